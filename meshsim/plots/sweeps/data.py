"""A sweep folder's tidy results as the figures and the report read them: :class:`SweepData`
(``where`` slices, the swept axes, per-point cells with 95 % intervals), the Pareto front and a search's
objectives."""
from __future__ import annotations

import difflib
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from ...core.errors import InputError


SWEEP_KINDS = ("tradeoff", "heatmap", "sensitivity", "parallel")
DELAY, FALSE_ISO, MISSED = "detection.delay_mean", "detection.false_isolation_rate", "detection.missed_rate"
#: what the report shows per point when the sweep has it, in this order (any other metric works everywhere)
HEADLINES = (DELAY, "detection.delay_p90", FALSE_ISO, MISSED, "detection.closure_rate",
             "detection.reintegration_delay_mean", "detection.watched_not_isolated", "accuracy.overall",
             "audit.initial_score_gap", "faa", "bfti", "ra", "h_majority", "routing.max_convergence_time")
LABELS = {DELAY: "mean detection delay (tasks)", FALSE_ISO: "false-isolation rate (isolated while healthy)",
          MISSED: "missed-detection rate", "detection.delay_p90": "p90 detection delay (tasks)",
          "detection.closure_rate": "closure rate", "detection.reintegration_delay_mean": "mean reintegration delay",
          "detection.watched_not_isolated": "healthy watched-not-isolated episodes",
          "accuracy.overall": "accuracy", "audit.initial_score_gap": "review score gap (healthy − degraded)"}
CONF = 0.95


# ------------------------------------------------------------------------------------- data


@dataclass
class SweepData:
    path: Path
    columns: list[str]
    rows: list[dict[str, Any]]
    manifest: dict[str, Any]
    fixed: dict[str, Any] = field(default_factory=dict)  # --where: swept path -> value

    @property
    def axes(self) -> list[str]:
        return list(self.manifest["axes"])

    @property
    def ok_rows(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["status"] == "ok"]

    @property
    def metrics(self) -> list[str]:
        from ...sweep.results import metric_columns

        return metric_columns(self.columns, self.axes)

    @property
    def name(self) -> str:
        return str(self.manifest.get("scenario", {}).get("name", self.path.name))

    def seeds(self) -> list[int]:
        return sorted({r["seed"] for r in self.rows})

    def values(self, axis: str) -> list[Any]:
        from ...sweep.results import sort_key

        return sorted({_hashable(r[axis]) for r in self.rows}, key=sort_key)

    def varying(self) -> list[str]:
        """The swept parameters with more than one value among these rows."""
        return [a for a in self.axes if len(self.values(a)) > 1]

    def column(self, name: Optional[str], what: str, choices: Optional[Sequence[str]] = None) -> str:
        """``name`` as a column: exact, or the one column ending in ``.name``."""
        pool = list(choices if choices is not None else self.columns)
        hits = [c for c in pool if name and c.endswith("." + name)]
        if name in pool:
            if hits and "." not in str(name):
                # a top-level column and a nested one share the short name (e.g. an older run's
                # top-level false_isolations beside detection.false_isolations): never pick silently
                raise InputError(f"ambiguous; choose one of {', '.join([str(name)] + hits)}", field=what, value=name)
            return name  # type: ignore[return-value]
        if len(hits) == 1:
            return hits[0]
        near = difflib.get_close_matches(str(name), pool, n=3, cutoff=0.5) or hits[:3] or pool[:3]
        why = "ambiguous" if len(hits) > 1 else ("not a swept parameter of this sweep" if choices is not None and
                                                 set(pool) <= set(self.axes) else "not a column of the sweep's results")
        raise InputError(f"{why}; e.g. {', '.join(near)}", field=what, value=name)

    def where(self, fixes: Any, field_name: str = "--where") -> "SweepData":
        """The points at the given values (``["window=16"]``, ``"window=16,beta=3"``
        or ``{"protocol.params.window": 16}``); an unknown path or a value no point
        has is an :class:`InputError`."""
        from ...sweep.slices import parse_fixes, select

        if not fixes:
            return self
        fx = parse_fixes(fixes, self.axes, self.values, field_name)
        return SweepData(self.path, self.columns, select(self.rows, fx), self.manifest, {**self.fixed, **fx})

    def names(self) -> dict[str, str]:
        from ...sweep.core import short_names

        return short_names(self.axes)


def _hashable(v: Any) -> Any:
    return v if not isinstance(v, (dict, list)) else str(v)


def open_sweep(path: Path | str | SweepData, where: Any = None) -> SweepData:
    if isinstance(path, SweepData):
        sd = path
    else:
        from ...sweep.results import read_table

        cols, rows, m = read_table(path, "runs")
        sd = SweepData(Path(path), cols, rows, m)
    return sd.where(where) if where else sd


def _num(v: Any) -> Optional[float]:
    if v is None or isinstance(v, str):
        return None
    x = float(v)
    return x if math.isfinite(x) else None


def point_means(sd: SweepData, metric: str, keys: Sequence[str]) -> dict[tuple, dict[str, Any]]:
    """Per combination of ``keys`` values: the metric's per-seed values (averaged
    over any other axis) with mean, sd and n."""
    groups: dict[tuple, list[float]] = {}
    for r in sd.ok_rows:
        k = tuple(_hashable(r[a]) for a in keys)
        x = _num(r.get(metric))
        groups.setdefault(k, [])
        if x is not None:
            groups[k].append(x)
    out = {}
    for k, xs in groups.items():
        out[k] = {"xs": xs, "n": len(xs), "mean": statistics.fmean(xs) if xs else None,
                  "sd": statistics.stdev(xs) if len(xs) > 1 else 0.0}
    return out


@dataclass
class Cell:
    """A metric over the points sharing ``keys`` values (see the module doc)."""
    mean: Optional[float]  # mean over seeds of the per-seed averages
    se: float
    lo: float  # CONF interval over seeds (NaN with one seed)
    hi: float
    n: int  # seeds
    seeds: dict[int, float]  # seed -> average over the cell's points
    point_means: list[float]  # each point's mean over its seeds
    points: int

    @property
    def spread(self) -> tuple[float, float]:
        return (min(self.point_means), max(self.point_means)) if self.point_means else (math.nan, math.nan)


def cells(sd: SweepData, metric: str, keys: Sequence[str]) -> dict[tuple, Cell]:
    """Per combination of ``keys`` values: the metric, per seed averaged over the
    points that differ only in other parameters, with a :data:`CONF` interval."""
    from ...sweep.stats import metric_interval, rate_counts

    by: dict[tuple, dict[str, dict[int, float]]] = {}
    rows_of: dict[tuple, list[dict]] = {}
    for r in sd.ok_rows:
        k = tuple(_hashable(r[a]) for a in keys)
        pts = by.setdefault(k, {})
        if _num(r.get(metric)) is not None:
            rows_of.setdefault(k, []).append(r)
        x = _num(r.get(metric))
        pts.setdefault(r["point"], {})
        if x is not None:
            pts[r["point"]][r["seed"]] = x
    out = {}
    for k, pts in by.items():
        per_seed: dict[int, list[float]] = {}
        for vals in pts.values():
            for s, x in vals.items():
                per_seed.setdefault(s, []).append(x)
        seeds = {s: statistics.fmean(xs) for s, xs in sorted(per_seed.items())}
        # a proportion: Wilson, in [0, 1]; a rate with its counts: also the pooled counts' (as summary.csv)
        ci = metric_interval(metric, list(seeds.values()), CONF, rate_counts(metric, rows_of.get(k, [])))
        pm = [statistics.fmean(v.values()) for v in pts.values() if v]
        out[k] = Cell(ci.mean if ci.n else None, ci.se, ci.lo, ci.hi, ci.n, seeds, pm, len(pts))
    return out


def _observed(sd: SweepData, metric: str) -> tuple[float, float]:
    """The range of a metric's per-run values: intervals are drawn clipped to it
    (a t-interval of a rate over few seeds can leave [0, 1])."""
    xs = [x for r in sd.ok_rows if (x := _num(r.get(metric))) is not None]
    return (min(xs), max(xs)) if xs else (-math.inf, math.inf)


def _clip(v: float, bounds: tuple[float, float]) -> float:
    return min(max(v, bounds[0]), bounds[1]) if math.isfinite(v) else v


def _label(metric: str) -> str:
    return LABELS.get(metric, metric)


def _names(sd: SweepData) -> dict[str, str]:
    return sd.names()


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _g(x: Optional[float], digits: int = 3) -> str:
    if x is None or not math.isfinite(x):
        return "–"
    if x != 0 and abs(x) < 10 ** -(digits - 1) and abs(x) >= 1e-12:
        return f"{x:.{digits - 1}g}"
    return f"{x:.{digits}g}" if abs(x) < 10 ** digits else f"{x:.0f}"


def _ci(c: Any) -> str:
    """``mean [lo, hi]`` of a Cell or an Interval."""
    if c is None or c.mean is None or not math.isfinite(c.mean):
        return "–"
    if not math.isfinite(c.lo):
        return _g(c.mean)
    if c.n >= 2 and c.lo == c.hi:  # seeds that agree: a zero-width interval would read as certainty
        return f"{_g(c.mean)} (n={c.n}, all equal)"
    return f"{_g(c.mean)} [{_g(c.lo)}, {_g(c.hi)}]"


def _in_range(c: Optional["Cell"], metric: str) -> Optional["Cell"]:
    """A cell's interval clipped to the metric's range (a rate to [0, 1], a count or delay to >= 0:
    :func:`meshsim.sweep.stats.metric_bounds`); the report says so."""
    from dataclasses import replace

    from ...sweep.stats import metric_bounds

    if c is None or not math.isfinite(c.lo):
        return c
    lo, hi = metric_bounds(metric)
    return replace(c, lo=min(max(c.lo, lo), hi), hi=max(min(c.hi, hi), lo))


def _pick(sd: SweepData, candidates: Sequence[str]) -> Optional[str]:
    return next((m for m in candidates if m in sd.columns), None)


def _default_metric(sd: SweepData) -> str:
    m = _pick(sd, HEADLINES)
    if m:
        return m
    if not sd.metrics:
        raise InputError("the sweep has no finished run with metrics yet", file=str(sd.path))
    return sd.metrics[0]


def _metric_list(sd: SweepData, metric: Optional[str | Sequence[str]]) -> list[str]:
    if metric is None:
        return []
    items = metric.split(",") if isinstance(metric, str) else list(metric)
    return [sd.column(m.strip(), "--metric", sd.metrics) for m in items if m and m.strip()]


def _slice_note(sd: SweepData, shown: Iterable[str], facet: Optional[str] = None, averaging: bool = True) -> str:
    """What the figure fixed (``--where`` and one-valued parameters) and what it
    averaged ("nothing averaged" when ``averaging`` and nothing was)."""
    names = sd.names()
    shown = set(shown) | ({facet} if facet else set())
    fixed = [f"{names[a]}={_fmt(sd.values(a)[0])}" for a in sd.axes
             if sd.values(a) and (a in sd.fixed or (a not in shown and len(sd.values(a)) == 1))]
    avg = [f"{names[a]} ({len(sd.values(a))} values)" for a in sd.axes
           if a not in shown and len(sd.values(a)) > 1]
    parts = []
    if fixed:
        parts.append("fixed: " + ", ".join(fixed))
    if avg or averaging:
        parts.append(("averaged over: " + ", ".join(avg)) if avg else "nothing averaged")
    return "; ".join(parts)


def _unfinished(sd: SweepData) -> str:
    """`` (120 of 186 runs finished)`` while a sweep runs or when runs failed; else empty."""
    done = len(sd.ok_rows)
    return "" if done == len(sd.rows) else f" ({done} of {len(sd.rows)} runs finished)"


def seed_counts(sd: SweepData) -> str:
    """How many finished seeds each point has, truly: ``31 points × 5 seeds``, or ``11 points: 8 × 3 seeds,
    3 × 6 seeds`` when they differ (a search's refined points have more)."""
    per: dict[str, int] = {}
    for r in sd.ok_rows:
        per[r["point"]] = per.get(r["point"], 0) + 1
    by: dict[int, int] = {}
    for n in per.values():
        by[n] = by.get(n, 0) + 1
    if len(by) == 1:
        ((n, k),) = by.items()
        return f"{k} point{'s' if k != 1 else ''} × {n} seed{'s' if n != 1 else ''}"
    parts = [f"{k} × {n} seed{'s' if n != 1 else ''}" for n, k in sorted(by.items(), key=lambda nk: (-nk[1], nk[0]))]
    return f"{len(per)} points: " + ", ".join(parts)


def _check_rows(sd: SweepData) -> None:
    if not sd.ok_rows:
        extra = f" at {', '.join(f'{k}={_fmt(v)}' for k, v in sd.fixed.items())}" if sd.fixed else ""
        raise InputError(f"no finished run{extra} to draw", file=str(sd.path))


def _facets(sd: SweepData, facet: Optional[str], used: Sequence[str]
            ) -> tuple[Optional[str], list[tuple[Any, SweepData]]]:
    if facet is None:
        return None, [(None, sd)]
    facet = sd.column(facet, "--facet", sd.axes)
    if facet in used:
        raise InputError("--facet must be a parameter the figure does not already draw", field="--facet",
                         value=facet)
    vals = sd.values(facet)
    if len(vals) > 16:
        raise InputError(f"{len(vals)} values: too many panels (at most 16); fix it with --where instead",
                         field="--facet", value=facet)
    return facet, [(v, sd.where({facet: v})) for v in vals]


def _grid(fig, n: int, ncols: Optional[int] = None, **kw):
    ncols = ncols or (1 if n == 1 else 2 if n in (2, 4) else 3)
    nrows = math.ceil(n / ncols)
    axs = fig.subplots(nrows, ncols, squeeze=False, **kw)
    flat = [a for row in axs for a in row]
    for a in flat[n:]:
        a.set_visible(False)
    return flat[:n]


def _positions(values: list[Any]) -> tuple[dict[Any, float], bool]:
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return {v: (float(v) if numeric else float(i)) for i, v in enumerate(values)}, numeric


def _compact(values: Mapping[str, Any], axes: Sequence[str]) -> str:
    return "/".join(_fmt(values[a]) for a in axes)


# ------------------------------------------------------------------------------------- trade-off


def pareto_front(points: list[dict[str, Any]], keys: Sequence[str]) -> list[int]:
    """Indices of the points no other point dominates (lower is better on every key)."""
    front = []
    for i, p in enumerate(points):
        dominated = False
        for j, q in enumerate(points):
            if i == j:
                continue
            if all(q[k] <= p[k] for k in keys) and any(q[k] < p[k] for k in keys):
                dominated = True
                break
        if not dominated:
            front.append(i)
    return front


def search_info(sd: SweepData) -> Optional[dict[str, Any]]:
    """A search folder's objectives ``[(direction, metric)]``, constraints and recommendation
    (``recommended.json``; None when it has none yet); None for a grid sweep."""
    spec = sd.manifest.get("search")
    if not isinstance(spec, dict):
        return None
    from ...sweep.search import RECOMMENDED, parse_constraint

    objs = [tuple(str(o).split(" ", 1)) for o in spec.get("objectives") or []]
    cons = [parse_constraint(c) for c in spec.get("constraints") or []]
    rec = None
    f = sd.path / RECOMMENDED
    if f.is_file() and f.stat().st_size < 1_000_000:  # our own small file; a damaged one draws no star
        try:
            rec = json.loads(f.read_text())
        except ValueError:
            rec = None
    return {"objectives": [(d, m) for d, m in objs if m in sd.columns], "constraints": cons,
            "recommended": rec if isinstance(rec, dict) else None}


def _senses(sd: SweepData, metrics: Any) -> dict[str, float]:
    """+1 (minimised) or -1 (maximised) per drawn role: a search's ``--maximize`` objectives are maximised."""
    fx, fy, fc = _objectives(sd, metrics)
    info = search_info(sd)
    mx = {m for d, m in (info["objectives"] if info else []) if d == "maximize"}
    return {k: (-1.0 if m in mx else 1.0) for k, m in (("fi", fx), ("delay", fy), ("missed", fc))}


def _objectives(sd: SweepData, metrics: Optional[str | Sequence[str]]) -> tuple[str, str, Optional[str]]:
    ms = _metric_list(sd, metrics)
    info = search_info(sd) if not ms else None
    if info and info["objectives"]:  # a search folder draws its own objectives: x the second, y the first
        om = [m for _d, m in info["objectives"]]
        if len(om) == 1:
            extra = [c.metric for c in info["constraints"] if c.metric != om[0] and c.metric in sd.columns] + \
                [m for m in (FALSE_ISO, DELAY) if m != om[0] and m in sd.columns]
            if not extra:
                raise InputError("the search has one objective: name a second metric with --metric X,Y",
                                 file=str(sd.path))
            return om[0], extra[0], None
        return om[1], om[0], (om[2] if len(om) > 2 else None)
    if ms:
        if len(ms) not in (2, 3):
            raise InputError("--kind tradeoff takes two or three metrics to minimise: X,Y[,COLOUR]",
                             field="--metric", value=",".join(ms))
        return ms[0], ms[1], (ms[2] if len(ms) == 3 else None)
    missing = [m for m in (DELAY, FALSE_ISO) if m not in sd.columns]
    if missing:
        raise InputError("--kind tradeoff needs the MeshHeal detection metrics in every summary "
                         f"(missing: {', '.join(missing)}), or --metric X,Y[,COLOUR]", file=str(sd.path))
    return FALSE_ISO, DELAY, (MISSED if MISSED in sd.columns else None)
