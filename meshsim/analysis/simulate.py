"""A controlled simulation of one producer's detector: the real detector objects
(:mod:`meshsim.protocols.meshheal.detector`) fed i.i.d. draws from a
:class:`~meshsim.analysis.scores.ScoreModel`, with healthy i.i.d. peers.

What the closed forms of :mod:`.detector` assume, made concrete: a complete
neighbourhood of healthy peers in the large-pool limit, i.e. a reference
``q̄_{-i}`` equal to the healthy mean (the shortfall is drawn directly) and
a normal range whose median and 25th percentile are those of the healthy x̄
distribution (a five-value pool with exactly that median and p25). The
cross-validation test (tests/protocols/test_detector_oc.py) checks the closed forms
against it; the full simulator (``meshsim run``) adds what both leave out.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..protocols.meshheal.detector import RELATIVE, DetectorParams, make_detector
from ..core.types import RoutingState
from .detector import evidence, healthy_pool
from .scores import ScoreModel

__all__ = ["SimResult", "simulate"]

_REF = 1.0  # the reference every shortfall is measured from: q = _REF - x


@dataclass
class SimResult:
    reps: int
    false_isolated: int  # healthy producers isolated within `outputs` updates
    delays: list = field(default_factory=list)  # degraded updates until isolation (started healthy)
    missed: int = 0
    rejected: int = 0  # delay replicates isolated while still healthy (the closed form conditions on not)

    @property
    def p_false(self) -> float:
        return self.false_isolated / self.reps

    def p_interval(self, z: float = 2.576) -> tuple[float, float]:
        """Wilson interval of the false-isolation probability (99 % by default)."""
        n, p = self.reps, self.p_false
        d = 1 + z * z / n
        c = (p + z * z / (2 * n)) / d
        h = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
        # exact at the ends (the float difference would print as 4.3e-19, not 0)
        lo = 0.0 if self.false_isolated == 0 else float(c - h)
        hi = 1.0 if self.false_isolated == n else float(c + h)
        return lo, hi

    def delay_interval(self, z: float = 2.576) -> tuple[float, float]:
        d = np.asarray(self.delays, dtype=float)
        m, se = float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))
        return m - z * se, m + z * se


class Peers:
    """A finite neighbourhood of healthy peers (for measuring what the large-pool limit leaves out):
    ``pool`` neighbours whose agent-level x̄ (each the mean of its last ``window`` shortfalls, one new
    shortfall per update of ours: equal loads) form C_{i,T}, and ``ref`` neighbours whose μ for our
    (T, s) (the mean of their last ``window`` scores of that key, a new one with probability
    ``ref_rate`` per update) form the reference."""

    def __init__(self, dist, window: int, pool: int, ref: int, ref_rate: float, rng):
        self.dist, self.rng, self.rate = dist, rng, ref_rate
        self.pw = dist.sample(rng, (pool, window))
        self.rw = dist.sample(rng, (ref, window))
        self.k = 0

    def step(self) -> tuple[float, list[float]]:
        """(reference offset, pool): our shortfall is x + offset (the peers' mean score is off by it)."""
        w = self.pw.shape[1]
        self.pw[:, self.k % w] = self.dist.sample(self.rng, self.pw.shape[0])
        upd = self.rng.random(self.rw.shape[0]) < self.rate
        if upd.any():
            self.rw[upd, self.k % w] = self.dist.sample(self.rng, int(upd.sum()))
        self.k += 1
        return -float(self.rw.mean()), [float(v) for v in self.pw.mean(axis=1)]


def _feed(det, dist_n, dist_w, rng, n: int, kind: str, pool: list[float], peers: Optional[Peers] = None
          ) -> Optional[int]:
    """``n`` updates; the update (1-based) at which the producer became isolated, or None."""
    xs_n = dist_n.sample(rng, n)
    xs_w = dist_w.sample(rng, n)
    for t in range(n):
        x = xs_w[t] if det.state is RoutingState.WATCHED else xs_n[t]
        if peers is not None:
            off, pool = peers.step()
            x = x + off
        q = _REF - x if kind == RELATIVE else x
        u = det.update_lists("T", "s", float(q), [_REF], pool)
        if u.state is RoutingState.ISOLATED:
            return t + 1
    return None


def simulate(model: ScoreModel, params: DetectorParams, detector: str = RELATIVE, outputs: int = 168,
             healthy_before: int = 24, degraded_max: int = 200, reps: int = 1000, seed: int = 0,
             delay_reps: Optional[int] = None, pool_size: Optional[int] = None, ref_size: int = 2,
             ref_rate: float = 1 / 7) -> SimResult:
    """``reps`` healthy producers over ``outputs`` updates, and ``reps`` degrading ones: ``healthy_before``
    healthy updates (replicates isolated there are rejected), then degraded ones until isolation.
    ``pool_size``: a finite neighbourhood instead of the large-pool limit (:class:`Peers`, relative rule)."""
    rng = np.random.default_rng(seed)
    dists = evidence(model, detector)
    m, p25 = healthy_pool(model.shortfalls["healthy"], params.window)
    pool = [p25 - 1.0, p25, m, m + 1.0, m + 2.0]  # median m, 25th percentile p25 (linear interpolation)
    res = SimResult(reps=reps, false_isolated=0)
    def peers() -> Optional[Peers]:
        if pool_size is None or detector != RELATIVE:
            return None
        return Peers(model.shortfalls["healthy"], params.window, pool_size, ref_size, ref_rate, rng)

    for _ in range(reps):
        det = make_detector(detector, params)
        if _feed(det, dists["healthy"], dists["healthy_watched"], rng, outputs, detector, pool,
                 peers()) is not None:
            res.false_isolated += 1
    for _ in range(reps if delay_reps is None else delay_reps):
        det = make_detector(detector, params)
        pe = peers()
        if _feed(det, dists["healthy"], dists["healthy_watched"], rng, healthy_before, detector, pool, pe) is not None:
            res.rejected += 1
            continue
        t = _feed(det, dists["degraded"], dists["degraded_watched"], rng, degraded_max, detector, pool, pe)
        if t is None:
            res.missed += 1
        else:
            res.delays.append(t)
    return res
