"""Keys and values of each conversation kept from one turn to the next.

An interactive turn's prompt is the previous turn's prompt, its reply and the new tool result. A
batched decoder that starts every turn from the shared system prompt re-encodes the whole
conversation each time: 16 AML episodes of ~10 turns re-encode ~300k tokens, against ~60k that are
new. ``RowKV`` holds what a row's last turn computed (its tokens after the shared prefix, their keys
and values per layer); the next turn places it in the decoding cache and encodes only the rest.

Keys carry their rotary position, so a row's cached tokens are valid only at the same positions:
the shared prefix must be the same object from turn to turn (``SharedPrefix``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


def cached_length(cached: Sequence[int], prompt: Sequence[int]) -> int:
    """Tokens at the start of ``prompt`` already in a cache of ``cached``, leaving at least one to
    encode (the next token's logits need one)."""
    n, limit = 0, min(len(cached), len(prompt) - 1)
    while n < limit and cached[n] == prompt[n]:
        n += 1
    return n


@dataclass
class SharedPrefix:
    """Token ids every row starts with and their encoded cache (read-only while decoding)."""

    ids: list[int]
    cache: Any

    def starts(self, prompt: Sequence[int]) -> bool:
        """Whether ``prompt`` begins with this prefix and goes on after it."""
        n = len(self.ids)
        return len(prompt) > n and list(prompt[:n]) == self.ids


@dataclass
class RowKV:
    """A row's suffix tokens (after the shared prefix) and their keys and values per layer,
    each ``[kv_heads, len(ids), head_dim]``."""

    ids: list[int]
    keys: list[Any]
    values: list[Any]

    def reusable(self, suffix: Sequence[int]) -> int:
        """Leading tokens of ``suffix`` whose keys and values this row holds."""
        return cached_length(self.ids, suffix)

    def head(self, n: int) -> RowKV:
        """The first ``n`` tokens' keys and values (copies: the rest is freed)."""
        keys = [k[:, :n].clone() for k in self.keys]
        return RowKV(self.ids[:n], keys, [v[:, :n].clone() for v in self.values])

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


def preload(cache: Any, rows: Sequence[RowKV], reuse: Sequence[int], offsets: Sequence[int]) -> int:
    """Write each row's first ``reuse[i]`` cached positions at its left-padded ``offsets[i]`` in a
    preallocated suffix cache; returns the column from which the batch must still be encoded.

    Columns before it are padding (zeroed: masked, but never garbage) or cached keys and values.
    A row whose cache reaches further than the returned column has those positions encoded again,
    to the same values, since a batch is encoded column by column."""
    start = min(offset + n for offset, n in zip(offsets, reuse, strict=True))
    for b, (row, offset) in enumerate(zip(rows, offsets, strict=True)):
        place(cache, b, row, offset, start - offset)
    for layer in cache.layers:
        layer.keys, layer.values = layer._keys[:, :, :start], layer._values[:, :, :start]
    return start


def place(cache: Any, batch_row: int, row: RowKV | None, offset: int, n: int) -> None:
    """Row ``batch_row`` of a preallocated suffix cache: zeros before its left-padded ``offset``
    (masked, but never garbage), then the first ``n`` kept positions of ``row`` (none if n <= 0)."""
    for index, layer in enumerate(cache.layers):
        layer._keys[batch_row, :, :offset].zero_()
        layer._values[batch_row, :, :offset].zero_()
        if n > 0:
            layer._keys[batch_row, :, offset : offset + n] = row.keys[index][:, :n]
            layer._values[batch_row, :, offset : offset + n] = row.values[index][:, :n]


def capture(cache: Any, batch_row: int, ids: list[int], offset: int) -> RowKV:
    """The keys and values of ``ids``, held at ``offset`` onwards in row ``batch_row`` of a
    preallocated suffix cache, copied out of it."""
    end = offset + len(ids)
    return RowKV(
        ids=list(ids),
        keys=[layer._keys[batch_row, :, offset:end].clone() for layer in cache.layers],
        values=[layer._values[batch_row, :, offset:end].clone() for layer in cache.layers],
    )
