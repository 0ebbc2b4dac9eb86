"""The plan-mode output protocol: how a plan of tool calls is written as one completion.

``render_completion`` lives here, in the rewards layer, so that the reward audit can write plans
without importing ``pipeline`` (data flows env -> rewards -> pipeline); ``pipeline.prompts``
offers the same function to the dataset builders.
"""

from __future__ import annotations

import json
from typing import Any


def render_completion(plan: list[Any]) -> str:
    """A plan (list of ``{"tool", "arguments"}`` dicts or actions) in the plan-mode format.

    >>> render_completion([{"tool": "look", "arguments": {"n": 1}}])
    '<tool_call>{"name": "look", "arguments": {"n": 1}}</tool_call>'
    """
    lines = []
    for call in plan:
        if not isinstance(call, dict):
            call = {"tool": call.tool, "arguments": call.arguments}
        name = call.get("tool", call.get("name"))
        payload = {"name": name, "arguments": call.get("arguments", {})}
        lines.append(f"<tool_call>{json.dumps(payload, ensure_ascii=False)}</tool_call>")
    return "\n".join(lines)
