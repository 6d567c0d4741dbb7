"""SAC / CP-WBFT figures: per-round honest-agent accuracy and BFTI bars (SAC Tab. 1-2)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

from ..core.errors import RunFolderError
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


# ---------------------------------------------------------------------------
# gray failures beside Byzantine agents (issue 20; docs/sac.md)

_GRAY_PHASE_TITLES = {"before": "before the gray failures", "degraded": "honest agents degraded",
                      "after": "after recovery"}


@dataclass
class GrayRun:
    """One run folder's ``summary.gray`` over its seeds: per phase, per round, the
    values of each seed (percent / percentage points)."""

    label: str
    method: str
    F: Any
    seeds: int
    queries: dict[str, list[int]]
    #: phase -> field ("bfti", "all", "healthy", "degraded", "weak", ...) -> per round, values over seeds
    rounds: dict[str, dict[str, list[list[float]]]]
    first_query: Optional[int] = None


def _gray_sets(runs: Any) -> list[tuple[RunSet, str]]:
    """Run sets with a label suffix: a run folder as it is; a sweep folder (``meshsim
    sweep``) gives one set per point, its seeds' summaries (points hold no aggregate)."""
    from ..sweep import is_sweep_folder

    out: list[tuple[RunSet, str]] = []
    for r in data_runs(runs):
        if isinstance(r, (str, Path)) and is_sweep_folder(r):
            import json

            root = Path(r)
            points = json.loads((root / "manifest.json").read_text(encoding="utf-8")).get("points") or {}
            for pid, params in points.items():
                pdir = root / "runs" / pid
                seeds = sorted((d for d in pdir.glob("seed-*") if (d / "summary.json").is_file()),
                               key=lambda d: int(d.name[5:]) if d.name[5:].isdigit() else 0)
                if seeds:
                    rest = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in params.items()
                                     if k != "protocol.params.F")
                    out.append((RunSet(pdir, {int(d.name[5:]): RunFolder(d) for d in seeds}), rest))
            continue
        out.append((_as_runset(r), ""))
    return out


def gray_runs(runs: Any) -> list[GrayRun]:
    """Load SAC / CP-WBFT run folders (single or multi-seed) or sweep folders that
    had gray failures (``summary.gray``)."""
    out = []
    for rs, extra in _gray_sets(runs):
        rf = rs.first
        sums = [s for s in rs.summaries() if isinstance(s.get("gray"), dict)]
        if not sums:
            raise RunFolderError("summary.json has no 'gray' section: no degrade event acted in this run",
                                 file=str(rs.path))
        method = _method_label(rf)
        F = rf.params.get("F", sums[0].get("F"))
        label = (f"{method} F={F}" if method == "SAC" else method) + (f" ({extra})" if extra else "")
        rounds: dict[str, dict[str, list[list[float]]]] = {}
        queries: dict[str, list[int]] = {}
        for s in sums:
            for ph, d in (s["gray"].get("by_phase") or {}).items():
                queries.setdefault(ph, []).append(int(d.get("queries", 0)))
                per = d.get("per_round") or {}
                for k in sorted(per, key=int):
                    for f, v in per[k].items():
                        col = rounds.setdefault(ph, {}).setdefault(f, [])
                        while len(col) <= int(k):
                            col.append([])
                        if isinstance(v, (int, float)):
                            col[int(k)].append(float(v) * 100.0)
        g = GrayRun(label, method, F, len(sums), queries, rounds, sums[0]["gray"].get("first_query"))
        if method != "SAC" and any(o.label == label and o.rounds == rounds for o in out):
            continue  # CP-WBFT filters nothing: its F = 0 and F = 3 points are the same run
        out.append(g)
    # SAC first, the larger F first (the protocol as specified, then without its filter)
    rank = {"SAC": 0, "CP-WBFT": 1}
    return sorted(out, key=lambda g: (rank.get(g.method, 2), -float(g.F) if isinstance(g.F, (int, float))
                                      else 0.0))


def _gray_style(g: GrayRun) -> tuple[str, str]:
    if g.method != "SAC":
        return "#e8590c", "-"
    return ("#1c7ed6", "-") if g.F not in (0, "0") else ("#74c0fc", "--")


def gray_bfti_rounds(runs: Any, phase: str = "degraded", ax=None, field: str = "bfti"):
    """BFTI(t) = Acc_all(t) − Acc_all(0) per round in one phase of the run (mean over
    seeds, band: ± sample std), one line per run folder (SAC with / without the
    filter, CP-WBFT)."""
    data = runs if isinstance(runs, list) and runs and isinstance(runs[0], GrayRun) else gray_runs(runs)
    ax = _axes(ax, 3.6)
    ends = []
    for g in data:
        cols = g.rounds.get(phase, {}).get(field)
        if not cols:
            continue
        xs = [t for t, v in enumerate(cols) if v]
        m = [statistics.fmean(cols[t]) for t in xs]
        sd = [statistics.stdev(cols[t]) if len(cols[t]) > 1 else 0.0 for t in xs]
        col, ls = _gray_style(g)
        ax.plot(xs, m, ls=ls, marker="o", ms=3.5, color=col, label=f"{g.label} ({g.seeds} seeds)")
        ax.fill_between(xs, [a - b for a, b in zip(m, sd)], [a + b for a, b in zip(m, sd)], color=col, alpha=0.15,
                        lw=0)
        acc = g.rounds.get(phase, {}).get("all") or []
        faa = f" (FAA {statistics.fmean(acc[xs[-1]]):.0f}%)" if field == "bfti" and len(acc) > xs[-1] and \
            acc[xs[-1]] else ""
        ends.append([m[-1], xs[-1], f"{m[-1]:+.1f}{faa}", col])
    if ends:
        # end labels: kept apart so close lines stay readable
        lo, hi = ax.get_ylim()
        gap = 0.06 * (hi - lo)
        ends.sort(key=lambda e: e[0])
        ys = [e[0] for e in ends]
        for i in range(1, len(ys)):
            ys[i] = max(ys[i], ys[i - 1] + gap)
        for (y, x, text, col), yy in zip(ends, ys):
            ax.annotate(text, (x, y), xytext=(x + 0.15, yy), textcoords="data", va="center", fontsize=7, color=col)
        last = max(e[1] for e in ends)
        ax.set_xlim(-0.2, last + 2.2)
        ax.set_xticks(range(0, last + 1))  # rounds only: the room on the right is for the labels
    ax.axhline(0, color="#495057", lw=0.8)
    ax.set_xlabel("round t")
    ax.set_ylabel("BFTI(t) = Acc(t) − Acc(0)  (pp)" if field == "bfti" else f"{field} accuracy (%)")
    n = next((g.queries.get(phase) for g in data if g.queries.get(phase)), None)
    span = f" ({n[0]} queries)" if n and len(set(n)) == 1 else ""
    ax.set_title(f"{_GRAY_PHASE_TITLES.get(phase, phase)}{span}", fontsize=9)
    return ax


def gray_groups(runs: Any, phase: str = "degraded", ax=None):
    """Accuracy per round of the healthy strong, degraded and weak honest agents in
    one phase: SAC with the filter (solid) and without (dashed)."""
    from matplotlib.lines import Line2D

    data = [g for g in (runs if isinstance(runs, list) and runs and isinstance(runs[0], GrayRun)
                        else gray_runs(runs)) if g.method == "SAC"]
    ax = _axes(ax, 3.6)
    colors = {"healthy": "#2f9e44", "degraded": "#c2255c", "weak": "#f08c00"}
    for g in data:
        ls = "--" if g.F in (0, "0") else "-"
        for f, col in colors.items():
            cols = g.rounds.get(phase, {}).get(f)
            if not cols:
                continue
            xs = [t for t, v in enumerate(cols) if v]
            ax.plot(xs, [statistics.fmean(cols[t]) for t in xs], ls=ls, marker="o", ms=3, color=col)
    h = [Line2D([], [], color=c, label={"healthy": "healthy strong", "degraded": "degraded (were strong)",
                                        "weak": "weak"}[f]) for f, c in colors.items()]
    h += [Line2D([], [], color="#495057", ls="-", label="SAC F=3 (filter)"),
          Line2D([], [], color="#495057", ls="--", label="SAC F=0 (no filter)")]
    ax.legend(handles=h, fontsize=7, loc="best", frameon=True, framealpha=0.85)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("round t")
    ax.set_ylabel("agents' accuracy (%)")
    ax.set_title(f"SAC by group, {_GRAY_PHASE_TITLES.get(phase, phase)}", fontsize=9)
    return ax


def gray_figure(runs: Any, fig=None):
    """BFTI per round before and during the gray failures (shared axis), and SAC's
    accuracy by group while the honest agents are degraded."""
    data = gray_runs(runs)
    if fig is None:
        fig = _new_figure(3.9, 12.0)
    axes = fig.subplots(1, 3)
    gray_bfti_rounds(data, "before", ax=axes[0])
    gray_bfti_rounds(data, "degraded", ax=axes[1])
    lo = min(a.get_ylim()[0] for a in axes[:2])
    hi = max(a.get_ylim()[1] for a in axes[:2])
    for a in axes[:2]:
        a.set_ylim(lo, hi)
    axes[0].legend(fontsize=7, loc="lower left", frameon=True, framealpha=0.85)
    gray_groups(data, "degraded", ax=axes[2])
    first = next((g.first_query for g in data if g.first_query), None)
    fig.suptitle("Gray failures beside a Byzantine agent: BFTI per round" +
                 (f" (honest agents degraded from query {first})" if first else ""), fontsize=10)
    return fig
