"""The tool-call text protocol: how tool calls are written as text, and how that text is read.

One call is ``<tool_call>{"name": <tool>, "arguments": {...}}</tool_call>``; a plan is such calls,
one per line; a tool's result given back as text is ``<tool_response>\\n...\\n</tool_response>``.
This module is the one home of that format, in the rewards layer so that everything above it
shares it (data flows env -> rewards -> pipeline): ``pipeline.data.prompts`` describes it to the model,
``rewards.parsing`` reads completions with it, ``rewards.audit`` writes plans with it, and
``scripts/serve_openai.py`` turns it into OpenAI ``tool_calls`` (``RESPONSE_TOOL_CALLS``).

Reading is lenient on purpose (models write calls in many shapes): ``tagged`` splits the text at
the tags, ``strip_think`` drops ``<think>`` blocks, and ``call_fields`` reads the name and
arguments of one call object under any of the usual keys.
"""

from __future__ import annotations

import json
import re
from typing import Any

OPEN = "<tool_call>"
CLOSE = "</tool_call>"
RESPONSE_OPEN = "<tool_response>"
RESPONSE_CLOSE = "</tool_response>"

NAME_KEYS = ("tool", "name", "tool_name", "function_name")
"""Keys a call object may name its tool under (``name`` is the protocol's own)."""
ARG_KEYS = ("arguments", "args", "parameters", "input", "kwargs")
"""Keys a call object may hold its arguments under (``arguments`` is the protocol's own)."""

CALL_TEMPLATE = f'{OPEN}{{"name": "<tool>", "arguments": {{...}}}}{CLOSE}'
"""The shape of one call, as the system prompts show it."""

RESPONSE_TOOL_CALLS: dict[str, Any] = {
    # A field of transformers' response template (transformers' own Qwen2 one): every
    # <tool_call>{json}</tool_call> of a served reply becomes an OpenAI tool call.
    "open_pattern": r"\s*" + re.escape(OPEN),
    "close": CLOSE,
    "repeats": True,
    "content": "json",
    "transform": {"type": "function", "function": "{content}"},
}

_TAG = re.compile(re.escape(OPEN) + r"(.*?)(?:" + re.escape(CLOSE) + r"|\Z)", re.DOTALL)
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)


def render_call(name: str, arguments: dict[str, Any] | None = None) -> str:
    """One call in the protocol.

    >>> render_call("look", {"n": 1})
    '<tool_call>{"name": "look", "arguments": {"n": 1}}</tool_call>'
    """
    payload = {"name": name, "arguments": arguments or {}}
    return f"{OPEN}{json.dumps(payload, ensure_ascii=False)}{CLOSE}"


def render_completion(plan: list[Any]) -> str:
    """A plan (list of ``{"tool", "arguments"}`` dicts or actions) in the plan-mode format.

    >>> render_completion([{"tool": "look", "arguments": {"n": 1}}])
    '<tool_call>{"name": "look", "arguments": {"n": 1}}</tool_call>'
    """
    lines = []
    for call in plan:
        if not isinstance(call, dict):
            call = {"tool": call.tool, "arguments": call.arguments}
        lines.append(render_call(call.get("tool", call.get("name")), call.get("arguments", {})))
    return "\n".join(lines)


def render_response(text: str) -> str:
    """A tool's result as text (a user message, for endpoints without tool messages)."""
    return f"{RESPONSE_OPEN}\n{text}\n{RESPONSE_CLOSE}"


def ends_with_call(text: str) -> bool:
    """Whether ``text`` ends with a closed call (trailing whitespace aside)."""
    return text.rstrip().endswith(CLOSE)


def strip_think(text: str) -> str:
    """``text`` without its ``<think>`` blocks (an unclosed one runs to the end)."""
    if "think>" not in text:
        return text
    if "</think>" in text and "<think>" not in text.split("</think>", 1)[0]:
        # The chat template opened the think block in the prompt: drop everything before it.
        text = text.split("</think>", 1)[1]
    return _THINK.sub(" ", text)


def tagged(text: str) -> tuple[list[str], str]:
    """The bodies of ``text``'s ``<tool_call>`` tags (an unclosed last tag runs to the end), in
    order and stripped, and the text outside them.

    >>> tagged('a <tool_call> {"name": "x"} </tool_call> b')
    (['{"name": "x"}'], 'a   b')
    """
    bodies = [match.group(1).strip() for match in _TAG.finditer(text)]
    return bodies, (_TAG.sub(" ", text) if bodies else text)


def call_fields(value: dict[str, Any]) -> tuple[str | None, Any]:
    """The tool name (None when there is none) and raw arguments (``{}`` when absent) of one call
    object; an OpenAI ``{"type": "function", "function": {...}}`` object is unwrapped."""
    if isinstance(value.get("function"), dict):
        value = value["function"]
    name = next((value[key] for key in NAME_KEYS if isinstance(value.get(key), str)), None)
    raw_args = next((value[key] for key in ARG_KEYS if key in value), {})
    return name, raw_args
