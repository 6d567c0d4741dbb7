"""SAC / CP-WBFT figures: per-round honest-agent accuracy and BFTI bars (SAC Tab. 1-2)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

from ..errors import RunFolderError
from .canvas import _axes, _new_figure, _TOPO_COLORS
from .folder import RunFolder, RunSet, SAC_METHODS, _as_runset
from .stats import Stat


TOPOLOGY_LABELS = {"complete": "Complete", "merg": "MERG", "gamma_merg": "MERG", "gnp": "Erdős-Rényi",
                   "erdos_renyi": "Erdős-Rényi", "er": "Erdős-Rényi", "ba": "Pref. attachment",
                   "preferential_attachment": "Pref. attachment", "pa": "Pref. attachment",
                   "er_robust": "Erdős-Rényi", "pa_robust": "Pref. attachment"}


def _pct(v: Any) -> Optional[float]:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    return float(v) * 100.0 if abs(v) <= 1.0 else float(v)


def _per_round(summary: dict) -> tuple[list[int], list[Optional[float]], list[Optional[float]]]:
    """(rounds, weak %, strong %) from the forms a SAC summary may use:
    ``per_round: {weak: [...], strong: [...]}``, ``per_round: [{round, weak, strong}, ...]``,
    ``per_round: {"1": {weak, strong}, ...}`` or ``per_round_weak`` / ``per_round_strong`` lists."""
    pr = summary.get("per_round")
    weak: list = []
    strong: list = []
    rounds: list[int] = []
    if isinstance(pr, dict) and ("weak" in pr or "strong" in pr):
        weak, strong = list(pr.get("weak") or []), list(pr.get("strong") or [])
    elif isinstance(pr, list):
        for i, e in enumerate(pr):
            if isinstance(e, dict):
                rounds.append(int(e.get("round", i)))
                weak.append(e.get("weak", e.get("weak_accuracy")))
                strong.append(e.get("strong", e.get("strong_accuracy")))
    elif isinstance(pr, dict):
        for k in sorted(pr, key=lambda k: int(k) if str(k).isdigit() else 0):
            e = pr[k]
            if isinstance(e, dict):
                rounds.append(int(k) if str(k).isdigit() else len(rounds))
                weak.append(e.get("weak"))
                strong.append(e.get("strong"))
    else:
        weak = list(summary.get("per_round_weak") or summary.get("weak_per_round") or [])
        strong = list(summary.get("per_round_strong") or summary.get("strong_per_round") or [])
    k = max(len(weak), len(strong))
    weak += [None] * (k - len(weak))
    strong += [None] * (k - len(strong))
    if len(rounds) != k:
        rounds = list(range(k))
    return rounds, [_pct(v) for v in weak], [_pct(v) for v in strong]


def _topology_label(rf: RunFolder) -> str:
    topo = (rf.scenario.get("network") or {}).get("topology") or {}
    kind = str(topo.get("kind", "?"))
    return TOPOLOGY_LABELS.get(kind.lower(), kind)


def _method_label(rf: RunFolder) -> str:
    name = rf.protocol or str(rf.summary.get("protocol", "?"))
    return SAC_METHODS.get(name.lower(), name.upper())


@dataclass
class SacRun:
    label: str
    method: str
    topology: str
    seeds: int
    metrics: dict[str, Stat]
    rounds: list[int]
    weak: list[Optional[float]]
    strong: list[Optional[float]]


SAC_FIELDS = ("iaa", "faa", "bfti", "ra", "h_majority")


def sac_runs(runs: Any) -> list[SacRun]:
    """Load one or several SAC / CP-WBFT run folders (single or multi-seed)."""
    if isinstance(runs, (str, Path, RunSet, RunFolder)):
        runs = [runs]
    out = []
    for r in runs:
        rs = _as_runset(r)
        rf = rs.first
        if not rf.is_sac:
            raise RunFolderError("summary.json has no SAC fields (iaa, faa, bfti): not a SAC or CP-WBFT run",
                                 file=str(rs.path))
        metrics = {}
        for f in SAC_FIELDS:
            st = Stat.of(rs.stat(f))
            if st.mean is not None:
                metrics[f] = st
        if "bfti" not in metrics and "iaa" in metrics and "faa" in metrics:
            metrics["bfti"] = Stat.from_values([
                (s.get("faa") - s.get("iaa")) if isinstance(s.get("faa"), (int, float)) and
                isinstance(s.get("iaa"), (int, float)) else None for s in rs.summaries()])
        per = [_per_round(s) for s in rs.summaries()]
        k = max((len(p[0]) for p in per), default=0)
        rounds = next((p[0] for p in per if len(p[0]) == k), [])

        def mean_at(j: int, which: int) -> Optional[float]:
            vals = [p[which][j] for p in per if j < len(p[which]) and p[which][j] is not None]
            return statistics.fmean(vals) if vals else None

        weak = [mean_at(j, 1) for j in range(k)]
        strong = [mean_at(j, 2) for j in range(k)]
        method, topo = _method_label(rf), _topology_label(rf)
        out.append(SacRun(f"{method} · {topo}", method, topo, len(rs.runs), metrics, rounds, weak, strong))
    return out


def _method_order(methods: Iterable[str]) -> list[str]:
    rank = {"SAC": 0, "CP-WBFT": 1}
    return sorted(dict.fromkeys(methods), key=lambda m: (rank.get(m, 2), m))


def sac_rounds(runs: Any, ax=None, method: Optional[str] = None):
    """Weak (dashed) and strong (solid) honest-agent accuracy per round, one
    colour per topology (SAC Tab. 2/4)."""
    from matplotlib.lines import Line2D

    data = [s for s in sac_runs(runs) if method is None or s.method == method]
    ax = _axes(ax, 3.6)
    topos = sorted({s.topology for s in data})
    shown = []
    for s in data:
        col = _TOPO_COLORS[topos.index(s.topology) % len(_TOPO_COLORS)]
        for vals, ls in ((s.strong, "-"), (s.weak, "--")):
            pts = [(r, v) for r, v in zip(s.rounds, vals) if v is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], ls=ls, marker="o", ms=3.5, color=col, alpha=0.9)
                if s.topology not in shown:
                    shown.append(s.topology)
    if not shown:
        ax.text(0.5, 0.5, "no per-round accuracy in these runs", transform=ax.transAxes, ha="center",
                va="center", fontsize=9, color="#868e96")
        ax.set_xticks([])
    else:
        h = [Line2D([], [], color=_TOPO_COLORS[topos.index(t) % len(_TOPO_COLORS)], label=t) for t in shown]
        h += [Line2D([], [], color="#495057", ls="-", label="strong"),
              Line2D([], [], color="#495057", ls="--", label="weak")]
        ax.legend(handles=h, fontsize=7, loc="best", frameon=True, framealpha=0.85)
        ax.set_xlabel("round")
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # rounds are whole numbers
        lo, hi = ax.get_ylim()
        ax.set_ylim(max(0.0, lo - 2), min(102.0, hi + 2))
    ax.set_ylabel("honest-agent accuracy (%)")
    ax.set_title(f"{method or 'per round'}: strong (solid) / weak (dashed)", fontsize=9)
    return ax


def bfti_bars(runs: Any, ax=None):
    """BFTI = FAA − IAA (percentage points) per topology, one bar per method
    (SAC vs CP-WBFT), with sample-std error bars over seeds."""
    data = sac_runs(runs)
    ax = _axes(ax, 3.6)
    topos = list(dict.fromkeys(s.topology for s in data))
    methods = _method_order(s.method for s in data)
    width = 0.8 / max(1, len(methods))
    mcol = {"SAC": "#1c7ed6", "CP-WBFT": "#e8590c"}
    for j, m in enumerate(methods):
        xs, ys, es = [], [], []
        for i, t in enumerate(topos):
            s = next((d for d in data if d.method == m and d.topology == t), None)
            if s is None or "bfti" not in s.metrics:
                continue
            st = s.metrics["bfti"]
            xs.append(i - 0.4 + width * (j + 0.5))
            ys.append(_pct(st.mean) if abs(st.mean) <= 1 else st.mean)
            es.append((_pct(st.std) if st.std is not None and abs(st.mean) <= 1 else (st.std or 0.0))
                      if st.n > 1 else 0.0)
        bars = ax.bar(xs, ys, width=width * 0.95, yerr=es if any(es) else None, capsize=3,
                      color=mcol.get(m, _TOPO_COLORS[(j + 3) % len(_TOPO_COLORS)]), label=m)
        for b, y, e in zip(bars, ys, es):
            ax.annotate(f"{y:+.1f}", (b.get_x() + b.get_width() / 2, y + (e if y >= 0 else -e)),
                        xytext=(0, 2 if y >= 0 else -2),
                        textcoords="offset points", ha="center", va="bottom" if y >= 0 else "top", fontsize=7)
    ax.axhline(0, color="#495057", lw=0.8)
    ax.set_xticks(range(len(topos)), topos, fontsize=8)
    ax.set_ylabel("BFTI = FAA − IAA (pp)")
    ax.set_title("Byzantine fault tolerance improvement", fontsize=9)
    lo, hi = ax.get_ylim()
    span = hi - lo
    ax.set_ylim(lo - 0.08 * span, hi + 0.3 * span)
    ax.legend(fontsize=8, frameon=False, loc="upper center", ncol=max(1, len(methods)))
    return ax


def sac_figure(runs: Any, fig=None):
    """Per-round accuracy panel for each method that reports it, plus the BFTI bars."""
    data = sac_runs(runs)
    methods = [m for m in _method_order(s.method for s in data)
               if any(v is not None for s in data if s.method == m for v in s.weak + s.strong)]
    if fig is None:
        fig = _new_figure(3.8)
    axes = fig.subplots(1, len(methods) + 1, squeeze=False)[0]
    for ax, m in zip(axes, methods):
        sac_rounds(data_runs(runs), ax=ax, method=m)
    bfti_bars(runs, ax=axes[-1])
    fig.suptitle("SAC vs CP-WBFT (SAC Tab. 1-2)", fontsize=10)
    return fig


def data_runs(runs: Any) -> list:
    return [runs] if isinstance(runs, (str, Path, RunSet, RunFolder)) else list(runs)
