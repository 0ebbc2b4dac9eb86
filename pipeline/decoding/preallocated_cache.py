"""Decoding caches written in place: ``PreallocatedLayer`` is a transformers ``DynamicLayer`` over
fixed storage, so a decoded token writes one column instead of ``torch.cat`` copying the whole cache
(``DynamicCache`` grows that way), and a row encoded alone can write straight into its batch row.
"""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def _preallocated_layer_class() -> type:
    """``DynamicLayer`` over fixed storage, written in place: ``DynamicCache`` grows with
    ``torch.cat``, so every decoded token would copy the whole cache."""
    from transformers.cache_utils import DynamicLayer

    class PreallocatedLayer(DynamicLayer):
        def __init__(self, keys: Any, values: Any, length: int = 0) -> None:
            super().__init__()
            self._keys, self._values = keys, values
            self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
            self.keys, self.values = keys[:, :, :length], values[:, :, :length]

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any):
            start = self.keys.shape[-2]
            end = start + key_states.shape[-2]
            self._keys[:, :, start:end] = key_states
            self._values[:, :, start:end] = value_states
            self.keys, self.values = self._keys[:, :, :end], self._values[:, :, :end]
            return self.keys, self.values

        def keep_rows(self, rows: Any) -> None:
            end = self.keys.shape[-2]
            self._keys, self._values = self._keys[rows], self._values[rows]
            self.keys, self.values = self._keys[:, :, :end], self._values[:, :, :end]

    return PreallocatedLayer


def cache_of(layers: list[Any]) -> Any:
    """A ``DynamicCache`` made of the given layers (transformers builds its own otherwise)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    cache.layers = layers
    return cache


def suffix_cache(prefix_cache: Any, batch: int, capacity: int) -> Any:
    """An empty per-row cache with room for ``capacity`` suffix positions, written in place."""
    layer_class = _preallocated_layer_class()
    layers = []
    for layer in prefix_cache.layers:
        shape = (batch, layer.keys.shape[1], capacity, layer.keys.shape[3])
        layers.append(layer_class(layer.keys.new_empty(shape), layer.keys.new_empty(shape)))
    return cache_of(layers)


def row_view(cache: Any, row: int, offset: int, length: int) -> Any:
    """A one-row cache that writes row ``row`` of a suffix cache from column ``offset`` on, with
    ``length`` positions already filled: a row encoded alone lands where the batch reads it."""
    layer_class = _preallocated_layer_class()
    return cache_of(
        [
            layer_class(
                layer._keys[row : row + 1, :, offset:],
                layer._values[row : row + 1, :, offset:],
                length,
            )
            for layer in cache.layers
        ]
    )


def keep_rows_of(cache: Any, rows: Any) -> None:
    """Keep only ``rows`` of every layer of a decoding cache (preallocated or plain)."""
    for layer in cache.layers:
        if hasattr(layer, "keep_rows"):
            layer.keep_rows(rows)
        else:
            layer.keys, layer.values = layer.keys[rows], layer.values[rows]
