"""Hub push: model card, upload of a folder that loads back with PEFT, errors that keep the run.

The Hub is unreachable here, so ``HfApi`` (the only network boundary) is replaced by a recorder
that copies the uploaded folder; everything else runs for real.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from peft import PeftModel

from pipeline.training.config import ModelSection, PeftSection, build_config
from pipeline.training.hub import (
    HubPushError,
    model_card,
    push_folder,
    upload_plan,
    write_model_card,
)
from pipeline.training.model import load_model_and_tokenizer


class RecordingHub:
    """Stands in for huggingface_hub.HfApi: records calls, copies uploads to a local 'remote'."""

    def __init__(self, remote: Path, fail: Exception | None = None) -> None:
        self.remote, self.fail, self.calls = remote, fail, []

    def create_repo(self, repo_id: str, **kwargs: Any) -> None:
        self.calls.append(("create_repo", repo_id, kwargs))
        if self.fail:
            raise self.fail

    def upload_folder(self, folder_path: str, repo_id: str, **kwargs: Any) -> None:
        self.calls.append(("upload_folder", repo_id, kwargs))
        shutil.copytree(folder_path, self.remote / repo_id, dirs_exist_ok=True)


def _config() -> Any:
    return build_config(
        {
            "model": {"backend": "tiny"},
            "data": {"envs": ["support"], "tasks": ["easy"]},
            "training": {"num_generations": 2, "per_device_train_batch_size": 2},
        }
    )


def _saved_adapter(folder: Path) -> Any:
    model, tokenizer = load_model_and_tokenizer(ModelSection(backend="tiny"), PeftSection(r=4))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.fill_(0.01)  # a non-zero adapter, as after training
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model


def test_pushed_folder_loads_back_with_peft(tmp_path: Path) -> None:
    folder = tmp_path / "final"
    trained = _saved_adapter(folder)
    write_model_card(folder, _config(), "tiny", {"GRPO steps": 2})
    hub = RecordingHub(tmp_path / "remote")
    url = push_folder(folder, "someone/agent", api=hub)
    assert url == "https://huggingface.co/someone/agent"
    assert [c[0] for c in hub.calls] == ["create_repo", "upload_folder"]
    uploaded = tmp_path / "remote" / "someone" / "agent"
    assert {"README.md", "adapter_config.json", "adapter_model.safetensors"} <= {
        p.name for p in uploaded.iterdir()
    }
    base, _ = load_model_and_tokenizer(ModelSection(backend="tiny"), None)
    reloaded = PeftModel.from_pretrained(base, str(uploaded))
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert torch.allclose(reloaded(ids).logits, trained(ids).logits, atol=1e-5)


def test_missing_token_keeps_the_local_save_and_says_how_to_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    folder = tmp_path / "final"
    _saved_adapter(folder)
    with pytest.raises(HubPushError, match="HF_TOKEN is not set.*python -m pipeline.training.hub"):
        push_folder(folder, "someone/agent")
    assert (folder / "adapter_model.safetensors").exists()


def test_unreachable_hub_is_a_clear_error_after_the_save(tmp_path: Path) -> None:
    folder = tmp_path / "final"
    _saved_adapter(folder)
    hub = RecordingHub(tmp_path / "remote", fail=ConnectionError("no route to host"))
    with pytest.raises(HubPushError, match=f"ConnectionError.*saved in {folder}"):
        push_folder(folder, "someone/agent", api=hub)
    assert (folder / "adapter_model.safetensors").exists()


def test_model_card_names_env_tasks_rewards_config_and_eval(tmp_path: Path) -> None:
    from huggingface_hub import ModelCard

    results = tmp_path / "eval.json"
    per_task = {"easy": {"episodes": 20, "mean_grade": 0.61, "decision_accuracy": 0.7}}
    summary = {"env": "support", "split": "test", "mean_grade": 0.61, "decision_rate": 0.9}
    results.write_text(json.dumps({"summary": {**summary, "per_task": per_task}}))
    cfg = _config()
    cfg.hub.eval_results = str(results)
    card = model_card(cfg, "HuggingFaceTB/SmolLM2-135M-Instruct")
    data = ModelCard(card).data  # the metadata huggingface_hub reads back
    assert data.library_name == "peft"
    assert data.base_model == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert {"grpo", "trl", "support"} <= set(data.tags)
    metrics = {r.metric_type: r.metric_value for r in data.eval_results}
    assert metrics == {"mean_grade": 0.61, "decision_rate": 0.9}
    assert {r.dataset_split for r in data.eval_results} == {"test"}
    for text in ("support", "Tasks: easy", "| grade |", "| format |", "num_generations: 2"):
        assert text in card
    assert "| mean_grade | 0.610 |" in card  # the evaluation table
    assert "| easy | 20 | 0.610 | 0.700 |" in card
    written = write_model_card(tmp_path, cfg, "base")
    assert ModelCard.load(written).data.base_model == "base"


def test_model_card_without_results_says_so(tmp_path: Path) -> None:
    from huggingface_hub import ModelCard

    card = model_card(_config(), "base")
    assert ModelCard(card).data.eval_results is None
    assert "No evaluation results were attached" in card
    cfg = _config()
    cfg.hub.eval_results = str(tmp_path / "missing.json")
    assert "was not found" in model_card(cfg, "base")


def test_upload_plan_lists_every_file_with_its_size(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("abc")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.bin").write_bytes(b"12345")
    assert upload_plan(tmp_path) == [("a.txt", 3), ("sub/b.bin", 5)]
