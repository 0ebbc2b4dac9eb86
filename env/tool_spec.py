"""Tools as every consumer sees them: ``@tool`` marks a typed, documented method, and
``spec_from_method`` reads its signature and Google-style docstring once into a ``ToolSpec`` (the
single source for prompts, JSON schemas, OpenEnv's action model, MCP and TRL tools) whose
``validate`` turns bad agent input into a ``ToolError`` naming each problem."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, get_type_hints

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model


class ToolError(Exception):
    """Raised inside a tool for bad agent input (unknown id, impossible request)."""


@dataclass(frozen=True)
class ToolSpec:
    """A tool as every consumer sees it, derived once from a typed, documented method."""

    name: str
    description: str
    parameters: dict[str, Any]
    kind: str
    terminal: bool
    arguments_model: type[BaseModel] = field(repr=False, compare=False)

    def openai_schema(self) -> dict[str, Any]:
        """The OpenAI / chat-template function schema."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def signature(self) -> str:
        """A one-line Python-like signature for prompts: ``name(a: int, b: str = 'x')``."""
        props = self.parameters.get("properties", {})
        required = set(self.parameters.get("required", []))
        parts = []
        for arg, schema in props.items():
            typ = _schema_type_name(schema)
            parts.append(f"{arg}: {typ}" if arg in required else f"{arg}: {typ} = optional")
        return f"{self.name}({', '.join(parts)})"

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Return validated keyword arguments, or raise ``ToolError`` naming each problem."""
        try:
            parsed = self.arguments_model.model_validate(arguments)
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                where = ".".join(str(p) for p in err["loc"]) or "arguments"
                problems.append(f"{where}: {err['msg']}")
            raise ToolError(f"invalid arguments for {self.name}: " + "; ".join(problems)) from None
        return {name: getattr(parsed, name) for name in self.arguments_model.model_fields}


def _schema_type_name(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "|".join(repr(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " | ".join(_schema_type_name(s) for s in schema["anyOf"])
    typ = schema.get("type", "any")
    if typ == "array":
        return f"list[{_schema_type_name(schema.get('items', {}))}]"
    return {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}.get(typ, typ)


def tool(fn=None, *, kind: str = "action", terminal: bool = False):
    """Mark a method as an agent tool. ``terminal`` tools end the episode with a decision."""

    def mark(f):
        f.__tool__ = {"kind": kind, "terminal": terminal}
        return f

    return mark(fn) if fn is not None else mark


def spec_from_method(name: str, method) -> ToolSpec:
    doc = docstring_parser.parse(inspect.getdoc(method) or "")
    description = " ".join(
        part for part in (doc.short_description, doc.long_description) if part
    ).strip()
    if not description:
        raise TypeError(f"tool {name} needs a docstring: it is the tool's description")
    arg_docs = {p.arg_name: p.description or "" for p in doc.params}
    hints = get_type_hints(method)
    fields: dict[str, Any] = {}
    for pname, param in inspect.signature(method).parameters.items():
        if pname == "self":
            continue
        if pname not in hints:
            raise TypeError(f"tool {name}: argument {pname} needs a type hint")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (hints[pname], Field(default, description=arg_docs.get(pname, "")))
    model = create_model(
        f"{name}_arguments",
        __config__=ConfigDict(extra="forbid", strict=False),
        **fields,
    )
    parameters = model.model_json_schema()
    parameters.pop("title", None)
    for prop in parameters.get("properties", {}).values():
        prop.pop("title", None)
    parameters.setdefault("properties", {})
    meta = method.__tool__
    return ToolSpec(name, description, parameters, meta["kind"], meta["terminal"], model)
