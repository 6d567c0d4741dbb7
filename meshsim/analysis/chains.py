"""The Markov chains behind the detectors' closed forms (:mod:`.detector` builds them from parameters).

Inputs first - a pmf mapped onto ``k`` levels (optimal 1-D clustering) and
the healthy pool's quantiles - then the chains: :class:`WindowChain` (the
ordered window of the relative and absolute rules), :class:`SumChain` (the
window sum on a lattice) and :class:`CusumChain` (Brook & Evans 1972), each
giving a :class:`RunLength`. :mod:`.detector`'s docstring states the model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from .scores import Dist

__all__ = ["Levels", "levels_for", "healthy_pool", "RunLength", "Chain", "WindowChain", "SumChain", "CusumChain"]


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
