"""A search's tables: trials.csv and front.csv (see :mod:`meshsim.sweep.search`)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from ...io.records import write_atomic
from .front import finite, mean
from .runner import Runner
from .spec import FRONT, TRIALS, SearchPlan


# ------------------------------------------------------------------------------------ tables


def write_front(sp: SearchPlan, runner: Runner, out: Path, rows: list[dict], rec: Optional[dict]) -> Path:
    from ..results import csv_text

    paths = [r.path for r in sp.spec.ranges]
    cols = ["rank", "point", "trial"] + paths + ["seeds"]
    for o in sp.spec.objectives:
        cols += [f"{o.metric}.{s}" for s in ("mean", "se", "lo", "hi", "n")]
    extra = [c.metric for c in sp.spec.constraints if c.metric not in [o.metric for o in sp.spec.objectives]]
    cols += [f"{m}.mean" for m in dict.fromkeys(extra)]
    cols += ["distinct_prev", "distinct_next", "recommended"]
    table = []
    for r in rows:
        d = {c: r.get(c) for c in ["rank", "point", "trial", "seeds"] + paths}
        for o in sp.spec.objectives:
            iv = r["intervals"][o.metric]
            d.update({f"{o.metric}.mean": finite(iv.mean), f"{o.metric}.se": finite(iv.se),
                      f"{o.metric}.lo": finite(iv.lo), f"{o.metric}.hi": finite(iv.hi), f"{o.metric}.n": iv.n})
        for m in extra:
            d[f"{m}.mean"] = finite(mean(r["_stats"][m]))
        d.update(distinct_prev=r["distinct_prev"], distinct_next=r["distinct_next"],
                 recommended=rec is not None and rec["point"] == r["point"])
        table.append(d)
    write_atomic(out / FRONT, csv_text(cols, table))
    return out / FRONT


def write_trials(sp: SearchPlan, out: Path, study) -> None:
    from ..results import csv_text

    paths = [r.path for r in sp.spec.ranges]
    ms = list(dict.fromkeys([o.metric for o in sp.spec.objectives] + [c.metric for c in sp.spec.constraints]))
    cols = ["trial", "batch", "state", "generation", "point"] + paths + ms + ["feasible", "reason"]
    rows = []
    for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
        vals = t.user_attrs.get("values") or {r.path: r.applied(t.params[r.path]) for r in sp.spec.ranges
                                              if r.path in t.params}
        means = t.user_attrs.get("means") or {}
        viol = t.user_attrs.get("constraints")
        row = {"trial": t.number, "batch": t.user_attrs.get("batch"), "state": t.state.name,
               "generation": t.system_attrs.get("NSGAIISampler:generation"), "point": t.user_attrs.get("point"),
               "feasible": (all(v <= 1e-12 for v in viol) if viol is not None else None)
               if t.state.name == "COMPLETE" else None,
               "reason": t.user_attrs.get("reason")}
        row.update({p: vals.get(p) for p in paths})
        row.update({m: means.get(m) for m in ms})
        rows.append(row)
    write_atomic(out / TRIALS, csv_text(cols, rows))
