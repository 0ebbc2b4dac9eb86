"""parse_tool_calls on the shapes that broke earlier parsers, and its diagnostics."""

from __future__ import annotations

from rewards.parsing import parse_tool_calls


def test_unfenced_multiple_calls_with_nested_arguments_on_one_line():
    text = (
        'First {"tool": "trace_network", "arguments": {"root": {"id": "C1", "depth": [1, 2]}}} '
        'then {"tool": "file_sar", "arguments": {"findings": "a {brace} in text"}}.'
    )
    result = parse_tool_calls(text)
    assert [c["tool"] for c in result.calls] == ["trace_network", "file_sar"]
    assert result.calls[0]["arguments"] == {"root": {"id": "C1", "depth": [1, 2]}}
    assert result.calls[1]["arguments"]["findings"] == "a {brace} in text"


def test_think_block_is_ignored_even_when_opened_by_the_template():
    text = '{"name": "decoy", "arguments": {}}</think><tool_call>{"name": "a"}</tool_call>'
    assert parse_tool_calls(text).calls == [{"tool": "a", "arguments": {}}]
    unclosed = '<tool_call>{"name": "a"}</tool_call><think>{"name": "late", "arguments": {}}'
    assert [c["tool"] for c in parse_tool_calls(unclosed).calls] == ["a"]


def test_broken_calls_are_reported_and_good_ones_kept():
    text = (
        '<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>'
        "<tool_call>{name: oops}</tool_call>"
        '<tool_call>{"name": "b", "arguments": "not json"}</tool_call>'
        '<tool_call>{"arguments": {"x": 1}}</tool_call>'
    )
    result = parse_tool_calls(text)
    assert result.calls == [{"tool": "a", "arguments": {"x": 1}}]
    assert len(result.errors) == 3
    assert result.n_candidates == 4
    assert any("#2" in e for e in result.errors)


def test_truncated_call_counts_as_an_unreadable_candidate():
    result = parse_tool_calls('ok {"name": "a", "arguments": {"x": 1}} {"name": "b", "argu')
    assert [c["tool"] for c in result.calls] == ["a"]
    assert any("unreadable" in e for e in result.errors)


def test_prose_only_and_empty_give_no_calls_and_no_errors():
    for text in ["", "I would close this alert [see notes] because it looks fine.", "   "]:
        result = parse_tool_calls(text)
        assert result.calls == [] and result.errors == [] and not result.ok


def test_only_assistant_messages_are_read():
    messages = [
        {"role": "user", "content": '{"name": "user_call", "arguments": {}}'},
        {"role": "assistant", "content": [{"type": "text", "text": '{"name": "a"}'}]},
        {"role": "tool", "content": '{"name": "tool_result", "arguments": {}}'},
    ]
    assert [c["tool"] for c in parse_tool_calls(messages).calls] == ["a"]


def test_null_arguments_mean_no_arguments():
    assert parse_tool_calls('{"name": "a", "arguments": null}').calls == [
        {"tool": "a", "arguments": {}}
    ]


def test_pathological_bracket_runs_stay_cheap():
    import time

    for junk in ["[" * 20_000, "{" * 20_000, '{"a": ' * 5_000, "<tool_call>" * 5_000]:
        start = time.perf_counter()
        result = parse_tool_calls(junk + '{"name": "after"}')
        assert time.perf_counter() - start < 1.0
        assert len(result.errors) <= 21
    many = parse_tool_calls('{"name": "x", "arguments": {' * 300)
    assert many.n_candidates == 300 and len(many.errors) == 21


def test_structured_tool_calls_are_not_counted_again_from_the_text():
    call = {"type": "function", "function": {"name": "a", "arguments": {"x": 1}}}
    message = {
        "role": "assistant",
        "content": '<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>',
        "tool_calls": [call],
    }
    assert parse_tool_calls([message]).calls == [{"tool": "a", "arguments": {"x": 1}}]
