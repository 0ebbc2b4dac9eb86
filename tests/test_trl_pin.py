"""What keeps the trl pin where it is (requirements.txt): behaviour a newer trl must still have.

trl 1.16.0 passes the rest of the suite on CPU, but TRL's completion table (``log_completions``)
then raises on a completion whose tool call carries a JSON list as its arguments, which a sampling
model writes now and then: one such completion stops the whole training run (the steps dry-run
hit it). Whoever bumps the pin reruns this first."""

from __future__ import annotations

from trl.trainer.utils import print_prompt_completions_sample


def test_completion_logging_survives_tool_calls_with_list_arguments(capsys) -> None:
    prompt = [{"role": "user", "content": "Alert AL-1 on C-1."}]
    call = {"type": "function", "function": {"name": "file_sar", "arguments": ["C-1"]}}
    completion = [{"role": "assistant", "content": "", "tool_calls": [call]}]
    print_prompt_completions_sample([prompt], [completion], {"grade": [0.0]}, [0.0], step=1)
    assert "Step 1" in capsys.readouterr().out  # the table was printed; nothing raised
