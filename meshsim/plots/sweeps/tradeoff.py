"""The trade-off figure: two objectives against each other, one marker per point with its 95 %
intervals, the Pareto front ringed and numbered (docs/sweeps.md#figures-and-the-report)."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from ...core.errors import InputError
from ..canvas import _new_figure
from .data import (CONF, DELAY, FALSE_ISO, SweepData, _check_rows, _clip, _compact, _facets, _fmt, _g, _grid,
                   _hashable, _label, _objectives, _observed, _senses, _slice_note, _unfinished, cells, open_sweep,
                   pareto_front, search_info, seed_counts)


def tradeoff_points(sd: SweepData, metrics: Optional[str | Sequence[str]] = None) -> list[dict[str, Any]]:
    """Per point: the objectives' mean over seeds with their 95 % interval
    (``fi``, ``delay`` and ``missed`` name x, y and the colour metric: by default
    false-isolation rate, detection delay and missed rate), whether it is
    Pareto-optimal (lower is better on every objective), and for front points
    ``rank`` (by x) and ``distinct`` (False when no objective's paired difference
    to the previous front point excludes 0 on shared seeds: the two are not told
    apart by these seeds)."""
    from ...sweep.stats import distinguishable

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
    metric_of = {"fi": fx, "delay": fy}
    # the view: the means and their bars as far as the values observed across the sweep reach (a bar
    # of two seeds can span most of [0, 1]); the bars themselves are the Points table's intervals,
    # cut only at the axes' frame, where an open arrowhead says that they go on
    limits = limits or _limits(pts, sum(1 for p in full if p["pareto"]), bounds)
    if limits:
        ax.set_xlim(*limits[0])
        ax.set_ylim(*limits[1])
    clipped = False

    def bar(p, k, lim):  # the table's interval, cut at the axes' limits ``lim``; None without an interval
        lo, hi = _table_interval(p, k, metric_of[k])
        if not math.isfinite(lo):
            return None
        a, b = (lim if lim else (-math.inf, math.inf))
        return (max(0.0, p[k] - max(lo, a)), max(0.0, min(hi, b) - p[k])), (lo < a, hi > b)

    bad = [p for p in full if p["violates"]]
    full = [p for p in full if not p["violates"]]
    for p in full:
        bx, by_ = bar(p, "fi", limits[0] if limits else None), bar(p, "delay", limits[1] if limits else None)
        (xl, xh), xcut = bx or ((0.0, 0.0), (False, False))
        (yl, yh), ycut = by_ or ((0.0, 0.0), (False, False))
        color = "#343a40" if p["pareto"] else "#ced4da"
        bars = ax.errorbar(p["fi"], p["delay"], xerr=[[xl], [xh]], yerr=[[yl], [yh]], fmt="none",
                           ecolor=color, elinewidth=0.9 if p["pareto"] else 0.7,
                           capsize=2.5 if p["pareto"] else 1.5, capthick=0.8, alpha=0.7 if p["pareto"] else 1.0,
                           zorder=1)
        for art in bars.lines[1] + bars.lines[2]:  # caps and bars end at the axes' frame
            art.set_clip_on(True)
        # caps in matplotlib's order: left, right, lower, upper; a cut end loses its cap for an arrowhead
        ends = [(p["fi"] - xl, p["delay"], "<", xcut[0]), (p["fi"] + xh, p["delay"], ">", xcut[1]),
                (p["fi"], p["delay"] - yl, "v", ycut[0]), (p["fi"], p["delay"] + yh, "^", ycut[1])]
        caps = [c for c in bars.lines[1]]
        for i, (ex, ey, marker, cut) in enumerate(ends):
            if cut:
                clipped = True
                if i < len(caps):
                    caps[i].set_visible(False)
                ax.plot([ex], [ey], marker=marker, ms=4, mfc="none", mec=color, mew=0.8, ls="none",
                        zorder=1, clip_on=False, gid="interval-cut")
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
        cis = {p["rank"]: _ci_short(p, "fi", fx) for p in front}
        cw = max(len(t) for t in cis.values())
        for p in front:
            mark = " " if p["distinct"] else "≈"
            lines.append(f"{mark}{p['rank']:>2} {pars[p['rank']]:<{width}}  {cis[p['rank']]:<{cw}}  "
                         f"{_ci_short(p, 'delay', fy)}  n={p['n']}" + ("  *" if p.get("recommended")
                                                                                    else ""))
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
    return pts, sc, (full, front, vary), clipped


def _limits(pts: list[dict], box_lines: int, bounds: Optional[dict] = None) -> Optional[tuple]:
    """The means and their interval bars as far as the observed values reach (``bounds``) set the
    view, with room above for the front's box (a bar that runs further is cut at the frame)."""
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


def _table_interval(p: dict, k: str, metric: Optional[str]) -> tuple[float, float]:
    """A point's interval of objective ``k`` as the Points table and summary.csv give it: clipped
    only to the metric's own range (:func:`meshsim.sweep.stats.metric_bounds`)."""
    from ...sweep.stats import metric_bounds

    lo, hi = p[k + "_lo"], p[k + "_hi"]
    if not math.isfinite(lo):
        return lo, hi
    a, b = metric_bounds(metric) if metric else (-math.inf, math.inf)
    return min(max(lo, a), b), max(min(hi, b), a)


def _ci_short(p: dict, k: str, metric: Optional[str] = None) -> str:
    """``mean [lo, hi]`` as the Points table writes it (seeds that agree: ``(n=2, all equal)``)."""
    lo, hi = _table_interval(p, k, metric)
    if not math.isfinite(lo):
        return _g(p[k])
    if lo == hi == p[k] and p.get(k + "_seeds") and len(p[k + "_seeds"]) > 1:
        return f"{_g(p[k])} (n={len(p[k + '_seeds'])}, all equal)"
    return f"{_g(p[k])} [{_g(lo)}, {_g(hi)}]"


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
    cut = False
    for (v, part), a in zip(panels, axs):
        _pts, s, lab, c = _tradeoff_panel(part, a, metrics, cnorm, show_box=True, label_all=label_all, limits=limits)
        cut = cut or c
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
    title = (f"{sd.name}{_unfinished(sd)}: {seed_counts(sd)}; bars: 95 % interval over seeds, as in the "
             f"Points table" + (" (clipped to the axes: open arrowheads)" if cut else "")
             + f"\nringed, numbered: Pareto-optimal on {objs}{how}")
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
