"""Figures and the HTML report of a sweep folder (``meshsim sweep``), drawn
from its tidy results (the runs' summaries) only (docs/sweeps.md#figures-and-the-report).

- :func:`tradeoff`: two metrics to minimise against each other (default:
  mean detection delay against false-isolation rate), one marker per point
  with 95 % interval bars, coloured by a third (the missed-detection rate),
  every point labelled with its parameters, the Pareto front marked and each
  front point marked distinguishable or not from its front neighbour (paired
  difference on shared seeds, :mod:`meshsim.sweep.stats`).
- :func:`heatmap`: a metric on two swept parameters.
- :func:`sensitivity`: a metric against one parameter (one panel per
  parameter without ``x``), one line per value of another (``by``).
- :func:`parallel`: parallel coordinates, every swept parameter and the
  chosen metrics, one line per point coloured by a metric.
- :func:`write_sweep_report`: ``SWEEP_DIR/report.html`` with all of them and
  the per-point table with intervals and paired differences.

Every figure takes ``where`` (fix swept parameters: ``{"window": 16}`` or
``["window=16"]``) and the multi-panel ones ``facet`` (one panel per value of a
parameter). A parameter neither drawn, fixed nor faceted is averaged, and the
figure says so: per seed, the points that differ only in such parameters are
averaged (the seeds are shared, so the average keeps its seed pairing), and the
interval is over those per-seed averages; heat-map cells then also show the
range of the averaged points' means (what the average hides).
"""
from __future__ import annotations

import difflib
import html
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from ..core.errors import InputError
from .canvas import _new_figure, _png_bytes, save_figure

__all__ = ["SweepData", "open_sweep", "tradeoff", "heatmap", "sensitivity", "parallel", "pareto_front",
           "point_means", "cells", "Cell", "tradeoff_points", "render_sweep", "write_sweep_report",
           "build_sweep_report", "SWEEP_KINDS", "DELAY", "FALSE_ISO", "MISSED", "search_info", "seed_counts",
           "FIGURES_STAMP", "results_stamp", "stamp_figure", "stale_figures", "redraw_stale"]

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
        from ..sweep.results import metric_columns

        return metric_columns(self.columns, self.axes)

    @property
    def name(self) -> str:
        return str(self.manifest.get("scenario", {}).get("name", self.path.name))

    def seeds(self) -> list[int]:
        return sorted({r["seed"] for r in self.rows})

    def values(self, axis: str) -> list[Any]:
        from ..sweep.results import sort_key

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
        from ..sweep.slices import parse_fixes, select

        if not fixes:
            return self
        fx = parse_fixes(fixes, self.axes, self.values, field_name)
        return SweepData(self.path, self.columns, select(self.rows, fx), self.manifest, {**self.fixed, **fx})

    def names(self) -> dict[str, str]:
        from ..sweep.core import short_names

        return short_names(self.axes)


def _hashable(v: Any) -> Any:
    return v if not isinstance(v, (dict, list)) else str(v)


def open_sweep(path: Path | str | SweepData, where: Any = None) -> SweepData:
    if isinstance(path, SweepData):
        sd = path
    else:
        from ..sweep.results import read_table

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
    from ..sweep.stats import metric_interval

    by: dict[tuple, dict[str, dict[int, float]]] = {}
    for r in sd.ok_rows:
        k = tuple(_hashable(r[a]) for a in keys)
        pts = by.setdefault(k, {})
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
        ci = metric_interval(metric, list(seeds.values()), CONF)  # a proportion: Wilson, in [0, 1]
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
    return f"{_g(c.mean)} [{_g(c.lo)}, {_g(c.hi)}]"


def _in_range(c: Optional["Cell"], metric: str) -> Optional["Cell"]:
    """A cell's interval clipped to the metric's range (a rate to [0, 1], a count or delay to >= 0:
    :func:`meshsim.sweep.stats.metric_bounds`); the report says so."""
    from dataclasses import replace

    from ..sweep.stats import metric_bounds

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
    from ..sweep.search import RECOMMENDED, parse_constraint

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


def tradeoff_points(sd: SweepData, metrics: Optional[str | Sequence[str]] = None) -> list[dict[str, Any]]:
    """Per point: the objectives' mean over seeds with their 95 % interval
    (``fi``, ``delay`` and ``missed`` name x, y and the colour metric: by default
    false-isolation rate, detection delay and missed rate), whether it is
    Pareto-optimal (lower is better on every objective), and for front points
    ``rank`` (by x) and ``distinct`` (False when no objective's paired difference
    to the previous front point excludes 0 on shared seeds: the two are not told
    apart by these seeds)."""
    from ..sweep.stats import distinguishable

    fx, fy, fc = _objectives(sd, metrics)
    sense = _senses(sd, metrics)
    info = search_info(sd)
    axes = sd.axes
    stats = {k: cells(sd, m, axes) for k, m in (("fi", fx), ("delay", fy)) + ((("missed", fc),) if fc else ())}
    point_of = {tuple(_hashable(r[a]) for a in axes): r["point"] for r in sd.rows}
    cons = info["constraints"] if info else []
    cstats = {c.metric: cells(sd, c.metric, axes) for c in cons if c.metric in sd.columns}
    rec = (info or {}).get("recommended") or {}
    pts = []
    for key in stats["delay"]:
        p: dict[str, Any] = {"values": dict(zip(axes, key)), "metrics": {"fi": fx, "delay": fy, "missed": fc},
                             "point": point_of.get(key)}
        # a search's constraints as the search judges them (== on every seed, <= / >= on the mean)
        p["violates"] = [c.text() for c in cons if not c.holds_on(cstats[c.metric][key].seeds
                                                                  if c.metric in cstats and key in cstats[c.metric]
                                                                  else {})]
        p["recommended"] = bool(rec) and rec.get("point") == p["point"]
        for k, st in stats.items():
            c = st.get(key)
            p[k] = c.mean if c else None
            p[k + "_sd"] = c.se * math.sqrt(c.n) if c and c.n > 1 else 0.0
            p[k + "_lo"], p[k + "_hi"] = (c.lo, c.hi) if c else (math.nan, math.nan)
            p[k + "_seeds"] = c.seeds if c else {}
        if not fc:
            p["missed"], p["missed_seeds"] = 0.0, {}
        p["missed"] = p["missed"] or 0.0
        p["n"] = max(stats["delay"][key].n, stats["fi"][key].n if key in stats["fi"] else 0)
        pts.append(p)
    full = [p for p in pts if p["delay"] is not None and p["fi"] is not None]
    feas = [p for p in full if not p["violates"]]  # a constraint violator is never Pareto-optimal
    signed = [{k: sense[k] * p[k] for k in ("fi", "delay", "missed")} for p in feas]
    for i in pareto_front(signed, ("fi", "delay", "missed")):
        feas[i]["pareto"] = True
    for p in pts:
        p.setdefault("pareto", False)
    front = sorted((p for p in full if p["pareto"]), key=lambda p: (sense["fi"] * p["fi"], sense["delay"] * p["delay"]))
    for i, p in enumerate(front, 1):
        p["rank"] = i
        if i > 1:
            q = front[i - 2]
            p["distinct"] = any(distinguishable(p[k + "_seeds"], q[k + "_seeds"], CONF)
                                for k in ("fi", "delay", "missed") if p.get(k + "_seeds"))
        else:
            p["distinct"] = True
    return pts


def _tradeoff_panel(sd: SweepData, ax, metrics: Any, cnorm: Any, show_box: bool, label_all: bool,
                    limits: Optional[tuple] = None):
    pts = tradeoff_points(sd, metrics)
    fx, fy, fc = _objectives(sd, metrics)
    names = sd.names()
    vary = sd.varying()
    full = [p for p in pts if p["delay"] is not None and p["fi"] is not None]
    never = [p for p in pts if p["delay"] is None and p["fi"] is not None]

    bounds = {"fi": _observed(sd, fx), "delay": _observed(sd, fy)}

    def bar(p, k):  # asymmetric interval bar, clipped to the observed values; none without an interval
        lo, hi = _clip(p[k + "_lo"], bounds[k]), _clip(p[k + "_hi"], bounds[k])
        return (max(0.0, p[k] - lo), max(0.0, hi - p[k])) if math.isfinite(lo) else (0.0, 0.0)

    bad = [p for p in full if p["violates"]]
    full = [p for p in full if not p["violates"]]
    for p in full:
        (xl, xh), (yl, yh) = bar(p, "fi"), bar(p, "delay")
        bars = ax.errorbar(p["fi"], p["delay"], xerr=[[xl], [xh]], yerr=[[yl], [yh]], fmt="none",
                           ecolor="#343a40" if p["pareto"] else "#ced4da", elinewidth=0.9 if p["pareto"] else 0.7,
                           capsize=2.5 if p["pareto"] else 1.5, capthick=0.8, alpha=0.7 if p["pareto"] else 1.0,
                           zorder=1)
        for art in bars.lines[1] + bars.lines[2]:  # caps and bars end at the axes' frame
            art.set_clip_on(True)
    style = dict(s=[70 if p["pareto"] else 26 for p in full], linewidths=1.3, zorder=3,
                 edgecolors=["black" if p["pareto"] else "none" for p in full])
    sc = None
    if cnorm is not None:
        sc = ax.scatter([p["fi"] for p in full], [p["delay"] for p in full], c=[p["missed"] for p in full],
                        cmap="plasma", norm=cnorm, **style)
    else:
        ax.scatter([p["fi"] for p in full], [p["delay"] for p in full], color="#1c7ed6", **style)
    if bad:  # drawn, never on the front: a hollow red square each
        cons = sorted({c for p in bad for c in p["violates"]})
        ax.scatter([p["fi"] for p in bad], [p["delay"] for p in bad], marker="s", s=30, facecolors="none",
                   edgecolors="#e03131", linewidths=1.1, zorder=3,
                   label=f"violates {', '.join(cons)} ({len(bad)}; never on the front)")
    recs = [p for p in full + bad if p.get("recommended")]
    if recs:
        r = recs[0]
        ax.scatter([r["fi"]], [r["delay"]], marker="*", s=420, color="#fab005", edgecolors="black", linewidths=1.2,
                   zorder=6, label="recommended (recommended.json)")
        ax.annotate("recommended", (r["fi"], r["delay"]), textcoords="offset points", xytext=(10, -16),
                    fontsize=8.5, fontweight="bold", color="#e67700", zorder=6)
    full = full + bad
    front = sorted((p for p in full if p["pareto"]), key=lambda p: p["rank"])
    sense = _senses(sd, metrics)
    lines = []
    if front:
        xs, ys, best = [], [], float("inf")
        for p in front:  # the staircase of the front on the two drawn objectives
            if sense["delay"] * p["delay"] < best:
                xs.append(p["fi"])
                ys.append(p["delay"])
                best = sense["delay"] * p["delay"]
        ax.step(xs, ys, where="post", color="black", lw=1.0, ls="--", zorder=2, label="Pareto front")
        pars = {p["rank"]: " ".join(f"{names[a]}={_fmt(v)}" for a, v in p["values"].items() if a in vary)
                or "(one point)" for p in front}
        width = max(len(t) for t in pars.values())
        cis = {p["rank"]: _ci_short(p, "fi", bounds["fi"]) for p in front}
        cw = max(len(t) for t in cis.values())
        for p in front:
            mark = " " if p["distinct"] else "≈"
            lines.append(f"{mark}{p['rank']:>2} {pars[p['rank']]:<{width}}  {cis[p['rank']]:<{cw}}  "
                         f"{_ci_short(p, 'delay', bounds['delay'])}  n={p['n']}" + ("  *" if p.get("recommended")
                                                                                    else ""))
    limits = limits or _limits(pts, len(lines), bounds)
    if limits:
        ax.set_xlim(*limits[0])
        ax.set_ylim(*limits[1])
    if never:
        top = max([p["delay"] for p in full] + [1.0]) * 1.08
        ax.scatter([p["fi"] for p in never], [top] * len(never), marker="x", color="#c92a2a", zorder=3,
                   label="never detected (plotted at the top)")
    if show_box and lines:
        head = (f"Pareto front{' (' + ' '.join(names[a] for a in vary) + ')' if vary else ''}: "
                f"{fx.split('.')[-1]}, {fy.split('.')[-1]}; mean [95 % interval]")
        box = head + "\n" + "\n".join(lines)
        if any(not p["distinct"] for p in front):
            box += "\n≈: not distinguishable from the point above (paired 95 % intervals all include 0)"
        if any(p.get("recommended") for p in front):
            box += "\n*: the search's recommendation; n: the point's seeds"
        ax.text(0.985, 0.97, box, transform=ax.transAxes, ha="right", va="top", multialignment="left",
                fontsize=7, family="monospace",
                bbox=dict(boxstyle="round,pad=0.4", facecolor="white", edgecolor="#ced4da", alpha=0.92), zorder=5)
    ax.grid(alpha=0.3)
    if front or never:
        ax.legend(loc="best", fontsize=7.5)
    return pts, sc, (full, front, vary)


def _limits(pts: list[dict], box_lines: int, bounds: Optional[dict] = None) -> Optional[tuple]:
    """The means and their interval bars (clipped to the observed values, ``bounds``) set the
    view, with room above for the front's box: every bar ends inside the frame, with its cap."""
    full = [p for p in pts if p["delay"] is not None and p["fi"] is not None]
    if not full:
        return None
    out = []
    for k in ("fi", "delay"):
        vals = [p[k] for p in full]
        if bounds is not None:
            vals += [_clip(p[k + e], bounds[k]) for p in full for e in ("_lo", "_hi") if math.isfinite(p[k + e])]
        lo, hi = min(vals), max(vals)
        pad = 0.06 * (hi - lo) if hi > lo else max(abs(hi) * 0.2, 0.05)
        top = hi + pad * (1.0 if k == "fi" else 1.6 + 0.45 * box_lines)
        out.append((lo - pad, top))
    return tuple(out)


def _ci_short(p: dict, k: str, bounds: tuple[float, float] = (-math.inf, math.inf)) -> str:
    if not math.isfinite(p[k + "_lo"]):
        return _g(p[k])
    return f"{_g(p[k])} [{_g(_clip(p[k + '_lo'], bounds))}, {_g(_clip(p[k + '_hi'], bounds))}]"


def _label_points(ax, full: list[dict], front: list[dict], vary: Sequence[str], label_all: bool) -> None:
    """Front points: their rank in bold; the others (``label_all``): their values
    in grey, in the order the title gives. A label that would overlap one
    already placed (front first) is left out, so none collide."""
    trans = ax.transData
    (x0, y0), (x1, y1) = ax.transAxes.transform((0, 0)), ax.transAxes.transform((1, 1))
    placed: list[tuple[float, float, float, float]] = []

    def free(b):
        return all(b[2] < q[0] or b[0] > q[2] or b[3] < q[1] or b[1] > q[3] for q in placed)

    for p in sorted(front, key=lambda p: p["rank"]):
        px, py = trans.transform((p["fi"], p["delay"]))
        placed.append((px - 5, py - 5, px + 5, py + 5))  # the marker itself
    for p in sorted(front, key=lambda p: p["rank"]):
        px, py = trans.transform((p["fi"], p["delay"]))
        t = str(p["rank"])
        for dx, dy in ((6, 4), (6, -13), (-6 - 7 * len(t), 4), (-6 - 7 * len(t), -13)):
            b = (px + dx, py + dy, px + dx + 7 * len(t), py + dy + 10)
            if free(b):
                placed.append(b)
                ax.annotate(t, (p["fi"], p["delay"]), textcoords="offset pixels", xytext=(dx, dy), fontsize=8,
                            fontweight="bold", color="#212529", zorder=4)
                break
    if not label_all:
        return
    for p in sorted((p for p in full if not p["pareto"]), key=lambda p: (p["delay"], p["fi"])):
        t = _compact(p["values"], vary)
        px, py = trans.transform((p["fi"], p["delay"]))
        w = 4.3 * len(t)
        for dx, dy in ((4, -10), (4, 3), (-4 - w, 3), (-4 - w, -10)):
            b = (px + dx, py + dy, px + dx + w, py + dy + 8)
            if b[0] < x0 or b[2] > x1 or b[1] < y0 or b[3] > y1:
                continue
            if free(b):
                placed.append(b)
                ax.annotate(t, (p["fi"], p["delay"]), textcoords="offset pixels", xytext=(dx, dy), fontsize=6,
                            color="#868e96", zorder=2)
                break


def tradeoff(run: Any, ax=None, where: Any = None, facet: Optional[str] = None,
             metrics: Optional[str | Sequence[str]] = None, fig=None):
    """Two metrics to minimise against each other per point (see the module doc);
    ``facet``: one panel per value of that parameter, each with its own front."""
    sd = open_sweep(run, where)
    _check_rows(sd)
    fx, fy, fc = _objectives(sd, metrics)
    facet, panels = _facets(sd, facet, ())
    from matplotlib.colors import Normalize

    worst = 0.0
    if fc:
        worst = max((x for c in cells(sd, fc, sd.axes).values() for x in [c.mean] if x is not None), default=0.0)
    cnorm = Normalize(0.0, worst) if worst > 0 else None
    if facet is None and ax is not None:
        fig = ax.figure
        axs = [ax]
    else:
        n = len(panels)
        nc = 1 if n <= 3 else 2
        fig = fig or _new_figure(5.8 if n == 1 else 3.4 * math.ceil(n / nc) + 0.9)
        axs = _grid(fig, n, nc, sharex=n > 1, sharey=n > 1)
    label_all = len({r["point"] for r in sd.ok_rows}) <= 60
    sc = None
    labels = []
    allpts = tradeoff_points(sd, metrics)
    limits = _limits(allpts, max(sum(1 for p in tradeoff_points(part, metrics) if p["pareto"]) for _v, part in panels)
                     + 2, {"fi": _observed(sd, fx), "delay": _observed(sd, fy)}) if facet is not None else None
    for (v, part), a in zip(panels, axs):
        _pts, s, lab = _tradeoff_panel(part, a, metrics, cnorm, show_box=True, label_all=label_all, limits=limits)
        labels.append((a, lab))
        sc = sc or s
        if facet is not None:
            a.set_title(f"{sd.names()[facet]} = {_fmt(v)}", fontsize=9)
    if sc is not None:
        cb = fig.colorbar(sc, ax=axs, pad=0.01, shrink=0.9 if len(axs) == 1 else 0.5)
        cb.set_label(f"{_label(fc)} (mean over seeds)")
    xl = _label(fx) + " (mean over seeds)"
    yl = _label(fy) + " (mean over seeds)"
    if fx == FALSE_ISO:
        xl = "false-isolation rate: agents isolated while healthy / agents ever healthy (mean over seeds)"
    if fy == DELAY:
        yl = "detection delay c−b (tasks; mean over degraded agents and seeds)"
    if facet is None:
        axs[0].set_xlabel(xl)
        axs[0].set_ylabel(yl)
    else:
        fig.supxlabel(xl, fontsize=9)
        for a in axs:
            a.set_ylabel(fy.split(".")[-1], fontsize=8.5)
    names = sd.names()
    vary = [a for a in sd.varying() if a != facet]
    sense = _senses(sd, metrics)
    objs = ", ".join(m.split(".")[-1] + (" (max)" if sense[k] < 0 else "")
                     for k, m in (("fi", fx), ("delay", fy), ("missed", fc)) if m)
    info = search_info(sd)
    how = " (the search's objectives; constraint violators excluded)" if info and not metrics else \
        (" (all minimised)" if all(v > 0 for v in sense.values()) else "")
    title = (f"{sd.name}{_unfinished(sd)}: {seed_counts(sd)}; bars: 95 % interval over seeds "
             f"(clipped to the observed values)\nringed, numbered: Pareto-optimal on {objs}{how}")
    sub = _slice_note(sd, sd.axes, facet, averaging=False)  # every point is drawn: only --where fixes some
    if label_all and vary:
        sub = f"grey labels: {'/'.join(names[a] for a in vary)}" + ("; " + sub if sub else "")
    if facet is None and ax is not None:
        axs[0].set_title(title + ("\n" + sub if sub else ""), fontsize=8.5)
    else:
        fig.suptitle(title + ("\n" + sub if sub else ""), fontsize=9)
    fig.draw_without_rendering()  # the final layout: labels are placed in pixels
    for a, (full, front, vary_) in labels:
        _label_points(a, full, front, vary_, label_all)
    return fig


# ------------------------------------------------------------------------------------- heat map


def _heat_panel(sd: SweepData, x: str, y: str, metric: str, ax, norm, xv: list, yv: list):
    import numpy as np
    from matplotlib.patches import Rectangle

    cs = cells(sd, metric, (x, y))
    grid = np.full((len(yv), len(xv)), np.nan)
    for (a, b), c in cs.items():
        if c.mean is not None and a in xv and b in yv:
            grid[yv.index(b), xv.index(a)] = c.mean
    im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis", norm=norm)
    ax.set_facecolor("#f1f3f5")
    fixed = {k: v for k, v in sd.fixed.items()}
    skipped = set()
    for s in sd.manifest.get("skipped", []):
        vals = s["values"]
        from ..sweep.slices import same_value

        if all(same_value(vals.get(k), v) for k, v in fixed.items() if k in vals):
            skipped.add((_hashable(vals.get(x)), _hashable(vals.get(y))))
    averaged = any(len(sd.values(a)) > 1 for a in sd.axes if a not in (x, y))
    state: dict[tuple, set] = {}  # cell -> statuses of its runs: a cell without a finished run says why
    for r in sd.rows:
        state.setdefault((_hashable(r[x]), _hashable(r[y])), set()).add(r["status"])
    small = len(xv) * len(yv) <= 120
    lo, hi = norm.vmin, norm.vmax
    for j, b in enumerate(yv):
        for i, a in enumerate(xv):
            v = grid[j, i]
            if np.isnan(v):  # no mean: hatched, and why
                ax.add_patch(Rectangle((i - 0.5, j - 0.5), 1, 1, fill=False, hatch="///", edgecolor="#adb5bd", lw=0))
                why = state.get((a, b), set())
                text = ("failed" if "failed" in why else "not run yet" if "missing" in why else
                        "no value" if "ok" in why else "skipped" if (a, b) in skipped else "")
                ax.text(i, j, text, ha="center", va="center", fontsize=6.5, color="#495057")
                continue
            light = hi > lo and (v - lo) / (hi - lo) < 0.55
            color = "white" if light else "black"
            if not small:
                if len(xv) * len(yv) <= 300:
                    ax.text(i, j, _g(v), ha="center", va="center", fontsize=6.5, color=color)
                continue
            c = cs[(a, b)]
            if averaged and c.points > 1:
                s0, s1 = c.spread
                sub = f"{_g(s0, 2)}–{_g(s1, 2)}"
            elif math.isfinite(c.lo):
                sub = f"±{_g((c.hi - c.lo) / 2, 2)}"
            else:
                sub = ""
            ax.text(i, j + (0.1 if sub else 0), _g(v), ha="center", va="center", fontsize=7.5, color=color,
                    fontweight="bold")
            if sub:
                ax.text(i, j - 0.22, sub, ha="center", va="center", fontsize=6, color=color)
    ax.set_xticks(range(len(xv)), [_fmt(v) for v in xv], fontsize=8)
    ax.set_yticks(range(len(yv)), [_fmt(v) for v in yv], fontsize=8)
    return im


def heatmap(run: Any, x: Optional[str] = None, y: Optional[str] = None, metric: Optional[str] = None, ax=None,
            where: Any = None, facet: Optional[str] = None, fig=None):
    """The mean over seeds of ``metric`` on the ``x`` × ``y`` grid (skipped points
    hatched). Other parameters: fixed by ``where``, one panel per value of
    ``facet``, else averaged (the title says which; each cell then shows the
    range of the averaged points' means below its mean, else ± the half-width
    of its 95 % interval)."""
    sd = open_sweep(run, where)
    _check_rows(sd)
    axes = sd.axes
    vary = sd.varying()
    fac = sd.column(facet, "--facet", axes) if facet else None
    pool = [a for a in (vary if len(vary) >= 2 else axes) if a != fac]
    if len(axes) < 2 and (x is None or y is None):
        raise InputError("--kind heatmap needs two swept parameters (--x and --y); this sweep has "
                         f"{len(axes)}: use --kind sensitivity", file=str(sd.path))
    x = sd.column(x, "--x", axes) if x else pool[0]
    y = sd.column(y, "--y", axes) if y else [a for a in pool + axes if a not in (x, fac)][0]
    if x == y:
        raise InputError("--x and --y must differ", field="--y", value=y)
    metric = sd.column(metric or _default_metric(sd), "--metric", sd.metrics)
    fac, panels = _facets(sd, fac, (x, y))
    from matplotlib.colors import Normalize

    xv, yv = sd.values(x), sd.values(y)
    allc = [c.mean for _v, part in panels for c in cells(part, metric, (x, y)).values() if c.mean is not None]
    norm = Normalize(min(allc, default=0.0), max(allc, default=1.0))
    names = sd.names()
    if ax is not None and fac is None:
        fig = ax.figure
        axs = [ax]
    else:
        n = len(panels)
        nc = 1 if n == 1 else 2 if n in (2, 4) else 3
        cell_h = max(2.6, 0.42 * len(yv) + 1.2) if n > 1 else max(3.2, 0.5 * len(yv) + 1.8)
        fig = fig or _new_figure(cell_h * math.ceil(n / nc) + 0.8)
        axs = _grid(fig, n, nc)
    im = None
    for (v, part), a in zip(panels, axs):
        im = _heat_panel(part, x, y, metric, a, norm, xv, yv)
        if fac is not None:
            a.set_title(f"{names[fac]} = {_fmt(v)}", fontsize=9)
    for a in axs:
        a.set_xlabel(names[x] if fac else x, fontsize=8.5)
        a.set_ylabel(names[y] if fac else y, fontsize=8.5)
    cb = fig.colorbar(im, ax=axs, pad=0.01, shrink=0.9 if fac else 1.0)
    cb.set_label(metric, fontsize=8)
    note = _slice_note(sd, (x, y), fac)
    averaged = "averaged over" in note
    small = len(xv) * len(yv) <= 120
    how = ("; cells: mean, below it the range of the averaged points' means" if averaged and small else
           "; cells: mean ± half-width of the 95 % interval" if small else "")
    title = f"{sd.name}{_unfinished(sd)}: {metric}, mean over {len(sd.seeds())} seeds\n{note}{how}"
    if ax is not None and fac is None:
        axs[0].set_title(title, fontsize=8.5, color="#c92a2a" if averaged else "black")
    else:
        fig.suptitle(title, fontsize=9, color="#c92a2a" if averaged else "black")
    return fig


# ------------------------------------------------------------------------------------- sensitivity


def _sens_panel(sd: SweepData, x: str, metric: str, by: Optional[str], ax, compact: bool = False):
    from matplotlib import colormaps

    names = sd.names()
    xv = sd.values(x)
    pos, numeric = _positions(xv)
    keys = (x, by) if by else (x,)
    cs = cells(sd, metric, keys)
    hidden = [a for a in sd.varying() if a not in keys]
    groups = sd.values(by) if by else [None]
    cmap = colormaps["viridis"]
    bounds = _observed(sd, metric)
    thin = cells(sd, metric, tuple(keys) + tuple(hidden)) if hidden else {}
    for gi, g in enumerate(groups):
        color = cmap(gi / max(1, len(groups) - 1) * 0.8) if by else "#1c7ed6"  # no pale yellow end
        if hidden:  # the curves the average hides: one per combination of the averaged parameters
            combos = sorted({k[len(keys):] for k in thin if not by or k[1] == g}, key=str)
            for combo in combos:
                pts = [(pos[v], thin[(v, g) + combo if by else (v,) + combo].mean) for v in xv
                       if ((v, g) + combo if by else (v,) + combo) in thin]
                pts = [(p, m) for p, m in pts if m is not None]
                if len(pts) > 1:
                    ax.plot([p for p, _ in pts], [m for _, m in pts], color=color if by else "#868e96", lw=0.6,
                            alpha=0.35, zorder=1)
        pts = [(pos[v], cs[(v, g) if by else (v,)]) for v in xv if ((v, g) if by else (v,)) in cs]
        pts = [(p, c) for p, c in pts if c.mean is not None]
        if not pts:
            continue
        xs = [p for p, _ in pts]
        ms = [c.mean for _, c in pts]
        if all(math.isfinite(c.lo) for _, c in pts):
            ax.fill_between(xs, [_clip(c.lo, bounds) for _, c in pts], [_clip(c.hi, bounds) for _, c in pts],
                            color=color, alpha=0.18, lw=0, zorder=2)
        lab = f"{names[by]}={_fmt(g)}" if by else ("mean over seeds" + (" and the other parameters" if hidden else ""))
        ax.plot(xs, ms, marker="o", color=color, lw=1.8, ms=4, label=lab, zorder=3)
        if not hidden:
            for p, c in pts:
                ax.scatter([p] * len(c.seeds), list(c.seeds.values()), s=7, color=color, alpha=0.45, lw=0,
                           zorder=2)
    if hidden and not by:
        ax.plot([], [], color="#868e96", lw=0.6, alpha=0.6, label="each combination of the other parameters")
    if numeric:
        ax.set_xticks([pos[v] for v in xv], [_fmt(v) for v in xv], fontsize=7.5 if compact else 8)
    else:
        ax.set_xticks(range(len(xv)), [_fmt(v) for v in xv], fontsize=7.5 if compact else 8)
    ax.set_xlabel(names[x] if compact else x, fontsize=8.5)
    ax.grid(alpha=0.3)
    if by or not compact:
        ax.legend(fontsize=7, loc="best")


def sensitivity(run: Any, x: Optional[str] = None, metric: Optional[str] = None, by: Optional[str] = None,
                ax=None, where: Any = None, facet: Optional[str] = None, fig=None):
    """``metric`` against swept parameter ``x``: per point the mean over seeds with
    its 95 % interval band and every seed's value; one line per value of ``by``
    (default: the one other varying parameter when it has at most 8 values).
    Parameters neither drawn, fixed (``where``) nor faceted are averaged: thin
    lines show each averaged combination. Without ``x`` (and with more than one
    varying parameter, no ``facet``): one panel per varying parameter."""
    sd = open_sweep(run, where)
    _check_rows(sd)
    axes = sd.axes
    metric = sd.column(metric or _default_metric(sd), "--metric", sd.metrics)
    names = sd.names()
    if by is not None:
        by = sd.column(by, "--by", axes)
    fac = sd.column(facet, "--facet", axes) if facet else None
    vary = [a for a in sd.varying() if a not in (by, fac)]
    if x is None and len(vary) > 1 and fac is None and ax is None:
        fig = fig or _new_figure(2.9 * math.ceil(len(vary) / (2 if len(vary) in (2, 4) else 3)) + 1.0)
        axs = _grid(fig, len(vary), sharey=True)
        for a, xa in zip(axs, vary):
            _sens_panel(sd, xa, metric, by, a, compact=True)
        axs[0].set_ylabel(_label(metric), fontsize=8.5)
        if not by:
            axs[0].legend(fontsize=7, loc="best")
        fig.suptitle(f"{sd.name}{_unfinished(sd)}: {metric} against every swept parameter\n"
                     "bold: mean over seeds and the other "
                     f"parameters, band: its 95 % interval over seeds; thin: each combination of the other parameters"
                     + (f"\n{_slice_note(sd, (), None)}" if sd.fixed else ""), fontsize=9)
        return fig
    x = sd.column(x or (vary[0] if vary else axes[0]), "--x", axes)
    if by == x:
        raise InputError("--by must differ from --x", field="--by", value=by)
    others = [a for a in sd.varying() if a not in (x, fac)]
    if by is None and len(others) == 1 and len(sd.values(others[0])) <= 8:
        by = others[0]
    fac, panels = _facets(sd, fac, (x,) + ((by,) if by else ()))
    if ax is not None and fac is None:
        fig = ax.figure
        axs = [ax]
    else:
        n = len(panels)
        fig = fig or _new_figure(4.2 if n == 1 else 3.0 * math.ceil(n / (2 if n in (2, 4) else 3)) + 0.9)
        axs = _grid(fig, n, sharey=n > 1)
    for k, ((v, part), a) in enumerate(zip(panels, axs)):
        _sens_panel(part, x, metric, by, a, compact=fac is not None)
        if fac is not None:
            a.set_title(f"{names[fac]} = {_fmt(v)}", fontsize=9)
            if k and a.get_legend() is not None:  # one legend: the panels share their lines' meaning
                a.get_legend().remove()
    axs[0].set_ylabel(_label(metric), fontsize=8.5)
    note = _slice_note(sd, (x,) + ((by,) if by else ()), fac)
    averaged = "averaged over" in note
    title = (f"{sd.name}{_unfinished(sd)}: {metric} against {names[x]}; band: 95 % interval over seeds"
             + ("" if averaged else ", dots: seeds") + f"\n{note}"
             + (" (thin lines: each combination of them)" if averaged else ""))
    if ax is not None and fac is None:
        axs[0].set_title(title, fontsize=8.5, color="#c92a2a" if averaged else "black")
    else:
        fig.suptitle(title, fontsize=9, color="#c92a2a" if averaged else "black")
    return fig


# ------------------------------------------------------------------------------------- parallel coordinates


def _default_parallel_metrics(sd: SweepData) -> list[str]:
    picks = [m for m in (DELAY, "detection.delay_p90", FALSE_ISO, MISSED, "accuracy.overall") if m in sd.columns]
    if not picks:
        picks = [m for m in HEADLINES if m in sd.columns][:4] or sd.metrics[:4]
    return picks


def parallel(run: Any, metrics: Optional[str | Sequence[str]] = None, color: Optional[str] = None, ax=None,
             where: Any = None):
    """Parallel coordinates: one vertical axis per swept parameter (its values
    evenly spaced) and per metric (mean over seeds, linear), one line per point
    coloured by ``color`` (default: the first metric); Pareto-optimal points of
    the trade-off drawn bold when the sweep has its metrics."""
    sd = open_sweep(run, where)
    _check_rows(sd)
    ms = _metric_list(sd, metrics) or _default_parallel_metrics(sd)
    color = sd.column(color, "--color", sd.metrics) if color else (FALSE_ISO if FALSE_ISO in ms else ms[0])
    axes = sd.varying() or sd.axes
    names = sd.names()
    per = {m: cells(sd, m, sd.axes) for m in dict.fromkeys(ms + [color])}
    keys = [k for k in per[ms[0]]]
    dropped = [m for m in ms if len({round(c.mean, 12) for c in per[m].values() if c.mean is not None}) <= 1]
    shown = [m for m in ms if m not in dropped] or ms[:1]
    cols = axes + shown
    lo_hi = {}
    for m in shown:
        vals = [c.mean for c in per[m].values() if c.mean is not None]
        lo, hi = min(vals), max(vals)
        lo_hi[m] = (lo, hi if hi > lo else lo + 1.0)
    pos = {a: {v: (i / max(1, len(sd.values(a)) - 1) if len(sd.values(a)) > 1 else 0.5)
               for i, v in enumerate(sd.values(a))} for a in axes}
    front = set()
    try:
        front = {tuple(_hashable(p["values"][a]) for a in sd.axes) for p in tradeoff_points(sd) if p["pareto"]}
    except InputError:
        pass
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    cvals = [per[color][k].mean for k in keys if k in per[color] and per[color][k].mean is not None]
    norm = Normalize(min(cvals, default=0.0), max(cvals, default=1.0))
    cmap = colormaps["viridis"]
    if ax is None:
        fig = _new_figure(5.2)
        ax = fig.add_subplot(1, 1, 1)
    fig = ax.figure
    ax_index = {a: i for i, a in enumerate(sd.axes)}
    order = sorted(keys, key=lambda k: -(per[color][k].mean if k in per[color] and per[color][k].mean is not None
                                         else -math.inf))
    for k in order:  # best (lowest colour value) drawn last, on top
        ys = []
        for c in cols:
            if c in ax_index:
                ys.append(pos[c][k[ax_index[c]]])
            else:
                cm = per[c].get(k)
                lo, hi = lo_hi[c]
                ys.append(math.nan if cm is None or cm.mean is None else (cm.mean - lo) / (hi - lo))
        cv = per[color][k].mean if k in per[color] else None
        is_front = k in front
        ax.plot(range(len(cols)), ys, color="#adb5bd" if cv is None else cmap(norm(cv)),
                lw=2.4 if is_front else 1.0, alpha=0.95 if is_front else 0.6, zorder=3 if is_front else 2)
        if is_front:
            ax.plot(range(len(cols)), ys, color="black", lw=3.6, alpha=0.9, zorder=2.5)
    for i, c in enumerate(cols):
        ax.axvline(i, color="#495057", lw=0.8, zorder=1)
        if c in ax_index:
            for v, p in pos[c].items():
                ax.text(i - 0.02, p, _fmt(v), ha="right", va="center", fontsize=7.5, color="#212529",
                        bbox=dict(boxstyle="round,pad=0.1", facecolor="white", edgecolor="none", alpha=0.7), zorder=4)
        else:
            lo, hi = lo_hi[c]
            for t in (0.0, 0.25, 0.5, 0.75, 1.0):
                ax.text(i - 0.02, t, _g(lo + t * (hi - lo)), ha="right", va="center", fontsize=7, color="#495057",
                        bbox=dict(boxstyle="round,pad=0.1", facecolor="white", edgecolor="none", alpha=0.7),
                        zorder=4)
    labels = [names[c] if c in ax_index else c.replace("detection.", "").replace("accuracy.", "accuracy ")
              for c in cols]
    ax.set_xticks(range(len(cols)), labels, fontsize=8)
    ax.xaxis.set_ticks_position("top")
    ax.set_yticks([])
    for s in ax.spines.values():
        s.set_visible(False)
    ax.set_xlim(-0.45, len(cols) - 0.75)
    ax.set_ylim(-0.05, 1.05)
    if len(axes) < len(cols):
        ax.axvspan(len(axes) - 0.5, len(cols) - 0.55, color="#e9ecef", zorder=0)
    sm = ScalarMappable(norm=norm, cmap=cmap)
    fig.colorbar(sm, ax=ax, pad=0.01).set_label(f"{color} (mean over seeds)", fontsize=8)
    note = [f"{len(keys)} points; parameters (left), metrics (shaded: mean over {len(sd.seeds())} seeds)"]
    if front:
        note.append("black-edged: Pareto-optimal")
    if dropped:
        note.append("same value at every point, left out: " + ", ".join(dropped))
    fixed = _slice_note(sd, axes, averaging=False)
    if fixed:
        note.append(fixed)
    text = "; ".join(note[:2]) + ("\n" + "; ".join(note[2:]) if note[2:] else "")
    ax.set_title(f"{sd.name}{_unfinished(sd)}: parallel coordinates, lines coloured by {color}\n" + text,
                 fontsize=8.5, pad=22)
    return fig


# ------------------------------------------------------------------------------------- CLI


def _search_tradeoff(sd: SweepData) -> bool:
    """A search folder whose trade-off draws its own objectives (two, or one and a constraint's metric)."""
    info = search_info(sd)
    if not info or not info["objectives"]:
        return False
    try:
        _objectives(sd, None)
    except InputError:
        return False
    return True


def render_sweep(path: Path | str, kind: Optional[str] = None, x: Optional[str] = None, y: Optional[str] = None,
                 metric: Optional[str] = None, by: Optional[str] = None, out: Optional[Path | str] = None,
                 where: Any = None, facet: Optional[str] = None, color: Optional[str] = None) -> Path:
    """Draw ``kind`` of a sweep folder; default file ``SWEEP_DIR/<kind>.png``."""
    sd = open_sweep(path)
    kind = kind or ("tradeoff" if DELAY in sd.columns or _search_tradeoff(sd) else "heatmap" if len(sd.axes) > 1
                    else "sensitivity")
    if kind not in SWEEP_KINDS:
        raise InputError(f"a sweep folder takes --kind {', '.join(SWEEP_KINDS)}", field="--kind", value=kind)
    if kind != "heatmap" and y is not None:
        raise InputError("--y goes with --kind heatmap", field="--y", value=y)
    if kind != "sensitivity" and by is not None:
        raise InputError("--by goes with --kind sensitivity", field="--by", value=by)
    if kind != "parallel" and color is not None:
        raise InputError("--color goes with --kind parallel", field="--color", value=color)
    if kind in ("tradeoff", "parallel") and x is not None:
        raise InputError(f"--x goes with --kind heatmap and sensitivity, not {kind}", field="--x", value=x)
    if kind == "parallel" and facet is not None:
        raise InputError("--kind parallel draws every parameter at once (use --where to fix some)",
                         field="--facet", value=facet)
    if kind in ("heatmap", "sensitivity") and metric and "," in metric:
        raise InputError(f"--kind {kind} takes one metric", field="--metric", value=metric)
    sd = sd.where(where)
    if kind == "tradeoff":
        fig = tradeoff(sd, where=None, facet=facet, metrics=metric)
    elif kind == "heatmap":
        fig = heatmap(sd, x, y, metric, facet=facet)
    elif kind == "parallel":
        fig = parallel(sd, metric, color)
    else:
        fig = sensitivity(sd, x, metric, by, facet=facet)
    target = save_figure(fig, Path(out) if out is not None else sd.path / f"{kind}.png")
    stamp_figure(path, target, {"kind": kind, "x": x, "y": y, "metric": metric, "by": by, "where": _plain(where),
                                "facet": facet, "color": color})
    return target


# ------------------------------------------------------------------------------- stale figures

#: which results each figure and report in a sweep folder was drawn from (``meshsim sweep`` redraws
#: the ones an extension of the sweep made stale)
FIGURES_STAMP = ".meshsim-figures.json"
_STAMPED = ("results.csv", "recommended.json")  # what the figures and reports read, beside the runs


def results_stamp(folder: Path | str) -> dict[str, Any]:
    """``{"digest", "runs"}`` of the results a sweep folder's figures are drawn from: a sha256 of
    results.csv (and a search's recommended.json) and the number of finished runs."""
    import hashlib

    folder = Path(folder)
    h = hashlib.sha256()
    runs = 0
    for name in _STAMPED:
        try:
            data = (folder / name).read_bytes()
        except OSError:
            continue
        h.update(name.encode() + b"\0" + data + b"\0")
        if name == "results.csv":
            import csv
            import io

            runs = sum(1 for r in csv.DictReader(io.StringIO(data.decode("utf-8", "replace")))
                       if r.get("status") == "ok")
    return {"digest": h.hexdigest()[:16], "runs": runs}


def _plain(v: Any) -> Any:
    """An option as JSON keeps it (PATH=VALUE items, or a mapping of them); None when unset."""
    if not v:
        return None
    if isinstance(v, Mapping):
        return {str(k): x for k, x in v.items()}
    return [str(x) for x in v] if isinstance(v, (list, tuple)) else str(v)


def _stamps(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / FIGURES_STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    figs = data.get("figures") if isinstance(data, dict) else None
    return figs if isinstance(figs, dict) else {}


def stamp_figure(folder: Path | str, target: Path | str, args: dict[str, Any], what: str = "plot") -> None:
    """Note that ``target`` (a figure or report inside the sweep folder) was drawn now, with ``args``,
    from the folder's current results; a file outside the folder is not followed."""
    from ..io.records import write_atomic

    folder, target = Path(folder), Path(target)
    try:
        rel = target.resolve().relative_to(folder.resolve()).as_posix()
    except (ValueError, OSError):
        return
    figs = _stamps(folder)
    figs[rel] = {"what": what, "args": args, **results_stamp(folder)}
    try:
        write_atomic(folder / FIGURES_STAMP, json.dumps({"format": 1, "figures": figs}, indent=1, sort_keys=True)
                     + "\n")
    except OSError:  # a read-only folder: the figure is written, its stamp is a convenience
        pass


def stale_figures(folder: Path | str) -> list[tuple[str, dict[str, Any]]]:
    """(file, its stamp) of every figure or report in the sweep folder that was drawn from other
    results than the folder holds now (and is still there)."""
    folder = Path(folder)
    now = results_stamp(folder)["digest"]
    return [(rel, st) for rel, st in sorted(_stamps(folder).items())
            if isinstance(st, dict) and st.get("digest") != now and (folder / rel).is_file()]


def redraw_stale(folder: Path | str, echo=lambda s: None) -> list[Path]:
    """Redraw every stale figure and report of a sweep folder (:func:`stale_figures`) with the
    options it was drawn with; one that cannot be redrawn (no matplotlib, an option that no
    longer applies) is named as stale with the command that redraws it. Returns the files redrawn."""
    from ..core.errors import MeshsimError

    folder = Path(folder)
    now = results_stamp(folder)["runs"]
    done = []
    for rel, st in stale_figures(folder):
        args = dict(st.get("args") or {})
        why = f"drawn from {st.get('runs', '?')} finished runs, the folder now holds {now}"
        try:
            if st.get("what") == "report":
                p = write_sweep_report(folder, folder / rel, where=args.get("where"), facet=args.get("facet"),
                                       reference=args.get("reference"))
            else:
                p = render_sweep(folder, out=folder / rel, **{k: args.get(k) for k in (
                    "kind", "x", "y", "metric", "by", "facet", "color")}, where=args.get("where"))
        except (MeshsimError, ImportError) as exc:
            cmd = "meshsim report" if st.get("what") == "report" else "meshsim plot"
            echo(f"stale: {folder / rel} ({why}); not redrawn: {str(exc).splitlines()[0]} ({cmd} redraws it)")
            continue
        echo(f"redrew {p} ({why})")
        done.append(p)
    return done


# ------------------------------------------------------------------------------------- report


def _img(fig) -> str:
    import base64

    return f'<img alt="figure" src="data:image/png;base64,{base64.b64encode(_png_bytes(fig)).decode()}">'


def _table(head: list[str], rows: list[list[str]], raw: bool = False) -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    b = "".join("<tr>" + "".join(f"<td>{c if raw else html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>"


def _ms(st: Optional[dict[str, Any]]) -> str:
    if not st or st["mean"] is None:
        return "–"
    if st["n"] <= 1:
        return f"{st['mean']:.3g}"
    return f"{st['mean']:.3g} ± {st['sd']:.2g}"


def _effect(sd: SweepData, metric: str, axis: str) -> float:
    cs = [c.mean for c in cells(sd, metric, (axis,)).values() if c.mean is not None]
    return (max(cs) - min(cs)) if len(cs) > 1 else 0.0


def build_sweep_report(path: Path | str, where: Any = None, facet: Optional[str] = None,
                       reference: Any = None) -> str:
    """The report's HTML: trade-off, parallel coordinates, every parameter's
    effect, heat maps of the two parameters that move each headline metric
    most, and the per-point table (95 % intervals, paired differences to the
    reference point, Pareto front). ``where`` fixes parameters for all of it;
    ``facet`` splits the trade-off, heat maps and sensitivity curves."""
    from ..core.errors import MeshsimError
    from ..sweep.results import resolve_reference, sort_key
    from ..sweep.slices import point_values, reference_points
    from ..sweep.stats import paired
    from .report import _CSS

    full = open_sweep(path)
    sd = full.where(where)
    _check_rows(sd)
    names = sd.names()
    axes = sd.axes
    vary = sd.varying()
    fac = sd.column(facet, "--facet", axes) if facet else None
    m = sd.manifest
    ok = len(sd.ok_rows)
    failed = [r for r in sd.rows if r["status"] == "failed"]
    missing = [r for r in sd.rows if r["status"] == "missing"]
    ref = resolve_reference(m, full.rows, reference)
    title = f"{sd.name}: sweep" + (f" at {', '.join(f'{names[k]}={_fmt(v)}' for k, v in sd.fixed.items())}"
                                   if sd.fixed else "")
    parts = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)} — meshsim"
             f"</title><style>{_CSS}td.c{{white-space:nowrap}}td b{{color:#c92a2a}}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    desc = (m.get("base") or {}).get("description")
    if desc:
        parts.append(f"<p>{html.escape(str(desc))}</p>")
    axes_txt = "; ".join(f"<code>{html.escape(a)}</code> ∈ "
                         f"{{{html.escape(', '.join(_fmt(v) for v in sd.values(a)))}}}" for a in axes)
    seeds = sd.seeds()
    parts.append(f'<p class="meta">sweep folder <code>{html.escape(str(sd.path))}</code> · scenario '
                 f'<code>{html.escape(str(m["scenario"].get("source")))}</code> · {axes_txt} · seeds '
                 f'{html.escape(_seed_text(seeds))} · {len({r["point"] for r in sd.rows})} points, {len(sd.rows)} '
                 f'runs: {ok} finished, {len(failed)} failed' + (f", {len(missing)} not run yet" if missing else "")
                 + f' · {len(m.get("skipped", []))} points skipped · output level {html.escape(m["output"])}</p>')
    if sd.fixed:
        fixed = ", ".join(f"{a}={_fmt(v)}" for a, v in sd.fixed.items())
        parts.append(f'<p class="note">Only the points at {html.escape(fixed)} (--where).</p>')
    figs: list[tuple[str, str, Any]] = []
    info = search_info(sd)
    if info is not None:
        parts.append(_search_section(sd, info, names))
    if _search_tradeoff(sd):
        fx, fy, fc = _objectives(sd, None)
        figs.append((f"Trade-off of the search: {fy} against {fx}",
                     "One marker per point (mean over its own seeds, bars: 95 % interval over them); the axes "
                     "are the search's objectives" + (f", colour its third ({fc})" if fc else "") + "; ringed and "
                     "numbered: Pareto-optimal among the points that meet the constraints (listed in the box with "
                     "n, each point's seeds); hollow red squares: points that broke a constraint (== on any "
                     "seed, <= / >= on the mean), never on the front; gold star: the recommendation "
                     "(recommended.json). ≈ marks a front point the seeds do not tell apart from the one above "
                     "it (paired differences on shared seeds).", lambda: tradeoff(sd, facet=fac)))
    elif DELAY in sd.columns and FALSE_ISO in sd.columns:
        figs.append(("Trade-off: detection delay against false isolations",
                     "One marker per point (mean over seeds, bars: 95 % interval over seeds); colour: "
                     "missed-detection rate; ringed and numbered: Pareto-optimal points (no other point is at least "
                     "as good on delay, false-isolation rate and missed rate, and better on one), listed in the box "
                     "with their parameters and intervals; ≈ marks a front point the seeds do not tell apart from "
                     "the one above it (paired differences on shared seeds). Read it from the lower left: fast "
                     "detection without isolating healthy agents.", lambda: tradeoff(sd, facet=fac)))
    if len(vary) >= 1:
        figs.append(("Parallel coordinates: every parameter and the headline metrics",
                     "One line per point through its parameter values (left) and its metrics' means over seeds "
                     "(shaded, each axis from its minimum to its maximum over the points); colour: the first "
                     "metric. Follow the dark (low) lines to see which parameter values they share.",
                     lambda: parallel(sd)))
    shown = [h for h in (DELAY, FALSE_ISO) if h in sd.columns] or \
        [h for h in HEADLINES if h in sd.columns][:2] or sd.metrics[:2]
    for h in shown:
        if len([a for a in vary if a != fac]) > 1 and fac is None:
            figs.append((f"Every parameter's effect on {h}",
                         "One panel per swept parameter: bold, the mean over seeds and over every other parameter "
                         "(band: 95 % interval over seeds); thin, one line per combination of the other parameters, "
                         "so an effect that the average hides (one setting of another parameter) stays visible.",
                         lambda h=h: sensitivity(sd, None, h)))
        else:
            for a in [a for a in vary if a != fac] or axes[:1]:
                figs.append((f"Sensitivity of {h} to {names[a]}", "Mean over seeds with its 95 % interval band.",
                             lambda a=a, h=h: sensitivity(sd, a, h, facet=fac)))
    hv = [a for a in vary if a != fac]
    if len(hv) >= 2:
        for h in shown:
            ranked = sorted(hv, key=lambda a: -_effect(sd, h, a))
            x, y = ranked[0], ranked[1]
            rest = [a for a in ranked[2:]]
            f = fac or next((a for a in rest if len(sd.values(a)) <= 6), None)
            avg = [names[a] for a in rest if a != f]
            cap = (f"Mean over seeds of {h} on the two parameters that move it most ({names[x]} × {names[y]})"
                   + (f", one panel per {names[f]}" if f else "")
                   + (f"; averaged over {', '.join(avg)} (each cell: mean, below it the range of the averaged "
                      "points' means)" if avg else "; each cell: mean ± half-width of its 95 % interval")
                   + "; hatched: skipped (invalid) points.")
            figs.append((f"Heat map: {h}", cap, lambda h=h, x=x, y=y, f=f: heatmap(sd, x, y, h, facet=f)))
    if figs:
        parts.append("<h2>Figures</h2>")
    for ftitle, caption, build in figs:
        try:
            fig = build()
        except MeshsimError as exc:
            parts.append(f"<h3>{html.escape(ftitle)}</h3><p class=\"note\">not drawn: {html.escape(str(exc))}</p>")
            continue
        parts.append(f"<figure><h3>{html.escape(ftitle)}</h3>{_img(fig)}"
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    # per point: the headline metrics with intervals and the paired difference to the reference
    cols = [h for h in HEADLINES if h in sd.columns][:5] or sd.metrics[:5]
    stats = {h: cells(sd, h, axes) for h in cols}
    front: dict[tuple, dict] = {}
    if (DELAY in sd.columns and FALSE_ISO in sd.columns) or _search_tradeoff(sd):
        front = {tuple(_hashable(p["values"][a]) for a in axes): p for p in tradeoff_points(sd)
                 if p["pareto"] or p.get("recommended") or p.get("violates")}
    pv = point_values(full.rows, axes)
    refs = reference_points(pv, axes, ref)
    by_point: dict[str, dict[str, dict[int, float]]] = {}
    for r in full.ok_rows:
        for h in cols:
            x = _num(r.get(h))
            if x is not None:
                by_point.setdefault(r["point"], {}).setdefault(h, {})[r["seed"]] = x
    keys = sorted({tuple(_hashable(r[a]) for a in axes) for r in sd.rows}, key=lambda k: tuple(map(sort_key, k)))
    point_of = {tuple(_hashable(r[a]) for a in axes): r["point"] for r in sd.rows}
    rows = []
    for k in keys:
        pid = point_of[k]
        n = sum(1 for r in sd.ok_rows if r["point"] == pid)
        row = [html.escape(_fmt(v)) for v in k] + [str(n)]
        rp = refs.get(pid)
        for h in cols:
            c = stats[h].get(k)
            cell = html.escape(_ci(_in_range(c, h)) + (f" (n={c.n})" if c is not None and c.mean is not None
                                                        and c.n < n else ""))
            if rp is not None and rp != pid:
                d = paired(by_point.get(pid, {}).get(h, {}), by_point.get(rp, {}).get(h, {}))
                if d.n:
                    sig = d.n >= 2 and math.isfinite(d.lo) and (d.lo > 0 or d.hi < 0)
                    txt = f"Δ {_g(d.mean)}" + (f" [{_g(d.lo)}, {_g(d.hi)}]" if math.isfinite(d.lo) else "")
                    cell += "<br>" + (f"<b>{html.escape(txt)}</b>" if sig else f"<small>{html.escape(txt)}</small>")
            elif rp == pid:
                cell += "<br><small>reference</small>"
            row.append(cell)
        if front:
            p = front.get(k)
            mark = "" if p is None else (f"{p['rank']}" + ("" if p["distinct"] else " ≈") if p["pareto"] else "")
            if p is not None and p.get("recommended"):
                mark += " ★ recommended"
            if p is not None and p.get("violates"):
                mark += "violates " + ", ".join(p["violates"])
            row.append(html.escape(mark.strip()))
        rows.append([f'<span>{c}</span>' for c in row])
    head = [names[a] for a in axes] + ["seeds"] + cols + (["front"] if front else [])
    ref_txt = _reference_text(ref, axes, names, reference is None)
    parts.append('<h2>Points</h2><div style="overflow-x:auto">' + _table(head, rows, raw=True).replace(
                 "<td>", '<td class="c">') + "</div>"
                 + f'<p class="note">mean [95 % interval] over the finished seeds (Student t, clipped to the '
                 "metric's range: counts and delays to ≥ 0; rates and accuracies: Wilson, in [0, 1]; one seed: "
                 "no interval; n=k: only k seeds have a value, e.g. a delay where something was detected); Δ: "
                 "paired difference to the point's reference on the seeds both ran, with its 95 % "
                 f"interval, <b>red</b> when the interval excludes 0. {html.escape(ref_txt)} front: rank on the "
                 "trade-off's Pareto front (along its x axis: the false-isolation rate, or a search's second "
                 "objective), ★ the search's recommendation, or the constraints a point broke; ≈: not "
                 "distinguishable from the front point ranked just before it; seeds: the point's own finished "
                 "seeds. Every scalar metric per run is in results.csv, per point (with se, lo, hi, "
                 "diff…) in summary.csv.</p>")
    if m.get("skipped"):
        parts.append("<h2>Skipped points</h2>" + _table(
            ["point", "reason"], [[" ".join(f"{names.get(a, a)}={_fmt(v)}" for a, v in s["values"].items()),
                                   s["reason"]] for s in m["skipped"]]))
    if failed:
        parts.append("<h2>Failed runs</h2>" + _table(
            ["point", "seed", "error"], [[" ".join(f"{names[a]}={_fmt(r[a])}" for a in axes), str(r["seed"]),
                                          str(r["error"])] for r in failed]))
    parts.append('<p class="meta">written by meshsim from the sweep folder\'s run summaries.</p></body></html>\n')
    return "\n".join(parts)


def _search_section(sd: SweepData, info: dict[str, Any], names: Mapping[str, str]) -> str:
    """The search's question and its answer: objectives, constraints, the recommendation with its intervals,
    seeds and ``--set`` line (recommended.json), or why there is none."""
    objs = ", ".join(f"{d} <code>{html.escape(m)}</code>" for d, m in info["objectives"])
    cons = ", ".join(f"<code>{html.escape(c.text())}</code>" for c in info["constraints"]) or "none"
    out = [f"<h2>Search</h2><p>Objectives: {objs}; constraints: {cons} (<code>==</code> on every seed of a point, "
           f"<code>&lt;=</code> / <code>&gt;=</code> on its mean). {html.escape(seed_counts(sd))}.</p>"]
    rec = info["recommended"]
    if rec is None:
        return out[0] + '<p class="note">No recommendation: recommended.json is absent (the search has not '\
            "finished) or holds none (no point met the constraints).</p>"
    try:
        return out[0] + _recommendation_html(rec, names)
    except (TypeError, ValueError, AttributeError, KeyError):  # a hand-edited or damaged file: say so
        return out[0] + '<p class="note">recommended.json could not be read as meshsim writes it.</p>'


def _recommendation_html(rec: dict[str, Any], names: Mapping[str, str]) -> str:
    out: list[str] = []
    vals = " ".join(f"{names.get(p, p)}={_fmt(v)}" for p, v in (rec.get("values") or {}).items())
    rows = []
    for m, iv in (rec.get("objectives") or {}).items():
        ci = f" [{_g(iv.get('lo'))}, {_g(iv.get('hi'))}]" if iv.get("lo") is not None else ""
        rows.append([str(m), f"{_g(iv.get('mean'))}{ci}", str(iv.get("n"))])
    for c, v in (rec.get("constraints") or {}).items():
        rows.append([f"constraint {c}", f"mean {_g(v.get('mean'))}, worst seed {_g(v.get('worst_seed'))}",
                     str(v.get("seeds"))])
    clipped = rec.get("clipped") or {}
    note = ("Intervals of " + ", ".join(f"{m} to [{_g(b[0])}, {_g(b[1]) if b[1] is not None else '∞'}]"
                                        for m, b in clipped.items()) + " are clipped to the metric's range. "
            if clipped else "")
    e = {k: html.escape(str(rec.get(k))) for k in ("rank", "trial", "seeds")}
    out.append(f"<p><b>Recommended</b> (front point {e['rank']}, trial {e['trial']}, "
               f"{e['seeds']} seeds): {html.escape(vals)}</p><pre>{html.escape(str(rec.get('set', '')))}</pre>"
               + _table(["", "mean [95 % interval]", "seeds"], rows)
               + f'<p class="note">{html.escape(note)}Rule: {html.escape(str(rec.get("rule", "")))}.</p>')
    return "".join(out)


def _reference_text(ref: Mapping[str, Any], axes: Sequence[str], names: Mapping[str, str], default: bool) -> str:
    if not ref:
        return ("No reference point: the base scenario's value of no swept parameter is on the grid "
                "(name one with --reference PATH=VALUE).") if default else "No reference point."
    own = [names[a] for a in axes if a not in ref]
    txt = "Reference: " + ", ".join(f"{names[a]}={_fmt(v)}" for a, v in ref.items())
    txt += " (the scenario's own values)" if default else " (--reference)"
    if own:
        txt += f"; {', '.join(own)}: each point's own value"
    return txt + "."


def _seed_text(seeds: list[int]) -> str:
    if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(map(str, seeds))


def write_sweep_report(path: Path | str, out: Optional[Path | str] = None, where: Any = None,
                       facet: Optional[str] = None, reference: Any = None) -> Path:
    """Write ``SWEEP_DIR/report.html`` (figures embedded); returns its path."""
    from ..io.records import write_atomic

    text = build_sweep_report(path, where=where, facet=facet, reference=reference)
    p = Path(out) if out is not None else Path(path) / "report.html"
    write_atomic(p, text)
    stamp_figure(path, p, {"where": _plain(where), "facet": facet, "reference": _plain(reference)}, what="report")
    return p
