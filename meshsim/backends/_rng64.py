"""SplitMix64 in 64-bit machine arithmetic: the fakes' per-call stream on the compiled path (issue 33).

:class:`meshsim.backends.profiles.SplitMix64` is the reference: Python integers masked to 64 bits, the same on every
interpreter. In the compiled build (``tests/benchmarks/build_compiled.py``, docs/scaling.md) this module's ``i64``
values are C integers, whose additions and products wrap around at 64 bits as SplitMix64 needs: the same draws
without a big integer per step, about a tenth of the profile's largest single entry. Interpreted, ``i64`` is a plain
``int`` that does not wrap, so :func:`machine_arithmetic` says False and the fakes keep the reference class
(``profiles.new_rng`` picks, after checking the two streams agree).

The state holds the reference's 64 bits read as a signed number. A logical right shift is an arithmetic shift
masked to the bits that remain; the constants are the reference's, minus 2**64.
"""
from __future__ import annotations

from math import cos as _cos, log as _log, sqrt as _sqrt
from typing import Final

from mypy_extensions import i64

_GOLDEN: Final[i64] = -7046029254386353131  # 0x9E3779B97F4A7C15 - 2**64
_MUL1: Final[i64] = -4658895280553007687    # 0xBF58476D1CE4E5B9 - 2**64
_MUL2: Final[i64] = -7723592293110705685    # 0x94D049BB133111EB - 2**64
_LOW34: Final[i64] = (1 << 34) - 1          # what a right shift by 30 leaves of 64 bits
_LOW37: Final[i64] = (1 << 37) - 1
_LOW33: Final[i64] = (1 << 33) - 1
_LOW53: Final[i64] = (1 << 53) - 1
_ONE: i64 = 1  # a variable, not a constant: the wrap test below must run, not be folded away


def machine_arithmetic() -> bool:
    """True where ``i64`` arithmetic wraps at 64 bits (this module compiled), False interpreted."""
    top: i64 = 0x7FFFFFFFFFFFFFFF
    return top + _ONE < 0


class MachineSplitMix64:
    """The stream of ``profiles.SplitMix64`` for the same seed, valid only where :func:`machine_arithmetic`."""

    __slots__ = ("s",)

    def __init__(self, seed: int):
        u = seed & 0xFFFFFFFFFFFFFFFF
        self.s: i64 = u - (1 << 64) if u >> 63 else u

    def _next(self) -> i64:
        z: i64 = self.s + _GOLDEN
        self.s = z
        z = (z ^ ((z >> 30) & _LOW34)) * _MUL1
        z = (z ^ ((z >> 27) & _LOW37)) * _MUL2
        return ((z ^ ((z >> 31) & _LOW33)) >> 11) & _LOW53

    def random(self) -> float:
        return float(self._next()) * (1.0 / 9007199254740992.0)

    def gauss(self, mu: float, sigma: float) -> float:
        # the reference's Box-Muller, operation for operation
        u1 = float(self._next()) * (1.0 / 9007199254740992.0) or 5e-324
        u2 = float(self._next()) * (1.0 / 9007199254740992.0)
        return mu + sigma * _sqrt(-2.0 * _log(u1)) * _cos(6.283185307179586 * u2)

    def randrange(self, n: int) -> int:
        return min(n - 1, int(self.random() * n))
