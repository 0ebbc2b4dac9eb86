"""The SFT-ceiling diagnostic counts the decision a reply opens, closed or not."""

from __future__ import annotations

from benchmarks.steps_sft_ceiling import intended


def test_intended_decision_reads_the_opened_terminal_call_even_when_cut_off() -> None:
    reference = [{"seed": 1, "decision": "file_sar"}, {"seed": 2, "decision": "close_alert"}]
    replies = [
        {"seed": 1, "reply": '<tool_call>{"name": "file_sar", "arguments": {"findings": "C-1, C-1'},
        {"seed": 2, "reply": '<tool_call>{"name": "file_sar", "arguments": {}}</tool_call>'},
    ]
    assert intended(replies, reference) == (1, 2)
    assert intended([{"seed": 2, "reply": "no call at all"}], reference) == (0, 1)
