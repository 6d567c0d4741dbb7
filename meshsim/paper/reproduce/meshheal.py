"""The MeshHeal paper's experiments (arXiv 2609.29015) for ``meshsim reproduce meshheal``.

Each experiment is data: its run groups (:class:`Group`: scenario, overrides,
profile) and its table of :class:`Row` s, one number of the paper each (or a
quantity the paper leaves out: paper value None), with where our value is
read. :func:`table_cells` turns any such table into report cells;
:func:`audit_cells` reads the calibration targets of App. C.5 instead
(:data:`meshsim.paper.calibration.TARGETS`).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from ...core.dotted import get_path
from .core import TARGET, Cell, Experiment, RunSpec, Sensitivity, _pair, _vals, seeds_of

__all__ = ["meshheal_experiments", "meshheal_sensitivities", "Group", "Row", "table_cells", "audit_cells"]

MH = "scenarios/meshheal"
NO_TRACE = ("output.trace=none",)


# ---------------------------------------------------------------------------------------- the two kinds of data

@dataclass(frozen=True)
class Group:
    """Runs of one scenario, one per seed (at most ``max_seeds`` of them)."""
    scenario: str
    sets: tuple[str, ...] = ()
    profile: Optional[str] = None
    max_seeds: Optional[int] = None

    def specs(self, seeds: "int | list[int]") -> list[RunSpec]:
        ks = seeds_of(seeds)[:self.max_seeds] if self.max_seeds else seeds_of(seeds)
        return [RunSpec(self.scenario, self.sets, seed=k, profile=self.profile) for k in ks]


Metric = Union[str, Callable[[dict], Optional[float]]]


@dataclass(frozen=True)
class Row:
    """One cell of the report: the paper's value and where ours comes from.

    ``runs``: a group label; ``"a - b"`` the paired (per seed) difference of
    two groups; ``"mean a b c"`` / ``"sum a b c"`` per seed over groups.
    ``metric``: a dotted summary path (times ``scale``); ``"x - y"`` the
    paired difference of two paths; or a function of one run's summary."""
    source: str  # the paper's table or section
    label: str
    runs: str
    metric: Metric
    paper: Any = None  # a number, a text such as "0.808-0.827", or None when the paper does not report it
    sd: Optional[float] = None
    fmt: str = "{:.3f}"
    note: str = ""
    scale: float = 1.0


def _minus(a: float, b: float) -> float:
    return a - b


def _values(by: dict[str, list[dict]], row: Row, runs: str, metric: Metric) -> list[Optional[float]]:
    """Per seed, ``metric`` over ``runs`` (the grammar of :class:`Row`)."""
    if isinstance(metric, str) and " - " in metric:
        x, y = metric.split(" - ")
        return _pair(_values(by, row, runs, x), _values(by, row, runs, y), _minus)
    if " - " in runs:
        a, b = runs.split(" - ")
        return _pair(_values(by, row, a, metric), _values(by, row, b, metric), _minus)
    how, *groups = runs.split()
    if how in ("mean", "sum"):
        combine = statistics.fmean if how == "mean" else sum
        cols = zip(*[_values(by, row, g, metric) for g in groups])
        return [None if any(v is None for v in col) else combine(col) for col in cols]
    if callable(metric):
        return [metric(x) for x in by[runs]]
    return _vals(by[runs], metric, row.scale)


def _groups(runs: str) -> set[str]:
    return {g for g in runs.replace(" - ", " ").split() if g not in ("mean", "sum")}


#: the paper closes every degraded agent in each of its 5 seeds: "5/5" beside 5 seeds, "all" beside another count
ALL_5 = "5/5"


def table_cells(rows: tuple[Row, ...], by: dict[str, list[dict]]) -> list[Cell]:
    """The report's cells of a table of :class:`Row` s, from the summaries of each run group."""
    cells = []
    for r in rows:
        paper = r.paper
        if paper == ALL_5:
            n = len(by[next(iter(_groups(r.runs)))])
            paper = ALL_5 if n == 5 else "all"
        cells.append(Cell(r.source, r.label, paper, values=_values(by, r, r.runs, r.metric), paper_sd=r.sd,
                          fmt=r.fmt, note=r.note))
    return cells


def audit_cells(by: dict[str, list[dict]]) -> list[Cell]:
    """App. C.5's audit of persistent BBH beside the values the fake was calibrated to."""
    from ..calibration import TARGETS, _pooled_takeover

    sums = by["bbh"]
    pooled = _pooled_takeover([s["audit"] for s in sums])
    cells = []
    for t in TARGETS:
        if t.key.startswith("takeover."):
            v = pooled.get(t.key.split(".", 1)[1])
            vals = [v]
            note = "pooled over seeds"
        else:
            vals = _vals(sums, "audit." + t.key)
            note = ""
        cells.append(Cell("App. C.5", t.label, t.paper, kind=TARGET, values=vals, paper_sd=t.spread, note=note))
    return cells


# ---------------------------------------------------------------------------------------- derived quantities

def _after_first_degradation(x: dict) -> Optional[float]:
    """Accuracy over the four phases after the first degradation (the 504 tasks of Tab. 3a)."""
    ph = x["accuracy"]["by_phase"]
    xs = [ph[k] for k in ("a5_degraded", "both_degraded", "a3_degraded", "restored") if k in ph]
    return statistics.fmean(xs) if len(xs) == 4 else None


def _isolated_share(x: dict) -> Optional[float]:
    """Degraded agents isolated, as a share of those degraded."""
    d = float(len(x.get("agents", {})))
    i = float(len(x.get("agents", {})) - x.get("missed", 0))
    return i / d if d else None


def _closed(agent: str) -> Callable[[dict], float]:
    def closed(x: dict) -> float:
        return 1.0 if get_path(x, f"agents.{agent}.closure", None) else 0.0
    return closed


# ---------------------------------------------------------------------------------------- the paper's tables

H, D = "accuracy.by_phase.healthy", "accuracy.by_phase.degraded"
CHANGE = f"{D} - {H}"  # the paired phase change
DATASETS = "bbh math mmlu-pro"
NOT_REPORTED = "the paper does not report them for this setting"

#: Sec. 6.1, Tab. 2a, C1, C2: persistent degradation on three datasets
PERSISTENT = (
    Row("Tab. C1", "BBH: healthy-phase accuracy", "bbh", H),
    Row("Tab. C1", "BBH: degraded-phase accuracy", "bbh", D),
    Row("Tab. C1", "BBH: paired phase change", "bbh", CHANGE, ">= 0", fmt="{:+.3f}"),
    Row("Tab. C1", "MATH: healthy-phase accuracy", "math", H, 0.821, 0.019),
    Row("Tab. C1", "MATH: degraded-phase accuracy", "math", D, 0.802, 0.021),
    Row("Tab. C1", "MATH: paired phase change", "math", CHANGE, -0.019, fmt="{:+.3f}"),
    Row("Tab. C1", "MMLU-Pro: healthy-phase accuracy", "mmlu-pro", H),
    Row("Tab. C1", "MMLU-Pro: degraded-phase accuracy", "mmlu-pro", D),
    Row("Tab. C1", "MMLU-Pro: paired phase change", "mmlu-pro", CHANGE, ">= 0", fmt="{:+.3f}"),
    Row("Tab. 2a", "mean of datasets: healthy-phase accuracy", f"mean {DATASETS}", H, 0.831, 0.013),
    Row("Tab. 2a", "mean of datasets: degraded-phase accuracy", f"mean {DATASETS}", D, 0.839, 0.012),
    Row("Tab. 2a", "mean of datasets: paired phase change", f"mean {DATASETS}", CHANGE, 0.007, 0.012,
        fmt="{:+.3f}"),
    Row("Tab. C2", "model calls per task, healthy phase", f"mean {DATASETS}", "calls_per_task_by_phase.healthy",
        12.4, 0.2, fmt="{:.1f}"),
    Row("Tab. C2", "model calls per task, degraded phase", f"mean {DATASETS}", "calls_per_task_by_phase.degraded",
        13.6, 0.3, fmt="{:.1f}"),
    Row("Tab. C2", "tokens per task (k), healthy phase", f"mean {DATASETS}", "tokens_per_task_by_phase.healthy",
        51.0, 3.0, fmt="{:.1f}", scale=1e-3),
    Row("Tab. C2", "tokens per task (k), degraded phase", f"mean {DATASETS}", "tokens_per_task_by_phase.degraded",
        51.0, 5.0, fmt="{:.1f}", scale=1e-3),
    Row("Sec. 6.1", "missed degraded agents (of 2 per dataset, summed)", f"sum {DATASETS}", "missed",
        fmt="{:.1f}", note=NOT_REPORTED),
    Row("Sec. 6.1", "agents isolated while healthy (of 6 per dataset, summed)", f"sum {DATASETS}",
        "detection.false_isolations", fmt="{:.1f}", note=NOT_REPORTED),
)

#: Sec. 6.2, Tab. 3: staggered degradation and recovery
STAGGERED = (
    Row("Tab. 3a", "accuracy, phase healthy", "staggered", "accuracy.by_phase.healthy"),
    Row("Tab. 3a", "accuracy, phase a5_degraded", "staggered", "accuracy.by_phase.a5_degraded"),
    Row("Tab. 3a", "accuracy, phase both_degraded", "staggered", "accuracy.by_phase.both_degraded", 0.770),
    Row("Tab. 3a", "accuracy, phase a3_degraded", "staggered", "accuracy.by_phase.a3_degraded", 0.841),
    Row("Tab. 3a", "accuracy, phase restored", "staggered", "accuracy.by_phase.restored", 0.857),
    Row("Tab. 3a", "accuracy over the 504 tasks after the first degradation", "staggered",
        _after_first_degradation, 0.812),
    Row("Tab. 3a", "tokens per task (k)", "staggered", "tokens_per_task", 49.0, fmt="{:.1f}", scale=1e-3),
    Row("Tab. 3b", "A5 detection delay (tasks)", "staggered", "agents.A5.detection_delay", 8.0, 5.2, fmt="{:.1f}"),
    Row("Tab. 3b", "A5 closure (seeds)", "staggered", _closed("A5"), ALL_5, fmt="{:.2f}", note="fraction of seeds"),
    Row("Tab. 3b", "A5 reintegration delay (tasks)", "staggered", "agents.A5.reintegration_delay", 46.0, 11.7,
        fmt="{:.1f}"),
    Row("Tab. 3b", "A3 detection delay (tasks)", "staggered", "agents.A3.detection_delay", 12.4, 6.2, fmt="{:.1f}"),
    Row("Tab. 3b", "A3 closure (seeds)", "staggered", _closed("A3"), ALL_5, fmt="{:.2f}", note="fraction of seeds"),
    Row("Tab. 3b", "A3 reintegration delay (tasks)", "staggered", "agents.A3.reintegration_delay", 45.0, 3.5,
        fmt="{:.1f}"),
    Row("Tab. 3b", "agents isolated while healthy (of 6)", "staggered", "detection.false_isolations", 0.0,
        fmt="{:.1f}",
        note="the paper reports none ('isolates degraded agents ... returns them to normal routing')"),
)

ISOLATED_ALL = "every degraded agent isolated in the paper"
COMPLETE, SPARSE, NEAR = "0.808-0.827", "0.803-0.818", "|d| <= 0.010"
SIZES = (96, 288, 576)

#: Sec. 6.3, Tab. 2b: scaling with local information
# deliberate repetition: one row per cell of Tab. 2b, written out as the paper prints it (issue 31)
SCALING = (
    Row("Tab. 2b", "96 agents, complete: accuracy", "96-complete", "accuracy.overall", COMPLETE),
    Row("Tab. 2b", "96 agents, complete: isolated / degraded", "96-complete", _isolated_share, 1.0, fmt="{:.3f}",
        note=ISOLATED_ALL),
    Row("Tab. 2b", "96 agents, complete: falsely isolated healthy agents", "96-complete",
        "detection.false_isolations", fmt="{:.1f}"),
    Row("Tab. 2b", "96 agents, sparse: accuracy", "96-sparse", "accuracy.overall", SPARSE),
    Row("Tab. 2b", "96 agents, sparse: isolated / degraded", "96-sparse", _isolated_share, 1.0, fmt="{:.3f}",
        note=ISOLATED_ALL),
    Row("Tab. 2b", "96 agents, sparse: falsely isolated healthy agents", "96-sparse",
        "detection.false_isolations", fmt="{:.1f}"),
    Row("Tab. 2b", "96 agents: sparse - complete accuracy", "96-sparse - 96-complete", "accuracy.overall", NEAR,
        fmt="{:+.3f}"),
    Row("Tab. 2b", "288 agents, complete: accuracy", "288-complete", "accuracy.overall", COMPLETE),
    Row("Tab. 2b", "288 agents, complete: isolated / degraded", "288-complete", _isolated_share, 1.0, fmt="{:.3f}",
        note=ISOLATED_ALL),
    Row("Tab. 2b", "288 agents, complete: falsely isolated healthy agents", "288-complete",
        "detection.false_isolations", fmt="{:.1f}"),
    Row("Tab. 2b", "288 agents, sparse: accuracy", "288-sparse", "accuracy.overall", SPARSE),
    Row("Tab. 2b", "288 agents, sparse: isolated / degraded", "288-sparse", _isolated_share, 1.0, fmt="{:.3f}",
        note=ISOLATED_ALL),
    Row("Tab. 2b", "288 agents, sparse: falsely isolated healthy agents", "288-sparse",
        "detection.false_isolations", fmt="{:.1f}"),
    Row("Tab. 2b", "288 agents: sparse - complete accuracy", "288-sparse - 288-complete", "accuracy.overall", NEAR,
        fmt="{:+.3f}"),
    Row("Tab. 2b", "576 agents, complete: accuracy", "576-complete", "accuracy.overall", COMPLETE),
    Row("Tab. 2b", "576 agents, complete: isolated / degraded", "576-complete", _isolated_share, 1.0, fmt="{:.3f}",
        note=ISOLATED_ALL),
    Row("Tab. 2b", "576 agents, complete: falsely isolated healthy agents", "576-complete",
        "detection.false_isolations", fmt="{:.1f}"),
    Row("Tab. 2b", "576 agents, sparse: accuracy", "576-sparse", "accuracy.overall", 0.814),
    Row("Tab. 2b", "576 agents, sparse: isolated / degraded", "576-sparse", _isolated_share, 1.0, fmt="{:.3f}",
        note=ISOLATED_ALL),
    Row("Tab. 2b", "576 agents, sparse: falsely isolated healthy agents", "576-sparse",
        "detection.false_isolations", fmt="{:.1f}"),
    Row("Tab. 2b", "576 agents: sparse - complete accuracy", "576-sparse - 576-complete", "accuracy.overall", NEAR,
        fmt="{:+.3f}"),
)

#: Sec. 6.4, Tab. C6: fast-timescale ablations on BBH
ABLATIONS = (
    Row("Tab. C6", "full: paired phase change", "full", CHANGE, 0.001, 0.016, fmt="{:+.3f}"),
    Row("Tab. C6", "full: degraded-phase accuracy", "full", D),
    Row("Tab. C6", "single reviewer: paired phase change", "single", CHANGE, -0.044, 0.024, fmt="{:+.3f}"),
    Row("Tab. C6", "single reviewer: degraded-phase accuracy", "single", D),
    Row("Tab. C6", "no Takeover: paired phase change", "no_takeover", CHANGE, -0.035, 0.030, fmt="{:+.3f}"),
    Row("Tab. C6", "no Takeover: degraded-phase accuracy", "no_takeover", D),
    Row("Tab. C6", "single reviewer - full: degraded-phase accuracy", "single - full", D, -0.035, fmt="{:+.3f}"),
    Row("Tab. C6", "single reviewer - full: healthy-phase accuracy", "single - full", H, "slightly higher",
        fmt="{:+.3f}"),
    Row("Tab. C6", "no Takeover - full: degraded-phase accuracy", "no_takeover - full", D, -0.056, fmt="{:+.3f}"),
    Row("Tab. C6", "no Takeover - full: healthy-phase accuracy", "no_takeover - full", H, -0.020, fmt="{:+.3f}"),
)

MISSED, FALSE = "missed", "detection.false_isolations"
OF_4 = "agents isolated while healthy (paper: of the 4 never degraded)"
THREE = "the paper's value is the mean of three datasets"

#: Sec. 6.4, Tab. C7 (+ C3, C4): detectors under model pairs A and B; "n/r": not reported
DETECTORS = (
    Row("Tab. C7", "pair A, relative: missed degraded agents (of 2)", "a-relative", MISSED, 0, fmt="{:.1f}"),
    Row("Tab. C7", f"pair A, relative: {OF_4}", "a-relative", FALSE, 0, fmt="{:.1f}"),
    Row("Tab. C7", "pair A, absolute: missed degraded agents (of 2)", "a-absolute", MISSED, 0, fmt="{:.1f}"),
    Row("Tab. C7", f"pair A, absolute: {OF_4}", "a-absolute", FALSE, 4, fmt="{:.1f}"),
    Row("Tab. C7", "pair A, cusum: missed degraded agents (of 2)", "a-cusum", MISSED, "n/r", fmt="{:.1f}"),
    Row("Tab. C7", f"pair A, cusum: {OF_4}", "a-cusum", FALSE, 2, fmt="{:.1f}"),
    Row("Tab. C7", "pair B, relative: missed degraded agents (of 2)", "b-relative", MISSED, 0, fmt="{:.1f}"),
    Row("Tab. C7", f"pair B, relative: {OF_4}", "b-relative", FALSE, 0, fmt="{:.1f}"),
    Row("Tab. C7", "pair B, absolute: missed degraded agents (of 2)", "b-absolute", MISSED, 0, fmt="{:.1f}"),
    Row("Tab. C7", f"pair B, absolute: {OF_4}", "b-absolute", FALSE, "n/r", fmt="{:.1f}"),
    Row("Tab. C7", "pair B, cusum: missed degraded agents (of 2)", "b-cusum", MISSED, 1, fmt="{:.1f}"),
    Row("Tab. C7", f"pair B, cusum: {OF_4}", "b-cusum", FALSE, "n/r", fmt="{:.1f}"),
    Row("Tab. C3", "pair A: degraded-phase accuracy (BBH)", "a-relative", D, 0.905, 0.016, note=THREE),
    Row("Tab. C3", "pair A: paired phase change (BBH)", "a-relative", CHANGE, "n/r", fmt="{:+.3f}"),
    Row("Tab. C4", "pair B: degraded-phase accuracy (BBH)", "b-relative", D, 0.782, 0.023, note=THREE),
    Row("Tab. C4", "pair B: paired phase change (BBH)", "b-relative", CHANGE, -0.008, 0.015, fmt="{:+.3f}"),
)


# ---------------------------------------------------------------------------------------- the run groups

def _persistent(ds: str, *sets: str, profile: Optional[str] = None) -> Group:
    return Group(f"{MH}/persistent-{ds}.yaml", NO_TRACE + sets, profile)


PERSISTENT_RUNS = {ds: _persistent(ds) for ds in DATASETS.split()}
STAGGERED_RUNS = {"staggered": Group(f"{MH}/staggered-math.yaml", NO_TRACE)}
# 576 agents: three seeds at most (the expensive runs)
SCALING_RUNS = {f"{n}-{g}": Group(f"{MH}/scale-{n}-{g}.yaml", max_seeds=3 if n == 576 else None)
                for n in SIZES for g in ("complete", "sparse")}
ABLATION_RUNS = {"full": _persistent("bbh"), "single": _persistent("bbh", "protocol.params.committee=false"),
                 "no_takeover": _persistent("bbh", "protocol.params.takeover=false")}
DETECTOR_RUNS = {f"{pair}-{d}": _persistent("bbh", f"protocol.params.detector={d}", profile=f"fake-pair-{pair}")
                 for pair in ("a", "b") for d in ("relative", "absolute", "cusum")}


def meshheal_experiments(seeds: "int | list[int]" = 5, quick: bool = False) -> list[Experiment]:
    """Sec. 6's experiments and App. C.5's audit; ``quick`` leaves out the 576-agent runs."""
    scaling_runs = {k: g for k, g in SCALING_RUNS.items() if not (quick and k.startswith("576-"))}
    scaling = tuple(r for r in SCALING if _groups(r.runs) <= set(scaling_runs))

    def table(rows: tuple[Row, ...]) -> Callable[[dict[str, list[dict]]], list[Cell]]:
        return lambda by: table_cells(rows, by)

    def specs(groups: dict[str, Group]) -> dict[str, list[RunSpec]]:
        return {k: g.specs(seeds) for k, g in groups.items()}

    return [
        Experiment("persistent", "Persistent degradation (Sec. 6.1, Tab. 2a, C1, C2)", specs(PERSISTENT_RUNS),
                   table(PERSISTENT)),
        Experiment("audit", "Review and Takeover audit (App. C.5, Tab. C8): calibration targets",
                   specs({"bbh": PERSISTENT_RUNS["bbh"]}), audit_cells),
        Experiment("staggered", "Degradation and recovery (Sec. 6.2, Tab. 3)", specs(STAGGERED_RUNS),
                   table(STAGGERED)),
        Experiment("scaling", "Scaling with local information (Sec. 6.3, Tab. 2b)"
                   + (" [--quick: 576 agents skipped]" if quick else ""), specs(scaling_runs), table(scaling)),
        Experiment("ablations", "Fast-timescale ablations on BBH (Sec. 6.4, Tab. C6)", specs(ABLATION_RUNS),
                   table(ABLATIONS)),
        Experiment("detectors", "Detector comparison under model pairs A and B (Sec. 6.4, Tab. C7)",
                   specs(DETECTOR_RUNS), table(DETECTORS)),
    ]


def meshheal_sensitivities() -> list[Sensitivity]:
    return [
        # review.scores.weak.unverifiable: {sound: x, error: 0.14, unverified: rest}, so x stays <= 0.86
        Sensitivity("weak-uncritical", "review.scores.weak.unverifiable.sound", (0.0, 0.15, 0.3, 0.5, 0.7, 0.86),
                    f"{MH}/persistent-bbh.yaml", ("output.trace=none",),
                    (("detection.false_isolations", "falsely isolated healthy agents"),
                     ("accuracy.by_phase.degraded", "degraded-phase accuracy")),
                    "degraded reviewers' leniency: how often a 1B reviewer that cannot re-derive accepts anyway"),
        # P(error) of an unverifiable half, beside P(sound) = 0.3: 0.14 is the profile's value
        Sensitivity("weak-flag-error", "review.scores.weak.unverifiable.error", (0.0, 0.14, 0.28, 0.42),
                    f"{MH}/persistent-bbh.yaml", ("output.trace=none",),
                    (("detection.false_isolations", "falsely isolated healthy agents"),
                     ("accuracy.by_phase.degraded", "degraded-phase accuracy")),
                    "how often a degraded reviewer claims an error it did not find"),
        Sensitivity("type-spread", "type_spread", (0.0, 0.3, 0.6, 0.9),
                    f"{MH}/persistent-bbh.yaml", ("output.trace=none", "protocol.params.detector=absolute"),
                    (("detection.false_isolations", "falsely isolated healthy agents (absolute detector)"),
                     ("missed", "missed degraded agents (absolute detector)")),
                    "how much task types differ in difficulty: what a fixed threshold cannot adapt to",
                    profile="fake-pair-a"),
        Sensitivity("review-persist", "review.persist", (0.0, 0.25, 0.5, 0.75),
                    f"{MH}/staggered-math.yaml", ("output.trace=none",),
                    (("agents.A3.detection_delay", "A3 detection delay (tasks)"),
                     ("agents.A5.reintegration_delay", "A5 reintegration delay (tasks)")),
                    "how much of a reviewer's call-to-call variation is its lasting view"),
    ]


