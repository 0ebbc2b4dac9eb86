"""Tool-calling chat templates: TRL's packaged Qwen2.5 template, or the same with a compact tool list.

The Qwen2.5 template lists every tool as its JSON schema, ~2k SmolLM2 tokens for AML's eighteen
tools: more than a third of an interactive conversation, which on a CPU every training step and every
decoded token pays for. Small models also imitate what they see: SmolLM2-135M warm-started on those
schemas wrote ``{"alert_id": {"type": "string", ...}}`` as call arguments (benchmarks/RESULTS.md).

The ``compact`` template is TRL's training variant of Qwen2.5 (prefix-preserving, with the
``{% generation %}`` markers SFT's assistant-only loss needs) where each tool is one signature line,
``- review_alert(alert_id: str)``: the form of the compact plan-mode prompts
(``ToolSpec.signature``; enums are JSON strings). Everything else, including the ``<tool_call>``
format and its parser, is Qwen2.5's, so TRL's tool loop and our parser read the replies unchanged.
TRL does not recognise the template by name, so ``apply_tool_chat_template`` also sets the Qwen
response parser it would have picked.
"""

from __future__ import annotations

from typing import Any

TOOL_STYLES = ("full", "compact")

_JSON_TOOL = "{{- tool | tojson }}"
_SIGNATURE_TOOL = """{%- set fn = tool.function if tool.function is defined else tool %}
        {%- set params = fn.parameters if fn.parameters is defined else {} %}
        {%- set required = params.required if params.required is defined else [] %}
        {%- set names = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"} %}
        {{- "- " + fn.name + "(" }}
        {%- for arg, schema in (params.properties if params.properties is defined else {}).items() %}
            {{- (", " if not loop.first else "") + arg + ": " }}
            {%- if schema.enum is defined %}
                {{- schema.enum | map("tojson") | join("|") }}
            {%- elif schema.type == "array" %}
                {%- set item = schema["items"]["type"] if schema["items"] is defined else "any" %}
                {{- "list[" + names.get(item, item) + "]" }}
            {%- else %}
                {{- names.get(schema.type, schema.type | default("any")) }}
            {%- endif %}
            {{- "" if arg in required else " = optional" }}
        {%- endfor %}
        {{- ")" }}"""


def compact_template() -> str:
    """TRL's Qwen2.5 training template with each tool's JSON schema replaced by its signature."""
    from trl.chat_template_utils import qwen2_5_training_chat_template as template

    if template.count(_JSON_TOOL) != 1:
        raise RuntimeError("TRL's qwen2_5 training template changed: cannot make the compact one")
    return template.replace(_JSON_TOOL, _SIGNATURE_TOOL)


def ours(template: str | None) -> bool:
    """Whether ``template`` is one this module sets (or none with tool calling), so a prompt style
    may replace it; a model's own tool-calling template is left alone."""
    from trl.chat_template_utils import qwen2_5_chat_template

    return "tool_call" not in (template or "") or template in (
        qwen2_5_chat_template,
        compact_template(),
    )


def apply_tool_chat_template(tokenizer: Any, style: str = "full") -> Any:
    """Give ``tokenizer`` a tool-calling template: TRL's packaged qwen2_5 (``full``), which TRL
    recognises (``supports_tool_calling``, ``add_response_schema``), or the ``compact`` variant
    with the same response parser set."""
    from trl.chat_template_utils import add_response_schema, qwen2_5_chat_template

    if style not in TOOL_STYLES:
        raise ValueError(f"unknown tool style {style!r}; choose from {', '.join(TOOL_STYLES)}")
    tokenizer.chat_template = qwen2_5_chat_template
    if style == "compact":
        add_response_schema(tokenizer)  # the Qwen2.5 parser: replies are written the same way
        tokenizer.chat_template = compact_template()
    return tokenizer
