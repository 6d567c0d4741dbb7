"""Figures and the HTML report of a sweep folder (``meshsim sweep``), drawn
from its tidy results (the runs' summaries) only.

- :func:`tradeoff`: mean detection delay against false-isolation rate, one
  marker per point, coloured by the missed-detection rate, the Pareto front
  marked (no other point is at least as good on delay, false isolations and
  missed detections and better on one).
- :func:`heatmap`: a metric's mean over seeds on two swept parameters.
- :func:`sensitivity`: a metric against one parameter, mean with a ± sd band
  and every seed's value, one line per value of another parameter (``by``).
- :func:`write_sweep_report`: ``SWEEP_DIR/report.html`` with all of them.
"""
from __future__ import annotations

import difflib
import html
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from ..errors import InputError
from .canvas import _new_figure, _png_bytes, save_figure

__all__ = ["SweepData", "open_sweep", "tradeoff", "heatmap", "sensitivity", "pareto_front", "point_means",
           "render_sweep", "write_sweep_report", "build_sweep_report", "SWEEP_KINDS", "DELAY", "FALSE_ISO", "MISSED"]

SWEEP_KINDS = ("tradeoff", "heatmap", "sensitivity")
DELAY, FALSE_ISO, MISSED = "detection.delay_mean", "detection.false_isolation_rate", "detection.missed_rate"
#: what the report shows per point when the sweep has it, in this order
HEADLINES = (DELAY, "detection.delay_p90", FALSE_ISO, MISSED, "detection.closure_rate",
             "detection.reintegration_delay_mean", "detection.watched_not_isolated", "accuracy.overall",
             "audit.initial_score_gap", "faa", "bfti", "ra", "h_majority", "routing.max_convergence_time")
LABELS = {DELAY: "mean detection delay (tasks)", FALSE_ISO: "false-isolation rate (isolated while healthy)",
          MISSED: "missed-detection rate", "detection.delay_p90": "p90 detection delay (tasks)",
          "detection.closure_rate": "closure rate", "detection.reintegration_delay_mean": "mean reintegration delay",
          "detection.watched_not_isolated": "healthy watched-not-isolated episodes",
          "accuracy.overall": "accuracy", "audit.initial_score_gap": "review score gap (healthy − degraded)"}


@dataclass
class SweepData:
    path: Path
    columns: list[str]
    rows: list[dict[str, Any]]
    manifest: dict[str, Any]

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
        why = "ambiguous" if len(hits) > 1 else "not a column of the sweep's results"
        raise InputError(f"{why}; e.g. {', '.join(near)}", field=what, value=name)


def _hashable(v: Any) -> Any:
    return v if not isinstance(v, (dict, list)) else str(v)


def open_sweep(path: Path | str | SweepData) -> SweepData:
    if isinstance(path, SweepData):
        return path
    from ..sweep.results import read_table

    cols, rows, m = read_table(path, "runs")
    return SweepData(Path(path), cols, rows, m)


def _num(v: Any) -> Optional[float]:
    if v is None or isinstance(v, str):
        return None
    return float(v)


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


def _label(metric: str) -> str:
    return LABELS.get(metric, metric)


def _names(sd: SweepData) -> dict[str, str]:
    from ..sweep.core import short_names

    return short_names(sd.axes)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _default_metric(sd: SweepData) -> str:
    for m in HEADLINES:
        if m in sd.columns:
            return m
    if not sd.metrics:
        raise InputError("the sweep has no finished run with metrics yet", file=str(sd.path))
    return sd.metrics[0]


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


def tradeoff_points(sd: SweepData) -> list[dict[str, Any]]:
    """Per point: mean over seeds of detection delay, false-isolation rate and
    missed rate (sd and n too), its values and whether it is Pareto-optimal."""
    missing = [m for m in (DELAY, FALSE_ISO, MISSED) if m not in sd.columns]
    if missing:
        raise InputError("--kind tradeoff needs the MeshHeal detection metrics in every summary "
                         f"(missing: {', '.join(missing)})", file=str(sd.path))
    axes = sd.axes
    d, f, m = (point_means(sd, k, axes) for k in (DELAY, FALSE_ISO, MISSED))
    pts = []
    for key in d:
        pts.append({"values": dict(zip(axes, key)), "delay": d[key]["mean"], "delay_sd": d[key]["sd"],
                    "fi": f[key]["mean"], "fi_sd": f[key]["sd"], "missed": m[key]["mean"] or 0.0,
                    "n": max(d[key]["n"], f[key]["n"])})
    full = [p for p in pts if p["delay"] is not None and p["fi"] is not None]
    for i in pareto_front(full, ("fi", "delay", "missed")):
        full[i]["pareto"] = True
    for p in pts:
        p.setdefault("pareto", False)
    return pts


def tradeoff(run: Any, ax=None):
    """Mean detection delay against false-isolation rate per point (see the module doc)."""
    sd = open_sweep(run)
    pts = tradeoff_points(sd)
    names = _names(sd)
    if ax is None:
        fig = _new_figure(5.8)
        ax = fig.add_subplot(1, 1, 1)
    fig = ax.figure
    full = [p for p in pts if p["delay"] is not None and p["fi"] is not None]
    never = [p for p in pts if p["delay"] is None and p["fi"] is not None]
    for p in full:
        ax.errorbar(p["fi"], p["delay"], xerr=p["fi_sd"], yerr=p["delay_sd"], fmt="none", ecolor="#ced4da",
                    elinewidth=0.8, zorder=1)
    worst = max((p["missed"] for p in pts), default=0.0)
    style = dict(s=[80 if p["pareto"] else 30 for p in full], linewidths=1.3, zorder=3,
                 edgecolors=["black" if p["pareto"] else "none" for p in full])
    if worst > 0:
        sc = ax.scatter([p["fi"] for p in full], [p["delay"] for p in full], c=[p["missed"] for p in full],
                        cmap="plasma", vmin=0.0, vmax=worst, **style)
        fig.colorbar(sc, ax=ax, pad=0.01).set_label("missed-detection rate (mean over seeds)")
    else:
        ax.scatter([p["fi"] for p in full], [p["delay"] for p in full], color="#1c7ed6", **style)
    front = sorted((p for p in full if p["pareto"]), key=lambda p: (p["fi"], p["delay"]))
    lines = []
    if front:
        xs, ys = [], []
        best = float("inf")
        for p in front:  # the staircase of the front on the two drawn objectives
            if p["delay"] < best:
                xs.append(p["fi"])
                ys.append(p["delay"])
                best = p["delay"]
        ax.step(xs, ys, where="post", color="black", lw=1.0, ls="--", zorder=2, label="Pareto front")
        for i, p in enumerate(front, 1):  # numbers on the plot, the values in a box: labels never collide
            ax.annotate(str(i), (p["fi"], p["delay"]), textcoords="offset points", xytext=(5, 3), fontsize=8,
                        fontweight="bold", color="#212529", zorder=4)
            lines.append(f"{i}: " + " ".join(f"{names[a]}={_fmt(v)}" for a, v in p["values"].items())
                         + f"  ({p['fi']:.3f}, {p['delay']:.0f})")
    if never:
        top = max([p["delay"] for p in full] + [1.0]) * 1.08
        ax.scatter([p["fi"] for p in never], [top] * len(never), marker="x", color="#c92a2a", zorder=3,
                   label="never detected (plotted at the top)")
    box = "Pareto-optimal (false-isolation rate, delay):\n" + "\n".join(lines) if lines else ""
    if worst == 0:
        box += ("\n" if box else "") + "no missed detections in any run"
    if box:
        ax.text(0.985, 0.97, box, transform=ax.transAxes, ha="right", va="top", multialignment="left",
                fontsize=7.5, family="monospace",
                bbox=dict(boxstyle="round,pad=0.4", facecolor="white", edgecolor="#ced4da", alpha=0.92), zorder=5)
    fmax = max([p["fi"] + p["fi_sd"] for p in pts if p["fi"] is not None] + [0.05])
    ax.set_xlim(-0.03 * fmax, fmax * 1.05)
    ax.set_xlabel("false-isolation rate: agents isolated while healthy / agents ever healthy (mean over seeds)")
    ax.set_ylabel("detection delay c−b, mean over degraded agents (tasks; mean over seeds)")
    seeds = sd.seeds()
    ax.set_title(f"{sd.name}: {len(pts)} points × {len(seeds)} seeds; bars: sd over seeds; ringed, numbered: "
                 "Pareto-optimal (delay, false isolations, missed)", fontsize=9)
    ax.grid(alpha=0.3)
    if front or never:
        ax.legend(loc="lower left", fontsize=8)
    return fig


# ------------------------------------------------------------------------------------- heat map


def heatmap(run: Any, x: Optional[str] = None, y: Optional[str] = None, metric: Optional[str] = None, ax=None):
    """The mean over seeds of ``metric`` on the ``x`` × ``y`` grid (skipped
    points hatched; other axes averaged)."""
    sd = open_sweep(run)
    axes = sd.axes
    if len(axes) < 2 and (x is None or y is None):
        raise InputError("--kind heatmap needs two swept parameters (--x and --y); this sweep has "
                         f"{len(axes)}: use --kind sensitivity", file=str(sd.path))
    x = sd.column(x or axes[0], "--x", axes)
    y = sd.column(y or [a for a in axes if a != x][0], "--y", axes)
    if x == y:
        raise InputError("--x and --y must differ", field="--y", value=y)
    metric = sd.column(metric or _default_metric(sd), "--metric", sd.metrics)
    means = point_means(sd, metric, (x, y))
    xv, yv = sd.values(x), sd.values(y)
    import numpy as np

    grid = np.full((len(yv), len(xv)), np.nan)
    for (a, b), st in means.items():
        if st["mean"] is not None:
            grid[yv.index(b), xv.index(a)] = st["mean"]
    if ax is None:
        fig = _new_figure(max(3.2, 0.42 * len(yv) + 1.8))
        ax = fig.add_subplot(1, 1, 1)
    fig = ax.figure
    im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
    ax.set_facecolor("#f1f3f5")
    skipped = {(_hashable(s["values"].get(x)), _hashable(s["values"].get(y)))
               for s in sd.manifest.get("skipped", [])}
    from matplotlib.patches import Rectangle

    for j, b in enumerate(yv):
        for i, a in enumerate(xv):
            v = grid[j, i]
            if np.isnan(v):
                if (a, b) in skipped or (a, b) not in means:
                    ax.add_patch(Rectangle((i - 0.5, j - 0.5), 1, 1, fill=False, hatch="///", edgecolor="#adb5bd",
                                           lw=0))
                    ax.text(i, j, "skipped" if (a, b) in skipped else "", ha="center", va="center", fontsize=6.5,
                            color="#495057")
                continue
            if len(xv) * len(yv) <= 240:
                lo, hi = np.nanmin(grid), np.nanmax(grid)
                light = hi > lo and (v - lo) / (hi - lo) < 0.55
                ax.text(i, j, f"{v:.3g}", ha="center", va="center", fontsize=7,
                        color="white" if light else "black")
    names = _names(sd)
    ax.set_xticks(range(len(xv)), [_fmt(v) for v in xv], fontsize=8)
    ax.set_yticks(range(len(yv)), [_fmt(v) for v in yv], fontsize=8)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    cb = fig.colorbar(im, ax=ax, pad=0.01)
    cb.set_label(metric, fontsize=8)
    others = [names[a] for a in axes if a not in (x, y)]
    ax.set_title(f"{sd.name}: {metric}, mean over seeds" + (f" (and over {', '.join(others)})" if others else ""),
                 fontsize=9)
    return fig


# ------------------------------------------------------------------------------------- sensitivity


def sensitivity(run: Any, x: Optional[str] = None, metric: Optional[str] = None, by: Optional[str] = None,
                ax=None):
    """``metric`` against swept parameter ``x``: mean over seeds with a ± sd band
    and every seed's value; one line per value of ``by`` (default: the one
    other swept parameter when it has at most 8 values)."""
    sd = open_sweep(run)
    axes = sd.axes
    x = sd.column(x or axes[0], "--x", axes)
    metric = sd.column(metric or _default_metric(sd), "--metric", sd.metrics)
    others = [a for a in axes if a != x]
    if by is not None:
        by = sd.column(by, "--by", others)
    elif len(others) == 1 and len(sd.values(others[0])) <= 8:
        by = others[0]
    keys = (x, by) if by else (x,)
    means = point_means(sd, metric, keys)
    xv = sd.values(x)
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in xv)
    pos = {v: (float(v) if numeric else i) for i, v in enumerate(xv)}
    if ax is None:
        fig = _new_figure(4.2)
        ax = fig.add_subplot(1, 1, 1)
    fig = ax.figure
    groups = sd.values(by) if by else [None]
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    names = _names(sd)
    for gi, g in enumerate(groups):
        color = cmap(gi / max(1, len(groups) - 1) * 0.9) if by else "#1c7ed6"
        pts = [(pos[v], means[(v, g) if by else (v,)]) for v in xv if ((v, g) if by else (v,)) in means]
        pts = [(p, st) for p, st in pts if st["mean"] is not None]
        if not pts:
            continue
        xs = [p for p, _ in pts]
        ms = [st["mean"] for _, st in pts]
        sds = [st["sd"] for _, st in pts]
        ax.fill_between(xs, [m - s for m, s in zip(ms, sds)], [m + s for m, s in zip(ms, sds)], color=color,
                        alpha=0.15, lw=0)
        ax.plot(xs, ms, marker="o", color=color, lw=1.5, ms=4,
                label=f"{names[by]}={_fmt(g)}" if by else "mean over seeds")
        for p, st in pts:
            ax.scatter([p] * len(st["xs"]), st["xs"], s=7, color=color, alpha=0.45, lw=0)
    if not numeric:
        ax.set_xticks(range(len(xv)), [_fmt(v) for v in xv])
    ax.set_xlabel(x)
    ax.set_ylabel(_label(metric))
    rest = [names[a] for a in others if a != by]
    ax.set_title(f"{sd.name}: {metric} against {names[x]}; band: ± sd over seeds, dots: seeds"
                 + (f" (averaged over {', '.join(rest)})" if rest else ""), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return fig


# ------------------------------------------------------------------------------------- CLI


def render_sweep(path: Path | str, kind: Optional[str] = None, x: Optional[str] = None, y: Optional[str] = None,
                 metric: Optional[str] = None, by: Optional[str] = None, out: Optional[Path | str] = None) -> Path:
    """Draw ``kind`` of a sweep folder; default file ``SWEEP_DIR/<kind>.png``."""
    sd = open_sweep(path)
    kind = kind or ("tradeoff" if DELAY in sd.columns else "heatmap" if len(sd.axes) > 1 else "sensitivity")
    if kind not in SWEEP_KINDS:
        raise InputError(f"a sweep folder takes --kind {', '.join(SWEEP_KINDS)}", field="--kind", value=kind)
    if kind != "heatmap" and y is not None:
        raise InputError("--y goes with --kind heatmap", field="--y", value=y)
    if kind == "tradeoff":
        if x or metric or by:
            raise InputError("--kind tradeoff draws fixed metrics (no --x, --metric, --by)", field="--kind",
                             value=kind)
        fig = tradeoff(sd)
    elif kind == "heatmap":
        if by is not None:
            raise InputError("--by goes with --kind sensitivity", field="--by", value=by)
        fig = heatmap(sd, x, y, metric)
    else:
        fig = sensitivity(sd, x, metric, by)
    return save_figure(fig, Path(out) if out is not None else sd.path / f"{kind}.png")


# ------------------------------------------------------------------------------------- report


def _img(fig) -> str:
    import base64

    return f'<img alt="figure" src="data:image/png;base64,{base64.b64encode(_png_bytes(fig)).decode()}">'


def _table(head: list[str], rows: list[list[str]]) -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    b = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>"


def _ms(st: Optional[dict[str, Any]]) -> str:
    if not st or st["mean"] is None:
        return "–"
    if st["n"] <= 1:
        return f"{st['mean']:.3g}"
    return f"{st['mean']:.3g} ± {st['sd']:.2g}"


def build_sweep_report(path: Path | str) -> str:
    from .report import _CSS

    sd = open_sweep(path)
    names = _names(sd)
    axes = sd.axes
    m = sd.manifest
    ok = len(sd.ok_rows)
    failed = [r for r in sd.rows if r["status"] == "failed"]
    missing = [r for r in sd.rows if r["status"] == "missing"]
    parts = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(sd.name)} sweep — meshsim"
             f"</title><style>{_CSS}</style></head><body>", f"<h1>{html.escape(sd.name)}: sweep</h1>"]
    desc = (m.get("base") or {}).get("description")
    if desc:
        parts.append(f"<p>{html.escape(str(desc))}</p>")
    axes_txt = "; ".join(f"<code>{html.escape(a)}</code> ∈ {{{html.escape(', '.join(_fmt(v) for v in sd.values(a)))}}}"
                         for a in axes)
    seeds = sd.seeds()
    parts.append(f'<p class="meta">sweep folder <code>{html.escape(str(sd.path))}</code> · scenario '
                 f'<code>{html.escape(str(m["scenario"].get("source")))}</code> · {axes_txt} · seeds '
                 f'{html.escape(_seed_text(seeds))} · {len(m["points"])} points, {len(sd.rows)} runs: {ok} finished, '
                 f'{len(failed)} failed' + (f", {len(missing)} not run yet" if missing else "")
                 + f' · {len(m.get("skipped", []))} points skipped · output level {html.escape(m["output"])}</p>')
    figs: list[tuple[str, str, Any]] = []
    if DELAY in sd.columns and FALSE_ISO in sd.columns and MISSED in sd.columns:
        figs.append(("Trade-off: detection delay against false isolations",
                     "One marker per point (mean over seeds, bars: sd); colour: missed-detection rate; ringed and "
                     "labelled: Pareto-optimal points (no other point is at least as good on delay, false-isolation "
                     "rate and missed rate, and better on one). Read it from the lower left: fast detection without "
                     "isolating healthy agents.", lambda: tradeoff(sd)))
    shown = [h for h in (DELAY, FALSE_ISO) if h in sd.columns] or \
        [h for h in HEADLINES if h in sd.columns][:2] or sd.metrics[:2]
    if len(axes) >= 2:
        for h in shown:
            figs.append((f"Heat map: {h}", f"Mean over seeds of {h} on {names[axes[0]]} × {names[axes[1]]}; "
                         "hatched: skipped (invalid) points.", lambda h=h: heatmap(sd, axes[0], axes[1], h)))
    for a in axes[:3]:
        for h in shown:
            figs.append((f"Sensitivity of {h} to {names[a]}", "Mean over seeds with a ± sd band and every seed's "
                         "value.", lambda a=a, h=h: sensitivity(sd, a, h)))
    if figs:
        parts.append("<h2>Figures</h2>")
    from ..errors import MeshsimError

    for title, caption, build in figs:
        try:
            fig = build()
        except MeshsimError as exc:
            parts.append(f"<h3>{html.escape(title)}</h3><p class=\"note\">not drawn: {html.escape(str(exc))}</p>")
            continue
        parts.append(f"<figure><h3>{html.escape(title)}</h3>{_img(fig)}"
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    # per point: the headline metrics
    cols = [h for h in HEADLINES if h in sd.columns] or sd.metrics[:6]
    stats = {h: point_means(sd, h, axes) for h in cols}
    front = set()
    if DELAY in sd.columns and FALSE_ISO in sd.columns and MISSED in sd.columns:
        front = {tuple(_hashable(p["values"][a]) for a in axes) for p in tradeoff_points(sd) if p["pareto"]}
    from ..sweep.results import sort_key

    keys = sorted({tuple(_hashable(r[a]) for a in axes) for r in sd.rows}, key=lambda k: tuple(map(sort_key, k)))
    rows = []
    for k in keys:
        n = sum(1 for r in sd.ok_rows if tuple(_hashable(r[a]) for a in axes) == k)
        rows.append([_fmt(v) for v in k] + [str(n)] + [_ms(stats[h].get(k)) for h in cols]
                    + (["●" if k in front else ""] if front else []))
    parts.append("<h2>Points</h2>" + _table([names[a] for a in axes] + ["seeds"] + cols
                                            + (["Pareto"] if front else []), rows)
                 + '<p class="note">mean ± sample sd over the finished seeds; every scalar metric per run is in '
                 "results.csv, per point in summary.csv.</p>")
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


def _seed_text(seeds: list[int]) -> str:
    if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(map(str, seeds))


def write_sweep_report(path: Path | str, out: Optional[Path | str] = None) -> Path:
    """Write ``SWEEP_DIR/report.html`` (figures embedded); returns its path."""
    from ..records import write_atomic

    text = build_sweep_report(path)
    p = Path(out) if out is not None else Path(path) / "report.html"
    write_atomic(p, text)
    return p

