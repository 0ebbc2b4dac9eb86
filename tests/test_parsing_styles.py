"""parse_tool_calls reads every accepted call style back exactly (hypothesis round trip)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from rewards.parsing import parse_tool_calls
from rewards.protocol import render_completion

FORBIDDEN = ("<tool_call>", "</tool_call>", "<think>", "</think>")

names = st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20).filter(lambda s: not any(f in s for f in FORBIDDEN))
)
keys_text = st.text(max_size=8).filter(lambda s: not any(f in s for f in FORBIDDEN))
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys_text, inner, max_size=3),
    max_leaves=8,
)
arguments = st.dictionaries(names, values, max_size=4)
calls = st.lists(st.fixed_dictionaries({"tool": names, "arguments": arguments}), max_size=6)
prose = st.text(alphabet=st.characters(blacklist_characters="{}[]<>`"), max_size=30)


def _obj(call: dict, name_key: str, arg_key: str) -> str:
    return json.dumps({name_key: call["tool"], arg_key: call["arguments"]})


def render(style: str, plan: list[dict], gaps: list[str], keys: tuple[str, str]) -> object:
    def gap(i: int) -> str:
        return gaps[i % len(gaps)] if gaps else " "

    if style == "tags":
        return render_completion(plan)
    if style == "tags_prose":
        return "".join(
            f"{gap(i)}\n<tool_call>\n{_obj(c, *keys)}\n</tool_call>\n" for i, c in enumerate(plan)
        )
    if style == "fenced":
        return "".join(f"{gap(i)}\n```json\n{_obj(c, *keys)}\n```\n" for i, c in enumerate(plan))
    if style == "bare":
        return "".join(f"{gap(i)} {_obj(c, *keys)}" for i, c in enumerate(plan))
    if style == "list":
        body = json.dumps([{keys[0]: c["tool"], keys[1]: c["arguments"]} for c in plan])
        return f"{gap(0)}\n```json\n{body}\n```\n{gap(1)}" if plan else gap(0)
    if style == "openai":
        return "\n".join(
            json.dumps(
                {
                    "type": "function",
                    "function": {"name": c["tool"], "arguments": json.dumps(c["arguments"])},
                }
            )
            for c in plan
        )
    if style == "messages":
        return [
            {"role": "assistant", "content": gap(0)},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {
                            "name": c["tool"],
                            "arguments": c["arguments"] if i % 2 else json.dumps(c["arguments"]),
                        },
                    }
                    for i, c in enumerate(plan)
                ],
            },
            {"role": "tool", "content": '{"name": "not_a_call", "arguments": {}}'},
        ]
    raise AssertionError(style)


STYLES = ["tags", "tags_prose", "fenced", "bare", "list", "openai", "messages"]
KEYS = [("name", "arguments"), ("tool", "arguments"), ("name", "args"), ("tool", "parameters")]


@settings(max_examples=150, deadline=None)
@given(
    plan=calls,
    style=st.sampled_from(STYLES),
    gaps=st.lists(prose, max_size=3),
    keys=st.sampled_from(KEYS),
    think=st.booleans(),
)
def test_every_style_round_trips_exactly(plan, style, gaps, keys, think):
    completion = render(style, plan, gaps, keys)
    if think and isinstance(completion, str):
        completion = '<think>maybe {"name": "decoy", "arguments": {}} first</think>' + completion
    result = parse_tool_calls(completion)
    assert result.calls == plan
    assert result.errors == []
    assert result.n_candidates >= len(plan) if style != "list" else True


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.text(max_size=200), st.binary(max_size=50), st.integers(), st.lists(st.text())))
def test_arbitrary_input_never_raises(junk):
    result = parse_tool_calls(junk)
    assert isinstance(result.calls, list)
