"""Serve a local checkpoint as an OpenAI-compatible ``/v1/chat/completions`` endpoint.

The inference runner (``scripts/inference.py``) and any OpenAI client can then evaluate a trained
checkpoint exactly as they evaluate a hosted model. The model is loaded once with transformers;
``tools`` in a request go through the chat template (TRL's qwen2_5 template, the one training
uses), and ``<tool_call>{...}</tool_call>`` blocks in the reply come back as OpenAI
``tool_calls``. Requests are served one at a time (a lock around generation): this is an
evaluation server for one CPU or GPU, not a production engine. A client that disconnects (its
timeout ran out) stops its generation, so a retry does not queue behind abandoned work.

    python scripts/serve_openai.py --model smollm2 --port 8001
    API_BASE_URL=http://127.0.0.1:8001/v1 MODEL_NAME=smollm2 python scripts/inference.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

logger = logging.getLogger("serve_openai")
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)


class ChatRequest(BaseModel):
    """The subset of OpenAI's chat-completions request this server honours."""

    model: str = ""
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    max_tokens: int | None = Field(default=None, ge=1, le=4096)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=4096)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = None


def load(model: str) -> tuple[Any, Any]:
    """Model and tokenizer from a folder, or ``smollm2`` for the converted CPU model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pipeline.model import apply_tool_chat_template, smollm2_path

    path = smollm2_path() if model.lower().startswith("smollm2") else Path(model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.chat_template is None or "tools" not in tokenizer.chat_template:
        apply_tool_chat_template(tokenizer)
    lm = AutoModelForCausalLM.from_pretrained(path)
    lm.eval()
    return lm, tokenizer


def _template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI messages -> chat-template messages (tool-call arguments as objects)."""
    out = []
    for message in messages:
        message = dict(message)
        if message.get("content") is None:
            message["content"] = ""
        calls = []
        for call in message.get("tool_calls") or []:
            fn = dict(call.get("function", call))
            if isinstance(fn.get("arguments"), str):
                try:
                    fn["arguments"] = json.loads(fn["arguments"])
                except json.JSONDecodeError:
                    fn["arguments"] = {}
            calls.append({"type": "function", "function": fn})
        if calls:
            message["tool_calls"] = calls
        out.append(message)
    return out


def split_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Reply text -> (content without tool-call tags, OpenAI ``tool_calls``)."""
    calls = []
    for i, block in enumerate(_TOOL_CALL.findall(text)):
        try:
            payload = json.loads(block.strip())
        except json.JSONDecodeError:
            continue
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            continue
        arguments = payload.get("arguments", {})
        calls.append(
            {
                "id": f"call_{i}_{uuid.uuid4().hex[:8]}",
                "type": "function",
                "function": {"name": payload["name"], "arguments": json.dumps(arguments)},
            }
        )
    content = _TOOL_CALL.sub("", text).strip() if calls else text
    return content, calls


def _finished(output: Any, tokenizer: Any) -> bool:
    return bool(output.shape[1]) and int(output[0, -1]) == tokenizer.eos_token_id


def create_app(model: Any, tokenizer: Any, name: str) -> FastAPI:
    """The OpenAI-compatible app around a loaded model."""
    import torch

    app = FastAPI(title=f"OpenAI-compatible server for {name}")
    lock = threading.Lock()
    app.state.cancelled = 0  # generations stopped because their client left

    def generate(ids: Any, request: ChatRequest, cancel: threading.Event) -> Any:
        """One generation under the lock; None if the client left before it finished."""
        from transformers import StoppingCriteria, StoppingCriteriaList

        class Cancelled(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                return torch.full((input_ids.shape[0],), cancel.is_set(), dtype=torch.bool)

        sample = request.temperature > 0
        with lock, torch.no_grad():
            if cancel.is_set():
                return None
            if request.seed is not None:
                torch.manual_seed(request.seed)
            output = model.generate(
                **ids,
                max_new_tokens=request.max_completion_tokens or request.max_tokens or 256,
                do_sample=sample,
                temperature=request.temperature if sample else None,
                top_p=request.top_p if sample else None,
                pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
                stopping_criteria=StoppingCriteriaList([Cancelled()]),
            )
        return None if cancel.is_set() and not _finished(output, tokenizer) else output

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "healthy", "model": name}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "local"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: ChatRequest, raw: Request) -> dict[str, Any]:
        if not request.messages:
            raise HTTPException(status_code=400, detail="messages must not be empty")
        try:
            ids = tokenizer.apply_chat_template(
                _template_messages(request.messages),
                tools=request.tools,
                add_generation_prompt=True,
                return_tensors="pt",
                return_dict=True,
            )
        except Exception as exc:  # a malformed conversation is the caller's error
            raise HTTPException(status_code=400, detail=f"cannot render messages: {exc}") from None
        cancel = threading.Event()

        async def watch() -> None:  # a client that gave up (timeout) frees the model at once
            while not cancel.is_set():
                if await raw.is_disconnected():
                    cancel.set()
                await asyncio.sleep(0.2)

        watcher = asyncio.create_task(watch())
        try:
            output = await asyncio.to_thread(generate, ids, request, cancel)
        finally:
            cancel.set()
            watcher.cancel()
        if output is None:
            app.state.cancelled += 1
            raise HTTPException(status_code=499, detail="client disconnected")
        new = output[0, ids["input_ids"].shape[1] :]
        text = tokenizer.decode(new, skip_special_tokens=True)
        content, calls = split_tool_calls(text)
        finished = _finished(output, tokenizer)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model or name,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else ("stop" if finished else "length"),
                }
            ],
            "usage": {
                "prompt_tokens": int(ids["input_ids"].shape[1]),
                "completion_tokens": int(len(new)),
                "total_tokens": int(ids["input_ids"].shape[1] + len(new)),
            },
        }

    return app


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="OpenAI-compatible server for a local model")
    parser.add_argument("--model", default="smollm2", help="model folder, or smollm2")
    parser.add_argument("--name", default=None, help="model id reported (default: --model)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    model, tokenizer = load(args.model)
    app = create_app(model, tokenizer, args.name or args.model)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
