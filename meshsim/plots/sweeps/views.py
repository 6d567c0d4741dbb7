"""Heat map, sensitivity curves and parallel coordinates of a sweep folder."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from ...core.errors import InputError
from ..canvas import _new_figure
from .data import (DELAY, FALSE_ISO, HEADLINES, MISSED, SweepData, _check_rows, _default_metric, _facets, _fmt,
                   _g, _grid, _hashable, _in_range, _label, _metric_list, _positions, _slice_note, _unfinished, cells,
                   open_sweep)
from .tradeoff import tradeoff_points


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
        from ...sweep.slices import same_value

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


def _sens_panel(sd: SweepData, x: str, metric: str, by: Optional[str], ax, compact: bool = False,
                legend: bool = True):
    from matplotlib import colormaps

    names = sd.names()
    xv = sd.values(x)
    pos, numeric = _positions(xv)
    keys = (x, by) if by else (x,)
    cs = cells(sd, metric, keys)
    hidden = [a for a in sd.varying() if a not in keys]
    groups = sd.values(by) if by else [None]
    cmap = colormaps["viridis"]
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
            # the Points table's interval of each point (clipped to the metric's own range only), not
            # bounded by other points' seeds; averaged over other parameters: the average's interval
            band = [_in_range(c, metric) for _, c in pts]
            what = ("95 % interval over seeds of the average over the other parameters, not any one point's"
                    if hidden else "95 % interval over the point's seeds (as in the Points table)")
            ax.fill_between(xs, [c.lo for c in band], [c.hi for c in band], color=color, alpha=0.18, lw=0,
                            zorder=2, label=None if by or gi else "band: " + what)
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
    if legend and (by or not compact):
        ax.legend(fontsize=7, loc="best")


def _figure_legend(fig, ax) -> None:
    """``ax``'s legend below the panels, outside them: inside, "best" still sits on the band or the
    curve when the points fill the panel (a small sweep). The panels share their lines' meaning."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    handles, labels = ax.get_legend_handles_labels()
    if handles and not isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
        ax.legend(fontsize=7, loc="best")  # a caller's figure: only constrained layout makes room below
    elif handles:
        # as many columns as fit the figure's width (a character of 7.5 pt ~ 0.06 in, a handle ~ 0.6 in)
        widths = sorted((0.06 * len(t) + 0.6 for t in labels), reverse=True)
        ncol = 1
        while ncol < min(len(widths), 6) and sum(widths[:ncol + 1]) <= fig.get_figwidth() - 0.3:
            ncol += 1
        fig.legend(handles, labels, loc="outside lower center", fontsize=7.5, frameon=False, ncol=ncol)


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
            _sens_panel(sd, xa, metric, by, a, compact=True, legend=False)
        axs[0].set_ylabel(_label(metric), fontsize=8.5)
        _figure_legend(fig, axs[0])
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
    own = ax is None or fac is not None  # a figure of ours: the legend goes below the panels
    for (v, part), a in zip(panels, axs):
        _sens_panel(part, x, metric, by, a, compact=fac is not None, legend=not own)
        if fac is not None:
            a.set_title(f"{names[fac]} = {_fmt(v)}", fontsize=9)
    if own and (by or fac is None):
        _figure_legend(fig, axs[0])
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
