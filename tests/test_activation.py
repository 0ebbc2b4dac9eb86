"""``peft.activated``: an adapter that acts from the reply's assistant turn on
(pipeline/decoding/activation.py). Every decoder of the package, fed in chunks, after caches and
token by token, must give what PEFT's activated LoRA gives over the whole sequence; the loss's
logits must be PEFT's; a context is encoded once per run."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig, get_peft_model

from pipeline.decoding.activation import (
    ContextStore,
    activation_start,
    generation_prompt_tokens,
    invocation_of,
    store_of,
)
from pipeline.decoding.batch_generation import generate
from pipeline.decoding.trainer_sampling import generate_by_prompt
from pipeline.training.context_grad import context_logits

from conftest import tiny_model

STOP = -1  # no stop token: every reply runs to its budget


def _activated(seed: int = 3) -> tuple:
    """A tiny model with a non-zero activated LoRA, and its tokenizer."""
    base, tok = tiny_model(seed=seed, style="compact")
    config = LoraConfig(
        r=4,
        lora_alpha=8,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj"],
        alora_invocation_tokens=generation_prompt_tokens(tok),
        init_lora_weights=False,  # random A and B: the adapter changes the logits from the start
        task_type="CAUSAL_LM",
    )
    return get_peft_model(base, config).eval(), tok


def _prompt(tok, case: str, turns: int = 1) -> list[int]:
    """A conversation with ``turns`` earlier assistant turns (each an invocation PEFT must not
    activate at) ending in the generation prompt."""
    messages = [{"role": "system", "content": "You investigate alerts."}]
    for k in range(turns):
        messages += [
            {"role": "user", "content": f"{case} step {k} " * 6},
            {"role": "assistant", "content": f"looked at account {k}"},
        ]
    messages.append({"role": "user", "content": f"decide on {case}"})
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tok(text, add_special_tokens=False)["input_ids"]


def _reference(model, prompt: list[int], n: int) -> list[int]:
    """Greedy tokens from whole-sequence forward passes: PEFT finds the invocation itself."""
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
            ids.append(int(logits.argmax()))
    return ids[len(prompt) :]


@pytest.fixture(scope="module")
def activated():
    return _activated()


def test_the_invocation_is_the_templates_assistant_turn(activated) -> None:
    model, tok = activated
    expected = tok("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    assert generation_prompt_tokens(tok) == expected == invocation_of(model)
    prompt = _prompt(tok, "A", turns=2)
    assert activation_start(prompt, expected) == len(prompt) - len(expected)
    with pytest.raises(ValueError, match="no assistant turn"):
        activation_start(prompt[:-4], [999_999])


def test_batched_decoding_equals_pefts_whole_sequence(activated, monkeypatch) -> None:
    """Rows of different lengths (left-padded), prompts fed in chunks that split earlier assistant
    turns from the last: the adapter acts exactly from each row's last assistant turn."""
    import pipeline.decoding.batch_generation as batch_generation

    model, tok = activated
    prompts = [_prompt(tok, "A", turns=2), _prompt(tok, "Bee bee", turns=3)]
    expected = [_reference(model, p, 8) for p in prompts]
    monkeypatch.setattr(batch_generation, "PREFILL_CHUNK", 16)
    got = generate(model, prompts, 8, {STOP}, tok.pad_token_id, batch_size=2)
    assert got == expected
    with model.disable_adapter():  # the adapter matters: without it the replies differ
        assert [_reference(model, p, 8) for p in prompts] != expected


def test_group_sampling_reads_the_context_from_the_store(activated) -> None:
    """``generate_by_prompt`` decodes a batch's groups together, each row after its case's
    base-model context, encoded once per run: a second step over the same prompts encodes
    nothing, and each reply is PEFT's whole-sequence one."""
    model, tok = activated
    prompts = [_prompt(tok, "A"), _prompt(tok, "C", turns=2)]
    opening = tok('<tool_call>{"name": "', add_special_tokens=False)["input_ids"]
    store = store_of(model)
    before = store.encoded
    first = generate_by_prompt(
        model, [prompts[0]] * 2 + [prompts[1]] * 2, 10, {STOP}, tok.pad_token_id, openings=[opening]
    )
    assert store.encoded == before + 2
    again = generate_by_prompt(
        model, [prompts[0]] * 2 + [prompts[1]] * 2, 10, {STOP}, tok.pad_token_id, openings=[opening]
    )
    assert store.encoded == before + 2 and store.hits >= 2
    assert first == again  # greedy: the same replies from the stored contexts
    for prompt, reply in zip(prompts, first[::2], strict=True):
        assert reply == opening + _reference(model, prompt + opening, 10 - len(opening))


def test_decision_branches_of_unequal_openings_decode_in_one_batch(activated) -> None:
    """Both branches' rows of every group in one call: each reply is its opening and PEFT's
    continuation, cut at the completion budget whatever its opening's length."""
    model, tok = activated
    prompts = [_prompt(tok, "A"), _prompt(tok, "C", turns=2)]
    short = tok('<tool_call>{"name": "close', add_special_tokens=False)["input_ids"]
    long = tok('<tool_call>{"name": "file_sar_report', add_special_tokens=False)["input_ids"]
    assert len(long) > len(short)
    rows, budget = [prompts[0]] * 2 + [prompts[1]] * 2, len(long) + 5
    replies = generate_by_prompt(
        model, rows, budget, {STOP}, tok.pad_token_id, openings=[short, long]
    )
    for prompt, pair in zip(prompts, (replies[:2], replies[2:]), strict=True):
        for opening, reply in zip((short, long), pair, strict=True):
            assert len(reply) == budget
            assert reply == opening + _reference(model, prompt + opening, budget - len(opening))


def test_the_losss_logits_are_pefts_and_train_the_adapter(activated) -> None:
    model, tok = activated
    prompt = _prompt(tok, "A", turns=2)
    replies = torch.tensor([[11, 12, 13, 14], [21, 22, 23, 24]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    full = torch.cat([torch.tensor([prompt] * 2), replies], dim=1)
    attention = torch.cat([torch.ones(2, len(prompt), dtype=torch.long), mask], dim=1)
    with torch.no_grad():
        expected = model(input_ids=full, attention_mask=attention).logits[:, len(prompt) - 1 : -1]
    logits = context_logits(model, tuple(prompt), replies, mask)
    assert logits.shape == expected.shape
    assert torch.allclose(logits[0], expected[0], atol=1e-2)  # the context stored in bfloat16
    assert torch.allclose(logits[1, :3], expected[1, :3], atol=1e-2)
    logits[mask.bool()].logsumexp(-1).sum().backward()
    grads = [p.grad for n, p in model.named_parameters() if "lora_" in n]
    assert all(g is not None for g in grads) and sum(float(g.abs().sum()) for g in grads) > 0
    model.zero_grad(set_to_none=True)


def test_the_store_keeps_a_budget_and_drops_the_least_recently_used() -> None:
    model, tok = _activated(seed=4)
    contexts = [_prompt(tok, case)[:-4] for case in ("A", "B", "C")]
    one = 2 * sum(k.numel() * 2 for k in _layers(model, contexts[0]))
    store = ContextStore(max_bytes=int(2.5 * one))
    for context in contexts:
        store.get(model, context)
    assert len(store) == 2 and store.encoded == 3
    store.get(model, contexts[2])
    assert store.encoded == 3  # kept
    store.get(model, contexts[0])
    assert store.encoded == 4  # the oldest was dropped and encoded again


def test_a_bfloat16_store_encodes_in_a_frozen_copy_the_adapter_never_reaches() -> None:
    """``encode_dtype``: contexts come from one bfloat16 copy of the model, made once; the model
    stays float32 and trainable; the copy's stale adapter does not matter (it is off on a
    context), and its keys match a float32 encoding to bfloat16's precision."""
    model, tok = _activated(seed=5)
    contexts = [_prompt(tok, case)[:-4] for case in ("A", "B")]
    store = ContextStore(max_bytes=2**30, encode_dtype=torch.bfloat16)
    got = [layer.keys for layer in store.get(model, contexts[0]).layers]
    encoder = store._encoder
    assert encoder is not model and next(encoder.parameters()).dtype == torch.bfloat16
    assert not any(p.requires_grad for p in encoder.parameters())
    assert next(model.parameters()).dtype == torch.float32
    assert any(p.requires_grad for p in model.parameters())
    for mine, exact in zip(got, _layers(model, contexts[0]), strict=True):
        assert mine.dtype == torch.float32
        assert (mine - exact).abs().max() <= 0.05 * exact.abs().max()
    with torch.no_grad():  # a training step moves the adapter; the copy keeps the old one
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.add_(1.0)
    second = store.get(model, contexts[1]).layers
    assert store._encoder is encoder and store.encoded == 2
    fresh = ContextStore(max_bytes=2**30, encode_dtype=torch.bfloat16).get(model, contexts[1])
    for a, b in zip(second, fresh.layers, strict=True):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


def test_the_plain_lora_path_computes_the_activated_one_where_the_adapter_is_on() -> None:
    """Over positions all past the activation start, PEFT's plain LoRA path gives the activated
    path's logits and gradients; the activated variant is back afterwards, after an error too."""
    from peft.tuners.lora.variants import ALoraLinearVariant

    from pipeline.decoding.activation import all_active, plain_lora

    model, tok = _activated(seed=6)
    ids = torch.tensor([_prompt(tok, "A")[-6:]])
    kwargs = {"alora_offsets": [6]}
    assert all_active(kwargs, 6) and not all_active({"alora_offsets": [5]}, 6)
    assert not all_active({}, 6)
    lora = [p for n, p in model.named_parameters() if "lora_A" in n]

    def run() -> tuple:
        model.zero_grad(set_to_none=True)
        logits = model(input_ids=ids, **kwargs).logits
        logits.logsumexp(-1).sum().backward()
        return logits.detach(), [p.grad.clone() for p in lora]

    activated_logits, activated_grads = run()
    with plain_lora(model):
        plain_logits, plain_grads = run()
        assert not any(getattr(m, "lora_variant", None) for m in model.modules())
    assert torch.allclose(plain_logits, activated_logits, atol=1e-5)
    pairs = zip(plain_grads, activated_grads, strict=True)
    assert all(torch.allclose(a, b, atol=1e-6) and a.abs().sum() > 0 for a, b in pairs)
    with pytest.raises(RuntimeError), plain_lora(model):
        raise RuntimeError("a failed forward pass")
    variants = [v for m in model.modules() for v in getattr(m, "lora_variant", {}).values()]
    assert variants and all(isinstance(v, ALoraLinearVariant) for v in variants)
    model.zero_grad(set_to_none=True)


def _layers(model, context: list[int]) -> list:
    with torch.no_grad():
        out = model(input_ids=torch.tensor([context]), use_cache=True, alora_offsets=[0])
    return [layer.keys for layer in out.past_key_values.layers]


@pytest.fixture(scope="module")
def saved(activated, tmp_path_factory):
    """The fixture's adapter saved on a saved copy of its base model: an evaluation checkpoint."""
    model, tok = activated
    folder = tmp_path_factory.mktemp("activated")
    tiny_model(seed=3)[0].save_pretrained(folder / "base")  # the base, without the adapter
    tok.save_pretrained(folder / "base")
    model.peft_config["default"].base_model_name_or_path = str(folder / "base")
    model.save_pretrained(folder / "adapter")
    return folder / "adapter"


def test_checkpoint_backend_turns_equal_pefts_whole_sequence(activated, saved) -> None:
    """A saved activated adapter, evaluated turn by turn with the backend's kept cache: each turn
    gives PEFT's whole-sequence reply (the kept cache stops at the last turn's context)."""
    from pipeline.evaluation.backends import CheckpointBackend, GenerationSettings

    model, tok = activated
    backend = CheckpointBackend(saved, GenerationSettings(plan_max_new_tokens=6))
    assert invocation_of(backend.model) == invocation_of(model)
    backend.stop_ids = set()
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "alert 7"}]
    for turn in range(3):
        reply = backend.complete(messages, tools=None, seed=0)
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompt = tok(text, add_special_tokens=False)["input_ids"]
        assert backend._cached[: len(prompt)] == prompt  # the last token decoded is not fed
        assert backend._cached[len(prompt) :] == _reference(model, prompt, 6)[:-1]
        messages += [reply, {"role": "user", "content": f"result {turn}"}]


def test_a_steps_run_trains_an_activated_adapter_encoding_each_case_once(
    tmp_path, monkeypatch
) -> None:
    """A real GRPOTrainer run (decision branches, the decision-blind warm start first): each
    case's context is encoded once for the run, whichever step or phase reads it."""
    import json
    from pathlib import Path

    from pipeline.training.config import load_config
    from pipeline.training.trainer import train

    root = Path(__file__).resolve().parents[1]
    cfg = load_config(
        root / "configs/cpu_steps.yaml",
        [
            "model.backend=tiny",
            "peft.activated=true",
            "data.n_train=2",
            "data.decision_branches=true",
            "training.num_generations=4",
            "training.per_device_train_batch_size=4",
            "training.max_completion_length=16",
            "training.max_steps=4",
            "training.save_steps=100",
            "logging.log_completions=false",
            f"output_dir={tmp_path}",
        ],
    )
    encoded: list[int] = []
    real = ContextStore._encode

    def counted(self, model, key):
        encoded.append(hash(key))
        return real(self, model, key)

    monkeypatch.setattr(ContextStore, "_encode", counted)
    result = train(cfg, sft_steps=1)
    assert result.global_step == 4
    assert len(encoded) == len(set(encoded)) == 2  # two cases, four steps and a warm start
    saved = json.loads((tmp_path / "final/adapter_config.json").read_text())
    assert saved["alora_invocation_tokens"] == [1, 520, 9531, 198]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["peft.enabled=false"], "peft.enabled=true"),
        (["training.use_vllm=true", "model.backend=transformers"], "do not apply an activated"),
        (["model.backend=unsloth"], "do not apply an activated"),
        (["peft.context_store_gb=0"], "context_store_gb"),
        (["peft.context_dtype=int8"], "context_dtype"),
    ],
)
def test_activated_needs_a_lora_adapter_the_decoders_can_activate(overrides, message) -> None:
    from pathlib import Path

    from pipeline.training.config import ConfigError, load_config

    root = Path(__file__).resolve().parents[1]
    with pytest.raises(ConfigError, match=message):
        load_config(root / "configs/cpu_steps.yaml", ["peft.activated=true", *overrides])


def test_a_context_dtype_without_an_activated_adapter_is_refused() -> None:
    from pathlib import Path

    from pipeline.training.config import ConfigError, load_config

    root = Path(__file__).resolve().parents[1]
    with pytest.raises(ConfigError, match="peft.activated"):
        load_config(root / "configs/cpu_steps.yaml", ["peft.context_dtype=bfloat16"])


def test_lockstep_episodes_of_an_activated_adapter_equal_sequential_ones(saved) -> None:
    """Episodes decoded together (shared prefix before the first assistant turn, no kept rows)
    are the episodes each plays alone."""
    import env
    from env.rollout import play
    from pipeline.decoding.lockstep import play_lockstep
    from pipeline.evaluation.backends import CheckpointBackend, GenerationSettings
    from pipeline.evaluation.model_policy import ModelPolicy

    settings = GenerationSettings(max_new_tokens=6, plan_max_new_tokens=10, max_idle_turns=2)
    backend = CheckpointBackend(saved, settings)
    jobs = [("easy", 1_000_000_001), ("easy", 1_000_000_003)]
    policies: dict[int, ModelPolicy] = {}

    def make_policy(shared, seed):
        policies[seed] = ModelPolicy(shared, "support", "interactive", seed, settings)
        return policies[seed]

    episodes, errors = play_lockstep("support", backend, make_policy, jobs, batch_size=2)
    assert errors == 0
    for (task, seed), episode in zip(jobs, episodes, strict=True):
        alone = ModelPolicy(backend, "support", "interactive", seed, settings)
        expected = play(env.make("support"), alone, task, seed)
        assert policies[seed].messages == alone.messages
        assert episode.report.steps == expected.report.steps


@pytest.mark.parametrize("adapter", [True, False])
def test_stored_contexts_give_the_same_replies_encoding_only_the_last_turn(adapter) -> None:
    """An evaluation batch resumed from the store (an activated adapter, or a plain model whose
    contexts are the base's too) decodes what whole-sequence forward passes decode."""
    from pipeline.decoding.activation import reads_context_as_base, stored_rows

    model, tok = _activated(seed=6) if adapter else tiny_model(seed=6, style="compact")
    model.eval()
    assert reads_context_as_base(model)
    prompts = [_prompt(tok, "A", turns=2), _prompt(tok, "Bee bee", turns=3)]
    expected = [_reference(model, p, 6) for p in prompts]
    invocation = generation_prompt_tokens(tok)
    prefix, rows = stored_rows(model, prompts, invocation)
    assert [len(prefix.ids) + len(r.ids) for r in rows] == [len(p) - 4 for p in prompts]
    fed: list[int] = []
    hook = model.register_forward_pre_hook(
        lambda _m, _a, kw: fed.append(kw["input_ids"].shape[1]), with_kwargs=True
    )
    got = generate(model, prompts, 6, {STOP}, tok.pad_token_id, prefix=prefix, resume=rows)
    hook.remove()
    assert got == expected
    assert fed[0] == 4  # the prefill: each row's assistant turn only


def test_a_resumed_row_may_not_reach_past_its_activation_start(activated) -> None:
    from pipeline.decoding.activation import stored_rows
    from pipeline.decoding.kv_rows import RowKV

    model, tok = activated
    prompt = _prompt(tok, "A")
    prefix, (row,) = stored_rows(model, [prompt], generation_prompt_tokens(tok))
    longer = RowKV(row.ids + prompt[len(prefix.ids) + len(row.ids) :][:1], row.keys, row.values)
    with pytest.raises(ValueError, match="past its prompt's activation start"):
        generate(model, [prompt], 2, {STOP}, tok.pad_token_id, prefix=prefix, resume=[longer])
