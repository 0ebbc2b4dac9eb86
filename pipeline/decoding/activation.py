"""An adapter that acts from the reply's assistant turn on (``peft.activated``), and the contexts it
lets a run encode once.

With PEFT's activated LoRA (aLoRA, arXiv 2504.12397) the adapter is off for every token before the
last occurrence of its invocation tokens (here the chat template's generation prompt,
``<|im_start|>assistant\\n``) and on from there. A steps prompt's context (the system prompt and the
case so far, 2-4k tokens) is then read by the base model alone, whose weights a LoRA run never
changes: its keys and values are the same at every step, in sampling, in the loss and in
evaluation. ``ContextStore`` keeps them for the run, so a case is encoded once instead of once per
step (~6 s for a 3k-token case on 2 cores), and a step costs the reply's tokens only.

PEFT finds the invocation by searching each forward pass's ``input_ids``. A decoder that feeds a
prompt in chunks, or one token at a time after a cache, does not show it the invocation (or shows
it an earlier assistant turn of the conversation), so every forward pass of this package's
decoders passes ``alora_offsets`` itself: per row, how many of its input positions lie at or after
the row's activation start, counted from the full prompt (``offsets_from``). A context is always
encoded with the adapter off; tokens decoded after the prompt always with it on.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

GENERATION_PROMPT_PROBE = [{"role": "user", "content": "x"}]


def generation_prompt_tokens(tokenizer: Any) -> list[int]:
    """The tokens the chat template appends for the assistant's turn (its generation prompt):
    the invocation of an activated adapter, taken from the template rather than written out."""
    bare = tokenizer.apply_chat_template(GENERATION_PROMPT_PROBE, tokenize=False)
    prompted = tokenizer.apply_chat_template(
        GENERATION_PROMPT_PROBE, tokenize=False, add_generation_prompt=True
    )
    if not prompted.startswith(bare) or prompted == bare:
        raise ValueError("the chat template adds no generation prompt to activate an adapter at")
    return tokenizer(prompted[len(bare) :], add_special_tokens=False)["input_ids"]


def invocation_of(model: Any) -> list[int] | None:
    """The active adapter's invocation tokens when ``model`` is an activated LoRA, else None."""
    model = getattr(model, "module", model)  # a DDP wrapper's model
    configs = getattr(model, "peft_config", None)
    if not configs:
        return None
    active = getattr(model, "active_adapter", None)
    config = configs.get(active) if isinstance(active, str) else None
    tokens = getattr(config, "alora_invocation_tokens", None)
    return list(tokens) if tokens else None


def activation_start(ids: Sequence[int], invocation: Sequence[int]) -> int:
    """Index where the last ``invocation`` in ``ids`` starts: the adapter acts from there on."""
    k = len(invocation)
    target = list(invocation)
    for start in range(len(ids) - k, -1, -1):
        if list(ids[start : start + k]) == target:
            return start
    raise ValueError("the prompt holds no assistant turn to activate the adapter at")


def offsets_from(positions: Any, starts: Sequence[int] | None) -> list[int]:
    """Per row, how many of its input ``positions`` ([rows, T], absolute, nondecreasing) are at or
    after its activation start: the adapter acts on that many trailing positions (PEFT's
    ``alora_offsets``). ``starts`` None: every position is after the prompt (decoding)."""
    import torch

    rows, width = positions.shape
    if starts is None:
        return [width] * rows
    begin = torch.tensor(list(starts), device=positions.device).unsqueeze(1)
    return (positions >= begin).sum(dim=1).tolist()


def adapter_kwargs(model: Any, positions: Any, starts: Sequence[int] | None) -> dict[str, Any]:
    """The ``alora_offsets`` a forward pass of ``model`` over ``positions`` needs ({} for any
    other model)."""
    if invocation_of(model) is None:
        return {}
    return {"alora_offsets": offsets_from(positions, starts)}


def all_active(kwargs: dict[str, Any], width: int) -> bool:
    """Whether a forward pass with these ``adapter_kwargs`` over ``width`` positions has the
    adapter on at every position (decoding after the prompt, the loss over a reply)."""
    offsets = kwargs.get("alora_offsets")
    return offsets is not None and all(o is not None and o >= width for o in offsets)


_VARIANTS: weakref.WeakKeyDictionary[Any, list[dict[str, Any]]] = weakref.WeakKeyDictionary()


@contextmanager
def plain_lora(model: Any, when: bool = True) -> Iterator[None]:
    """PEFT's plain LoRA path for the forward passes inside, if ``when``: only for passes whose
    every position is at or after its row's activation start (``all_active``), where the
    activated LoRA computes the same sums but adds a mask, a gather and a scatter in each of the
    ~200 adapted modules (a tenth of an activated GRPO step's decoding on 2 cores). Not
    thread-safe: the package runs one forward pass of a model at a time."""
    from peft.tuners.lora.variants import ALoraLinearVariant

    if not when:
        yield
        return
    model = getattr(model, "module", model)
    dicts = _VARIANTS.get(model)
    if dicts is None:
        dicts = [m.lora_variant for m in model.modules() if getattr(m, "lora_variant", None)]
        _VARIANTS[model] = dicts
    held = [
        (variants, name, variants.pop(name))
        for variants in dicts
        for name, variant in list(variants.items())
        if isinstance(variant, ALoraLinearVariant)
    ]
    try:
        yield
    finally:
        for variants, name, variant in held:
            variants[name] = variant


def context_kwargs(model: Any, rows: int = 1) -> dict[str, Any]:
    """A forward pass over context only: the adapter off on every position ({} for any other
    model, whose adapter, if any, reads the context too)."""
    return {"alora_offsets": [0] * rows} if invocation_of(model) is not None else {}


class ContextStore:
    """Base-model caches of contexts, kept for the run, least recently used dropped past a budget.

    Stored in bfloat16 (a 3k-token SmolLM2-135M context: ~69 MB instead of 138) and handed out in
    the model's dtype, a fresh copy each time (decoders read them, forward passes grow copies).

    ``encode_dtype`` (e.g. ``torch.bfloat16``): contexts are encoded by a frozen copy of the model
    in that dtype instead of by the model itself. On a CPU with bfloat16 matrix units (AMX) a 3k-token
    SmolLM2-135M context then takes ~3 s instead of ~10 (benchmarks/bench_context_store.py); the
    keys and values differ from a float32 encoding by bfloat16's rounding inside the pass too, not
    only in storage."""

    def __init__(self, max_bytes: int, encode_dtype: Any = None) -> None:
        self.max_bytes = max_bytes
        self.encode_dtype = encode_dtype
        self._encoder: Any = None
        self._caches: OrderedDict[tuple[int, ...], list[tuple[Any, Any]]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.encoded = 0  # contexts encoded (the rest were read from the store)
        self.hits = 0

    def __len__(self) -> int:
        return len(self._caches)

    def get(self, model: Any, context: Sequence[int]) -> Any:
        """A cache of ``context`` as the base model reads it (``model``'s adapter off)."""
        from pipeline.decoding.preallocated_cache import cache_of

        key = tuple(context)
        with self._lock:
            layers = self._caches.get(key)
            if layers is not None:
                self._caches.move_to_end(key)
                self.hits += 1
        if layers is None:
            layers = self._encode(model, key)
        dtype = next(model.parameters()).dtype
        return cache_of([_layer(k.to(dtype), v.to(dtype)) for k, v in layers])

    def _encode(self, model: Any, key: tuple[int, ...]) -> list[tuple[Any, Any]]:
        from pipeline.decoding.batch_generation import encode_prefix  # a context: adapter off

        cache = encode_prefix(self._encoder_for(model), list(key)).cache
        layers = [(x.keys.bfloat16(), x.values.bfloat16()) for x in cache.layers]
        size = _nbytes(layers)
        with self._lock:
            self.encoded += 1
            if size <= self.max_bytes:
                self._caches[key] = layers
                self._bytes += size
                while self._bytes > self.max_bytes:
                    self._bytes -= _nbytes(self._caches.popitem(last=False)[1])
        return layers

    def _encoder_for(self, model: Any) -> Any:
        """The model that encodes contexts: ``model``, or its frozen copy in ``encode_dtype`` (made
        once per dtype, a later ``store_of(encode_dtype=...)`` included: the store's contexts
        depend on the base weights only, which a LoRA run never changes; the copy's adapter,
        stale after a step, is off on every context position)."""
        import copy

        import torch

        model = getattr(model, "module", model)
        if self.encode_dtype is None or next(model.parameters()).dtype == self.encode_dtype:
            return model
        with self._lock:
            made = self._encoder
            if made is None or next(made.parameters()).dtype != self.encode_dtype:
                with torch.no_grad():
                    encoder = copy.deepcopy(model).to(self.encode_dtype).eval()
                for param in encoder.parameters():
                    param.requires_grad_(False)
                    param.grad = None
                self._encoder = encoder
            return self._encoder


def _nbytes(layers: list[tuple[Any, Any]]) -> int:
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)


def _layer(keys: Any, values: Any) -> Any:
    from transformers.cache_utils import DynamicLayer

    layer = DynamicLayer()
    layer.lazy_initialization(keys, values)
    layer.keys, layer.values = keys, values
    return layer


_STORES: dict[tuple[Any, ...], ContextStore] = {}
_FINGERPRINTS: weakref.WeakKeyDictionary[Any, tuple[Any, ...]] = weakref.WeakKeyDictionary()
DEFAULT_STORE_BYTES = 8 * 2**30
_ENCODE_DTYPE: list[Any] = [None]


def encode_contexts_in(dtype: Any) -> None:
    """The dtype every context store made from now on in this process encodes in (None: each
    model's own), so that an evaluation that runs before the training run's config has built its
    store (a benchmark's untrained stage) encodes as the run will."""
    _ENCODE_DTYPE[0] = dtype


def base_fingerprint(model: Any) -> tuple[Any, ...]:
    """What a context's encoding depends on: the base model's name, dtype and weights (the sum of
    its input embeddings stands for them). Two loads of one base share a fingerprint, so a run's
    evaluations (the untrained model, the warm start, the trained adapter) share its contexts."""
    import torch

    model = getattr(model, "module", model)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    held = _FINGERPRINTS.get(base)
    if held is None:
        embedding = base.get_input_embeddings().weight
        with torch.no_grad():
            total = float(embedding.double().sum())
        held = (base.config._name_or_path, str(embedding.dtype), tuple(embedding.shape), total)
        _FINGERPRINTS[base] = held
    return held


def store_of(model: Any, max_bytes: int | None = None, encode_dtype: Any = None) -> ContextStore:
    """The process's context store for ``model``'s base model: an activated LoRA run never
    changes those weights, so its contexts are the same for the whole run (and for any
    evaluation in the process of a model on the same base). ``max_bytes`` sets its budget
    (default ``DEFAULT_STORE_BYTES``), ``encode_dtype`` the dtype it encodes in (None: keep)."""
    key = base_fingerprint(model)
    store = _STORES.get(key)
    if store is None:
        store = _STORES[key] = ContextStore(max_bytes or DEFAULT_STORE_BYTES, _ENCODE_DTYPE[0])
    elif max_bytes is not None:
        store.max_bytes = max_bytes
    if encode_dtype is not None:
        store.encode_dtype = encode_dtype
    return store


def reads_context_as_base(model: Any) -> bool:
    """Whether ``model`` encodes a prompt's context as its base model does: an activated adapter
    or no adapter at all (its stored contexts serve it)."""
    return invocation_of(model) is not None or not getattr(model, "peft_config", None)


def stored_rows(
    model: Any, prompts: Sequence[Sequence[int]], invocation: Sequence[int]
) -> tuple[Any, list[Any]]:
    """The shared prefix and each row's context after it, read from the store: what
    ``batch_generation.generate(prefix=..., resume=...)`` needs to encode only each prompt's last
    turn. The context of a prompt ends where its last ``invocation`` starts."""
    from pipeline.decoding.kv_rows import RowKV, SharedPrefix
    from pipeline.decoding.preallocated_cache import cache_of

    starts = [activation_start(p, invocation) for p in prompts]
    shared = 0
    while shared < min(starts) and all(p[shared] == prompts[0][shared] for p in prompts):
        shared += 1
    store, rows, prefix = store_of(model), [], None
    seen: dict[tuple[int, ...], Any] = {}  # rows of one case share its keys and values
    for prompt, start in zip(prompts, starts, strict=True):
        context = tuple(prompt[:start])
        if context not in seen:
            layers = store.get(model, context).layers
            if prefix is None:
                head = [_layer(x.keys[:, :, :shared], x.values[:, :, :shared]) for x in layers]
                prefix = SharedPrefix(list(prompt[:shared]), cache_of(head))
            keys = [x.keys[0, :, shared:start] for x in layers]
            values = [x.values[0, :, shared:start] for x in layers]
            seen[context] = RowKV(list(prompt[shared:start]), keys, values)
        rows.append(seen[context])
    return prefix, rows
