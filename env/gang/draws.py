"""Counter-based draws: the uniform of (a, b, field) is a keyed hash, computed when it is needed.

A gang world holds up to 1,000 accounts and ~10k follows, but an episode reads a few dozen
accounts. Drawing the whole graph at reset cost ~2 ms a hard world (benchmarks/RESULTS.md,
bench_resets); with draws addressed by (account, other account, field) instead of by position in
one random stream, any account's profile or follow list is drawn alone, in any order, and is the
same whichever order the tools read it in. The key comes from the episode's ``random.Random``, so
the world is still a function of (task, seed) only.

The hash is SplitMix64's finaliser over ``a*A + b*B + field*F + key`` (mod 2**64); the scalar path
(Python ints) and the vector path (numpy uint64, which wraps the same way) give bit-identical
uniforms, so a column computed for every account agrees with the account read alone (tested).
"""

from __future__ import annotations

import numpy as np

MASK = (1 << 64) - 1
_A, _B, _F = 0x9E3779B97F4A7C15, 0xD1B54A32D192ED03, 0x8CB92BA72F3D8DD7
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_SCALE = 2.0**-53
_HALF, _LOW = 2.0**-32, (1 << 32) - 1
_U64 = np.uint64


def _u64(value: int | np.ndarray) -> np.ndarray:
    return np.asarray(value).astype(np.uint64, copy=False)


class Draws:
    """Uniforms in [0, 1) addressed by (a, b, field) under one episode key."""

    def __init__(self, key: int) -> None:
        self.key = key & MASK

    def _hash(self, a: int, b: int, field: int) -> int:
        """The mixed 64-bit hash of (a, b, field) in plain Python (``mix`` on one input)."""
        z = self.offset(a, b, field)
        z = ((z ^ (z >> 30)) * _M1) & MASK
        z = ((z ^ (z >> 27)) * _M2) & MASK
        return z ^ (z >> 31)

    def unit(self, a: int, b: int, field: int) -> float:
        """One uniform (plain Python: a few hundred nanoseconds)."""
        return (self._hash(a, b, field) >> 11) * _SCALE

    def below(self, a: int, b: int, field: int, k: int) -> int:
        """An integer uniform in [0, k)."""
        return int(self.unit(a, b, field) * k)

    def pair(self, a: int, b: int, field: int) -> tuple[float, float]:
        """Two independent uniforms (the hash's two 32-bit halves) for the price of one."""
        z = self._hash(a, b, field)
        return (z >> 32) * _HALF, (z & _LOW) * _HALF

    def units(
        self, a: int | np.ndarray, b: int | np.ndarray, field: int | np.ndarray
    ) -> np.ndarray:
        """The uniforms of many (a, b, field) at once; any argument may be an array."""
        return to_units(self._mixed(a, b, field))

    def pairs(
        self, a: int | np.ndarray, b: int | np.ndarray, field: int | np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``pair`` for many (a, b, field) at once."""
        z = self._mixed(a, b, field)
        high = (z >> _U64(32)).astype(np.float64) * _HALF
        return high, (z & _U64(_LOW)).astype(np.float64) * _HALF

    def _mixed(
        self, a: int | np.ndarray, b: int | np.ndarray, field: int | np.ndarray
    ) -> np.ndarray:
        const = self.key
        z = None
        for value, mult in ((a, _A), (b, _B), (field, _F)):
            if isinstance(value, np.ndarray):
                term = _u64(value) * _U64(mult)
                z = term if z is None else z + term
            else:
                const = (const + int(value) * mult) & MASK
        z = np.full((), const, dtype=np.uint64) if z is None else z + _U64(const)
        return mix(z)

    def offset(self, a: int, b: int, field: int) -> int:
        """The hash input of (a, b, field): ``mix(offset)`` is the draw, and inputs add, so a
        caller can build many inputs with a few array additions (``env/gang/follows.py``)."""
        return (a * _A + b * _B + field * _F + self.key) & MASK


A, B, F = _U64(_A), _U64(_B), _U64(_F)
_S30, _S27, _S31, _S11 = _U64(30), _U64(27), _U64(31), _U64(11)
_M1U, _M2U = _U64(_M1), _U64(_M2)


def mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser, in place on uint64 hash inputs."""
    z ^= z >> _S30
    z *= _M1U
    z ^= z >> _S27
    z *= _M2U
    z ^= z >> _S31
    return z


def to_units(z: np.ndarray) -> np.ndarray:
    """Mixed hashes as uniforms in [0, 1), the same as ``Draws.unit``."""
    return (z >> _S11).astype(np.float64) * _SCALE


def reseed(bits: np.random.PCG64, seed: tuple[int, int]) -> np.random.Generator:
    """A numpy generator on ``bits`` set to PCG64 (state, increment) ``seed``: setting the state
    of an existing bit generator is far cheaper than seeding a new one, and a reset makes two."""
    state = bits.state
    state["state"] = {"state": seed[0], "inc": seed[1] | 1}
    state["has_uint32"], state["uinteger"] = 0, 0
    bits.state = state
    return np.random.Generator(bits)
