"""learning_cpu's report logic on real evaluations: scripted policies stand in for the stages."""

from __future__ import annotations

import pytest

from benchmarks.learning_cpu import QUICK, parse_args
from benchmarks.learning_report import chart, mode_markdown
from pipeline.evaluation.episodes import evaluate


def _with_errors(result: dict) -> dict:
    for row in result["episodes"]:
        row.setdefault("n_errors", 0)
    return result


@pytest.fixture(scope="module")
def stages() -> dict[str, dict]:
    """random as the untrained model, heuristic as warm start and GRPO (same 6 eval seeds)."""
    random = evaluate("aml", "random", tasks="easy", episodes=6, progress=False)
    heuristic = evaluate("aml", "heuristic", tasks="easy", episodes=6, progress=False)
    return {"untrained": _with_errors(random), "warm": _with_errors(heuristic), "grpo": heuristic}


def _run(results: dict) -> dict:
    return {
        "results": results,
        "seconds": 1.0,
        "warm_seconds": 0.5,
        "grpo_seconds": 0.5,
        "frac_reward_zero_std": 0.25,
    }


def test_targets_are_checked_against_the_untrained_and_warm_stages(stages, tmp_path) -> None:
    text = "\n".join(mode_markdown("plan", _run(stages)))
    assert "| grpo - untrained |" in text and "| grpo - warm |" in text
    assert "valid calls >= 0.9: met" in text
    assert "decisions >= 0.8: met" in text
    assert "run under 60 min: met" in text
    assert "grade gain >= 0.10, intervals apart: met" in text
    # GRPO equal to the warm start is not "above" it.
    assert (
        "GRPO above warm start: not shown (paired interval 0.000 [0.000, 0.000] includes 0)" in text
    )
    png = chart("plan", _run(stages), tmp_path / "lc.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_a_gain_whose_interval_includes_zero_is_not_shown_as_met(stages) -> None:
    import copy

    warm = copy.deepcopy(stages["warm"])
    warm["episodes"][0]["grade"] -= 0.05  # GRPO is above by its mean, on one world of six
    text = "\n".join(mode_markdown("plan", _run({**stages, "warm": warm})))
    assert "GRPO above warm start: not shown (paired interval 0.008 [0.000, 0.025]" in text
    assert "GRPO above warm start: met" not in text


def test_a_final_stage_worse_than_the_untrained_fails_the_gain_target(stages) -> None:
    run = _run({"untrained": stages["grpo"], "grpo": stages["untrained"]})
    text = "\n".join(mode_markdown("interactive", run))
    assert "grade gain >= 0.10, intervals apart: NOT met" in text
    assert "GRPO above warm start" not in text  # no warm stage in this mode
    assert "Plan-mode targets, applied for reference" in text


def test_quick_preset_fills_unset_arguments_only() -> None:
    args = parse_args(["--quick", "--episodes", "5"])
    assert args.episodes == 5 and args.sft_steps == QUICK["sft_steps"]
    assert parse_args([]).episodes == 100


def test_report_only_rebuilds_the_section_from_a_saved_run(stages, tmp_path, capsys) -> None:
    import json

    import benchmarks.learning_cpu as lc

    out = tmp_path / "plan"
    out.mkdir()
    run = {k: v for k, v in _run(stages).items() if k != "results"}
    run["stages"] = {"warm": str(out / "warm"), "grpo": str(out / "grpo")}
    run["overrides"] = ["lr=1"]
    (out / "run.json").write_text(json.dumps(run))
    for stage, result in stages.items():
        (out / f"eval_{stage}.json").write_text(json.dumps(result, default=str))
    args = ["--report-only", "--no-results", "--modes", "plan", "--output-dir", str(tmp_path)]
    assert lc.main(args) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("## learning_cpu\n") and "### learning_cpu, plan mode" in printed
    assert "| grpo - warm |" in printed and "GRPO config overrides `lr=1`" in printed
    assert (tmp_path / "learning_cpu_plan.png").read_bytes()[:4] == b"\x89PNG"


def test_run_command_names_the_arguments_that_differ_from_the_preset() -> None:
    from benchmarks.learning_report import run_command

    args = {k: str(v) for k, v in vars(parse_args(["--episodes", "20"])).items()}
    assert run_command("interactive", args) == (
        "OMP_NUM_THREADS=2 python benchmarks/learning_cpu.py --modes interactive --episodes 20"
    )
    quick = {k: str(v) for k, v in vars(parse_args(["--quick"])).items()}
    assert run_command("plan", quick).endswith("--modes plan --quick")
    capped = {k: str(v) for k, v in vars(parse_args(["--max-context", "4096"])).items()}
    assert run_command("interactive", capped).endswith("--modes interactive --max-context 4096")


def test_interactive_starts_from_the_plan_warm_adapter_or_says_what_is_missing(tmp_path) -> None:
    from benchmarks.learning_cpu import plan_warm_adapter
    from benchmarks.learning_report import run_command, warm_start_label

    args = parse_args(["--output-dir", str(tmp_path)])
    with pytest.raises(SystemExit, match="run --modes plan first"):
        plan_warm_adapter(args)
    (tmp_path / "plan" / "warm").mkdir(parents=True)
    (tmp_path / "plan" / "warm" / "adapter_model.safetensors").write_bytes(b"")
    assert plan_warm_adapter(args) == tmp_path / "plan" / "warm"
    cold = parse_args(["--output-dir", str(tmp_path), "--interactive-warm", "none"])
    assert plan_warm_adapter(cold) is None
    cold_args = {k: str(v) for k, v in vars(cold).items()}
    assert run_command("interactive", cold_args).endswith("--interactive-warm none")
    assert warm_start_label("interactive", cold_args) == "none"
    warm_args = {k: str(v) for k, v in vars(args).items()}
    assert "plan mode's warm adapter" in warm_start_label("interactive", warm_args)
    assert warm_start_label("plan", warm_args) == "40 SFT steps"
    own = parse_args(
        ["--output-dir", str(tmp_path), "--interactive-warm", "sft", "--sft-steps", "8"]
    )
    assert plan_warm_adapter(own) is None
    own_args = {k: str(v) for k, v in vars(own).items()}
    assert warm_start_label("interactive", own_args) == "8 SFT steps"


def test_a_mode_report_rewrites_its_own_section_and_keeps_the_other_modes(
    stages, tmp_path, monkeypatch, capsys
) -> None:
    import benchmarks.results as results
    from benchmarks.learning_report import report

    page = tmp_path / "RESULTS.md"
    kept = "<!-- learning_cpu_interactive:start -->\ninteractive figures\n"
    page.write_text(f"# Benchmark results\n\n{kept}<!-- learning_cpu_interactive:end -->\n")
    monkeypatch.setattr(results, "RESULTS", page)
    args = parse_args(["--output-dir", str(tmp_path)])
    assert report({"plan": _run(stages)}, args) == 0
    text = page.read_text()
    assert kept in text and "<!-- learning_cpu:start -->" in text
    plan = text.split("<!-- learning_cpu_plan:start -->")[1].split("<!-- learning_cpu_plan:end")[0]
    assert "### learning_cpu, plan mode" in plan and "| grpo - warm |" in plan
    assert "interactive" not in plan.split("Targets")[0].lower()


def test_the_interactive_report_names_its_conversation_cap_and_the_plan_report_does_not(
    stages,
) -> None:
    args = {k: str(v) for k, v in vars(parse_args(["--max-context", "4096"])).items()}
    for mode, shown in (("interactive", True), ("plan", False)):
        text = "\n".join(mode_markdown(mode, {**_run(stages), "args": args}))
        assert ("conversations at 4096 tokens" in text) is shown


def test_steps_report_marks_a_target_met_only_when_its_interval_says_so() -> None:
    from benchmarks.learning_steps import cut_rows, evaluate_cuts, steps_markdown

    rows = cut_rows(20)
    reference, always_file = (evaluate_cuts(p, rows, 64) for p in ("reference", "always_file"))
    run = {
        "machine": "test",
        "seconds": 10.0,
        "warm_seconds": 1.0,
        "grpo_seconds": 1.0,
        "frac_reward_zero_std": [0.25],
        "overrides": ["output_dir=x", "data.n_train=4"],
        "curves": "c.png",
        "horizon": {},
    }
    good = {"always_file": always_file, "warm": always_file, "grpo": reference}
    text = "\n".join(steps_markdown({**run, "cuts": good}, "cmd"))
    assert "| cuts: grpo - always_file, decision accuracy |" in text
    assert "decision accuracy >= always_file + 0.10, paired interval above 0: met" in text
    assert "first GRPO step frac_reward_zero_std <= 0.5: met" in text
    same = {"always_file": always_file, "warm": always_file, "grpo": always_file}
    text = "\n".join(steps_markdown({**run, "cuts": same}, "cmd"))
    assert "paired interval above 0: NOT met" in text
    assert "aim: decision accuracy >= 0.8: NOT met" in text
    # Without always_file the better rival is unknown: the target is not met against warm alone.
    blind = {"warm": always_file, "grpo": reference}
    text = "\n".join(steps_markdown({**run, "cuts": blind}, "cmd"))
    assert "decision accuracy >= always_file + 0.10, paired interval above 0: NOT met (" in text
    assert "Sampled replies per sampling" not in text  # a run that logged no decisions


def test_steps_report_lists_the_training_batches_decisions_per_step() -> None:
    from benchmarks.learning_steps import decision_curves, decision_lines

    history = [
        {"step": 1, "decision/file_sar_share": 0.5, "decision/split_groups": 0.75, "loss": 0.1},
        {"step": 2, "decision/file_sar_share": 0.8125, "decision/split_groups": 0.25},
        {"train_runtime": 3.0},
    ]
    curves = decision_curves(history)
    assert curves == {"file_sar_share": [0.5, 0.812], "split_groups": [0.75, 0.25]}
    text = "\n".join(decision_lines({"decisions": curves}))
    assert "- `file_sar_share`: [0.5, 0.812]" in text and "- `split_groups`: [0.75, 0.25]" in text
    assert text.startswith("Sampled replies per sampling")  # reuse steps (num_iterations) log none


def test_decisions_come_back_from_a_saved_history(tmp_path) -> None:
    """A run saved before run.json kept the decision curves reads them from log_history.csv."""
    from benchmarks.learning_steps import decision_curves
    from pipeline.training.trainer import read_history, write_history

    history = [
        {"step": 1, "reward": 0.5, "decision/close_alert_share": 0.25},
        {"step": 2, "reward": 0.7, "decision/close_alert_share": 0.5},
        {"step": 2, "train_runtime": 9.0},
    ]
    write_history(history, tmp_path)
    rows = read_history(tmp_path / "log_history.csv")
    assert rows[2] == {"step": 2.0, "train_runtime": 9.0}
    assert decision_curves(rows) == {"close_alert_share": [0.25, 0.5]}


def test_a_saved_steps_run_reloads_with_its_baselines_in_order(tmp_path) -> None:
    """A run saved without the scripted baselines gets them back on its own seeds."""
    import json

    from benchmarks.learning_steps import cut_rows, evaluate_cuts, load_steps

    rows = cut_rows(4)
    stage = evaluate_cuts("always_file", rows, 64)
    (tmp_path / "run.json").write_text(
        json.dumps({"args": {"episodes": "4", "horizon_episodes": "1"}})
    )
    for name in ("grpo", "untrained", "warm"):
        (tmp_path / f"cuts_{name}.json").write_text(json.dumps(stage))
    run = load_steps(tmp_path)
    assert list(run["cuts"]) == ["always_file", "reference", "untrained", "warm", "grpo"]
    assert list(run["horizon"]) == ["always_file", "heuristic"]
    assert run["cuts"]["always_file"]["episodes"] == stage["episodes"]
    assert (tmp_path / "cuts_reference.json").is_file()


def test_steps_command_reproduces_each_override_as_its_own_flag() -> None:
    from benchmarks.learning_report import steps_command

    args = {"quick": "True", "reply_tokens": "16", "steps_set": "['a.b=1', 'training.x=2']"}
    command = steps_command(args)
    assert command.endswith("--reply-tokens 16 --steps-set a.b=1 --steps-set training.x=2")


def test_a_reused_warm_start_counts_its_training_time_or_shows_no_time_target(tmp_path) -> None:
    """`--steps-warm` skips the SFT in this run: the hour must still include it."""
    import json

    from benchmarks.learning_report import steps_command
    from benchmarks.learning_steps import WARM_RECORD, steps_targets, warm_phrase, warm_record

    base = {"seconds": 3000.0, "frac_reward_zero_std": [0.0], "warm_from": str(tmp_path)}
    assert warm_record(tmp_path)["seconds"] is None
    stage = {"episodes": [{"decision_accuracy": 1.0, "grade": 1.0}]}
    run = {**base, "warm_start": warm_record(tmp_path), "cuts": {"grpo": stage}}
    text = steps_targets(run, {})[0]
    assert "run under 60 min: not shown (warm start reused from" in text
    (tmp_path / WARM_RECORD).write_text(json.dumps({"sft_steps": 48, "seconds": 1708.0}))
    run["warm_start"] = warm_record(tmp_path)
    assert "run under 60 min: NOT met (4708 s)" in steps_targets(run, {})[0]
    run["warm_start"]["seconds"] = 500.0
    assert "run under 60 min: met (3500 s)" in steps_targets(run, {})[0]
    record = {"sft_steps": 48, "seconds": 1544.0, "overrides": ["data.n_train=64"]}
    (tmp_path / WARM_RECORD).write_text(json.dumps(record))
    run = {**run, "warm_start": warm_record(tmp_path), "warm_seconds": 1.0}
    assert "(trained in 1544 s with `data.n_train=64`, counted" in warm_phrase(run)
    command = steps_command({"reply_tokens": "16", "steps_sft": "12", "steps_warm": str(tmp_path)})
    assert command.endswith(f"--reply-tokens 16 --steps-warm {tmp_path}")


def test_extended_cuts_append_new_seeds_and_the_report_says_so(tmp_path) -> None:
    import json

    from benchmarks.learning_steps import cut_rows, evaluate_cuts, extension_lines, scripted_cuts
    from benchmarks.learning_steps_extend import extend_cuts

    scripted_cuts(cut_rows(3), tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"args": {"episodes": "3"}}))
    run = extend_cuts(tmp_path, tmp_path, 2, 64, ("always_file", "reference"))
    five = evaluate_cuts("always_file", cut_rows(5), 0)["episodes"]
    saved = json.loads((tmp_path / "cuts_always_file.json").read_text())
    key = lambda r: (r["seed"], r["grade"])  # noqa: E731
    assert [key(r) for r in saved["episodes"]] == [key(r) for r in five]  # seeds 4-5 are new
    assert saved["summary"]["episodes"] == 5
    assert run["extended"][0]["offset"] == 3 and run["extended"][0]["cuts"] == 2
    (line,) = [t for t in extension_lines(run) if t]
    assert "Cuts 4-5" in line and "--extend-cuts 2" in line
    with pytest.raises(SystemExit, match="different cut counts"):
        (tmp_path / "cuts_warm.json").write_text(json.dumps({"summary": {}, "episodes": []}))
        extend_cuts(tmp_path, tmp_path, 2, 64, ("always_file", "warm"))


def test_reuse_evals_keeps_a_stages_saved_evaluations_only_for_the_same_cuts(tmp_path) -> None:
    import json

    from benchmarks.learning_steps import saved_evaluation

    assert saved_evaluation(tmp_path, "warm", 2) is None  # nothing saved yet
    cuts = {"summary": {"episodes": 2}, "episodes": [{"seed": 1}, {"seed": 2}]}
    (tmp_path / "cuts_warm.json").write_text(json.dumps(cuts))
    assert saved_evaluation(tmp_path, "warm", 2) is None  # the horizon evaluation is missing
    (tmp_path / "horizon_warm.json").write_text(json.dumps({"summary": {}, "episodes": []}))
    assert saved_evaluation(tmp_path, "warm", 2) == (cuts, {"summary": {}, "episodes": []})
    assert saved_evaluation(tmp_path, "warm", 3) is None  # another cut count: evaluate again
    assert parse_args(["--reuse-evals"]).reuse_evals and not parse_args([]).reuse_evals


def test_extended_horizon_replays_the_runs_episodes_and_the_report_says_so(tmp_path) -> None:
    """``--extend-horizon N``: each named stage plays the first N held-out seeds (the run's own
    episodes among them, replayed as they were), its horizon file replaced, the report told."""
    import json

    from benchmarks.learning_steps import extension_lines, scripted_horizon
    from benchmarks.learning_steps_extend import extend_horizon

    two = scripted_horizon(2, tmp_path)["always_file"]["episodes"]
    (tmp_path / "run.json").write_text(json.dumps({"args": {"horizon_episodes": "2"}}))
    run = extend_horizon(tmp_path, tmp_path, 3, 64, ("always_file", "reference"), 4)
    saved = {
        name: json.loads((tmp_path / f"horizon_{name}.json").read_text())
        for name in ("always_file", "heuristic")
    }
    assert all(result["summary"]["episodes"] == 3 for result in saved.values())
    key = lambda r: (r["seed"], r["grade"])  # noqa: E731
    assert [key(r) for r in saved["always_file"]["episodes"][:2]] == [key(r) for r in two]
    assert not (tmp_path / "horizon_reference.json").exists()
    assert run["extended_horizon"][0]["episodes"] == 3
    (line,) = [t for t in extension_lines(run) if t]
    assert "--extend-horizon 3" in line and "first 3 held-out seeds" in line
