"""System prompts and observation rendering, built from an environment's own specs.

The system prompt is the only place a model learns the tools and the output protocol, so it is
generated from the environment class (``instructions`` and ``ToolSpec``s) and never written by
hand: a new tool shows up in every prompt the moment it is defined.

Three modes (shared/DESIGN.md):

- ``plan``: the model sees only the opening observation and writes the whole investigation in one
  reply, every call as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, ending with
  exactly one terminal tool; the rewards replay those calls against the seeded episode.
- ``interactive``: TRL passes the tools through the chat template and runs them one at a time, so
  the prompt omits the tool list and asks for one call per turn. The dataset's user message is
  then a short header; the adapter's ``reset()`` returns ``render_observation(opening)`` and TRL
  appends it to that message.
- ``steps``: the prompt is an interactive conversation cut at some point of a reference trajectory
  (``pipeline.data.steps``): the same user message (header + opening), every earlier call as an assistant
  tool call and its result as a tool message. The system prompt lists the tools as plan mode does
  (TRL must not run the reply's calls, so no ``tools=`` reaches the chat template) and asks for the
  rest of the investigation as a plan ending in one terminal call.

Tool results are rendered in one of ``RESULT_STYLES``: ``full`` (one-line JSON) or ``compact``
(``pipeline.data.compact``: record lists as tables, lossless, about half the tokens).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from env.base import ToolObservation, ToolSpec
from env.registry import env_class
from pipeline.data.compact import compact_text
from rewards.protocol import CALL_TEMPLATE, render_completion

MODES = ("plan", "interactive", "steps")
RESULT_STYLES = ("full", "compact")
PROMPT_STYLES = ("full", "compact")
"""``full`` lists each tool with its description and argument notes (~1.4k SmolLM2 tokens for
AML); ``compact`` lists signatures only (~0.7k): on a CPU, decoding cost grows with the context
(benchmarks/RESULTS.md, learning_cpu), so small-model CPU runs use it. Interactive prompts leave the
tool list to the chat template: there the style picks the qwen2_5 template's variant
(``pipeline.training.chat_templates``: JSON schemas or the same signature lines)."""

_CALL = CALL_TEMPLATE.replace("{", "{{").replace("}", "}}")  # literal under .format
_PLAN_FORMAT = (
    "## Output format\n"
    "Write the whole investigation in this one reply. Put every tool call on its own line as\n"
    f"{_CALL}\n"
    "with arguments as a JSON object that matches the tool's signature, for example\n"
    "{example}\n"
    "The calls run in the "
    "order you write them and you do not see their results, so take ids and amounts from the "
    "case in front of you. End with exactly one terminal tool ({terminals}); nothing after it "
    "runs. You may think first inside <think>...</think>."
)

_INTERACTIVE_FORMAT = (
    "## Protocol\n"
    "Call the tools one at a time; after each call you receive its result and then choose the "
    "next call. Ids you need come from earlier results. Finish with exactly one terminal tool "
    "({terminals}), which ends the case."
)


_STEPS_FORMAT = (
    "## Output format\n"
    "The conversation shows the calls made so far and their results. Write the rest of the case "
    "in this one reply: every remaining call on its own line as\n"
    f"{_CALL}\n"
    "in the order they should run, taking ids and amounts from the case and the results above, "
    "and end with exactly one terminal tool ({terminals}); nothing after it runs. When the "
    "results already settle the case, the terminal call alone is the whole reply."
)


def _example_call(specs: list[ToolSpec]) -> str:
    """One call of the first tool with placeholder arguments, to show the exact shape."""
    readers = [s for s in specs if s.kind in ("investigation", "lookup")]
    spec = next(iter(readers or [s for s in specs if not s.terminal] or specs), None)
    if spec is None:
        return ""
    required = spec.parameters.get("required", [])
    args = {}
    for arg, schema in spec.parameters.get("properties", {}).items():
        if arg in required:
            kind = schema.get("type")
            if "enum" in schema:
                args[arg] = schema["enum"][0]
            else:
                args[arg] = {"integer": 1, "number": 1.0, "boolean": True, "array": []}.get(
                    kind, f"<{arg}>"
                )
    return render_completion([{"tool": spec.name, "arguments": args}])


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _tool_lines(spec: ToolSpec, style: str = "full") -> list[str]:
    if style == "compact":
        return [f"- {spec.signature()}"]
    lines = [f"- {spec.signature()}: {_one_line(spec.description)}"]
    for arg, schema in spec.parameters.get("properties", {}).items():
        if schema.get("description"):
            lines.append(f"    {arg}: {_one_line(schema['description'])}")
    return lines


@lru_cache(maxsize=64)
def system_prompt(env_name: str, mode: str = "plan", style: str = "full") -> str:
    """The system message for ``env_name`` in ``mode`` ("plan" or "interactive").

    Args:
        env_name: A registered environment name (``env.names()``).
        mode: "plan" lists every tool and the ``<tool_call>`` format; "interactive" leaves the
            tool list to the chat template and asks for one call at a time.
        style: "full" or "compact" tool list (``PROMPT_STYLES``; interactive prompts leave the
            list to the chat template).

    Returns:
        The prompt text (cached: the same arguments always give the same string).
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if style not in PROMPT_STYLES:
        raise ValueError(f"unknown prompt style {style!r}; choose from {', '.join(PROMPT_STYLES)}")
    cls = env_class(env_name)
    specs = cls.tool_specs()
    terminals = ", ".join(s.name for s in specs if s.terminal) or "a terminal tool"
    parts = [cls.instructions.strip() or f"You are an agent in the {env_name} environment."]
    if mode in ("plan", "steps"):
        by_kind: dict[str, list[ToolSpec]] = {}
        for spec in specs:
            by_kind.setdefault("terminal" if spec.terminal else spec.kind, []).append(spec)
        tool_text = ["## Tools"]
        for kind, group in by_kind.items():
            label = kind.upper() if len(kind) <= 3 else kind.replace("_", " ").capitalize()
            tool_text.append(f"{label} tools:")
            for spec in group:
                tool_text.extend(_tool_lines(spec, style))
        parts.append("\n".join(tool_text))
        if mode == "plan":
            parts.append(_PLAN_FORMAT.format(terminals=terminals, example=_example_call(specs)))
        else:
            parts.append(_STEPS_FORMAT.format(terminals=terminals))
    else:
        parts.append(_INTERACTIVE_FORMAT.format(terminals=terminals))
    return "\n\n".join(parts)


def render_observation(observation: ToolObservation, style: str = "full") -> str:
    """An observation as readable text for a user or tool message (no hidden truth is added).

    ``style`` is a ``RESULT_STYLES`` name: ``compact`` writes the result in ``pipeline.data.compact``'s
    lossless table form instead of one-line JSON."""
    if style not in RESULT_STYLES:
        raise ValueError(f"unknown result style {style!r}; choose from {', '.join(RESULT_STYLES)}")
    lines = []
    if observation.message and observation.message != f"error: {observation.error}":
        lines.append(observation.message)  # the base env repeats a bare error as the message
    if observation.error:
        lines.append(f"Error: {observation.error}")
    if observation.result is not None:
        lines.append(
            compact_text(observation.result)
            if style == "compact"
            else _render_value(observation.result)
        )
    if not observation.done:
        lines.append(f"Steps left: {observation.steps_left}.")
    return "\n\n".join(lines)


def _render_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    # One line: indentation cost ~30% more prompt tokens for the same facts.
    return json.dumps(value, ensure_ascii=False, default=str)


def user_message(
    env_name: str, task: str, observation: ToolObservation, mode: str, result_style: str = "full"
) -> str:
    """The dataset's user message: the rendered opening (plan), a header that TRL completes with
    the opening (interactive), or that header with the opening already in it (steps)."""
    header = f"Environment: {env_name}. Task: {task}."
    if mode in ("interactive", "steps"):
        head = header + " The case follows; investigate it with the tools.\n\n"
        return (
            head if mode == "interactive" else head + render_observation(observation, result_style)
        )
    return f"{header}\n\n{render_observation(observation, result_style)}"
