"""Completion -> ordered tool calls, with diagnostics for the format reward.

A plan-mode completion is free text in which the model writes its whole investigation as tool
calls. Models write those calls in many shapes: ``<tool_call>{...}</tool_call>`` tags, ```json
fenced blocks, bare JSON objects one after another, a JSON list, OpenAI-style
``{"type": "function", "function": {...}}`` objects, with prose in between and ``<think>`` blocks
before. A conversational completion is a list of chat messages whose assistant turns carry text
and/or ``tool_calls``. All of them come out as the same ordered list of
``{"tool": name, "arguments": {...}}`` dicts, plus a list of human-readable errors for the parts
that looked like calls but could not be read (the format reward and TRL's ``log_extra`` use them).

The scanner decodes every JSON value it meets with ``json.JSONDecoder.raw_decode`` and walks
straight past it, so nested argument objects and several calls per line never confuse it. The
protocol itself (tags, think blocks, the keys of a call object) is ``rewards.protocol``'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rewards.protocol import NAME_KEYS, call_fields, strip_think, tagged

_DECODER = json.JSONDecoder()


MAX_ERRORS = 20  # beyond this only the count grows: a junk completion must stay cheap to log


@dataclass
class ParseResult:
    """Calls found in a completion, in order, and why other call-like parts were not read.

    ``n_candidates`` counts everything that looked like an attempt at a call (a JSON object or a
    ``<tool_call>`` tag, readable or not), so ``len(calls) / n_candidates`` is a parse rate.
    """

    calls: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    n_candidates: int = 0

    def error(self, message: str) -> None:
        """Record why a call-like part was not read (capped; the count is kept)."""
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(message)
        elif len(self.errors) == MAX_ERRORS:
            self.errors.append("more unreadable parts not listed")

    @property
    def ok(self) -> bool:
        """True when at least one call was read and nothing failed to parse."""
        return bool(self.calls) and not self.errors


def parse_tool_calls(completion: Any) -> ParseResult:
    """Read the ordered tool calls of a completion (text or a list of chat messages).

    Args:
        completion: The model output: a string, or a list of messages (dicts with ``role``,
            ``content`` and optionally ``tool_calls``); only assistant messages are read.

    Returns:
        A ``ParseResult``; never raises, whatever the input.

    >>> parse_tool_calls('<tool_call>{"name": "look", "arguments": {"n": 1}}</tool_call>').calls
    [{'tool': 'look', 'arguments': {'n': 1}}]
    """
    result = ParseResult()
    try:
        if isinstance(completion, str):
            _parse_text(completion, result)
        elif isinstance(completion, dict):
            _parse_message(completion, result)
        elif isinstance(completion, (list, tuple)):
            for message in completion:
                _parse_message(message, result)
        elif completion is not None:
            result.error(f"unsupported completion type {type(completion).__name__}")
    except RecursionError:
        result.error("completion nested too deeply to read")
    return result


def _parse_message(message: Any, result: ParseResult) -> None:
    if isinstance(message, str):
        _parse_text(message, result)
        return
    if not isinstance(message, dict):
        result.error(f"message of type {type(message).__name__} ignored")
        return
    if message.get("role", "assistant") != "assistant":
        return
    content = message.get("content")
    if message.get("tool_calls"):
        content = None  # structured calls win; text beside them is commentary, not more calls
    if isinstance(content, str):
        _parse_text(content, result)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                _parse_text(part["text"], result)
            elif isinstance(part, str):
                _parse_text(part, result)
    for raw in message.get("tool_calls") or []:
        result.n_candidates += 1
        _take_value(raw, result, where="tool_calls entry")


def _parse_text(text: str, result: ParseResult) -> None:
    # Calls outside the tags are read too, so a half-tagged completion loses nothing.
    bodies, text = tagged(strip_think(text))
    for i, body in enumerate(bodies, 1):
        result.n_candidates += 1
        try:  # the common case: the tag holds exactly one JSON object
            values = [_DECODER.decode(body)]
        except (json.JSONDecodeError, RecursionError):
            values = _scan_json(body)
        if not values:
            result.error(f"<tool_call> #{i}: no readable JSON ({_clip(body)})")
            continue
        for value in values:
            _take_value(value, result, where=f"<tool_call> #{i}")
    for value in _scan_json(text, result):
        result.n_candidates += 1
        _take_value(value, result, where="JSON")


def _scan_json(text: str, result: ParseResult | None = None) -> list[Any]:
    """Every top-level JSON object or list in ``text``, left to right."""
    values: list[Any] = []
    i, n = 0, len(text)
    while i < n:
        brace, bracket = text.find("{", i), text.find("[", i)
        starts = [p for p in (brace, bracket) if p >= 0]
        if not starts:
            break
        i = min(starts)
        if not _plausible_start(text, i):
            i += 1
            continue
        try:
            value, end = _DECODER.raw_decode(text, i)
        except RecursionError:
            if result is not None:
                result.error("JSON nested too deeply; the rest of the text was not read")
            break
        except json.JSONDecodeError:
            if text[i] == "{" and result is not None and _looks_like_call(text, i):
                result.n_candidates += 1
                result.error(f"unreadable JSON call ({_clip(text[i:])})")
            i += 1
            continue
        if isinstance(value, dict) or (
            isinstance(value, list) and value and all(isinstance(v, dict) for v in value)
        ):
            values.append(value)
        i = end
    return values


def _plausible_start(text: str, start: int) -> bool:
    """Cheap pre-check so runs of brackets in junk text do not cost a decode attempt each."""
    j = start + 1
    while j < len(text) and text[j] in " \t\r\n":
        j += 1
    if j >= len(text):
        return False
    if text[start] == "{":
        return text[j] in '"}'
    return text[j] == "{"


def _looks_like_call(text: str, start: int) -> bool:
    head = text[start : start + 40]
    return any(f'"{key}"' in head for key in NAME_KEYS)


def _take_value(value: Any, result: ParseResult, where: str) -> None:
    if isinstance(value, list):
        if not value:
            result.error(f"{where}: empty list")
        for item in value:
            _take_value(item, result, where)
        return
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            result.error(f"{where}: not JSON ({_clip(value)})")
            return
        _take_value(value, result, where)
        return
    if not isinstance(value, dict):
        result.error(f"{where}: expected an object, got {type(value).__name__}")
        return
    if isinstance(value.get("tool_calls"), list):
        _take_value(value["tool_calls"], result, where)
        return
    if isinstance(value.get("function"), dict):
        value = value["function"]
    name, raw_args = call_fields(value)
    if name is None:
        result.error(f"{where}: object without a tool name ({_clip(json.dumps(value))})")
        return
    if isinstance(raw_args, str):
        try:
            raw_args = json.loads(raw_args) if raw_args.strip() else {}
        except json.JSONDecodeError:
            result.error(f"{where}: arguments of {name} are not JSON")
            return
    if raw_args is None:
        raw_args = {}
    if not isinstance(raw_args, dict):
        result.error(f"{where}: arguments of {name} are not an object")
        return
    result.calls.append({"tool": name, "arguments": raw_args})


def _clip(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
