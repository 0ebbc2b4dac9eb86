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


def _episode(seed: int, decision: str | None, right: str) -> dict:
    correct = decision == right
    return {
        "seed": seed,
        "task": "easy",
        "cut": 3,
        "grade": 0.9 if correct else 0.0,
        "components": {},
        "decision": decision,
        "decision_correct": correct,
        "valid_calls": 1.0 if decision else 0.0,
        "n_calls": 1,
        "steps": 4,
        "n_errors": 0,
        "total_reward": 1.0 if correct else -1.0,
        "category": "suspicious" if right == "file_sar" else "clean",
        "reply": f'<tool_call>{{"name": "{decision or right}"',
    }


def _run(steps: int, sft_decisions: list[str | None]) -> tuple[dict, str]:
    truth = ["file_sar", "close_alert", "file_sar", "close_alert"]
    cuts = {
        "always_file": [_episode(i, "file_sar", t) for i, t in enumerate(truth)],
        "reference": [_episode(i, t, t) for i, t in enumerate(truth)],
        "sft_reference": [
            _episode(i, d, t) for i, (d, t) in enumerate(zip(sft_decisions, truth, strict=True))
        ],
    }
    sft = {"steps": steps, "seconds": 1.0, "losses": [1.0, 0.5], "train_decisions": {}}
    run = {"seconds": 2.0, "sft": sft, "cuts": {k: {"episodes": v} for k, v in cuts.items()}}
    return run, f"python benchmarks/steps_sft_ceiling.py --sft-steps {steps}"


def test_report_keeps_one_block_per_run_with_its_own_figures() -> None:
    from benchmarks.steps_sft_ceiling import report

    short = _run(12, [None, None, None, "close_alert"])
    long = _run(24, ["file_sar", "close_alert", None, "close_alert"])
    text = report([short, long])
    assert text.count("### ") == 2
    first, second = text.split("### 24 SFT steps")
    assert "### 12 SFT steps" in first and "--sft-steps 12" in first
    assert "--sft-steps 24" in second
    # decisions parsed per run: the short run parsed one, the long run three
    assert "{None: 3, 'close_alert': 1}" in first
    assert "{'file_sar': 1, 'close_alert': 2, None: 1}" in second
    assert "###" not in report([short])
