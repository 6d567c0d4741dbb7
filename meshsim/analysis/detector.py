"""Operating characteristics of MeshHeal's detectors in closed form (Sec. 4.2.2, App. B.5, Tab. B11).

One producer's detector updates are a Markov chain once its per-output
shortfalls (relative rule) or scores (absolute rule, CUSUM) are i.i.d. draws
from a :class:`~meshsim.analysis.scores.ScoreModel`:

* **Window rules** (:class:`~meshsim.protocols.meshheal.detector.RelativeDetector`,
  ``AbsoluteDetector``): the state after an update is the ordered tuple of the
  last ``window - 1`` values, the consecutive-crossing counter and the watched
  bit (which chooses the next output's pmf: a watched producer's outputs always
  go to committee, Alg. 2). One step appends a draw, tests the mean of the
  full window against the thresholds, moves the counter, absorbs on
  ``consecutive`` crossings and drops the oldest value. The matched count
  (``min_obs``) and the short windows of the first updates are followed
  exactly. Exact for a pmf on at most ``k`` support points; a finer pmf is
  first mapped onto ``k`` levels (optimal 1-D clustering, levels at the
  cluster means), ``k`` as large as ``max_states`` allows.
* **Relative thresholds** in the large-pool limit: the pool ``C_{i,T}`` of
  neighbours' x̄ is the healthy distribution of the mean of ``window`` i.i.d.
  shortfalls (an exact convolution of the fine pmf), so ``m`` and ``p25`` are
  its quantiles and an update crosses ``z >= beta`` iff
  ``x̄ >= m + beta * max(m - p25, floor)``.
* **CUSUM** (``CusumDetector``): Brook & Evans (1972) - ``[0, 2h)`` cut into
  ``cells`` intervals plus the atom at 0, each represented by its midpoint;
  watched iff ``C >= h``, isolated at ``C >= 2h``.

Run lengths are counted in the producer's own detector updates (one per
ability of an output: outputs, in the six-agent profiles).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Optional

import numpy as np

from ..core.errors import InputError
from ..protocols.meshheal.detector import ABSOLUTE, CUSUM, DETECTORS, RELATIVE, DetectorParams, detector_names
from .scores import Dist, ScoreModel

__all__ = ["Chain", "OC", "finite_pool",
           "RunLength", "operating_characteristics", "curve", "levels_for", "healthy_pool",
           "window_chain", "cusum_chain", "PARAMS", "CLOSED_FORMS", "oc_kinds", "evidence"]

#: parameters a curve may vary, with the DetectorParams field each sets
PARAMS = {"alpha": "alpha", "beta": "beta", "window": "window", "floor": "spread_floor", "min_obs": "min_obs",
          "consecutive": "consecutive", "abs_watch": "abs_watch", "abs_isolate": "abs_isolate",
          "cusum_k": "cusum_k", "cusum_h": "cusum_h", "cusum_target": "cusum_target"}


#: the registered detectors whose operating characteristics have a closed form here
CLOSED_FORMS = (RELATIVE, ABSOLUTE, CUSUM)


def oc_kinds() -> list[str]:
    """The registered detectors this module has a closed form for, in registration order."""
    return [n for n in detector_names(acting=True) if n in CLOSED_FORMS]


def evidence(model: ScoreModel, kind: str) -> dict[str, Dist]:
    """The draws a detector's rule is a statistic of: shortfalls or the producer's own scores
    (its registration's ``watches``)."""
    entry = DETECTORS.get(kind)
    return model.shortfalls if entry is not None and entry.watches == "shortfall" else model.scores


# ---------------------------------------------------------------------------------------------
# inputs: levels and the healthy pool

def _kmeans_1d(x: np.ndarray, w: np.ndarray, k: int) -> np.ndarray:
    """Optimal weighted 1-D k-means on sorted points (dynamic programming); returns cluster labels."""
    n = len(x)
    if k >= n:
        return np.arange(n)
    cw = np.concatenate([[0.0], np.cumsum(w)])
    cx = np.concatenate([[0.0], np.cumsum(w * x)])
    cxx = np.concatenate([[0.0], np.cumsum(w * x * x)])

    def sse(i: np.ndarray, j: int) -> np.ndarray:  # points i..j-1
        ww = cw[j] - cw[i]
        s = cx[j] - cx[i]
        with np.errstate(divide="ignore", invalid="ignore"):
            out = cxx[j] - cxx[i] - np.where(ww > 0, s * s / np.where(ww > 0, ww, 1), 0.0)
        return out

    cost = np.array([sse(np.array([0]), j)[0] for j in range(n + 1)])
    back = np.zeros((k + 1, n + 1), dtype=int)
    for c in range(2, k + 1):
        new = np.full(n + 1, np.inf)
        for j in range(c, n + 1):
            i = np.arange(c - 1, j)
            tot = cost[i] + sse(i, j)
            b = int(np.argmin(tot))
            new[j], back[c, j] = tot[b], i[b]
        cost = new
    labels = np.zeros(n, dtype=int)
    j = n
    for c in range(k, 1, -1):
        i = back[c, j]
        labels[i:j] = c - 1
        j = i
    return labels


@dataclass(frozen=True)
class Levels:
    """``k`` state values and each case's pmf on them (exact when the pmfs have at most ``k`` points)."""

    values: np.ndarray
    pmfs: dict[str, np.ndarray]
    exact: bool


def levels_for(dists: dict[str, Dist], k: int, weights: Optional[dict[str, float]] = None) -> Levels:
    """Map the cases' pmfs onto ``k`` common levels (1-D k-means of their mixture)."""
    support = np.unique(np.concatenate([d.values for d in dists.values()]))
    weights = weights or {c: 1.0 for c in dists}
    mix = np.zeros(len(support))
    per = {}
    for c, d in dists.items():
        p = np.zeros(len(support))
        p[np.searchsorted(support, d.values)] = d.probs
        per[c] = p
        mix += weights.get(c, 0.0) * p
    mix = np.maximum(mix, 1e-12)
    lab = _kmeans_1d(support, mix, k)
    kk = int(lab.max()) + 1
    vals = np.array([np.average(support[lab == j], weights=mix[lab == j]) for j in range(kk)])
    pmfs = {c: np.bincount(lab, weights=p, minlength=kk) for c, p in per.items()}
    return Levels(vals, pmfs, exact=kk == len(support))


def _grid(d: Dist, step: float) -> tuple[int, np.ndarray]:
    idx = np.round(d.values / step).astype(int)
    lo = int(idx.min())
    p = np.zeros(int(idx.max()) - lo + 1)
    np.add.at(p, idx - lo, d.probs)
    return lo, p


def healthy_pool(d: Dist, window: int, step: float = 1 / 400) -> tuple[float, float]:
    """(m, p25) of the healthy x̄ distribution: the mean of ``window`` i.i.d. shortfalls, by exact
    convolution on the shortfall grid (large-pool limit of the neighbours' pooled x̄, Sec. 4.2.2)."""
    lo, p = _grid(d, step)
    s = np.array([1.0])
    for _ in range(window):
        s = np.convolve(s, p)
    cdf = np.cumsum(s)
    xs = (lo * window + np.arange(len(s))) * step / window

    def q(f: float) -> float:
        return float(xs[int(np.searchsorted(cdf, f - 1e-12))])

    return q(0.5), q(0.25)


# ---------------------------------------------------------------------------------------------
# the chains

@dataclass
class RunLength:
    """Where the chain's mass goes, step by step (steps = the producer's detector updates)."""

    absorbed: np.ndarray  # P(isolated at step t), t = 1..len
    watched: np.ndarray  # P(watched after step t, not isolated)
    watch_entries: np.ndarray  # P(normal -> watched at step t)
    tail_ratio: float  # survival ratio per step at the end (geometric tail)
    end_state: Any = None  # surviving state distribution (unnormalised)
    iso_windows: Any = None  # window distribution at isolation (window rules)

    def extended(self, n: int) -> "RunLength":
        """The first ``n`` steps, past the computed ones by the geometric tail: survival falls by
        ``tail_ratio`` per step and the watched / entry rates stay at their last conditional values
        (the chain is time-homogeneous after the warm-up; :meth:`SumChain.run` stops early only
        once the per-step hazard has settled)."""
        m = len(self.absorbed)
        if n <= m or m == 0:
            return self
        s = 1.0 - float(self.absorbed.sum())
        r = self.tail_ratio
        w_rate = self.watched[-1] / s if s > 0 else 0.0
        prev = s + float(self.absorbed[-1])
        e_rate = self.watch_entries[-1] / prev if prev > 0 else 0.0
        k = np.arange(1, n - m + 1)
        alive_before = s * r ** (k - 1)
        return RunLength(np.concatenate([self.absorbed, alive_before * (1 - r)]),
                         np.concatenate([self.watched, alive_before * r * w_rate]),
                         np.concatenate([self.watch_entries, alive_before * e_rate]), r, self.end_state,
                         self.iso_windows)

    @property
    def survival(self) -> np.ndarray:
        return 1.0 - np.cumsum(self.absorbed)

    def p_within(self, n: int) -> float:
        n = min(n, len(self.absorbed))
        return float(self.absorbed[:n].sum())

    def mean(self) -> float:
        """E[run length], with a geometric tail past the computed steps; inf when the chain never absorbs."""
        t = np.arange(1, len(self.absorbed) + 1)
        head = float((t * self.absorbed).sum())
        s_end = float(self.survival[-1])
        if s_end <= 1e-12:
            return head
        r = self.tail_ratio
        if not (r < 1.0):
            return math.inf
        n = len(self.absorbed)
        # remaining mass absorbed at n+j with prob s_end (1-r) r^(j-1), j >= 1
        return head + s_end * (n + 1.0 / (1.0 - r))

    def quantile(self, f: float) -> Optional[int]:
        c = np.cumsum(self.absorbed)
        i = int(np.searchsorted(c, f - 1e-12))
        return i + 1 if i < len(c) else None


class Chain:
    """Common interface: start state, a step with a chosen producer class, and run-length runs."""

    def start(self) -> Any:
        raise NotImplementedError

    def run(self, state: Any, t0: int, steps: int, cls: str, stop: float = 0.0) -> RunLength:
        raise NotImplementedError


@dataclass
class WindowChain(Chain):
    """Exact chain of a window-mean rule over ordered windows on ``levels``."""

    levels: Levels
    window: int
    min_obs: int
    consecutive: int
    iso: Any  # mean -> bool array: the isolation test (z >= beta, mu < abs_isolate)
    watch: Any  # mean -> bool array: the watch test
    _means: dict = field(default_factory=dict)

    @property
    def k(self) -> int:
        return len(self.levels.values)

    def _mean(self, length: int) -> np.ndarray:
        m = self._means.get(length)
        if m is None:
            s = np.zeros(1)
            for _ in range(length):
                s = (s[:, None] + self.levels.values[None, :]).ravel()
            m = self._means[length] = s / length
        return m

    def start(self) -> tuple[np.ndarray, int]:
        """Nothing seen yet: empty window, counter 0, normal."""
        P = np.zeros((self.consecutive, 2, 1))
        P[0, 0, 0] = 1.0
        return P, 0

    def _pmfs(self, cls: str) -> np.ndarray:
        return np.stack([self.levels.pmfs[cls], self.levels.pmfs[cls + "_watched"]])

    def run(self, state, t0: int, steps: int, cls: str, stop: float = 0.0, keep_iso: bool = False) -> RunLength:
        """``steps`` updates of a ``cls`` producer from ``state`` (``t0`` updates already matched)."""
        P, _ = state
        C, k, w = self.consecutive, self.k, self.window
        pm = self._pmfs(cls)
        absorbed, watched, entries = [], [], []
        iso_win = None
        total0 = P.sum()
        ratio = 1.0
        prev_alive = total0
        for step in range(steps):
            n = t0 + step + 1  # matched updates after this one
            Lf = min(n, w)  # values in the window after this update
            F = (P[:, :, :, None] * pm[None, :, None, :]).reshape(C, 2, -1)
            if n < self.min_obs:
                G = F
                absorbed.append(0.0)
                entries.append(0.0)
            else:
                mean = self._mean(Lf)
                ob = self.iso(mean)
                oa = self.watch(mean)
                G = np.zeros_like(F)
                below = F.sum(axis=0) * ~ob  # (2, K)
                G[0, 1] = (below * oa).sum(axis=0)
                G[0, 0] = (below * ~oa).sum(axis=0)
                ent = float((below[0] * oa).sum())
                iso_now = np.zeros(F.shape[2])
                for c in range(C):
                    up = F[c] * ob  # (2, K)
                    if c + 1 >= C:
                        iso_now += up.sum(axis=0)
                    else:
                        G[c + 1, 1] += (up * oa).sum(axis=0)
                        G[c + 1, 0] += (up * ~oa).sum(axis=0)
                        ent += float((up[0] * oa).sum())
                absorbed.append(float(iso_now.sum()))
                entries.append(ent)
                if keep_iso and Lf == w:
                    iso_win = iso_now if iso_win is None else iso_win + iso_now
            if Lf >= w:
                G = G.reshape(C, 2, k, -1).sum(axis=2)
            P = G
            alive = float(P.sum())
            watched.append(float(P[:, 1].sum()))
            ratio = alive / prev_alive if prev_alive > 0 else 0.0
            prev_alive = alive
            if alive <= stop * total0:
                break
        return RunLength(np.array(absorbed), np.array(watched), np.array(entries), ratio,
                         end_state=(P, t0 + len(absorbed)), iso_windows=iso_win)

    def recovery(self, iso_windows: np.ndarray, cls: str, steps: int = 200) -> RunLength:
        """Probes until one update with z < beta (isolated -> watched, App. B.5) from the windows at
        isolation; every probe goes to committee (``cls``_watched pmf)."""
        k, w = self.k, self.window
        W = iso_windows.reshape(k, -1).sum(axis=0)  # drop the oldest: the next probe pushes it out
        p = self.levels.pmfs[cls + "_watched"]
        mean = self._mean(w)
        ok = ~self.iso(mean)
        absorbed = []
        tot = W.sum()
        for _ in range(steps):
            F = (W[:, None] * p[None, :]).ravel()
            absorbed.append(float((F * ok).sum()) / tot)
            W = (F * ~ok).reshape(k, -1).sum(axis=0)
            if W.sum() <= 1e-9 * tot:
                break
        return RunLength(np.array(absorbed), np.zeros(len(absorbed)), np.zeros(len(absorbed)), 0.0)


def _add_value(A: np.ndarray, pv: np.ndarray) -> np.ndarray:
    """Distribution of (sum + v, ...) for v ~ pv[watched]: FFT convolution along the sum axis (2)."""
    G, K = A.shape[2], pv.shape[1]
    n = G + K - 1
    nfft = 1 << (n - 1).bit_length()
    fa = np.fft.rfft(A, nfft, axis=2)
    fk = np.fft.rfft(pv, nfft, axis=1).reshape((1, 2, -1) + (1,) * (A.ndim - 3))
    out = np.fft.irfft(fa * fk, nfft, axis=2)[:, :, :n]
    return np.maximum(out, 0.0)


@dataclass
class SumChain(Chain):
    """Window-mean rule on a lattice: state = (counter, watched, window sum, the ``track`` oldest values).

    The first ``window`` updates are followed exactly (nothing leaves the window yet). Afterwards the
    oldest value leaves; with ``track == 1`` it is known exactly and the next-oldest value is drawn from
    its conditional law given the sum of the ``window - 1`` values that remain (i.i.d. values from the
    ``law`` pmf: p(a) f_{w-2}(R - a) / f_{w-1}(R)); with ``track == 0`` the leaving value itself is drawn
    from its law given the window sum. ``track == window - 1`` would be the exact ordered-window chain;
    each tracked value roughly halves the error (docs/detector.md), so :func:`operating_characteristics`
    reports the extrapolation 2 P_1 - P_0 beside P_1.
    """

    values: np.ndarray  # lattice values of the cases (index 0 = lowest)
    step: float
    lo: int
    pmfs: dict[str, np.ndarray]
    law: str  # case whose pmf stands for the values already in the window
    window: int
    min_obs: int
    consecutive: int
    iso: Any
    watch: Any
    track: int = 1

    @classmethod
    def build(cls, dists: dict[str, Dist], step: float, **kw: Any) -> "SumChain":
        idx = {c: np.round(d.values / step).astype(int) for c, d in dists.items()}
        lo = min(int(i.min()) for i in idx.values())
        hi = max(int(i.max()) for i in idx.values())
        pmfs = {}
        for c, d in dists.items():
            p = np.zeros(hi - lo + 1)
            np.add.at(p, idx[c] - lo, d.probs)
            pmfs[c] = p
        return cls(values=(np.arange(lo, hi + 1)) * step, step=step, lo=lo, pmfs=pmfs, **kw)

    @property
    def K(self) -> int:
        return len(self.values)

    def _conv_powers(self) -> list[np.ndarray]:
        p = self.pmfs[self.law]
        f = [np.array([1.0])]
        for _ in range(self.window):
            f.append(np.convolve(f[-1], p))
        return f

    def _cond(self, f: list[np.ndarray], m: int) -> np.ndarray:
        """P(a given value is a | the m values sum to index q): [q, a]."""
        p = self.pmfs[self.law]
        fm, fm1 = f[m], f[m - 1]
        out = np.zeros((len(fm), self.K))
        for a in np.flatnonzero(p > 0):
            out[a:a + len(fm1), a] = p[a] * fm1
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(fm[:, None] > 0, out / np.where(fm[:, None] > 0, fm[:, None], 1.0), 0.0)

    def start(self) -> tuple[np.ndarray, int]:
        A = np.zeros((self.consecutive, 2, 1) + ((1,) if self.track else ()))
        A[(0, 0, 0) + ((0,) if self.track else ())] = 1.0
        return A, 0

    def run(self, state, t0: int, steps: int, cls: str, stop: float = 0.0, keep_iso: bool = False,
            settle: bool = False) -> RunLength:
        """``steps`` updates; with ``settle``, stop once the per-step hazard is steady (same to 0.5 %
        over the last ``window`` steps, at least 4 windows in): :meth:`RunLength.extended` continues it."""
        A, _ = state
        hazards: list[float] = []
        C, K, w, lo, tr = self.consecutive, self.K, self.window, self.lo, self.track
        pv = np.stack([self.pmfs[cls], self.pmfs[cls + "_watched"]])
        f = self._conv_powers()
        cond = self._cond(f, w - 1) if tr else self._cond(f, w)
        absorbed, watched, entries = [], [], []
        tot = float(A.sum())
        ratio, prev = 1.0, tot
        for i in range(steps):
            n = t0 + i + 1
            if n <= w:  # nothing leaves yet: exact
                G = A.shape[2]
                if tr and n == 1:  # the first value is the oldest
                    F = np.zeros((C, 2, K, K))
                    for wt in (0, 1):
                        F[:, wt] = A[:, wt, 0, 0][:, None, None] * np.diag(pv[wt])[None]
                else:
                    F = _add_value(A, pv)
            else:
                G = A.shape[2]  # sums of w values
                Gr = len(f[w - 1])
                if tr:
                    B = np.zeros((C, 2, Gr))
                    for a in range(K):  # the known oldest value a leaves: r = s - a
                        hi = min(G - a, Gr)
                        if hi > 0:
                            B[:, :, :hi] += A[:, :, a:a + hi, a]
                    Bu = B[..., None] * cond[None, None, :Gr, :]  # the next-oldest, given the rest
                else:
                    Bu = np.zeros((C, 2, Gr))
                    for a in range(K):
                        hi = min(G - a, Gr)
                        if hi > 0:
                            Bu[:, :, :hi] += A[:, :, a:a + hi] * cond[a:a + hi, a]
                F = _add_value(Bu, pv)
            L = min(n, w)
            mean = (np.arange(F.shape[2]) + L * lo) * self.step / L
            if n < self.min_obs:
                A = F
                absorbed.append(0.0)
                entries.append(0.0)
            else:
                ex = (slice(None),) + ((None,) if tr else ())
                ob, oa = self.iso(mean)[ex], self.watch(mean)[ex]
                Gn = np.zeros_like(F)
                below = F.sum(axis=0) * ~ob
                Gn[0, 1] = (below * oa).sum(axis=0)
                Gn[0, 0] = (below * ~oa).sum(axis=0)
                ent = float((below[0] * oa).sum())
                iso_now = 0.0
                for c in range(C):
                    up = F[c] * ob
                    if c + 1 >= C:
                        iso_now += float(up.sum())
                    else:
                        Gn[c + 1, 1] += (up * oa).sum(axis=0)
                        Gn[c + 1, 0] += (up * ~oa).sum(axis=0)
                        ent += float((up[0] * oa).sum())
                absorbed.append(iso_now)
                entries.append(ent)
                A = Gn
            watched.append(float(A[:, 1].sum()))
            alive = float(A.sum())
            ratio, prev = (alive / prev if prev > 0 else 0.0), alive
            hazards.append(1.0 - ratio)
            if alive <= stop * tot:
                break
            if settle and n >= max(4 * w, self.min_obs + 2 * w) and len(hazards) > w:
                h0, h1 = hazards[-1 - w], hazards[-1]
                if h1 > 0 and abs(h1 - h0) <= 0.005 * h1:
                    break
        return RunLength(np.array(absorbed), np.array(watched), np.array(entries), ratio,
                         end_state=(A, t0 + len(absorbed)))


@dataclass
class CusumChain(Chain):
    """Brook & Evans Markov-chain approximation of the one-sided CUSUM on q (Sec. 6.4)."""

    scores: dict[str, Dist]
    k: float
    h: float
    target: float
    cells: int = 200

    def _matrices(self, cls: str) -> tuple[np.ndarray, np.ndarray]:
        """(Q, a): transitions among the transient states (0: the atom at 0, j: ((j-1)d, jd]) and
        absorption, with the pmf chosen by the source state's watched flag (C >= h)."""
        m = self.cells
        d = 2.0 * self.h / m
        mids = np.concatenate([[0.0], (np.arange(1, m + 1) - 0.5) * d])
        Q = np.zeros((m + 1, m + 1))
        a = np.zeros(m + 1)
        for i, c in enumerate(mids):
            dist = self.scores[cls + ("_watched" if c >= self.h else "")]
            for q, p in zip(dist.values, dist.probs):
                nxt = max(0.0, c + (self.target - q) - self.k)
                if nxt >= 2.0 * self.h:
                    a[i] += p
                elif nxt <= 0.0:
                    Q[i, 0] += p
                else:
                    Q[i, min(m, int(math.ceil(nxt / d - 1e-9)))] += p
        return Q, a

    def start(self) -> tuple[np.ndarray, int]:
        v = np.zeros(self.cells + 1)
        v[0] = 1.0
        return v, 0

    def run(self, state, t0: int, steps: int, cls: str, stop: float = 0.0, keep_iso: bool = False) -> RunLength:
        v, _ = state
        Q, a = self._matrices(cls)
        d = 2.0 * self.h / self.cells
        watched_mask = np.concatenate([[False], (np.arange(1, self.cells + 1) - 1) * d >= self.h])
        absorbed, watched, entries = [], [], []
        tot = v.sum()
        ratio, prev = 1.0, tot
        for _ in range(steps):
            absorbed.append(float(v @ a))
            entries.append(float((v[~watched_mask] @ Q[~watched_mask][:, watched_mask]).sum()))
            v = v @ Q
            watched.append(float(v[watched_mask].sum()))
            alive = float(v.sum())
            ratio, prev = (alive / prev if prev > 0 else 0.0), alive
            if alive <= stop * tot:
                break
        return RunLength(np.array(absorbed), np.array(watched), np.array(entries), ratio, end_state=(v, t0 + len(absorbed)))

    def arl(self, cls: str) -> float:
        """Exact ARL of the discretised chain from C = 0: (I - Q)^-1 1."""
        Q, _a = self._matrices(cls)
        try:
            x = np.linalg.solve(np.eye(len(Q)) - Q, np.ones(len(Q)))
        except np.linalg.LinAlgError:
            return math.inf
        return float(x[0]) if x[0] >= 0 else math.inf


# ---------------------------------------------------------------------------------------------
# building chains from parameters

_CASES = ("healthy", "healthy_watched", "degraded", "degraded_watched")
_HEALTHY = ("healthy", "healthy_watched")


def window_chain(model: ScoreModel, p: DetectorParams, kind: str = RELATIVE, max_states: int = 400_000,
                 k: Optional[int] = None, cases: tuple[str, ...] = _CASES) -> tuple[WindowChain, dict[str, Any]]:
    """The window chain of ``kind`` (relative: shortfalls vs the healthy pool; absolute: scores) on the
    levels of ``cases`` (the healthy ones alone for the in-control quantities: whether they fit the
    exact chain must not depend on the degraded values)."""
    w = p.window
    dists = evidence(model, kind)
    dists = {c: dists[c] for c in cases}
    if k is None:
        k = max(2, int(math.floor(max_states ** (1.0 / w) + 1e-9)))
    # the healthy cases weigh most: false isolations hinge on their rare low values
    cache = model.__dict__.setdefault("_levels", {})  # a curve reuses them: only thresholds change
    lev = cache.get((kind, k, cases))
    if lev is None:
        lev = cache[(kind, k, cases)] = levels_for(dists, k, {"healthy": 2.0, "healthy_watched": 1.0,
                                                              "degraded": 1.0, "degraded_watched": 0.5})
    info: dict[str, Any] = {"levels": [round(float(v), 4) for v in lev.values], "exact_levels": lev.exact}
    if kind == RELATIVE:
        m, p25 = healthy_pool(dists["healthy"], w)
        spread = max(m - p25, p.spread_floor)
        c_b, c_a = m + p.beta * spread, m + p.alpha * spread
        info.update(m=m, p25=p25, spread=spread, xbar_isolate=c_b, xbar_watch=c_a)
        iso = (lambda x, c=c_b: x >= c - 1e-9)
        watch = (lambda x, c=c_a: x >= c - 1e-9)
    elif kind == ABSOLUTE:
        info.update(mu_isolate=p.abs_isolate, mu_watch=p.abs_watch)
        iso = (lambda x, c=p.abs_isolate: x < c - 1e-9)
        watch = (lambda x, c=p.abs_watch: x < c - 1e-9)
    else:
        raise InputError("window chains are for the relative and absolute rules", field="detector", value=kind)
    return WindowChain(lev, w, p.min_obs, p.consecutive, iso, watch), info


@dataclass
class OC:
    """Operating characteristics at one parameter setting."""

    detector: str
    params: DetectorParams
    scope: str
    outputs: int  # a healthy agent's detector updates per stream
    keys: int  # (T, s) detectors they are split over (scope key)
    p_false: float  # P(a healthy agent is isolated within `outputs` updates)
    arl0: float  # expected updates until a healthy agent's false isolation (one detector)
    watched_rate: float  # share of a healthy agent's updates after which it is watched
    watch_entries: float  # expected normal -> watched changes per stream
    delay: RunLength  # out-of-control run length (updates after degradation)
    healthy_before: int  # healthy updates before degradation (start of the delay chain)
    degraded_outputs: int  # updates in the degraded phase
    recovery: Optional[RunLength]  # good probes until isolated -> watched
    probe_every: int
    info: dict[str, Any]
    in_control: RunLength

    @property
    def delay_mean(self) -> float:
        return self.delay.mean()

    @property
    def p_missed(self) -> float:
        return 1.0 - self.delay.p_within(self.degraded_outputs)

    def summary(self) -> dict[str, Any]:
        d = self.delay
        out: dict[str, Any] = {
            "detector": self.detector, "scope": self.scope,
            "params": {k: getattr(self.params, v) for k, v in PARAMS.items()},
            "outputs_per_stream": self.outputs, "keys": self.keys,
            "false_isolation_probability": self.p_false, "arl0_updates": self.arl0,
            "watched_rate": self.watched_rate, "watch_entries_per_stream": self.watch_entries,
            "delay": {"mean": d.mean(), "median": d.quantile(0.5), "p10": d.quantile(0.1), "p90": d.quantile(0.9),
                      "missed": self.p_missed, "degraded_outputs": self.degraded_outputs,
                      "pmf": [round(float(x), 6) for x in d.absorbed[:60]]},
            "info": self.info,
        }
        if self.recovery is not None:
            r = self.recovery
            out["reintegration"] = {"probes_p10": r.quantile(0.1), "probes_mean": r.mean(),
                                    "probes_median": r.quantile(0.5),
                                    "probes_p90": r.quantile(0.9),
                                    "tasks_mean": r.mean() * self.probe_every, "probe_every": self.probe_every}
        return out


def _thresholds(model: ScoreModel, p: DetectorParams, kind: str) -> tuple[Any, Any, dict[str, Any]]:
    if kind == RELATIVE:
        m, p25 = healthy_pool(model.shortfalls["healthy"], p.window)
        spread = max(m - p25, p.spread_floor)
        c_b, c_a = m + p.beta * spread, m + p.alpha * spread
        return ((lambda x, c=c_b: x >= c - 1e-9), (lambda x, c=c_a: x >= c - 1e-9),
                {"m": m, "p25": p25, "spread": spread, "xbar_isolate": c_b, "xbar_watch": c_a})
    return ((lambda x, c=p.abs_isolate: x < c - 1e-9), (lambda x, c=p.abs_watch: x < c - 1e-9),
            {"mu_isolate": p.abs_isolate, "mu_watch": p.abs_watch})


def _sum_chain(dists: dict[str, Dist], params: DetectorParams, per: int, iso: Any, watch: Any, step: float,
               also: int = 0) -> tuple[RunLength, float, float, float, float]:
    """In-control run length on the lattice: (run length with 1 tracked value, P_1, P_0, 2 P_1 - P_0), all
    within ``per`` updates, and the extrapolated P within ``also`` updates."""
    healthy = {c: dists[c] for c in _HEALTHY}
    kw = dict(law="healthy", window=params.window, min_obs=params.min_obs, consecutive=params.consecutive,
              iso=iso, watch=watch)
    n = max(per, also)
    c1 = SumChain.build(healthy, step, track=1, **kw)
    ic = c1.run(c1.start(), 0, n, "healthy", settle=True).extended(n)
    c0 = SumChain.build(healthy, step, track=0, **kw)
    r0 = c0.run(c0.start(), 0, n, "healthy", settle=True).extended(n)

    def ex(k: int) -> float:
        p1 = ic.p_within(k)
        return min(1.0, max(0.0, 2.0 * p1 - r0.p_within(k))) if params.window > 1 else p1

    return ic, ic.p_within(per), r0.p_within(per), ex(per), ex(also)


def finite_pool(model: ScoreModel, params: DetectorParams, per: int, pool: int = 5, ref: int = 2, bins: int = 16,
                samples: int = 20_000, seed: int = 0, step: float = 0.025, also: int = 0) -> dict[str, Any]:
    """P(false isolation within ``per`` updates) of one healthy producer among ``pool`` healthy i.i.d. peers
    (relative rule), quasi-static: the normal range's median and p25 (of ``pool`` peers' x̄, each the mean
    of ``window`` healthy shortfalls) and the reference offset (the mean of ``ref`` peers' last ``window``
    scores against the healthy mean) are drawn ``samples`` times; each draw moves both thresholds on x̄
    (c = m~ + z spread~ - offset); P is the average of the window-sum chain's P over ``bins``
    equal-probability classes of the isolation threshold. Exact to first order in P when the pool and the
    reference change slowly against a window (P ~ N E[hazard(c)]); with two crossings and windows that
    overlap by ``window - 1`` the pool's median moves little between them. Returns P and the threshold
    quantiles."""
    rng = np.random.default_rng(seed)
    d = model.shortfalls["healthy"]
    w = params.window
    xb = d.sample(rng, (samples, pool, w)).mean(axis=2)
    mm, q25 = np.median(xb, axis=1), np.percentile(xb, 25, axis=1)
    off = d.sample(rng, (samples, ref, w)).mean(axis=(1, 2))  # shortfall += -mean(peers' shortfalls)
    spread = np.maximum(mm - q25, params.spread_floor)
    cb, ca = mm + params.beta * spread + off, mm + params.alpha * spread + off
    order = np.argsort(cb)
    hc, hinfo = window_chain(model, params, RELATIVE, 70_000, cases=_HEALTHY)
    p = p_also = 0.0
    for b in np.array_split(order, bins):
        c_b, c_a = float(cb[b].mean()), float(ca[b].mean())
        iso, watch = (lambda x, c=c_b: x >= c - 1e-9), (lambda x, c=c_a: x >= c - 1e-9)
        if hinfo["exact_levels"]:  # the same exact chain as the limit's, at the drawn thresholds
            wc = replace(hc, iso=iso, watch=watch, _means=hc._means)
            ic = wc.run(wc.start(), 0, max(per, also), "healthy")
            pb, pa = ic.p_within(per), ic.p_within(also)
        else:
            _ic, _p1, _p0, pb, pa = _sum_chain(model.shortfalls, params, per, iso, watch, step, also)
        p += len(b) / samples * pb
        p_also += len(b) / samples * pa
    return {"p": p, "p_also": p_also, "also": also, "pool": pool, "ref": ref, "bins": bins, "samples": samples,
            "xbar_isolate_q05_50_95": [round(float(v), 4) for v in np.quantile(cb, [0.05, 0.5, 0.95])]}


def operating_characteristics(model: ScoreModel, params: DetectorParams, detector: str = RELATIVE,
                              outputs: int = 168, keys: int = 1, healthy_before: Optional[int] = None,
                              degraded_outputs: Optional[int] = None, probe_every: int = 10,
                              max_states: int = 70_000, cusum_cells: int = 200, step: float = 0.025,
                              horizon: int = 400, pool: Optional[int] = None) -> OC:
    """OC of one detector setting.

    ``outputs``: a healthy agent's detector updates per stream; with ``count_scope == shortfall_scope ==
    "key"`` they are split evenly over ``keys`` independent (T, s) detectors (the watched state they
    share is not coupled). ``healthy_before`` / ``degraded_outputs``: updates of a degrading agent
    before and after its degradation (default: half of ``outputs`` each).

    Window rules: the in-control quantities come from :class:`SumChain` on the ``step`` lattice (one
    and zero tracked values; the false-isolation probability is the extrapolation 2 P_1 - P_0, both
    kept in ``info``); the delay and the probes after isolation from the exact ordered-window chain on
    at most ``max_states`` windows (:class:`WindowChain`, levels by 1-D clustering), whose start is
    the healthy window ``min(healthy_before, 3 window)`` updates in, given no false isolation.
    """
    scope = params.count_scope  # with mixed scopes the counter's scope decides (an approximation)
    if detector == ABSOLUTE:
        scope = "key"  # AbsoluteDetector's mean is always over the (T, s) key's own recent scores
    kk = keys if scope == "key" else 1
    per = max(1, int(round(outputs / kk)))
    hb = healthy_before if healthy_before is not None else outputs // 2
    hb = max(1, int(round(hb / kk)))
    dn = degraded_outputs if degraded_outputs is not None else outputs - outputs // 2
    dn = max(1, int(round(dn / kk)))
    recovery = None
    if detector in (RELATIVE, ABSOLUTE):
        dists = evidence(model, detector)
        iso, watch, info = _thresholds(model, params, detector)
        wc, winfo = window_chain(model, params, detector, max_states)
        info["window_levels"] = winfo["levels"]
        info["window_levels_exact"] = winfo["exact_levels"]
        # the in-control chain sees healthy values only: their shape alone decides whether it is exact
        hc, hinfo = window_chain(model, params, detector, max_states, cases=_HEALTHY)
        info["healthy_levels_exact"] = hinfo["exact_levels"]
        if hinfo["exact_levels"]:
            ic = hc.run(hc.start(), 0, max(per, hb, horizon), "healthy")
            p_one, p_hb = ic.p_within(per), ic.p_within(hb)
            info["method"] = ("ordered-window chain (exact)" if winfo["exact_levels"] else
                              "ordered-window chain (exact in control; delay, probes on clustered levels)")
        else:
            ic, p1, p0, p_one, p_hb = _sum_chain(dists, params, per, iso, watch, step, hb)
            info.update(p_false_track1=1.0 - (1.0 - p1) ** kk, p_false_track0=1.0 - (1.0 - p0) ** kk,
                        lattice=step, method="window-sum chain on the lattice (in control), ordered-window "
                                             "chain on clustered levels (delay, probes)")
        arl0 = ic.mean()
        # delay and recovery: the ordered-window chain
        pre = wc.run(wc.start(), 0, min(hb, 3 * params.window), "healthy")
        st, t0 = pre.end_state
        st = st / max(float(st.sum()), 1e-300)
        delay = wc.run((st, t0), t0, max(dn, horizon), "degraded", stop=1e-9, keep_iso=True)
        if delay.iso_windows is not None and delay.iso_windows.sum() > 0:
            recovery = wc.recovery(delay.iso_windows, "healthy")
    elif detector == CUSUM:
        chain = CusumChain(model.scores, params.cusum_k, params.cusum_h, params.cusum_target, cusum_cells)
        info = {"cells": cusum_cells, "method": "Brook & Evans (1972)"}
        ic = chain.run(chain.start(), 0, max(per, hb), "healthy")
        p_one, p_hb = ic.p_within(per), ic.p_within(hb)
        arl0 = chain.arl("healthy")
        pre = chain.run(chain.start(), 0, hb, "healthy")
        st, t0 = pre.end_state
        st = st / max(float(st.sum()), 1e-300)
        delay = chain.run((st, t0), t0, max(dn, horizon), "degraded", stop=1e-9)
    else:
        kinds = oc_kinds()
        raise InputError(f"no closed form for this detector; choose {', '.join(kinds[:-1])} or {kinds[-1]}",
                         field="detector", value=detector)
    p_false = 1.0 - (1.0 - p_one) ** kk
    # a degrading agent's healthy phase: the same in-control chain over its `healthy_before` updates
    info["p_false_before_degradation"] = 1.0 - (1.0 - p_hb) ** kk
    if pool and detector == RELATIVE:
        fp = finite_pool(model, params, per, pool, also=hb)
        fp["p"], fp["p_also"] = 1.0 - (1.0 - fp["p"]) ** kk, 1.0 - (1.0 - fp["p_also"]) ** kk
        # the closed form holds where a finite pool leaves it within 2x; beyond, the i.i.d. limit is no guide
        fp["ratio"] = fp["p"] / p_false if p_false > 0 else math.inf
        info["finite_pool"] = fp
    alive = ic.survival[:per]
    watched_rate = float(ic.watched[:per].sum() / max(alive.sum(), 1e-300))
    watch_entries = float(ic.watch_entries[:per].sum()) * kk
    return OC(detector, params, scope, outputs, kk, p_false, arl0, watched_rate, watch_entries, delay, hb, dn,
              recovery, probe_every, info, ic)


def _set(params: DetectorParams, name: str, value: float) -> DetectorParams:
    f = PARAMS[name]
    v = int(round(value)) if f in ("window", "min_obs", "consecutive") else float(value)
    return replace(params, **{f: v})


def curve(model: ScoreModel, params: DetectorParams, name: str, values: list[float], **kw: Any) -> list[OC]:
    """OC at each value of one parameter (the others fixed)."""
    if name not in PARAMS:
        raise InputError(f"cannot vary {name!r}; choose one of {', '.join(PARAMS)}", field="--vary", value=name)
    return [operating_characteristics(model, _set(params, name, v), **kw) for v in values]
