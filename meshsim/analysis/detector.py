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
from dataclasses import dataclass, replace
from typing import Any, Optional

import numpy as np

from ..core.errors import InputError
from ..protocols.meshheal.detector import ABSOLUTE, CUSUM, DETECTORS, RELATIVE, DetectorParams, detector_names
# the chains live in .chains; their names stay importable from here (__all__)
from .chains import (Chain, CusumChain, Levels, RunLength, SumChain, WindowChain, healthy_pool,
                     levels_for)
from .scores import Dist, ScoreModel

__all__ = ["Chain", "OC", "finite_pool", "Levels", "WindowChain", "SumChain", "CusumChain",
           "RunLength", "operating_characteristics", "curve", "levels_for", "healthy_pool",
           "window_chain", "PARAMS", "CLOSED_FORMS", "oc_kinds", "evidence"]

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
