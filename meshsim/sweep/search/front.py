"""The front of a search, its seed refinement and the recommendation (see :mod:`meshsim.sweep.search`,
docs/sweeps.md "The recommendation")."""
from __future__ import annotations

import math
from typing import Any, Optional

from ..stats import Interval, clip, distinguishable, interval, metric_bounds
from .runner import Runner
from .spec import Constraint, Objective, SearchPlan


def finite(v: float) -> Optional[float]:
    return v if isinstance(v, (int, float)) and math.isfinite(v) else None


# ------------------------------------------------------------------------------------ the front


def _stats(sp: SearchPlan, runner: Runner, key: str, n: int) -> dict[str, dict[int, float]]:
    seeds = (sp.seeds + sp.extra_seeds)[:n]
    ms = dict.fromkeys([o.metric for o in sp.spec.objectives] + [c.metric for c in sp.spec.constraints])
    return {m: runner.series(key, m, seeds) for m in ms}


def mean(xs: dict[int, float]) -> float:
    return sum(xs.values()) / len(xs) if xs else math.nan


def _feasible(sp: SearchPlan, st: dict[str, dict[int, float]]) -> bool:
    """Every constraint holds on the point's seeds so far (``==`` on each seed, ``<=`` / ``>=`` on the mean:
    :meth:`Constraint.holds_on`) and every objective has a value."""
    return all(c.holds_on(st[c.metric]) for c in sp.spec.constraints) and \
        all(math.isfinite(mean(st[o.metric])) for o in sp.spec.objectives)


def _dominates(sp: SearchPlan, a: dict, b: dict) -> bool:
    va = [o.sign * mean(a[o.metric]) for o in sp.spec.objectives]
    vb = [o.sign * mean(b[o.metric]) for o in sp.spec.objectives]
    return all(x <= y for x, y in zip(va, vb)) and any(x < y for x, y in zip(va, vb))


def _nondominated(sp: SearchPlan, keys: list[str], st: dict[str, dict]) -> list[str]:
    return [k for k in keys if not any(_dominates(sp, st[q], st[k]) for q in keys if q != k)]


def _order(sp: SearchPlan, keys: list[str], st: dict[str, dict]) -> list[str]:
    """Front points along the first objective (best first), ties by the next ones, then by point id."""
    return sorted(keys, key=lambda k: tuple(o.sign * mean(st[k][o.metric]) for o in sp.spec.objectives) + (k,))


def _separated(sp: SearchPlan, a: dict, b: dict) -> bool:
    return any(distinguishable(a[o.metric], b[o.metric]) for o in sp.spec.objectives)


def _better(o: Objective, a: dict, b: dict) -> bool:
    """``a`` is distinguishably better than ``b`` on ``o`` (paired on shared seeds)."""
    return o.sign * (mean(a[o.metric]) - mean(b[o.metric])) < 0 and distinguishable(a[o.metric], b[o.metric])


def interval_dominates(sp: SearchPlan, a: dict, b: dict) -> bool:
    """The interval rule: ``a`` is distinguishably better than ``b`` on some objective and distinguishably
    worse on none (a point so dominated is never recommended)."""
    objs = sp.spec.objectives
    return any(_better(o, a, b) for o in objs) and not any(_better(o, b, a) for o in objs)


def _iv(metric: str, xs: dict[int, float]) -> Interval:
    """The 95 % interval of a metric's seed values, clipped to the metric's range (a rate to [0, 1])."""
    return clip(interval(list(xs.values())), metric_bounds(metric))


def _choose(sp: SearchPlan, front: list[str], st: dict[str, dict]) -> Optional[str]:
    """The recommendation among the feasible front points ``front`` (docs/sweeps.md, "The recommendation"):

    1. drop every point another front point dominates by the interval rule (:func:`interval_dominates`);
    2. on the second objective, then the third, ..., keep the points not distinguishably worse than the
       best mean;
    3. on the first objective, take the best pessimistic 95 % bound, and with it every kept point it does
       not beat distinguishably; of those, the best means on the later objectives, in order (then the
       bound, then the order along the front).

    The result is never dominated by any front point by the interval rule, and a point is never preferred
    for a first-objective advantage the seeds cannot tell from noise."""
    if not front:
        return None
    objs = sp.spec.objectives
    pos = {k: i for i, k in enumerate(front)}
    cand = [k for k in front if not any(interval_dominates(sp, st[q], st[k]) for q in front if q != k)] or \
        list(front)  # a cycle of the paired rule (noise): every point
    for o in objs[1:]:
        best = min(cand, key=lambda k: (o.sign * mean(st[k][o.metric]), pos[k]))
        cand = [k for k in cand if k == best or not _better(o, st[best], st[k])]
    o1 = objs[0]

    def bound(k: str) -> float:
        return _bound(o1, _iv(o1.metric, st[k][o1.metric]))

    top = min(cand, key=lambda k: (bound(k), pos[k]))
    tied = [k for k in cand if k == top or not _better(o1, st[top], st[k])]
    return min(tied, key=lambda k: tuple(o.sign * mean(st[k][o.metric]) for o in objs[1:]) + (bound(k), pos[k]))


def front_keys(sp: SearchPlan, runner: Runner, complete: list, seeds: list[int]) -> list[str]:
    keys = sorted({t.user_attrs["point"] for t in complete if "point" in t.user_attrs})
    st = {k: _stats(sp, runner, k, len(seeds)) for k in keys}
    feas = [k for k in keys if _feasible(sp, st[k])]
    return _nondominated(sp, feas, st)


def _contenders(sp: SearchPlan, rec: str, front: list[str], rest: list[str], st: dict[str, dict]) -> list[str]:
    """The points that can still take the recommendation from ``rec``: front points and feasible points of
    the next layer that no objective yet tells apart from it (paired on shared seeds; its neighbours along
    the front among them while they are not told apart), nearest first along the first objective. Points
    already told apart from it, at the far ends of the front, get no seeds: they cannot change the choice."""
    out = [k for k in front if k != rec and not _separated(sp, st[k], st[rec])]
    out += [k for k in _nondominated(sp, rest, st) if not _separated(sp, st[k], st[rec])]
    o1 = sp.spec.objectives[0]
    x = mean(st[rec][o1.metric])
    return sorted(out, key=lambda k: (abs(mean(st[k][o1.metric]) - x), k))


def refine(sp: SearchPlan, runner: Runner, complete: list, echo) -> tuple[list[dict], Optional[dict]]:
    """More seeds where the recommendation is decided: the current recommendation and the points that
    cannot yet be told apart from it (:func:`_contenders`), until none is left, each has ``max_seeds``
    or the budget is spent; the recommendation is recomputed after every round."""
    keys = sorted({t.user_attrs["point"] for t in complete if "point" in t.user_attrs})
    n = {k: len(sp.seeds) for k in keys}
    step = sp.seed_step
    all_seeds = sp.seeds + sp.extra_seeds
    budget = sp.refine_runs
    spent = rnd = 0  # runs scheduled (finished or not: a resumed study decides as the uninterrupted one)
    while True:
        st = {k: _stats(sp, runner, k, n[k]) for k in keys}
        feas = [k for k in keys if _feasible(sp, st[k])]
        front = _order(sp, _nondominated(sp, feas, st), st)
        rec = _choose(sp, front, st)
        if rec is None:
            break
        others = _contenders(sp, rec, front, [k for k in feas if k not in front], st)
        grow = [k for k in [rec] + others if n[k] < sp.max_seeds] if others else []
        if not grow or spent >= budget:  # told apart from every contender, or no seeds left to give
            break
        rnd += 1
        pairs, grown = [], []
        for k in grow:  # the recommendation first (every comparison is paired), then its nearest contenders
            new_n = min(sp.max_seeds, n[k] + step, n[k] + budget - spent)
            if new_n <= n[k]:
                break
            pairs += [(runner.points[k], s) for s in all_seeds[n[k]:new_n]]
            spent += new_n - n[k]
            n[k] = new_n
            grown.append(k)
        echo(f"search: refinement round {rnd}: the recommended point and {len(grown) - 1} contender"
             f"{'s' if len(grown) != 2 else ''} get seeds up to {max(n[k] for k in grown)} ({len(pairs)} runs; "
             f"{spent}/{budget} of the refinement budget)")
        runner.run(pairs, f"refinement {rnd}")
        for k in grown:  # a failed run: refine that point no further (its statistics use the seeds that ran)
            if any(runner.values(k, s) is None for s in all_seeds[:n[k]]):
                n[k] = sp.max_seeds
    st = {k: _stats(sp, runner, k, n[k]) for k in keys}
    feas = [k for k in keys if _feasible(sp, st[k])]
    front = _order(sp, _nondominated(sp, feas, st), st)
    trial_of: dict[Any, int] = {}
    for t in sorted(complete, key=lambda t: t.number):
        trial_of.setdefault(t.user_attrs.get("point"), t.number)
    rows = []
    for i, k in enumerate(front):
        ran = sum(1 for s in all_seeds[:n[k]] if runner.values(k, s) is not None)
        row: dict[str, Any] = {"rank": i + 1, "point": k, "trial": trial_of.get(k), "seeds": ran}
        row.update(runner.points[k].values)
        row["_stats"] = st[k]
        row["intervals"] = {o.metric: _iv(o.metric, st[k][o.metric]) for o in sp.spec.objectives}
        prev = front[i - 1] if i > 0 else None
        nxt = front[i + 1] if i + 1 < len(front) else None
        row["distinct_prev"] = None if prev is None else _separated(sp, st[k], st[prev])
        row["distinct_next"] = None if nxt is None else _separated(sp, st[k], st[nxt])
        rows.append(row)
    return rows, _recommend(sp, rows)


def _bound(o: Objective, iv: Interval) -> float:
    """The pessimistic end of the 95 % interval (the mean when there is none)."""
    if not math.isfinite(iv.lo):
        return o.sign * iv.mean
    return iv.hi if o.direction == "minimize" else -iv.lo


RULE = ("feasible front points (constraints: == on every seed, <= and >= on the mean over every seed the point "
        "ran) that no front point dominates by the interval rule (distinguishably better on one objective, "
        "worse on none); of those, not distinguishably worse than the best on {later}; then the best 95 % bound "
        "on {first}, and among the points it does not beat distinguishably, the best means on {later}")


def _recommend(sp: SearchPlan, rows: list[dict]) -> Optional[dict]:
    if not rows:
        return None
    objs = sp.spec.objectives
    by = {r["point"]: r for r in rows}
    key = _choose(sp, [r["point"] for r in rows], {k: r["_stats"] for k, r in by.items()})
    rec = by[key]
    paths = [r.path for r in sp.spec.ranges]
    later = ", then ".join(o.metric for o in objs[1:]) or "(no other objective)"
    bounded = [o.metric for o in objs if metric_bounds(o.metric) != (-math.inf, math.inf)]
    return {"rule": RULE.format(later=later, first=objs[0].metric),
            "rank": rec["rank"], "trial": rec["trial"], "point": rec["point"], "seeds": rec["seeds"],
            "values": {p: rec[p] for p in paths},
            "objectives": {o.metric: _iv_dict(rec["intervals"][o.metric]) for o in objs},
            "constraints": {c.text(): {"mean": finite(mean(rec["_stats"][c.metric])),
                                       "worst_seed": finite(_worst(c, rec["_stats"][c.metric])),
                                       "seeds": len(rec["_stats"][c.metric])} for c in sp.spec.constraints},
            "clipped": {m: list(_json_bounds(metric_bounds(m))) for m in bounded},
            "set": " ".join(f"--set {p}={_setval(rec[p])}" for p in paths)}


def _worst(c: Constraint, xs: dict[int, float]) -> float:
    """The seed value furthest on the wrong side of the bound (the largest for <=, the smallest for >=)."""
    if not xs:
        return math.nan
    return max(xs.values(), key=lambda x: (c.violation(x), x))


def _json_bounds(b: tuple[float, float]) -> tuple[Optional[float], Optional[float]]:
    return tuple(x if math.isfinite(x) else None for x in b)  # type: ignore[return-value]


def _setval(v: Any) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def _iv_dict(iv: Interval) -> dict[str, Any]:
    return {"mean": finite(iv.mean), "se": finite(iv.se), "lo": finite(iv.lo), "hi": finite(iv.hi), "n": iv.n}
