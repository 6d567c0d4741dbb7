"""Figures of the detector's closed-form operating characteristics (``meshsim detector --plot``).

* ``oc`` - false-isolation probability per healthy agent per stream against the mean detection
  delay (in the agent's own outputs) as one threshold varies, each point labelled with its value;
  the default setting ringed, simulated values (a run folder) as crosses.
* ``runlength`` - the two run lengths: P(a healthy agent is still not isolated) over its outputs
  (in-control) and the distribution of the detection delay after degradation (out-of-control).

Both take ``ax=None`` (a new figure) or axes to draw into; matplotlib is imported lazily.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from ..analysis.report import fmt_p
from .canvas import CURVE_COLOR, STATE_COLORS, _new_figure

__all__ = ["oc_curve", "runlength", "oc_figure", "runlength_figure"]


def _fmt(v: float) -> str:
    return f"{v:g}" if abs(v - round(v)) > 1e-9 else f"{int(round(v))}"


def oc_curve(ocs: Sequence[Any], name: str, values: Sequence[float], ax=None, default: Optional[float] = None,
             simulated: Optional[dict[str, float]] = None, title: Optional[str] = None):
    """P(false isolation) vs mean delay across ``values`` of parameter ``name``."""
    if ax is None:
        ax = _new_figure(5.2).add_subplot(1, 1, 1)
    x = np.array([o.delay_mean for o in ocs], dtype=float)
    y = np.array([o.p_false for o in ocs], dtype=float)
    ax.plot(x, y, "-", color=CURVE_COLOR, lw=1.2, zorder=1)
    ax.scatter(x, y, s=28, color=STATE_COLORS["isolated"], zorder=2, label="closed form")
    for xi, yi, v in zip(x, y, values):
        ax.annotate(f"{name} {_fmt(v)}", (xi, yi), textcoords="offset points", xytext=(6, 4), fontsize=8,
                    color="#495057")
    if default is not None:
        k = int(np.argmin([abs(v - default) for v in values]))
        if abs(values[k] - default) < 1e-9:
            ax.scatter([x[k]], [y[k]], s=140, facecolors="none", edgecolors=CURVE_COLOR, lw=1.4, zorder=3,
                       label=f"default ({name} {_fmt(default)})")
    if simulated and simulated.get("p") is not None and simulated.get("delay") is not None:
        ax.scatter([simulated["delay"]], [simulated["p"]], marker="x", s=70, color="#1c7ed6", zorder=3,
                   label=simulated.get("label", "simulated"))
    o = ocs[0]
    ax.set_xlabel("mean detection delay (degraded agent's own outputs until isolation)")
    ax.set_ylabel(f"P(healthy agent isolated within {o.outputs} outputs)")
    ys = y[y > 0]
    if len(ys) and ys.max() / ys.min() > 20:
        from matplotlib.ticker import FuncFormatter

        ax.set_yscale("log")  # small false-isolation probabilities stay readable
        plain = FuncFormatter(lambda v, _pos: f"{v:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: f"{v:g}" if f"{v:.0e}"[0] in "25" else ""))
    xs = list(x) + ([simulated["delay"]] if simulated and simulated.get("delay") is not None else [])
    span = max(float(np.ptp(xs)), 0.5)
    ax.set_xlim(float(min(xs)) - 0.08 * span, float(max(xs)) + 0.2 * span)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8, frameon=False)
    ax.set_title(title or f"{o.detector} detector: false isolation vs delay as {name} varies", fontsize=11)
    return ax


def runlength(oc: Any, ax=None, max_delay: int = 20, title: Optional[str] = None):
    """Two panels (when ``ax`` is None): in-control survival and the detection-delay pmf."""
    if ax is None:
        fig = _new_figure(4.2)
        axes = fig.subplots(1, 2)
    else:
        axes = ax
    a1, a2 = axes
    per = oc.outputs / max(oc.keys, 1)
    surv = np.concatenate([[1.0], oc.in_control.extended(int(3 * per)).survival])
    n = np.arange(len(surv))
    a1.plot(n, surv, color=STATE_COLORS["normal"], lw=1.6)
    for k in (1, 2, 3):
        a1.axvline(k * per, color="#868e96", ls=":", lw=1)
        a1.text(k * per, 0.03, f" {k} stream{'s' if k > 1 else ''}", fontsize=8, color="#495057", va="bottom",
                ha="right", rotation=90)
    a1.set_ylim(0, 1.02)
    a1.set_xlim(0, len(surv) - 1)
    a1.set_xlabel("healthy agent's outputs" + (" (per (T, s) detector)" if oc.keys > 1 else ""))
    a1.set_ylabel("P(not yet isolated)")
    a1.set_title(f"in control: P(false isolation in {oc.outputs} outputs) = {fmt_p(oc.p_false)}", fontsize=10)
    a1.grid(alpha=0.3)
    pmf = oc.delay.absorbed
    big = np.flatnonzero(pmf >= 1e-3)
    m = min(max_delay, len(pmf), int(big[-1]) + 2 if len(big) else max_delay)
    a2.bar(np.arange(1, m + 1), pmf[:m], color=STATE_COLORS["isolated"], width=0.8)
    a2.set_xlabel("degraded agent's outputs until isolation")
    a2.set_ylabel("probability")
    med = oc.delay.quantile(0.5)
    a2.set_title(f"out of control: mean delay {oc.delay_mean:.2f}, median {med}", fontsize=10)
    a2.set_xticks(np.arange(1, m + 1, max(1, m // 10)))
    a2.grid(alpha=0.3, axis="y")
    if title:
        getattr(a1, "figure").suptitle(title, fontsize=11)
    return axes


def oc_figure(ocs, name, values, default=None, simulated=None, title=None):
    return oc_curve(ocs, name, values, default=default, simulated=simulated, title=title).figure


def runlength_figure(oc, title=None):
    return runlength(oc, title=title)[0].figure
