"""Accuracy, tokens and model calls per phase (MeshHeal Tab. 2-3) as bars."""
from __future__ import annotations

from typing import Any

from .canvas import _new_figure
from .folder import _as_runset, _summary_agents
from .stats import degraded_intervals, phase_stats, _fmt_num


def phase_bars(run: Any, fig=None):
    """Accuracy, tokens (thousands) and model calls per task for each phase:
    mean over seeds with sample-std error bars (Tab. 2-3). Phases during
    which some agent was degraded are drawn in pink."""
    rs = _as_runset(run)
    rows = [r for r in phase_stats(rs) if r["phase"] != "all"] or phase_stats(rs)
    deg = degraded_intervals(rs.first) if rs.first.has("reviews.jsonl") or _summary_agents(rs.first.summary) else {}
    if fig is None:
        fig = _new_figure(3.6)
    axes = fig.subplots(1, 3)
    names = [r["phase"] for r in rows]
    bounds = {name: (lo, hi) for name, lo, hi in rs.first.phases()}

    def degraded_phase(name: str) -> bool:
        if name not in bounds:
            return False
        lo, hi = bounds[name]
        return any(b <= hi and r > lo for spans in deg.values() for b, r in spans)

    colors = ["#f783ac" if degraded_phase(nm) else "#74c0fc" for nm in names]
    specs = [("accuracy", "accuracy", 1.0, 3), ("tokens", "tokens per task (k)", 1e-3, 1),
             ("calls", "model calls per task", 1.0, 1)]
    for ax, (key, label, scale, digits) in zip(axes, specs):
        means = [(r[key].mean or 0.0) * scale for r in rows]
        errs = [(r[key].std or 0.0) * scale for r in rows]
        xs = list(range(len(rows)))
        # ± std, kept in the metric's range (an accuracy in [0, 1], a count >= 0): a bar past it reads as a value
        lo_err = [min(e, m) for m, e in zip(means, errs)]
        errs = [min(e, 1.0 - m) if key == "accuracy" else e for m, e in zip(means, errs)]
        ax.bar(xs, means, yerr=[lo_err, errs] if rs.multi else None, color=colors, capsize=3, width=0.7,
               error_kw={"lw": 1})
        for x, m, e in zip(xs, means, errs):
            ax.annotate(_fmt_num(m, digits), (x, m + (e if rs.multi else 0.0)), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(xs, names, rotation=25 if max(map(len, names)) > 8 else 0, ha="right"
                      if max(map(len, names)) > 8 else "center", fontsize=8)
        ax.set_title(label, fontsize=9)
        top = max((m + e for m, e in zip(means, errs)), default=1.0)
        ax.set_ylim(0, (1.05 if key == "accuracy" else 1.18) * max(top, 1e-9) if key != "accuracy"
                    else min(1.1, max(top * 1.12, 0.1)))
    seeds = f"{len(rs.runs)} seeds, mean ± std" if rs.multi else f"seed {rs.first.seed}"
    fig.suptitle(f"{rs.first.scenario.get('name', '')}: per phase ({seeds}; pink: some agent degraded)",
                 fontsize=10)
    return fig
