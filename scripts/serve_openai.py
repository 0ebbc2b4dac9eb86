"""Serve a trained adapter or a model folder with ``transformers serve`` (OpenAI-compatible).

``transformers serve`` loads a full model folder (config + weights + tokenizer); it cannot load a
PEFT adapter folder (it reads ``config.json`` first). This wrapper prepares a folder it can serve
and then replaces itself with ``transformers serve FOLDER``:

- a LoRA adapter folder (``adapter_config.json``) is merged into its base on this machine
  (``pipeline.training.hub.merge_adapter``: the base named in the adapter config, the SmolLM2 Hub id mapped
  to the local conversion) and saved to ``--out`` (default: ``ADAPTER-merged``);
- a model folder (or ``smollm2``) is linked file by file into ``--out``, weights untouched;
- in both, the tokenizer gets the tool-calling chat template training used (TRL's qwen2_5, when
  its own has no tool support) and a ``response_template`` so that ``<tool_call>{...}</tool_call>``
  blocks come back as OpenAI ``tool_calls`` (transformers ships that parser only for Qwen models).

The server pins that one folder: requests must name it as ``model`` (or omit it).

    python scripts/serve_openai.py outputs/cpu/final --port 8001        # adapter -> merged, served
    API_BASE_URL=http://127.0.0.1:8001/v1 MODEL_NAME=outputs/cpu/final-merged \
        python scripts/inference.py
    python scripts/serve_openai.py outputs/cpu/final --prepare-only      # just write the folder

Any flag after ``--`` goes to ``transformers serve`` (e.g. ``-- --continuous-batching``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from rewards.protocol import RESPONSE_TOOL_CALLS

RESPONSE_TEMPLATE: dict[str, Any] = {
    # transformers' own Qwen2 response template (cli/serving/utils.py), for the qwen2_5 chat
    # template the pipeline trains with: <tool_call>{json}</tool_call> -> OpenAI tool_calls.
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": RESPONSE_TOOL_CALLS,
        "content": {
            "close_pattern": r"\s*(?:<\|im_end\|>|<\|endoftext\|>|<\|eot_id\|>)",
            "content": "text",
        },
    },
}
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "tokenizer.model",
)


def serving_tokenizer(tokenizer: Any, prompt_style: str = "full") -> Any:
    """The tokenizer as served: a tool-calling chat template and the tool-call response parser."""
    from pipeline.training import chat_templates

    if chat_templates.ours(tokenizer.chat_template):
        chat_templates.apply_tool_chat_template(tokenizer, prompt_style)
    tokenizer.response_template = RESPONSE_TEMPLATE
    return tokenizer


def prepare(
    model: str, out: Path | None = None, dtype: str = "float32", prompt_style: str = "full"
) -> Path:
    """Write the folder ``transformers serve`` loads; returns it (see the module docstring)."""
    from transformers import AutoTokenizer

    from pipeline.training.model import resolve_name

    source = Path(resolve_name(model))
    if not source.is_dir():
        raise FileNotFoundError(f"{model}: no such model or adapter folder")
    adapter = (source / "adapter_config.json").is_file()
    if out is None:
        out = source.with_name(source.name + ("-merged" if adapter else "-serve"))
    out = Path(out)
    if out.resolve() == source.resolve():
        raise ValueError("--out must differ from the model folder")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    if adapter:
        from pipeline.training.hub import merge_adapter

        tokenizer = merge_adapter(source, out, dtype)
    else:
        for path in source.iterdir():
            if path.is_file() and path.name not in TOKENIZER_FILES and path.name != "README.md":
                (out / path.name).symlink_to(path.resolve())
        tokenizer = AutoTokenizer.from_pretrained(source)
    serving_tokenizer(tokenizer, prompt_style).save_pretrained(out)
    return out


def command(folder: Path, host: str, port: int, device: str, extra: list[str]) -> list[str]:
    """The ``transformers serve`` command line for ``folder``."""
    return [
        sys.executable,
        "-m",
        "transformers.cli.transformers",
        "serve",
        str(folder),
        "--host",
        host,
        "--port",
        str(port),
        "--device",
        device,
        *extra,
    ]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="adapter folder, model folder, or smollm2")
    parser.add_argument("--out", type=Path, default=None, help="folder to write and serve")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--device", default="cpu", help="cpu, cuda:0, auto")
    parser.add_argument("--dtype", default="float32", help="dtype of a merged adapter")
    parser.add_argument("--prompt-style", default="full", choices=("full", "compact"))
    parser.add_argument("--prepare-only", action="store_true", help="write the folder, no server")
    args = parser.parse_args(argv)
    folder = prepare(args.model, args.out, args.dtype, args.prompt_style)
    print(json.dumps({"folder": str(folder), "model_name": str(folder)}), flush=True)
    if args.prepare_only:
        return 0
    cmd = command(folder, args.host, args.port, args.device, extra)
    os.execv(cmd[0], cmd)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
