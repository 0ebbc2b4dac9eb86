"""Checks of a built TrainConfig: the combinations that cannot run, refused before any model loads.

``config.build_config`` calls ``validate`` on every config it builds; each message says what to
change. Kept apart from the sections themselves so that each file reads as one concern.
"""

from __future__ import annotations

from typing import Any

from pipeline.training.config import (
    MODES,
    REPORT_TO,
    ConfigError,
    DataSection,
    EnvSection,
    ModelSection,
    TrainConfig,
)
from pipeline.training.model import BACKENDS


def world_size() -> int:
    """Processes in this run (torchrun/accelerate set WORLD_SIZE)."""
    import os

    return int(os.environ.get("WORLD_SIZE", "1"))


def validate(cfg: TrainConfig) -> None:
    """Reject combinations that cannot run, before anything heavy is loaded."""
    m, t, d = cfg.model, cfg.training, cfg.data
    if m.backend not in BACKENDS:
        raise ConfigError(f"model.backend {m.backend!r}: choose one of {', '.join(BACKENDS)}")
    if m.chat_template not in ("qwen2_5", "native"):
        raise ConfigError("model.chat_template must be qwen2_5 or native")
    if d.mode not in MODES:
        raise ConfigError(f"data.mode {d.mode!r}: choose {', '.join(MODES)}")
    if d.prompt_style not in ("full", "compact"):
        raise ConfigError(f"data.prompt_style {d.prompt_style!r}: choose full or compact")
    if d.result_style not in ("full", "compact"):
        raise ConfigError(f"data.result_style {d.result_style!r}: choose full or compact")
    if not 0.0 <= float(d.detour) <= 1.0:
        raise ConfigError(f"data.detour {d.detour!r}: a probability in [0, 1]")
    try:
        from pipeline.data.steps import parse_cuts

        parse_cuts(d.cuts)
    except ValueError as exc:
        raise ConfigError(f"data.cuts: {exc}") from None
    if d.decision_branches:
        _check_branches(cfg)
    _check_branch_credit(cfg)
    if not d.envs:
        raise ConfigError("data.envs is empty: name at least one environment (e.g. [aml])")
    if d.n_train < 1 or d.n_eval < 0:
        raise ConfigError("data.n_train must be >= 1 and data.n_eval >= 0")
    from rewards import REWARD_WEIGHTS_DEFAULT  # the components the rewards define

    unknown = set(cfg.rewards.weights) - set(REWARD_WEIGHTS_DEFAULT)
    if unknown:
        known = ", ".join(REWARD_WEIGHTS_DEFAULT)
        raise ConfigError(
            f"rewards.weights has unknown components {sorted(unknown)}; known: {known}"
        )
    if cfg.logging.report_to not in REPORT_TO:
        raise ConfigError(f"logging.report_to {cfg.logging.report_to!r}: one of {REPORT_TO}")
    cpu = m.on_cpu
    if cpu and t.get("use_vllm"):
        raise ConfigError(
            "training.use_vllm needs a CUDA backend; set model.backend or use_vllm=false"
        )
    if cpu and t.get("fp16"):
        raise ConfigError(
            f"fp16 mixed precision needs a GPU; backend {m.backend}: use bf16 or fp32"
        )
    if not 0 <= m.release_memory_above <= 1:
        raise ConfigError("model.release_memory_above is a share of memory: 0 to 1")
    if m.backend in ("bnb4bit", "unsloth") and not cfg.peft.enabled:
        raise ConfigError(
            f"model.backend={m.backend} trains 4-bit weights only through LoRA: peft.enabled=true"
        )
    if t.get("vllm_mode", "colocate") not in ("colocate", "server"):
        raise ConfigError("training.vllm_mode must be colocate or server")
    if d.mode == "interactive" and m.chat_template != "qwen2_5" and cpu:
        raise ConfigError(
            "interactive mode on SmolLM2 needs model.chat_template=qwen2_5 (tool calling)"
        )
    if cfg.hub.push and not cfg.hub.hub_model_id:
        raise ConfigError("hub.push=true needs hub.hub_model_id=USER/NAME")
    if not m.context_grad and (t.get("gradient_checkpointing") or t.get("use_liger_kernel")):
        raise ConfigError(
            "model.context_grad=false reads the prompt from a cache, which gradient checkpointing"
            " and Liger kernels drop: set training.gradient_checkpointing=false"
            " (the replies alone need little activation memory) and use_liger_kernel=false"
        )
    _check_context_reuse(m)
    _check_activated(cfg)
    _check_decision_rate(cfg)
    _check_batches(t, d)
    _check_env_urls(cfg.env, d)


def _check_context_reuse(m: ModelSection) -> None:
    """``model.context_reuse`` names a known rule, and ``generation`` has a cache to reuse (the
    shared-prefix sampler runs on the CPU backends only)."""
    if m.context_reuse not in ("step", "generation"):
        raise ConfigError(f"model.context_reuse={m.context_reuse!r}: choose step or generation")
    if m.context_reuse == "generation" and (m.context_grad or not m.on_cpu):
        raise ConfigError(
            "model.context_reuse=generation reuses the shared-prefix sampler's prompt caches:"
            " it needs model.context_grad=false on the cpu or tiny backend"
        )


def _check_activated(cfg: TrainConfig) -> None:
    """``peft.activated`` needs a LoRA adapter, a chat template with an assistant turn to
    activate at, and a sampler that passes the activation on (not Unsloth's, not vLLM's)."""
    p, m = cfg.peft, cfg.model
    if not p.activated:
        if p.context_dtype is not None:
            raise ConfigError("peft.context_dtype sets how peft.activated stores contexts")
        return
    if not p.enabled:
        raise ConfigError("peft.activated is a LoRA adapter's setting: set peft.enabled=true")
    if m.backend == "unsloth" or cfg.training.get("use_vllm"):
        raise ConfigError(
            "peft.activated: Unsloth and vLLM do not apply an activated LoRA; use"
            " model.backend=cpu/cuda/bnb4bit and training.use_vllm=false"
        )
    if p.context_store_gb <= 0:
        raise ConfigError("peft.context_store_gb must be > 0")
    if p.context_dtype not in (None, "float32", "bfloat16", "float16"):
        raise ConfigError(
            f"peft.context_dtype {p.context_dtype!r}: use bfloat16, float16, float32 or null"
        )


def _check_decision_rate(cfg: TrainConfig) -> None:
    """A held rate reads each case's log-odds from its stored context (``peft.activated``), and
    weighs the decision branches' pushes by them (``decision_likelihood`` credit)."""
    r = cfg.rewards
    if r.decision_rate not in ("free", "held"):
        raise ConfigError(f"rewards.decision_rate {r.decision_rate!r}: choose free or held")
    if r.decision_rate == "free":
        return
    if r.branch_credit != "decision_likelihood" or not cfg.peft.activated:
        raise ConfigError(
            "rewards.decision_rate=held needs rewards.branch_credit=decision_likelihood (with"
            " data.decision_branches) and peft.activated=true"
        )
    if world_size() > 1:
        raise ConfigError("rewards.decision_rate=held runs in one process (the CPU sampler)")
    if not r.rate_lr > 0:
        raise ConfigError("rewards.rate_lr must be > 0")


def _check_env_urls(e: EnvSection, d: DataSection) -> None:
    """Server URLs that look like base URLs, one list per environment trained."""
    from env.remote import check_urls

    if e.retries < 1 or e.timeout_s <= 0:
        raise ConfigError("env.retries must be >= 1 and env.timeout_s > 0")
    if not e.urls:
        return
    if isinstance(e.urls, dict):
        missing = [name for name in d.envs if name not in e.urls]
        if missing:
            raise ConfigError(f"env.urls names no server for {missing}; give each of data.envs")
        lists = list(e.urls.values())
    elif len(set(d.envs)) > 1:
        raise ConfigError(
            "one server serves one environment: with several data.envs give env.urls as a "
            "mapping env -> [urls] (e.g. {aml: [http://h1:8000], fraud: [http://h2:8000]})"
        )
    else:
        lists = [e.urls]
    for urls in lists:
        try:
            check_urls(urls)
        except ValueError as exc:
            raise ConfigError(f"env.urls: {exc}") from None


def _check_branches(cfg: TrainConfig) -> None:
    """Decision branches open every reply as a decision: only where the reference decides next,
    with one environment's decisions, on the sampler that implements them."""
    from pipeline.decoding.trainer_sampling import BRANCHING_ENVS, terminal_tools

    d = cfg.data
    if d.mode != "steps" or d.cuts != "decision":
        raise ConfigError("data.decision_branches needs data.mode=steps and data.cuts=decision")
    if not cfg.model.on_cpu:
        raise ConfigError("data.decision_branches needs model.backend cpu or tiny (its sampler)")
    if len(d.envs) != 1 or d.envs[0] not in BRANCHING_ENVS:
        raise ConfigError(f"data.decision_branches needs data.envs one of {list(BRANCHING_ENVS)}")
    n = len(terminal_tools(d.envs))
    g = cfg.training.get("num_generations", 8)
    if not isinstance(g, int) or g % n:
        raise ConfigError(
            f"data.decision_branches: training.num_generations {g} must be a multiple of "
            f"{d.envs[0]}'s {n} decisions"
        )


BRANCH_CREDITS = ("total", "decision", "decision_tokens", "decision_likelihood")
TOKEN_CREDITS = ("decision_tokens", "decision_likelihood")
"""Credits that split the advantage over the tokens (pipeline/training/branch_credit.py)."""


def _check_branch_credit(cfg: TrainConfig) -> None:
    """Decision credit re-weighs decision branches by the decision component: both must be on."""
    credit = cfg.rewards.branch_credit
    if credit not in BRANCH_CREDITS:
        raise ConfigError(f"rewards.branch_credit {credit!r}: one of {', '.join(BRANCH_CREDITS)}")
    if credit == "total":
        return
    if not cfg.data.decision_branches:
        raise ConfigError(f"rewards.branch_credit={credit} needs data.decision_branches=true")
    if not cfg.rewards.weights.get("decision", 0.0) > 0.0:
        raise ConfigError(f"rewards.branch_credit={credit} needs rewards.weights.decision > 0")
    aggregation = cfg.training.get("multi_objective_aggregation", "sum_then_normalize")
    if credit in TOKEN_CREDITS and aggregation != "sum_then_normalize":
        raise ConfigError(
            f"rewards.branch_credit={credit} splits TRL's summed advantage: it needs "
            "training.multi_objective_aggregation=sum_then_normalize"
        )


def _check_batches(t: dict[str, Any], d: DataSection) -> None:
    """The generation batch must hold whole groups of num_generations completions."""
    g = t.get("num_generations", 8)
    if not isinstance(g, int) or g < 2:
        raise ConfigError(f"training.num_generations = {g!r}: GRPO needs at least 2 per prompt")
    per_device = t.get("per_device_train_batch_size", 8)
    global_batch = per_device * world_size()
    gen_batch = t.get("generation_batch_size")
    steps = t.get("steps_per_generation")
    if gen_batch is not None and steps is not None:
        raise ConfigError("set training.generation_batch_size or steps_per_generation, not both")
    if gen_batch is None:
        gen_batch = global_batch * (steps or t.get("gradient_accumulation_steps", 1))
    elif gen_batch % global_batch:
        raise ConfigError(
            f"training.generation_batch_size {gen_batch} is not divisible by the global batch "
            f"{global_batch} (per_device_train_batch_size x {world_size()} processes)"
        )
    if gen_batch % g:
        raise ConfigError(
            f"generation batch {gen_batch} (per_device_train_batch_size {per_device} x "
            f"{world_size()} processes x steps) is not divisible by training.num_generations {g}"
        )
    if d.n_train * g < gen_batch:
        raise ConfigError(
            f"data.n_train {d.n_train} prompts x {g} generations < generation batch {gen_batch}"
        )
