"""Figures of a run folder, drawn from its flat records only.

Every function here reads what a run wrote (``summary.json``,
``aggregate.json``, ``scenario.resolved.yaml`` and the JSONL tables) and never
the simulator. matplotlib is imported inside the drawing functions, so
``import meshsim.plots`` stays cheap and works without it; figures are built as
``matplotlib.figure.Figure`` objects (no pyplot state), so they render
headless and can be returned to a notebook.

Conventions: a single-panel function takes ``ax=None`` and returns the axes it
drew on; a multi-panel one takes ``fig=None`` and returns the figure. The
``run`` argument is a path, a :class:`RunSet` or a :class:`RunFolder`.

Figures (docs/plots.md shows each one):

- :func:`timeline` / :func:`agent_timeline`: MeshHeal Fig. C1, per agent.
- :func:`state_heatmap`: routing state of every agent at every task (large runs).
- :func:`phase_bars`: accuracy, tokens and calls per phase (Tab. 2-3).
- :func:`detector_view`: the detector statistic over tasks with its thresholds.
- :func:`sac_figure`, :func:`sac_rounds`, :func:`bfti_bars`: SAC Tab. 1-2.
- :func:`topology`: the initial graph coloured by final state or role.
"""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import yaml

from .errors import InputError, MeshsimError, RunFolderError
from .topology import node_order

__all__ = [
    "RunFolder", "RunSet", "open_run", "KINDS",
    "timeline", "agent_timeline", "state_heatmap", "phase_bars", "detector_view", "detector_figure",
    "sac_figure", "sac_rounds", "bfti_bars", "topology", "save_figure", "render",
    "phase_stats", "healing_stats", "degraded_intervals", "state_series", "healing_marks",
]

STATES = ("normal", "watched", "isolated")
STATE_COLORS = {"normal": "#2b8a3e", "watched": "#f08c00", "isolated": "#d6336c"}
HEAT_COLORS = {"normal": "#e6f2e8", "watched": "#f59f00", "isolated": "#c92a2a"}
DEGRADED_COLOR = "#fcd5e3"
BAND_COLOR = "#a5d8ff"
CURVE_COLOR = "#212529"
DPI = 100
WIDTH = 10.0  # inches: every figure is 1000 px wide at DPI
MAX_PANELS = 8  # timeline panels before switching to the heatmap
HEAT_COLUMNS = 700  # heatmap columns at most (about the axes' width in pixels)
KINDS = ("timeline", "heatmap", "phases", "detector", "sac", "topology")

SAC_METHODS = {"sac": "SAC", "cp-wbft": "CP-WBFT", "cp_wbft": "CP-WBFT", "cpwbft": "CP-WBFT"}
TOPOLOGY_LABELS = {"complete": "Complete", "merg": "MERG", "gamma_merg": "MERG", "gnp": "Erdős-Rényi",
                   "erdos_renyi": "Erdős-Rényi", "er": "Erdős-Rényi", "ba": "Pref. attachment",
                   "preferential_attachment": "Pref. attachment", "pa": "Pref. attachment",
                   "er_robust": "Erdős-Rényi", "pa_robust": "Pref. attachment"}


# ---------------------------------------------------------------------------
# reading a run folder


def _order(agents: Iterable[str]) -> list[str]:
    return sorted(set(agents), key=node_order)


class RunFolder:
    """One seed's run folder; files are read on first use and cached."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._cache: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    def has(self, name: str) -> bool:
        return (self.path / name).is_file()

    def require(self, *names: str, why: str = "") -> None:
        missing = [n for n in names if not self.has(n)]
        if missing:
            raise RunFolderError(f"{' and '.join(missing)} missing" + (f" ({why})" if why else ""),
                                 file=str(self.path))

    def json(self, name: str) -> Any:
        if name not in self._cache:
            self.require(name)
            try:
                self._cache[name] = json.loads((self.path / name).read_text(encoding="utf-8"))
            except ValueError as exc:
                raise RunFolderError(f"not valid JSON ({exc.msg}, line {exc.lineno})",
                                     file=str(self.path / name)) from None
        return self._cache[name]

    def jsonl(self, name: str, why: str = "") -> list[dict[str, Any]]:
        if name not in self._cache:
            self.require(name, why=why)
            rows = []
            with open(self.path / name, encoding="utf-8") as fh:
                for lineno, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        raise RunFolderError(f"line {lineno}: not valid JSON (truncated file?)",
                                             file=str(self.path / name)) from None
            self._cache[name] = rows
        return self._cache[name]

    @property
    def summary(self) -> dict[str, Any]:
        return self.json("summary.json")

    @property
    def scenario(self) -> dict[str, Any]:
        if "scenario" not in self._cache:
            self.require("scenario.resolved.yaml")
            try:
                data = yaml.safe_load((self.path / "scenario.resolved.yaml").read_text(encoding="utf-8"))
            except yaml.YAMLError as exc:
                raise RunFolderError(f"not valid YAML ({str(exc).splitlines()[0]})",
                                     file=str(self.path / "scenario.resolved.yaml")) from None
            self._cache["scenario"] = data if isinstance(data, dict) else {}
        return self._cache["scenario"]

    @property
    def seed(self) -> Optional[int]:
        s = self.summary.get("seed", self.scenario.get("seed"))
        return s if isinstance(s, int) else None

    @property
    def protocol(self) -> str:
        return str((self.scenario.get("protocol") or {}).get("name", ""))

    @property
    def params(self) -> dict[str, Any]:
        return dict((self.scenario.get("protocol") or {}).get("params") or {})

    @property
    def is_meshheal(self) -> bool:
        return self.has("reviews.jsonl") and self.has("states.jsonl")

    @property
    def is_sac(self) -> bool:
        s = self.summary
        return self.protocol.lower() in SAC_METHODS or any(k in s for k in ("iaa", "faa", "bfti"))

    def tasks(self) -> list[dict]:
        return self.jsonl("tasks.jsonl", why="a MeshHeal run writes it")

    def states(self) -> list[dict]:
        if "_states" not in self._cache:
            rows = self.jsonl("states.jsonl", why="a MeshHeal run writes it")
            self._cache["_states"] = sorted(rows, key=lambda r: (r["task"], r.get("t", 0.0)))
        return self._cache["_states"]

    def reviews(self) -> list[dict]:
        return self.jsonl("reviews.jsonl", why="a MeshHeal run writes it")

    @property
    def n_tasks(self) -> int:
        if "_n" not in self._cache:
            n = self.summary.get("tasks")
            if not isinstance(n, int):
                n = (self.scenario.get("tasks") or {}).get("count")
            if not isinstance(n, int):
                n = max((r["index"] for r in self.tasks()), default=0) if self.has("tasks.jsonl") else 0
            self._cache["_n"] = n
        return self._cache["_n"]

    def phases(self) -> list[tuple[str, int, int]]:
        """(name, first task, last task) of each phase, in scenario order."""
        out, k = [], 1
        for ph in self.scenario.get("phases") or []:
            n = int(ph.get("tasks", 0))
            out.append((str(ph["name"]), k, k + n - 1))
            k += n
        return out

    def agents(self) -> list[str]:
        """Every agent named in the records (natural order)."""
        if "_agents" not in self._cache:
            names: set[str] = set()
            for r in self.reviews():
                names.add(r["agent"])
            for s in self.states():
                names.add(s["agent"])
            names.update(_summary_agents(self.summary))
            if self.has("tasks.jsonl"):
                for t in self.tasks():
                    names.update(t.get("route") or ())
                    if t.get("entry"):
                        names.add(t["entry"])
            self._cache["_agents"] = _order(names)
        return self._cache["_agents"]


def _summary_agents(summary: dict) -> dict[str, dict]:
    a = summary.get("agents")
    return a if isinstance(a, dict) else {}


@dataclass
class RunSet:
    """A run folder as given on the command line: one seed, or a multi-seed
    folder (``seed-<s>/`` sub-folders plus ``aggregate.json``)."""

    path: Path
    runs: dict[int, RunFolder]
    aggregate: Optional[dict[str, Any]] = None
    _single: Optional[RunFolder] = field(default=None, repr=False)

    @property
    def multi(self) -> bool:
        return self.aggregate is not None

    @property
    def seeds(self) -> list[int]:
        return list(self.runs)

    def run(self, seed: Optional[int] = None) -> RunFolder:
        if seed is None:
            return next(iter(self.runs.values()))
        if seed not in self.runs:
            raise RunFolderError(f"no seed {seed} in this run folder (seeds: {', '.join(map(str, self.runs))})",
                                 file=str(self.path))
        return self.runs[seed]

    @property
    def first(self) -> RunFolder:
        return self.run()

    def summaries(self) -> list[dict[str, Any]]:
        return [r.summary for r in self.runs.values()]

    def stat(self, path: str) -> Optional[dict[str, Any]]:
        """``{mean, std, min, max, n[, missing]}`` (or ``{true, n}``) of a flattened summary field."""
        if self.aggregate is not None:
            return (self.aggregate.get("metrics") or {}).get(path)
        v = _dig(self.first.summary, path)
        if isinstance(v, bool):
            return {"true": int(v), "n": 1}
        if isinstance(v, (int, float)) and math.isfinite(v):
            return {"mean": float(v), "std": 0.0, "min": float(v), "max": float(v), "n": 1}
        return None


def _dig(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def _seed_dirs(path: Path) -> dict[int, Path]:
    out = {}
    for p in path.iterdir():
        if p.is_dir() and p.name.startswith("seed-") and p.name[5:].lstrip("-").isdigit():
            out[int(p.name[5:])] = p
    return dict(sorted(out.items()))


def _check_single(path: Path) -> None:
    has_sum = (path / "summary.json").is_file()
    has_sc = (path / "scenario.resolved.yaml").is_file()
    if has_sum and has_sc:
        return
    if not has_sum and not has_sc:
        raise RunFolderError("not a run folder (no summary.json, scenario.resolved.yaml or seed-*/ folders)",
                             file=str(path))
    if not has_sum:
        why = "the run failed, see error.txt" if (path / "error.txt").is_file() else "the run did not finish"
        raise RunFolderError(f"summary.json missing ({why})", file=str(path))
    raise RunFolderError("scenario.resolved.yaml missing (partial run folder)", file=str(path))


def open_run(path: Path | str | RunSet | RunFolder) -> RunSet:
    """Open and check a run folder; raises :class:`RunFolderError` naming what is missing."""
    if isinstance(path, RunSet):
        return path
    if isinstance(path, RunFolder):
        _check_single(path.path)
        return RunSet(path.path, {path.seed if path.seed is not None else 0: path})
    p = Path(path)
    if not p.exists():
        raise RunFolderError("run folder not found", file=str(p))
    if not p.is_dir():
        raise RunFolderError("not a folder (give the run folder, e.g. runs/<scenario>)", file=str(p))
    seeds = _seed_dirs(p)
    has_agg = (p / "aggregate.json").is_file()
    if not seeds and not has_agg:
        _check_single(p)
        rf = RunFolder(p)
        return RunSet(p, {rf.seed if rf.seed is not None else 0: rf})
    # multi-seed folder
    agg = None
    if has_agg:
        agg = RunFolder(p).json("aggregate.json")
        if not isinstance(agg, dict) or "metrics" not in agg:
            raise RunFolderError("aggregate.json has no 'metrics'", file=str(p / "aggregate.json"))
    listed = [int(s) for s in (agg or {}).get("seeds", [])] or list(seeds)
    problems = []
    for s in listed:
        d = seeds.get(s)
        if d is None:
            problems.append(f"seed-{s}/")
            continue
        for name in ("summary.json", "scenario.resolved.yaml"):
            if not (d / name).is_file():
                problems.append(f"seed-{s}/{name}")
    if agg is None:
        problems.insert(0, "aggregate.json")
    if problems:
        shown = ", ".join(problems[:4]) + (f" and {len(problems) - 4} more" if len(problems) > 4 else "")
        raise RunFolderError(f"partial multi-seed run folder: {shown} missing (rerun 'meshsim run' to resume)",
                             file=str(p))
    return RunSet(p, {s: RunFolder(seeds[s]) for s in listed}, agg)


def _as_runset(run: Any) -> RunSet:
    return open_run(run)


def _as_folder(run: Any, seed: Optional[int] = None) -> RunFolder:
    if isinstance(run, RunFolder):
        return run
    return open_run(run).run(seed)


def _need_meshheal(rf: RunFolder, what: str) -> None:
    rf.require("states.jsonl", "reviews.jsonl", why=f"the {what} needs a MeshHeal run")


# ---------------------------------------------------------------------------
# derived records (pure Python: what the figures and tables show)


def degraded_intervals(run: Any) -> dict[str, list[tuple[int, int]]]:
    """Ground truth: per agent, [b, r) task intervals of injected degradation.

    From ``summary.json`` (``agents.<id>`` and its ``intervals``), completed by
    the ``degraded`` flag of ``reviews.jsonl`` rows for agents the summary does
    not list. ``r`` is N + 1 when the agent never recovered.
    """
    rf = _as_folder(run)
    n = rf.n_tasks
    out: dict[str, list[tuple[int, int]]] = {}
    for a, info in _summary_agents(rf.summary).items():
        per = info.get("intervals") or [info]
        spans = []
        for p in per:
            b = p.get("degraded_at")
            if isinstance(b, int):
                r = p.get("recovered_at")
                spans.append((b, r if isinstance(r, int) else n + 1))
        if spans:
            out[a] = spans
    if rf.has("reviews.jsonl"):
        flags: dict[str, list[tuple[int, bool]]] = {}
        for r in rf.reviews():
            if r["agent"] not in out:
                flags.setdefault(r["agent"], []).append((r["task"], bool(r.get("degraded"))))
        for a, fl in flags.items():
            fl.sort()
            spans, start = [], None
            for k, d in fl:
                if d and start is None:
                    start = k
                elif not d and start is not None:
                    spans.append((start, k))
                    start = None
            if start is not None:
                spans.append((start, n + 1))
            if spans:
                out[a] = spans
    return {a: out[a] for a in _order(out)}


def state_series(run: Any, agent: str) -> list[str]:
    """The inferred state of ``agent`` at every task (index 0..N+1; a change
    recorded at task k holds from task k on)."""
    rf = _as_folder(run)
    n = rf.n_tasks
    series = ["normal"] * (n + 2)
    cur, k0 = "normal", 0
    for s in rf.states():
        if s["agent"] != agent:
            continue
        k = max(0, min(int(s["task"]), n + 1))
        for i in range(k0, k):
            series[i] = cur
        cur, k0 = s["new"], k
    for i in range(k0, n + 2):
        series[i] = cur
    return series


def _spans(series: Sequence[str], lo: int = 1) -> list[tuple[int, int, str]]:
    """Runs of equal values: (first, last + 1, value), from index ``lo``."""
    out, start = [], lo
    for i in range(lo + 1, len(series) + 1):
        if i == len(series) or series[i] != series[start]:
            out.append((start, i, series[start]))
            start = i
    return out


def healing_marks(run: Any, agent: str) -> list[dict[str, Any]]:
    """Per degradation interval of ``agent``: b, r, c (isolated_at), u
    (reintegrated_at), delays and closure.

    Taken from ``summary.json`` when it lists the agent; otherwise computed
    from ``states.jsonl`` with the same definition (Sec. 3.2).
    """
    rf = _as_folder(run)
    info = _summary_agents(rf.summary).get(agent)
    if info is not None:
        per = info.get("intervals") or [info]
        return [dict(p) for p in per if isinstance(p.get("degraded_at"), int)]
    from .metrics import self_healing

    n = rf.n_tasks
    states = rf.states()
    return [self_healing(states, b, r, n, agent) for b, r in degraded_intervals(rf).get(agent, [])]


def _rolling(values: Sequence[float], w: int) -> list[float]:
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= w:
            acc -= values[i - w]
        out.append(acc / min(i + 1, w))
    return out


def _score_curves(rf: RunFolder, window: int):
    """numpy arrays: agents, [agent x task] rolling mean review score (forward
    filled, NaN before the first review) and [agent x task] inferred state code."""
    import numpy as np

    key = f"_curves{window}"
    if key in rf._cache:
        return rf._cache[key]
    agents = rf.agents()
    idx = {a: i for i, a in enumerate(agents)}
    n = rf.n_tasks
    per: dict[str, list[tuple[int, float]]] = {}
    for r in rf.reviews():
        if r.get("q") is not None:
            per.setdefault(r["agent"], []).append((int(r["task"]), float(r["q"])))
    curves = np.full((len(agents), n + 2), np.nan)
    for a, pts in per.items():
        pts.sort(key=lambda p: p[0])
        roll = _rolling([q for _, q in pts], window)
        row = curves[idx[a]]
        for (k, _), m in zip(pts, roll):
            if 0 <= k <= n + 1:
                row[k] = m
        # forward fill
        last = np.nan
        for k in range(n + 2):
            if np.isnan(row[k]):
                row[k] = last
            else:
                last = row[k]
    codes = np.zeros((len(agents), n + 2), dtype=np.int8)
    code = {s: i for i, s in enumerate(STATES)}
    for a in agents:
        codes[idx[a]] = [code.get(s, 0) for s in state_series(rf, a)]
    rf._cache[key] = (agents, curves, codes)
    return rf._cache[key]


def _reference_band(rf: RunFolder, agent: str, window: int):
    """10th-90th percentile, per task, of the rolling mean score of the other
    agents that are in the normal state at that task."""
    import numpy as np

    agents, curves, codes = _score_curves(rf, window)
    mask = np.ones(len(agents), dtype=bool)
    if agent in agents:
        mask[agents.index(agent)] = False
    c = np.where(codes[mask] == 0, curves[mask], np.nan)
    ok = (~np.isnan(c)).sum(axis=0) >= 2
    lo = np.full(c.shape[1], np.nan)
    hi = np.full(c.shape[1], np.nan)
    if ok.any():
        lo[ok] = np.nanpercentile(c[:, ok], 10, axis=0)
        hi[ok] = np.nanpercentile(c[:, ok], 90, axis=0)
    return lo, hi


# ---------------------------------------------------------------------------
# tables' data (Tab. 2-3)


def _fmt_num(x: float, digits: int) -> str:
    return f"{x:.{digits}f}"


@dataclass
class Stat:
    mean: Optional[float]
    std: Optional[float] = None
    min: Optional[float] = None
    max: Optional[float] = None
    n: int = 0
    missing: int = 0

    @classmethod
    def of(cls, entry: Optional[dict]) -> "Stat":
        if not entry or "mean" not in entry:
            return cls(None, n=int((entry or {}).get("n", 0)), missing=int((entry or {}).get("missing", 0)))
        return cls(entry["mean"], entry.get("std"), entry.get("min"), entry.get("max"), int(entry.get("n", 1)),
                   int(entry.get("missing", 0)))

    @classmethod
    def from_values(cls, values: list[Any]) -> "Stat":
        nums = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        missing = sum(v is None for v in values)
        if not nums:
            return cls(None, n=0, missing=missing)
        return cls(statistics.fmean(nums), statistics.stdev(nums) if len(nums) > 1 else 0.0,
                   min(nums), max(nums), len(nums), missing)

    def fmt(self, digits: int = 3, scale: float = 1.0, spread: bool = False) -> str:
        """``mean ± std`` (one seed: the value); with ``spread`` also ``(min–max)``."""
        if self.mean is None:
            return "–"
        m = self.mean * scale
        if self.n <= 1:
            return f"{m:.0f}" if digits <= 1 and float(m).is_integer() else _fmt_num(m, digits)
        s = f"{_fmt_num(m, digits)} ± {_fmt_num((self.std or 0.0) * scale, digits)}"
        if spread and self.min is not None:
            s += f" ({_fmt_num(self.min * scale, 0 if digits <= 1 else digits)}–" \
                 f"{_fmt_num(self.max * scale, 0 if digits <= 1 else digits)})"
        return s


def phase_stats(run: Any) -> list[dict[str, Any]]:
    """Per phase (scenario order) and overall: accuracy, tokens and calls per
    task as :class:`Stat` (mean ± sample std over seeds, from ``aggregate.json``;
    a single-seed folder gives its own values)."""
    rs = _as_runset(run)
    rf = rs.first
    rows = []
    for name, lo, hi in rf.phases():
        rows.append({"phase": name, "tasks": f"{lo}–{hi}", "n_tasks": hi - lo + 1,
                     "accuracy": Stat.of(rs.stat(f"accuracy.by_phase.{name}")),
                     "tokens": Stat.of(rs.stat(f"tokens_per_task_by_phase.{name}")),
                     "calls": Stat.of(rs.stat(f"calls_per_task_by_phase.{name}"))})
    n = rf.n_tasks
    rows.append({"phase": "all", "tasks": f"1–{n}", "n_tasks": n,
                 "accuracy": Stat.of(rs.stat("accuracy.overall")),
                 "tokens": Stat.of(rs.stat("tokens_per_task")),
                 "calls": Stat.of(rs.stat("calls_per_task"))})
    return rows


def healing_stats(run: Any) -> list[dict[str, Any]]:
    """Per degraded agent (and interval): b, r, detection delay, closure count
    and reintegration delay over seeds (Tab. 3b). The first interval comes
    from ``aggregate.json``; later intervals of re-degraded agents from the
    seeds' summaries."""
    rs = _as_runset(run)
    agents: dict[str, int] = {}
    for s in rs.summaries():
        for a, info in _summary_agents(s).items():
            agents[a] = max(agents.get(a, 1), len(info.get("intervals") or [info]))
    n_seeds = len(rs.runs)
    out = []
    for a in _order(agents):
        for k in range(agents[a]):
            if k == 0:
                det = Stat.of(rs.stat(f"agents.{a}.detection_delay"))
                rein = Stat.of(rs.stat(f"agents.{a}.reintegration_delay"))
                b = Stat.of(rs.stat(f"agents.{a}.degraded_at"))
                r = Stat.of(rs.stat(f"agents.{a}.recovered_at"))
                clo = rs.stat(f"agents.{a}.closure") or {}
                closure, n = int(clo.get("true", 0)), int(clo.get("n", n_seeds))
                # an agent undetected in every seed has no numeric delay entry at all
                if det.mean is None:
                    det.missing = n
            else:
                pers = [(_summary_agents(s).get(a, {}).get("intervals") or [])[k:k + 1] for s in rs.summaries()]
                pers = [p[0] for p in pers if p]
                det = Stat.from_values([p.get("detection_delay") for p in pers])
                rein = Stat.from_values([p.get("reintegration_delay") for p in pers])
                b = Stat.from_values([p.get("degraded_at") for p in pers])
                r = Stat.from_values([p.get("recovered_at") for p in pers])
                closure, n = sum(bool(p.get("closure")) for p in pers), len(pers)
            out.append({"agent": a, "interval": k + 1, "degraded_at": b, "recovered_at": r,
                        "detection_delay": det, "closure": closure, "seeds": n,
                        "missed": det.missing, "reintegration_delay": rein})
    return out


# ---------------------------------------------------------------------------
# matplotlib helpers


def _mpl():
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover
        raise InputError("plots need matplotlib: pip install 'meshsim[plot]'") from None
    return Figure


def _new_figure(height: float, width: float = WIDTH):
    Figure = _mpl()
    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def _axes(ax, height: float):
    if ax is None:
        fig = _new_figure(height)
        return fig.add_subplot(1, 1, 1)
    return ax


def save_figure(fig, path: Path | str) -> Path:
    """Write ``fig`` as a PNG of exactly its size (``figsize`` x DPI pixels)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(_png_bytes(fig))
    tmp.replace(path)
    return path


def _png_bytes(fig) -> bytes:
    """PNG bytes of ``fig``; reduced to a 192-colour palette when Pillow is
    there (a quarter of the size, no visible change for these flat figures)."""
    import io

    buf = io.BytesIO()
    getattr(fig, "figure", fig).savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover
        return buf.getvalue()
    buf.seek(0)
    with Image.open(buf) as im:
        pal = im.convert("RGB").quantize(colors=192, method=Image.Quantize.FASTOCTREE)
    out = io.BytesIO()
    pal.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _shade_degraded(ax, spans: list[tuple[int, int]], label: bool = True) -> None:
    for i, (b, r) in enumerate(spans):
        ax.axvspan(b - 0.5, r - 0.5, color=DEGRADED_COLOR, lw=0, zorder=0,
                   label="injected degradation" if (label and i == 0) else None)


def _state_strip(ax, series: Sequence[str], y0: float, h: float) -> None:
    for lo, hi, st in _spans(series, 1):
        ax.add_patch(_rect((lo - 0.5, y0), hi - lo, h, STATE_COLORS.get(st, "#adb5bd")))


def _rect(xy, w, h, color, fill=True, **kw):
    from matplotlib.patches import Rectangle

    if fill:
        return Rectangle(xy, w, h, facecolor=color, edgecolor="none", **kw)
    return Rectangle(xy, w, h, facecolor="none", edgecolor=color, **kw)


_LABEL_BOX = {"fc": "white", "ec": "none", "alpha": 0.8, "pad": 0.6}


def _marks(ax, rf: RunFolder, agent: str, top: float) -> list[dict]:
    """Vertical lines at c (detection) and u (reintegration), delays written next to them."""
    drawn = []
    for i, m in enumerate(healing_marks(rf, agent)):
        c, u = m.get("isolated_at"), m.get("reintegrated_at")
        if isinstance(c, int):
            ln = ax.axvline(c, color=STATE_COLORS["isolated"], ls="--", lw=1.3, zorder=4)
            ln.set_gid(f"detection:{agent}:{i}")
            ax.annotate(f"c={c}\nδ={m.get('detection_delay')}", (c, top), xycoords=("data", "axes fraction"),
                        xytext=(3, -2), textcoords="offset points", va="top", ha="left", fontsize=8,
                        color=STATE_COLORS["isolated"], zorder=6, bbox=_LABEL_BOX)
            drawn.append({"kind": "detection", "task": c})
        if isinstance(u, int):
            ln = ax.axvline(u, color=STATE_COLORS["normal"], ls="--", lw=1.3, zorder=4)
            ln.set_gid(f"reintegration:{agent}:{i}")
            ax.annotate(f"u={u}\nδ={m.get('reintegration_delay')}", (u, top), xycoords=("data", "axes fraction"),
                        xytext=(3, -2), textcoords="offset points", va="top", ha="left", fontsize=8,
                        color=STATE_COLORS["normal"], zorder=6, bbox=_LABEL_BOX)
            drawn.append({"kind": "reintegration", "task": u})
    return drawn


def _mark_caption(rf: RunFolder, agent: str) -> str:
    parts = []
    for m in healing_marks(rf, agent):
        b, r = m.get("degraded_at"), m.get("recovered_at")
        span = f"degraded {b}–{r - 1}" if isinstance(r, int) else f"degraded from {b}"
        if m.get("isolated_at") is None:
            parts.append(f"{span}: never isolated")
            continue
        p = f"{span}: detection delay {m['detection_delay']}, closure {'yes' if m.get('closure') else 'no'}"
        if isinstance(r, int):
            d = m.get("reintegration_delay")
            p += f", reintegration delay {d}" if d is not None else ", not reintegrated"
        parts.append(p)
    return "; ".join(parts) if parts else "never degraded"


def _state_legend_handles(probe: bool = True, curve: bool = True, band: bool = True, degraded: bool = True):
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    h = [Line2D([], [], ls="", marker="o", color=STATE_COLORS[s], label=s) for s in STATES]
    if probe:
        h.append(Line2D([], [], ls="", marker="o", mfc="none", color="#495057", label="recovery probe"))
    if curve:
        h.append(Line2D([], [], color=CURVE_COLOR, lw=1.5, label="mean review score"))
    if band:
        h.append(Patch(color=BAND_COLOR, alpha=0.6, label="normal agents' range"))
    if degraded:
        h.append(Patch(color=DEGRADED_COLOR, label="injected degradation"))
    return h


# ---------------------------------------------------------------------------
# 1. timeline (Fig. C1) and heatmap


def default_agents(run: Any, limit: int = 4) -> list[str]:
    """Degraded agents, then falsely isolated ones; else the first agents."""
    rf = _as_folder(run)
    picks = list(degraded_intervals(rf))
    for s in rf.states():
        if s["new"] == "isolated" and s["agent"] not in picks:
            picks.append(s["agent"])
    if not picks:
        picks = rf.agents()
    return picks[:limit]


def agent_timeline(run: Any, agent: str, ax=None, seed: Optional[int] = None, window: Optional[int] = None,
                   legend: bool = True):
    """Fig. C1 for one agent: review scores, inferred state and self-healing marks.

    x = task index. Pink spans: injected degradation (ground truth). One
    marker per reviewed output of the agent (score q), coloured by the state
    inferred after that review's detector update; hollow markers are recovery
    probes. Black curve: the agent's rolling mean score over its last
    ``window`` reviews (default: the detector window); blue band: the 10th-90th
    percentile of the same curve over the agents that are normal at that task.
    Bottom strip: the inferred state. Dashed lines: c (detection) and u
    (reintegration), with their delays.
    """
    import numpy as np

    rf = _as_folder(run, seed)
    _need_meshheal(rf, "timeline")
    if agent not in rf.agents():
        raise InputError(f"unknown agent (this run has {_agent_list(rf)})",
                         field="--agents", value=agent)
    ax = _axes(ax, 3.2)
    n = rf.n_tasks
    w = int(window or rf.params.get("window") or 8)
    _shade_degraded(ax, degraded_intervals(rf).get(agent, []))
    lo, hi = _reference_band(rf, agent, w)
    x = np.arange(n + 2)
    ax.fill_between(x[1:n + 1], lo[1:n + 1], hi[1:n + 1], color=BAND_COLOR, alpha=0.6, lw=0, zorder=1,
                    label="normal agents' range")
    rows = sorted((r for r in rf.reviews() if r["agent"] == agent and r.get("q") is not None),
                  key=lambda r: r["task"])
    series = state_series(rf, agent)
    if rows:
        ks = [r["task"] for r in rows]
        qs = [float(r["q"]) for r in rows]
        ax.plot(ks, _rolling(qs, w), color=CURVE_COLOR, lw=1.4, zorder=3, drawstyle="steps-post",
                label="mean review score")
        for st in STATES:
            def after(r):
                det = r.get("detector") or []
                return det[-1].get("state") if det else series[min(r["task"], n + 1)]

            for probe in (False, True):
                sel = [r for r in rows if after(r) == st and bool(r.get("probe")) == probe]
                if not sel:
                    continue
                col = STATE_COLORS[st]
                ax.scatter([r["task"] for r in sel], [r["q"] for r in sel], s=22 if not probe else 30,
                           marker="o", facecolors="none" if probe else col, edgecolors=col,
                           linewidths=1.1, zorder=5 if probe else 4, alpha=1.0 if probe else 0.85)
    # state strip under the scores
    _state_strip(ax, series, -0.19, 0.09)
    ax.text(0.0, -0.145, "state ", transform=ax.get_yaxis_transform(), ha="right", va="center", fontsize=8)
    _marks(ax, rf, agent, top=0.995)
    ax.set_xlim(0.5, n + 0.5)
    ax.set_ylim(-0.22, 1.12)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_ylabel("review score q")
    ax.set_title(f"{agent}: {_mark_caption(rf, agent)}", fontsize=9, loc="left")
    if legend and ax.figure is not None and len(ax.figure.axes) == 1:
        ax.figure.legend(handles=_state_legend_handles(), loc="outside lower center", ncol=8, fontsize=8,
                         frameon=False)
        ax.set_xlabel("task index")
    return ax


def _agent_list(rf: RunFolder, k: int = 8) -> str:
    names = rf.agents()
    return ", ".join(names[:k]) + (f", … ({len(names)} in all)" if len(names) > k else "")


def timeline(run: Any, agents: Optional[Sequence[str]] = None, seed: Optional[int] = None, fig=None,
             window: Optional[int] = None):
    """Fig. C1 for several agents, one panel each (shared task axis).

    ``agents`` defaults to the degraded agents (then falsely isolated ones).
    More than ``MAX_PANELS`` agents (or a large run with no choice) gives the
    :func:`state_heatmap` instead.
    """
    rf = _as_folder(run, seed)
    _need_meshheal(rf, "timeline")
    chosen = list(agents) if agents else default_agents(rf)
    if len(chosen) > MAX_PANELS:
        if fig is None:
            fig = _new_figure(_heatmap_height(len(chosen)))
        ax = fig.add_subplot(1, 1, 1)
        state_heatmap(rf, agents=chosen, ax=ax)
        return fig
    k = len(chosen)
    if fig is None:
        fig = _new_figure(timeline_height(k))
    axes = fig.subplots(k, 1, sharex=True, squeeze=False)[:, 0]
    for ax, a in zip(axes, chosen):
        agent_timeline(rf, a, ax=ax, window=window, legend=False)
    axes[-1].set_xlabel("task index")
    fig.legend(handles=_state_legend_handles(), loc="outside lower center", ncol=8, fontsize=8, frameon=False)
    fig.suptitle(f"{rf.scenario.get('name', '')} (seed {rf.seed}): detection and reintegration",
                 fontsize=10)
    return fig


def timeline_height(k: int) -> float:
    return 0.9 + 2.5 * k


def _heatmap_height(n: int) -> float:
    return min(7.0, 1.6 + 0.22 * n)


def state_heatmap(run: Any, agents: Optional[Sequence[str]] = None, ax=None, seed: Optional[int] = None):
    """Inferred state of every agent (rows) at every task (columns).

    Rows: degraded agents first (grouped by degradation interval), then the
    others, natural order within a group. Black outlines: injected
    degradation (ground truth); one outline per group of consecutive rows
    with the same interval, so 576-agent runs stay readable.
    """
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    rf = _as_folder(run, seed)
    _need_meshheal(rf, "heatmap")
    names = list(agents) if agents else rf.agents()
    known = set(rf.agents())
    bad = [a for a in names if a not in known]
    if bad:
        raise InputError(f"unknown agent (this run has {_agent_list(rf)})",
                         field="--agents", value=bad[0])
    deg = degraded_intervals(rf)
    rows = sorted(names, key=lambda a: (0 if a in deg else 1, tuple(deg.get(a, ())), node_order(a)))
    n = rf.n_tasks
    ax = _axes(ax, _heatmap_height(len(rows)))
    mat = np.zeros((len(rows), n), dtype=np.int8)
    code = {s: i for i, s in enumerate(STATES)}
    per: dict[str, list[dict]] = {}
    for s in rf.states():
        per.setdefault(s["agent"], []).append(s)
    for i, a in enumerate(rows):
        cur, k0 = 0, 1
        for s in per.get(a, ()):
            k = max(1, min(int(s["task"]), n + 1))
            mat[i, k0 - 1:k - 1] = cur
            cur, k0 = code.get(s["new"], 0), k
        mat[i, k0 - 1:] = cur
    # more tasks than pixels: show the worst state per bin, so one-task blips stay visible
    step = max(1, math.ceil(n / HEAT_COLUMNS))
    if step > 1:
        pad = (-n) % step
        mat = np.pad(mat, ((0, 0), (0, pad)), mode="edge").reshape(len(rows), -1, step).max(axis=2)
    cmap = ListedColormap([HEAT_COLORS[s] for s in STATES])
    ax.imshow(mat, aspect="auto", interpolation="nearest", cmap=cmap, vmin=0, vmax=2,
              extent=(0.5, n + pad + 0.5 if step > 1 else n + 0.5, len(rows) - 0.5, -0.5))
    ax.set_xlim(0.5, n + 0.5)
    # outlines: merge consecutive rows with the same intervals
    i = 0
    while i < len(rows):
        spans = tuple(deg.get(rows[i], ()))
        j = i
        while j + 1 < len(rows) and tuple(deg.get(rows[j + 1], ())) == spans:
            j += 1
        for b, r in spans:
            ax.add_patch(_rect((b - 0.5, i - 0.5), r - b, j - i + 1, "black", fill=False, lw=1.0, zorder=3))
        i = j + 1
    if len(rows) <= 40:
        ax.set_yticks(range(len(rows)), rows, fontsize=7 if len(rows) > 20 else 8)
    else:
        step = max(1, len(rows) // 12)
        ticks = list(range(0, len(rows), step))
        ax.set_yticks(ticks, [rows[t] for t in ticks], fontsize=7)
    n_deg = sum(1 for a in rows if a in deg)
    ax.set_ylabel(f"agents ({n_deg} degraded first)" if n_deg else "agents")
    ax.set_xlabel("task index")
    ax.set_title(f"{rf.scenario.get('name', '')} (seed {rf.seed}): inferred state of {len(rows)} agents"
                 + (f" (worst per {step} tasks)" if step > 1 else "") + "; outlined: injected degradation",
                 fontsize=9, loc="left")
    handles = [Patch(facecolor=HEAT_COLORS[s], edgecolor="#868e96", label=s) for s in STATES]
    handles.append(Patch(facecolor="none", edgecolor="black", label="degraded (truth)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
    return ax


# ---------------------------------------------------------------------------
# 2. phases


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
        ax.bar(xs, means, yerr=errs if rs.multi else None, color=colors, capsize=3, width=0.7,
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


# ---------------------------------------------------------------------------
# 3. detector


def _detector_points(rf: RunFolder, agent: str) -> tuple[str, list[tuple[int, str, float, str, bool]], dict]:
    """(statistic label, [(task, ability, value, state, probe)], thresholds)."""
    p = rf.params
    kind = str(p.get("detector", "relative"))
    rows = sorted((r for r in rf.reviews() if r["agent"] == agent), key=lambda r: r["task"])
    pts = []
    if kind == "absolute":
        w = int(p.get("window", 8))
        hist: dict[tuple[str, str], list[float]] = {}
        for r in rows:
            for d in r.get("detector") or []:
                if r.get("q") is None:
                    continue
                h = hist.setdefault((r["type"], d["ability"]), [])
                h.append(float(r["q"]))
                del h[:-w]
                pts.append((r["task"], d["ability"], sum(h) / len(h), d["state"], bool(r.get("probe"))))
        th = {"watch": (f"abs_watch = {p.get('abs_watch', 0.6):g} (watch below)", float(p.get("abs_watch", 0.6))),
              "isolate": (f"abs_isolate = {p.get('abs_isolate', 0.5):g} (isolate below)",
                          float(p.get("abs_isolate", 0.5)))}
        return f"own mean score (last {w}, per task type and ability)", pts, th
    for r in rows:
        for d in r.get("detector") or []:
            if d.get("z") is not None:
                pts.append((r["task"], d["ability"], float(d["z"]), d["state"], bool(r.get("probe"))))
    if kind == "cusum":
        h = float(p.get("cusum_h", 1.0))
        return "CUSUM of the score deficit", pts, {"watch": ("h (watch)", h), "isolate": ("2h (isolate)", 2 * h)}
    return ("z = (x̄ − m) / max(m − p25, floor)", pts,
            {"watch": (f"α = {p.get('alpha', 1.2):g} (watch)", float(p.get("alpha", 1.2))),
             "isolate": (f"β = {p.get('beta', 2.0):g} (isolate)", float(p.get("beta", 2.0)))})


def detector_view(run: Any, agent: str, ax=None, seed: Optional[int] = None, legend: bool = True):
    """The detector statistic of ``agent`` at each of its matched reviews.

    Relative detector (default): z per (task type, ability) update with the
    α (watch) and β (isolate) lines from ``protocol.params``; CUSUM: the
    statistic against h and 2h; absolute: the agent's own recent mean score
    against abs_watch / abs_isolate (recomputed from reviews.jsonl). Points
    are coloured by the state after the update, hollow for probes; pink spans
    are injected degradation, the bottom strip the inferred state.
    """
    rf = _as_folder(run, seed)
    _need_meshheal(rf, "detector view")
    if agent not in rf.agents():
        raise InputError(f"unknown agent (this run has {_agent_list(rf)})",
                         field="--agents", value=agent)
    if str(rf.params.get("detector", "relative")) == "none" or rf.params.get("review") is False:
        raise RunFolderError("this run has no detector (protocol.params.detector: none)", file=str(rf.path))
    label, pts, th = _detector_points(rf, agent)
    ax = _axes(ax, 3.4)
    n = rf.n_tasks
    _shade_degraded(ax, degraded_intervals(rf).get(agent, []))
    pts.sort(key=lambda p: p[0])
    ax.plot([p[0] for p in pts], [p[2] for p in pts], color="#adb5bd", lw=0.7, zorder=2)
    for probe in (False, True):
        ss = [p for p in pts if p[4] == probe]
        if ss:
            cols = [STATE_COLORS.get(p[3], "#495057") for p in ss]
            ax.scatter([p[0] for p in ss], [p[2] for p in ss], marker="o", s=20 if not probe else 26,
                       facecolors="none" if probe else cols, edgecolors=cols, linewidths=1.0, zorder=4)
    (wl, wv), (il, iv) = th["watch"], th["isolate"]
    # the two labels sit on the far sides of their lines, so close thresholds do not collide
    upper = "watch" if wv > iv else "isolate"
    for key, v, lab, col in (("watch", wv, wl, STATE_COLORS["watched"]), ("isolate", iv, il, STATE_COLORS["isolated"])):
        ax.axhline(v, color=col, ls=":", lw=1.4, zorder=3)
        above = key == upper
        ax.annotate(lab, (1.0, v), xycoords=("axes fraction", "data"), xytext=(-3, 2 if above else -2),
                    textcoords="offset points", ha="right", va="bottom" if above else "top", fontsize=7,
                    color=col, zorder=6,
                    bbox={"fc": "white", "ec": "none", "alpha": 0.75, "pad": 0.5})
    vals = [p[2] for p in pts] + [wv, iv, 0.0]
    ymin, ymax = min(vals), max(vals)
    pad = (ymax - ymin) * 0.08 or 0.5
    strip = (ymax - ymin + 2 * pad) * 0.1
    ax.set_ylim(ymin - pad - strip, ymax + pad * 2.6)
    y0 = ymin - pad - strip
    _state_strip(ax, state_series(rf, agent), y0 + strip * 0.1, strip * 0.75)
    _marks(ax, rf, agent, top=0.995)
    ax.set_xlim(0.5, n + 0.5)
    ax.set_ylabel("detector statistic")
    ax.set_title(f"{agent}: {label}" + ("" if pts else " (no detector updates with a statistic)"),
                 fontsize=9, loc="left")
    if legend and len(ax.figure.axes) == 1:
        ax.set_xlabel("task index")
        ax.figure.legend(handles=_state_legend_handles(curve=False, band=False), loc="outside lower center",
                         ncol=6, fontsize=8, frameon=False)
    return ax


def detector_figure(run: Any, agents: Optional[Sequence[str]] = None, seed: Optional[int] = None, fig=None):
    """:func:`detector_view` for several agents, one panel each."""
    rf = _as_folder(run, seed)
    _need_meshheal(rf, "detector view")
    chosen = list(agents) if agents else default_agents(rf)
    chosen = chosen[:MAX_PANELS]
    if fig is None:
        fig = _new_figure(0.9 + 2.8 * len(chosen))
    axes = fig.subplots(len(chosen), 1, sharex=True, squeeze=False)[:, 0]
    for ax, a in zip(axes, chosen):
        detector_view(rf, a, ax=ax)
    axes[-1].set_xlabel("task index")
    fig.legend(handles=_state_legend_handles(curve=False, band=False), loc="outside lower center", ncol=6,
               fontsize=8, frameon=False)
    fig.suptitle(f"{rf.scenario.get('name', '')} (seed {rf.seed}): detector statistic per review", fontsize=10)
    return fig


# ---------------------------------------------------------------------------
# 4. SAC / CP-WBFT


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


ROLE_COLORS = {"strong": "#1c7ed6", "weak": "#f08c00", "faulty": "#f08c00", "adversarial": "#e03131",
               "ood": "#fa5252", "persuasive": "#a61e4d",
               "equivocating": "#c2255c", "colluding": "#862e9c", "no ability": "#ced4da"}
_TOPO_COLORS = ["#1c7ed6", "#e8590c", "#2f9e44", "#ae3ec9", "#f08c00", "#0c8599", "#c2255c"]


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
# 5. topology


def _graph(rf: RunFolder):
    from .scenario import agent_abilities, build_graph, parse_scenario

    src = str(rf.path / "scenario.resolved.yaml")
    try:
        sc = parse_scenario(rf.scenario, source=src, base_dir=rf.path)
        G = build_graph(sc, rf.seed)
        try:
            abilities, _ = agent_abilities(sc, G)
        except InputError:
            abilities = {v: [] for v in G.nodes}
    except MeshsimError as exc:
        raise RunFolderError(f"cannot rebuild the topology: {exc}", file=src) from None
    return G, abilities


def _final_states(rf: RunFolder) -> dict[str, str]:
    out: dict[str, str] = {}
    if rf.has("states.jsonl"):
        for s in rf.states():
            out[s["agent"]] = s["new"]
    return out


def _roles(rf: RunFolder, abilities: dict[str, list[str]]) -> dict[str, str]:
    """Agent roles: summary ``roles``, else scenario ``agents.roles`` (SAC: default
    strong), else the ability set."""
    s = rf.summary
    for key in ("roles", "role"):
        if isinstance(s.get(key), dict):
            return {str(a): str(r) for a, r in s[key].items()}
    declared = (rf.scenario.get("agents") or {}).get("roles")
    if (isinstance(declared, dict) and declared) or rf.is_sac:
        declared = declared if isinstance(declared, dict) else {}
        return {a: str(declared.get(a, "strong")) for a in abilities}
    return {a: (", ".join(k) if k else "no ability") for a, k in abilities.items()}


def topology(run: Any, color_by: str = "state", seed: Optional[int] = None, fig=None):
    """The run's initial graph (rebuilt from scenario.resolved.yaml).

    ≤ 100 agents: spring layout, nodes coloured by final inferred state (or by
    role: summary ``roles`` if present, else the ability set), ground-truth
    degraded agents ringed in black. Larger graphs: degree histogram and
    agents per ability, split by final state. The title gives the
    r-robustness (SAC Def. 3.3) for graphs of ≤ 30 agents.
    """
    import numpy as np
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    rf = _as_folder(run, seed)
    G, abilities = _graph(rf)
    n, m = G.number_of_nodes(), G.number_of_edges()
    final = _final_states(rf)
    deg_truth = set(degraded_intervals(rf)) if (rf.has("reviews.jsonl") or _summary_agents(rf.summary)) else set()
    title = f"{rf.scenario.get('name', '')}: {n} agents, {m} links (initial graph)"
    if 2 <= n <= 30:
        try:
            from .robustness import robustness

            title += f", {robustness(G, time_limit=5.0)}-robust"
        except (MeshsimError, ImportError):
            pass
    if color_by == "role" or (color_by == "state" and not final and not rf.has("states.jsonl")):
        groups = _roles(rf, abilities)
        color_by = "role"
    else:
        groups = {v: final.get(v, "normal") for v in G.nodes}
    if n <= 100:
        import networkx as nx

        if fig is None:
            fig = _new_figure(6.0)
        ax = fig.add_subplot(1, 1, 1)
        pos = nx.spring_layout(G, seed=0) if n > 1 else {v: np.zeros(2) for v in G.nodes}
        segs = [(pos[u], pos[v]) for u, v in G.edges]
        ax.add_collection(LineCollection(segs, colors="#ced4da", linewidths=0.8 if n > 30 else 1.2, zorder=1))
        order = list(G.nodes)
        if color_by == "role":
            kinds = list(dict.fromkeys(groups.get(v, "?") for v in sorted(order, key=node_order)))
            if len(kinds) > 20:  # keep the legend readable: the rarest roles share one grey
                count = {k: sum(1 for v in order if groups.get(v) == k) for k in kinds}
                keep = set(sorted(kinds, key=lambda k: -count[k])[:19])
                other = f"other ({len(kinds) - 19} roles)"
                groups = {v: (g if g in keep else other) for v, g in groups.items()}
                kinds = [k for k in kinds if k in keep] + [other]
            palette = _palette(kinds)
        else:
            kinds = [s for s in STATES if s in set(groups.values())]
            palette = STATE_COLORS
        xy = np.array([pos[v] for v in order])
        size = 420 if n <= 12 else (160 if n <= 40 else 60)
        ax.scatter(xy[:, 0], xy[:, 1], s=size, c=[palette.get(groups.get(v, "?"), "#adb5bd") for v in order],
                   edgecolors=["black" if v in deg_truth else "white" for v in order],
                   linewidths=[2.4 if v in deg_truth else 0.8 for v in order], zorder=2)
        if n <= 40:
            for v in order:
                ax.annotate(v, pos[v], ha="center", va="center", fontsize=8 if n <= 12 else 6, color="white"
                            if n <= 12 else "black", xytext=(0, 0 if n <= 12 else 7), textcoords="offset points",
                            zorder=3, fontweight="bold" if n <= 12 else "normal")
        handles = [Line2D([], [], ls="", marker="o", ms=8, color=palette[k], label=_short(k)) for k in kinds]
        if deg_truth:
            handles.append(Line2D([], [], ls="", marker="o", ms=8, mfc="white", mec="black", mew=2,
                                  label="degraded (truth)"))
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False,
                  title="final state" if color_by == "state" else "role", title_fontsize=8)
        ax.set_aspect("equal", adjustable="datalim")
        ax.autoscale_view()
        ax.margins(0.08)
        ax.set_axis_off()
        ax.set_title(title, fontsize=10)
        return fig
    # large graph: degree and ability summary
    if fig is None:
        fig = _new_figure(3.8)
    a1, a2 = fig.subplots(1, 2)
    kinds = [s for s in STATES if s in set(groups.values())] if color_by == "state" else \
        list(dict.fromkeys(groups.values()))
    palette = STATE_COLORS if color_by == "state" else _palette(kinds)
    degs = dict(G.degree())
    dmax = max(degs.values()) if degs else 0
    dmin = min(degs.values()) if degs else 0
    bins = np.arange(dmin - 0.5, dmax + 1.5, max(1, (dmax - dmin + 1) // 40))
    a1.hist([[degs[v] for v in G.nodes if groups.get(v) == k] for k in kinds], bins=bins, stacked=True,
            color=[palette[k] for k in kinds], label=[_short(k) for k in kinds])
    a1.set_xlabel("degree")
    a1.set_ylabel("agents")
    a1.set_title(f"degree: min {min(degs.values())}, mean {np.mean(list(degs.values())):.1f}, max {dmax}",
                 fontsize=9)
    a1.legend(fontsize=8, frameon=False)
    abil = sorted({k for ks in abilities.values() for k in ks})
    if abil:
        bottom = np.zeros(len(abil))
        for k in kinds:
            cnt = np.array([sum(1 for v in G.nodes if ab in abilities.get(v, ()) and groups.get(v) == k)
                            for ab in abil], dtype=float)
            a2.barh(range(len(abil)), cnt, left=bottom, color=palette[k], label=_short(k))
            bottom += cnt
        a2.set_yticks(range(len(abil)), [a.replace("_", " ") for a in abil], fontsize=8)
        a2.invert_yaxis()
        a2.set_xlabel("holders")
        a2.set_title("agents per ability", fontsize=9)
    else:
        counts = [sum(1 for v in G.nodes if groups.get(v) == k) for k in kinds]
        a2.bar(range(len(kinds)), counts, color=[palette[k] for k in kinds])
        a2.set_xticks(range(len(kinds)), [_short(k) for k in kinds], fontsize=8)
        a2.set_ylabel("agents")
        a2.set_title("agents per " + ("final state" if color_by == "state" else "role"), fontsize=9)
    fig.suptitle(title, fontsize=10)
    return fig


def _palette(kinds: list[str]) -> dict[str, str]:
    """Role colours: fixed ones for SAC roles, then a qualitative palette."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    if len(kinds) <= len(_TOPO_COLORS):
        base = list(_TOPO_COLORS)
    else:
        base = [to_hex(colormaps["tab20"](i)) for i in range(20)]
    out = {}
    for i, k in enumerate(kinds):
        out[k] = "#adb5bd" if k.startswith("other (") else ROLE_COLORS.get(k, base[i % len(base)])
    return out


def _short(text: str, k: int = 38) -> str:
    text = str(text).replace("_", " ")
    return text if len(text) <= k else text[:k - 1] + "…"


# ---------------------------------------------------------------------------
# one call per CLI kind


def parse_agents(text: Optional[str]) -> Optional[list[str]]:
    if not text:
        return None
    out = [a.strip() for a in text.split(",") if a.strip()]
    return out or None


def default_kind(run: Any) -> str:
    rf = _as_folder(run)
    if rf.is_meshheal:
        return "timeline" if len(rf.agents()) <= 40 else "heatmap"
    if rf.is_sac:
        return "sac"
    return "topology"


def figure(kind: str, run_dirs: Sequence[Any], agents: Optional[Sequence[str]] = None,
           seed: Optional[int] = None):
    """Build the figure of ``kind`` (one of :data:`KINDS`) for the run folder(s)."""
    if kind not in KINDS:
        raise InputError(f"unknown plot kind (choose from {', '.join(KINDS)})", field="--kind", value=kind)
    if kind == "sac":
        return sac_figure(list(run_dirs))
    if len(run_dirs) != 1:
        raise InputError(f"--kind {kind} takes one run folder (several only for --kind sac)",
                         field="RUN_DIR", value=[str(r) for r in run_dirs])
    rs = open_run(run_dirs[0])
    if kind == "phases":
        return phase_bars(rs)
    rf = rs.run(seed)
    if kind == "timeline":
        return timeline(rf, agents=agents)
    if kind == "heatmap":
        fig = _new_figure(_heatmap_height(len(agents or rf.agents())))
        state_heatmap(rf, agents=agents, ax=fig.add_subplot(1, 1, 1))
        return fig
    if kind == "detector":
        return detector_figure(rf, agents=agents)
    return topology(rf)


def render(run_dirs: Sequence[Any] | Any, kind: Optional[str] = None, agents: Optional[Sequence[str]] = None,
           seed: Optional[int] = None, out: Optional[Path | str] = None) -> Path:
    """Draw ``kind`` and write it as a PNG; returns the file written.

    Default file: ``RUN_DIR/<kind>.png`` (``<kind>-seed-<s>.png`` for a seed of a
    multi-seed folder).
    """
    if isinstance(run_dirs, (str, Path, RunSet, RunFolder)):
        run_dirs = [run_dirs]
    run_dirs = list(run_dirs)
    if not run_dirs:
        raise InputError("give at least one run folder", field="RUN_DIR")
    first = open_run(run_dirs[0])
    kind = kind or default_kind(first.run(seed))
    fig = figure(kind, [first] + run_dirs[1:], agents=agents, seed=seed)
    if out is None:
        suffix = f"-seed-{first.run(seed).seed}" if first.multi and kind not in ("phases", "sac") else ""
        out = first.path / f"{kind}{suffix}.png"
    return save_figure(fig, out)
