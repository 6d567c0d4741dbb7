"""Run the papers' experiments and set every result beside the paper's (``meshsim reproduce``).

Each experiment is a set of runs (scenario file, ``--set`` overrides, seeds,
optionally a profile with one parameter moved) and a list of *cells*: one
number of a paper table, the simulated mean ± sample sd over seeds, and
whether it is a **calibration target** (a mechanism-level statistic the fake
was fitted to: App. C.5, per-model accuracy) or a **prediction** (everything
else: accuracy per phase, detection and reintegration, isolation counts,
BFTI, H-Majority). Predictions are reported as they come out.

Runs go to a process pool; each run's summary is cached under
``OUT/runs/<key>.json`` (the key hashes the scenario text, overrides, seed and
profile), so an interrupted reproduction resumes and a finished one is
re-rendered instantly. ``OUT/report.md`` and ``OUT/report.json`` hold the
tables; ``OUT/sensitivity-*.png`` the assumption curves (with the ``plot``
extra).
"""
from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import math
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import yaml

from .errors import InputError

__all__ = ["RunSpec", "Cell", "Experiment", "experiments", "run_experiments", "render_markdown"]

ROOT = Path(__file__).resolve().parents[1]
PREDICTION, TARGET = "prediction", "calibration target"


@dataclass(frozen=True)
class RunSpec:
    scenario: str  # path relative to the checkout
    sets: tuple[str, ...] = ()
    seed: int = 1
    #: profile parameters moved for this run: ((dotted path, value), ...)
    patch: tuple[tuple[str, Any], ...] = ()
    profile: Optional[str] = None  # a different profile than the scenario's

    def key(self) -> str:
        text = (ROOT / self.scenario).read_text() if (ROOT / self.scenario).is_file() else self.scenario
        blob = json.dumps([text, list(self.sets), self.seed, [list(p) for p in self.patch], self.profile,
                           _profile_text(self.profile)], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _profile_text(name: Optional[str]) -> str:
    if not name:
        return ""
    from .backends import find_profile

    return find_profile(name, ROOT).read_text()


@dataclass
class Cell:
    table: str
    row: str
    paper: Any  # a number, a "min-max" text, or None when the paper does not report it
    kind: str = PREDICTION
    values: list[float] = field(default_factory=list)
    paper_sd: Optional[float] = None
    fmt: str = "{:.3f}"
    note: str = ""

    def stats(self) -> tuple[Optional[float], Optional[float]]:
        xs = [v for v in self.values if v is not None and not (isinstance(v, float) and math.isnan(v))]
        if not xs:
            return None, None
        return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)

    def as_dict(self) -> dict[str, Any]:
        m, s = self.stats()
        return {"table": self.table, "row": self.row, "paper": self.paper, "paper_sd": self.paper_sd,
                "kind": self.kind, "mean": m, "sd": s, "n": len([v for v in self.values if v is not None]),
                "values": self.values, "note": self.note, "fmt": self.fmt}


@dataclass
class Experiment:
    key: str
    title: str
    runs: dict[str, list[RunSpec]]  # label -> one RunSpec per seed
    cells: Callable[[dict[str, list[dict]]], list[Cell]]
    quick_skip: bool = False
    wall: float = 0.0


# ---------------------------------------------------------------------------------------- running


def _run(spec: RunSpec) -> dict[str, Any]:
    """One run in a worker process: its summary."""
    from .calibration import set_path
    from .runner import run_one
    from .scenario import load_scenario

    sets = list(spec.sets)
    with tempfile.TemporaryDirectory(prefix="meshsim-reproduce-") as tmp:
        if spec.patch or spec.profile:
            from .backends import find_profile

            sc0 = yaml.safe_load((ROOT / spec.scenario).read_text())
            name = spec.profile or (sc0.get("backend") or {}).get("profile")
            data = yaml.safe_load(find_profile(name, ROOT / Path(spec.scenario).parent).read_text())
            for path, value in spec.patch:
                set_path(data, path, value)
            p = Path(tmp) / "profile.yaml"
            p.write_text(yaml.safe_dump(data, sort_keys=False))
            sets.append(f"backend.profile={p}")
        sc = load_scenario(ROOT / spec.scenario, sets)
        t0 = time.perf_counter()
        res = run_one(sc, spec.seed)
        summary = json.loads(json.dumps(res.summary, default=str))
        summary["_wall"] = time.perf_counter() - t0
    return summary


def run_specs(specs: Iterable[RunSpec], out: Path, workers: int = 1,
              progress: Optional[Callable[[int, int, float], None]] = None) -> dict[RunSpec, dict]:
    """Every spec's summary, from the cache under ``out/runs`` or by running it."""
    cache = out / "runs"
    cache.mkdir(parents=True, exist_ok=True)
    specs = list(dict.fromkeys(specs))
    done: dict[RunSpec, dict] = {}
    todo = []
    for s in specs:
        f = cache / f"{s.key()}.json"
        if f.is_file():
            try:
                done[s] = json.loads(f.read_text())
                continue
            except ValueError:
                pass  # a torn write: run it again
        todo.append(s)
    total, t0 = len(specs), time.perf_counter()

    def keep(s: RunSpec, summary: dict) -> None:
        f = cache / f"{s.key()}.json"
        tmp = f.with_name(f.name + ".tmp")
        tmp.write_text(json.dumps(summary, sort_keys=True))
        tmp.replace(f)
        done[s] = summary
        if progress is not None:
            progress(len(done), total, time.perf_counter() - t0)

    if progress is not None and done:
        progress(len(done), total, 0.0)
    if workers <= 1 or len(todo) <= 1:
        for s in todo:
            keep(s, _run(s))
    else:
        with cf.ProcessPoolExecutor(max_workers=workers) as pool:
            futs = {pool.submit(_run, s): s for s in todo}
            for fut in cf.as_completed(futs):
                keep(futs[fut], fut.result())
    return done


def run_experiments(exps: list[Experiment], out: Path, workers: int = 1,
                    progress: Optional[Callable[[str], None]] = None) -> list[dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for exp in exps:
        specs = [s for runs in exp.runs.values() for s in runs]
        t0 = time.perf_counter()

        def tick(done: int, total: int, dt: float, exp: Experiment = exp) -> None:
            if progress is not None:
                progress(f"{exp.key}: {done}/{total} runs ({dt:.0f} s)")

        got = run_specs(specs, out, workers, tick)
        by_label = {label: [got[s] for s in runs] for label, runs in exp.runs.items()}
        sim_wall = sum(s.get("_wall", 0.0) for runs in by_label.values() for s in runs)
        cells = exp.cells(by_label)
        results.append({"key": exp.key, "title": exp.title, "wall": time.perf_counter() - t0,
                        "simulated_seconds": sim_wall, "runs": len(specs),
                        "cells": [c.as_dict() for c in cells]})
    return results


# ---------------------------------------------------------------------------------------- helpers


def _get(summary: dict, path: str) -> Any:
    cur: Any = summary
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _vals(sums: list[dict], path: str, scale: float = 1.0) -> list[Optional[float]]:
    out = []
    for s in sums:
        v = _get(s, path)
        out.append(None if v is None or isinstance(v, bool) else float(v) * scale)
    return out


def _seeds(scenario: str, seeds: int, sets: tuple[str, ...] = (), **kw: Any) -> list[RunSpec]:
    return [RunSpec(scenario, sets, seed=k, **kw) for k in range(1, seeds + 1)]


def _pair(a: list, b: list, fn: Callable[[float, float], float]) -> list[Optional[float]]:
    return [None if x is None or y is None else fn(x, y) for x, y in zip(a, b)]


# ---------------------------------------------------------------------------------------- MeshHeal

MH = "scenarios/meshheal"
DATASETS = (("bbh", "BBH"), ("math", "MATH"), ("mmlu-pro", "MMLU-Pro"))


def meshheal_experiments(seeds: int = 5, quick: bool = False) -> list[Experiment]:
    exps: list[Experiment] = []

    # Tab. 2a / C1 / C2: persistent degradation on three datasets ------------------------------
    runs = {ds: _seeds(f"{MH}/persistent-{ds}.yaml", seeds, ("output.trace=none",)) for ds, _ in DATASETS}

    def persistent(by: dict[str, list[dict]]) -> list[Cell]:
        cells = []
        h = {ds: _vals(by[ds], "accuracy.by_phase.healthy") for ds, _ in DATASETS}
        d = {ds: _vals(by[ds], "accuracy.by_phase.degraded") for ds, _ in DATASETS}
        for ds, name in DATASETS:
            paper_h, paper_d = ((0.821, 0.019), (0.802, 0.021)) if ds == "math" else ((None, None), (None, None))
            cells.append(Cell("Tab. C1", f"{name}: healthy-phase accuracy", paper_h[0], values=h[ds],
                              paper_sd=paper_h[1]))
            cells.append(Cell("Tab. C1", f"{name}: degraded-phase accuracy", paper_d[0], values=d[ds],
                              paper_sd=paper_d[1]))
            cells.append(Cell("Tab. C1", f"{name}: paired phase change", -0.019 if ds == "math" else ">= 0",
                              values=_pair(d[ds], h[ds], lambda a, b: a - b), fmt="{:+.3f}"))
        n = len(by["bbh"])
        mean = lambda vals: [statistics.fmean([vals[ds][k] for ds, _ in DATASETS])  # noqa: E731
                             if all(vals[ds][k] is not None for ds, _ in DATASETS) else None for k in range(n)]
        mh, md = mean(h), mean(d)
        cells += [Cell("Tab. 2a", "mean of datasets: healthy-phase accuracy", 0.831, values=mh, paper_sd=0.013),
                  Cell("Tab. 2a", "mean of datasets: degraded-phase accuracy", 0.839, values=md, paper_sd=0.012),
                  Cell("Tab. 2a", "mean of datasets: paired phase change", 0.007, values=_pair(md, mh, lambda a, b: a - b),
                       paper_sd=0.012, fmt="{:+.3f}")]
        for phase, paper, sd in (("healthy", 12.4, 0.2), ("degraded", 13.6, 0.3)):
            calls = [statistics.fmean(x) for x in zip(*[_vals(by[ds], f"calls_per_task_by_phase.{phase}")
                                                        for ds, _ in DATASETS])]
            cells.append(Cell("Tab. C2", f"model calls per task, {phase} phase", paper, values=calls, paper_sd=sd,
                              fmt="{:.1f}"))
        for phase, paper, sd in (("healthy", 51.0, 3.0), ("degraded", 51.0, 5.0)):
            tok = [statistics.fmean(x) for x in zip(*[_vals(by[ds], f"tokens_per_task_by_phase.{phase}", 1e-3)
                                                      for ds, _ in DATASETS])]
            cells.append(Cell("Tab. C2", f"tokens per task (k), {phase} phase", paper, values=tok, paper_sd=sd,
                              fmt="{:.1f}"))
        miss = [sum(x) for x in zip(*[_vals(by[ds], "missed") for ds, _ in DATASETS])]
        false = [sum(x) for x in zip(*[_vals(by[ds], "false_isolations") for ds, _ in DATASETS])]
        cells.append(Cell("Sec. 6.1", "missed degraded agents (of 2 per dataset, summed)", None, values=miss,
                          fmt="{:.1f}", note="the paper does not report them for this setting"))
        cells.append(Cell("Sec. 6.1", "falsely isolated healthy agents (of 4 per dataset, summed)", None,
                          values=false, fmt="{:.1f}", note="the paper does not report them for this setting"))
        return cells

    exps.append(Experiment("persistent", "Persistent degradation (Sec. 6.1, Tab. 2a, C1, C2)", runs, persistent))

    # App. C.5: the audit the fake was calibrated to (persistent BBH) -----------------------------
    def audit(by: dict[str, list[dict]]) -> list[Cell]:
        from .calibration import TARGETS, _pooled_takeover

        sums = by["bbh"]
        pooled = _pooled_takeover([s["audit"] for s in sums])
        cells = []
        for t in TARGETS:
            if t.key.startswith("takeover."):
                v = pooled.get(t.key.split(".", 1)[1])
                vals = [v]
                note = "pooled over seeds, as the paper counts '15 of 32'"
            else:
                vals = _vals(sums, "audit." + t.key)
                note = ""
            cells.append(Cell("App. C.5", t.label, t.paper, kind=TARGET, values=vals, paper_sd=t.spread, note=note))
        return cells

    exps.append(Experiment("audit", "Review and Takeover audit (App. C.5, Tab. C8): calibration targets",
                           {"bbh": runs["bbh"]}, audit))

    # Tab. 3: staggered degradation and recovery --------------------------------------------------
    st = {"staggered": _seeds(f"{MH}/staggered-math.yaml", seeds, ("output.trace=none",))}

    def staggered(by: dict[str, list[dict]]) -> list[Cell]:
        s = by["staggered"]
        cells = []
        for phase, paper in (("healthy", None), ("a5_degraded", None), ("both_degraded", 0.770),
                             ("a3_degraded", 0.841), ("restored", 0.857)):
            cells.append(Cell("Tab. 3a", f"accuracy, phase {phase}", paper, values=_vals(s, f"accuracy.by_phase.{phase}")))
        post = []
        for x in s:
            ph = x["accuracy"]["by_phase"]
            xs = [ph[k] for k in ("a5_degraded", "both_degraded", "a3_degraded", "restored") if k in ph]
            post.append(statistics.fmean(xs) if len(xs) == 4 else None)
        cells.append(Cell("Tab. 3a", "accuracy over the 504 tasks after the first degradation", 0.812, values=post))
        cells.append(Cell("Tab. 3a", "tokens per task (k)", 49.0, values=_vals(s, "tokens_per_task", 1e-3), fmt="{:.1f}"))
        for a, det, det_sd, rein, rein_sd in (("A5", 8.0, 5.2, 46.0, 11.7), ("A3", 12.4, 6.2, 45.0, 3.5)):
            cells.append(Cell("Tab. 3b", f"{a} detection delay (tasks)", det, paper_sd=det_sd,
                              values=_vals(s, f"agents.{a}.detection_delay"), fmt="{:.1f}"))
            cells.append(Cell("Tab. 3b", f"{a} closure (seeds)", f"5/{len(s)}" if len(s) == 5 else "all",
                              values=[1.0 if _get(x, f"agents.{a}.closure") else 0.0 for x in s], fmt="{:.2f}",
                              note="fraction of seeds"))
            cells.append(Cell("Tab. 3b", f"{a} reintegration delay (tasks)", rein, paper_sd=rein_sd,
                              values=_vals(s, f"agents.{a}.reintegration_delay"), fmt="{:.1f}"))
        cells.append(Cell("Tab. 3b", "falsely isolated healthy agents (of 4)", 0.0,
                          values=_vals(s, "false_isolations"), fmt="{:.1f}",
                          note="the paper reports none ('isolates degraded agents ... returns them to normal routing')"))
        return cells

    exps.append(Experiment("staggered", "Degradation and recovery (Sec. 6.2, Tab. 3)", st, staggered))

    # Tab. 2b: scaling -------------------------------------------------------------------------------
    sizes = (96, 288) if quick else (96, 288, 576)
    sc_runs = {f"{n}-{g}": _seeds(f"{MH}/scale-{n}-{g}.yaml", seeds if n < 576 else min(seeds, 3))
               for n in sizes for g in ("complete", "sparse")}

    def scaling(by: dict[str, list[dict]]) -> list[Cell]:
        cells = []
        paper = {(576, "sparse"): 0.814}
        for n in sizes:
            for g in ("complete", "sparse"):
                s = by[f"{n}-{g}"]
                deg = [float(len(x.get("agents", {}))) for x in s]
                iso = [float(len(x.get("agents", {})) - x.get("missed", 0)) for x in s]
                cells.append(Cell("Tab. 2b", f"{n} agents, {g}: accuracy", paper.get((n, g),
                                  "0.808-0.827" if g == "complete" else "0.803-0.818"),
                                  values=_vals(s, "accuracy.overall")))
                cells.append(Cell("Tab. 2b", f"{n} agents, {g}: isolated / degraded", 1.0,
                                  values=[i / d if d else None for i, d in zip(iso, deg)], fmt="{:.3f}",
                                  note="every degraded agent isolated in the paper"))
                cells.append(Cell("Tab. 2b", f"{n} agents, {g}: falsely isolated healthy agents", None,
                                  values=_vals(s, "false_isolations"), fmt="{:.1f}"))
            c, sp = _vals(by[f"{n}-complete"], "accuracy.overall"), _vals(by[f"{n}-sparse"], "accuracy.overall")
            cells.append(Cell("Tab. 2b", f"{n} agents: sparse - complete accuracy", "|d| <= 0.010",
                              values=_pair(sp, c, lambda a, b: a - b), fmt="{:+.3f}"))
        return cells

    exps.append(Experiment("scaling", "Scaling with local information (Sec. 6.3, Tab. 2b)"
                           + (" [--quick: 576 agents skipped]" if quick else ""), sc_runs, scaling))

    # Tab. C6: fast-timescale ablations on BBH -----------------------------------------------------
    ab = {"full": runs["bbh"],
          "single": _seeds(f"{MH}/persistent-bbh.yaml", seeds, ("output.trace=none", "protocol.params.committee=false")),
          "no_takeover": _seeds(f"{MH}/persistent-bbh.yaml", seeds, ("output.trace=none",
                                                                       "protocol.params.takeover=false"))}

    def ablations(by: dict[str, list[dict]]) -> list[Cell]:
        cells = []
        ph = {k: (_vals(v, "accuracy.by_phase.healthy"), _vals(v, "accuracy.by_phase.degraded")) for k, v in by.items()}
        for k, name, change, sd in (("full", "full", 0.001, 0.016), ("single", "single reviewer", -0.044, 0.024),
                                    ("no_takeover", "no Takeover", -0.035, 0.030)):
            h, d = ph[k]
            cells.append(Cell("Tab. C6", f"{name}: paired phase change", change, paper_sd=sd,
                              values=_pair(d, h, lambda a, b: a - b), fmt="{:+.3f}"))
            cells.append(Cell("Tab. C6", f"{name}: degraded-phase accuracy", None, values=d))
        for k, name, dd, dh in (("single", "single reviewer", -0.035, None), ("no_takeover", "no Takeover", -0.056, -0.020)):
            cells.append(Cell("Tab. C6", f"{name} - full: degraded-phase accuracy", dd,
                              values=_pair(ph[k][1], ph["full"][1], lambda a, b: a - b), fmt="{:+.3f}"))
            cells.append(Cell("Tab. C6", f"{name} - full: healthy-phase accuracy",
                              dh if dh is not None else "slightly higher",
                              values=_pair(ph[k][0], ph["full"][0], lambda a, b: a - b), fmt="{:+.3f}"))
        return cells

    exps.append(Experiment("ablations", "Fast-timescale ablations on BBH (Sec. 6.4, Tab. C6)", ab, ablations))

    # Tab. C7 (+ C3, C4): detectors under model pairs A and B ------------------------------------------
    det = {}
    for pair in ("a", "b"):
        for d in ("relative", "absolute", "cusum"):
            det[f"{pair}-{d}"] = _seeds(f"{MH}/persistent-bbh.yaml", seeds,
                                        ("output.trace=none", f"protocol.params.detector={d}"),
                                        profile=f"fake-pair-{pair}")

    def detectors(by: dict[str, list[dict]]) -> list[Cell]:
        paper = {("a", "relative"): (0, 0), ("b", "relative"): (0, 0), ("a", "absolute"): (0, 4),
                 ("b", "absolute"): (0, None), ("a", "cusum"): (None, 2), ("b", "cusum"): (1, None)}
        cells = []
        for pair in ("a", "b"):
            for d in ("relative", "absolute", "cusum"):
                s = by[f"{pair}-{d}"]
                pm, pf = paper[(pair, d)]
                cells.append(Cell("Tab. C7", f"pair {pair.upper()}, {d}: missed degraded agents (of 2)",
                                  pm if pm is not None else "n/r", values=_vals(s, "missed"), fmt="{:.1f}"))
                cells.append(Cell("Tab. C7", f"pair {pair.upper()}, {d}: falsely isolated healthy agents (of 4)",
                                  pf if pf is not None else "n/r", values=_vals(s, "false_isolations"), fmt="{:.1f}"))
        for pair, dacc, dsd, ch, chsd in (("a", 0.905, 0.016, None, None), ("b", 0.782, 0.023, -0.008, 0.015)):
            s = by[f"{pair}-relative"]
            h, dd = _vals(s, "accuracy.by_phase.healthy"), _vals(s, "accuracy.by_phase.degraded")
            cells.append(Cell("Tab. C3" if pair == "a" else "Tab. C4",
                              f"pair {pair.upper()}: degraded-phase accuracy (BBH)", dacc, paper_sd=dsd, values=dd,
                              note="the paper's value is the mean of three datasets"))
            cells.append(Cell("Tab. C3" if pair == "a" else "Tab. C4", f"pair {pair.upper()}: paired phase change (BBH)",
                              ch if ch is not None else "n/r", paper_sd=chsd, values=_pair(dd, h, lambda a, b: a - b),
                              fmt="{:+.3f}"))
        return cells

    exps.append(Experiment("detectors", "Detector comparison under model pairs A and B (Sec. 6.4, Tab. C7)",
                           det, detectors))
    return exps


# ---------------------------------------------------------------------------------------- sensitivity

@dataclass
class Sensitivity:
    key: str
    param: str  # profile path
    values: tuple[float, ...]
    scenario: str
    sets: tuple[str, ...]
    metrics: tuple[tuple[str, str], ...]  # (summary path, label)
    why: str
    profile: Optional[str] = None


def meshheal_sensitivities() -> list[Sensitivity]:
    return [
        Sensitivity("weak-uncritical", "models.weak.review.uncritical", (0.0, 0.15, 0.3, 0.5, 0.7, 0.9),
                    f"{MH}/persistent-bbh.yaml", ("output.trace=none",),
                    (("false_isolations", "falsely isolated healthy agents"),
                     ("accuracy.by_phase.degraded", "degraded-phase accuracy")),
                    "degraded reviewers' leniency: how often a 1B reviewer that cannot re-derive accepts anyway"),
        Sensitivity("weak-flag-error", "models.weak.review.flag_error", (0.0, 0.2, 0.4, 0.6),
                    f"{MH}/persistent-bbh.yaml", ("output.trace=none",),
                    (("false_isolations", "falsely isolated healthy agents"),
                     ("accuracy.by_phase.degraded", "degraded-phase accuracy")),
                    "how often a degraded reviewer claims an error it did not find"),
        Sensitivity("type-spread", "type_spread", (0.0, 0.3, 0.6, 0.9),
                    f"{MH}/persistent-bbh.yaml", ("output.trace=none", "protocol.params.detector=absolute"),
                    (("false_isolations", "falsely isolated healthy agents (absolute detector)"),
                     ("missed", "missed degraded agents (absolute detector)")),
                    "how much task types differ in difficulty: what a fixed threshold cannot adapt to",
                    profile="fake-pair-a"),
        Sensitivity("review-persist", "review.persist", (0.0, 0.25, 0.5, 0.75),
                    f"{MH}/staggered-math.yaml", ("output.trace=none",),
                    (("agents.A3.detection_delay", "A3 detection delay (tasks)"),
                     ("agents.A5.reintegration_delay", "A5 reintegration delay (tasks)")),
                    "how much of a reviewer's call-to-call variation is its lasting view"),
    ]


def sensitivity_runs(sens: list[Sensitivity], seeds: int) -> dict[tuple[str, float], list[RunSpec]]:
    return {(s.key, v): _seeds(s.scenario, seeds, s.sets, patch=((s.param, v),), profile=s.profile)
            for s in sens for v in s.values}


def run_sensitivities(sens: list[Sensitivity], out: Path, seeds: int, workers: int,
                      progress: Optional[Callable[[str], None]] = None) -> list[dict[str, Any]]:
    runs = sensitivity_runs(sens, seeds)
    got = run_specs([r for rs in runs.values() for r in rs], out, workers,
                    (lambda d, t, dt: progress(f"sensitivity: {d}/{t} runs ({dt:.0f} s)")) if progress else None)
    results = []
    for s in sens:
        curves = []
        for path, label in s.metrics:
            pts = []
            for v in s.values:
                vals = [x for x in _vals([got[r] for r in runs[(s.key, v)]], path) if x is not None]
                pts.append({"x": v, "mean": statistics.fmean(vals) if vals else None,
                            "sd": statistics.stdev(vals) if len(vals) > 1 else 0.0, "n": len(vals)})
            curves.append({"metric": path, "label": label, "points": pts})
        results.append({"key": s.key, "param": s.param, "why": s.why, "scenario": s.scenario,
                        "profile": s.profile, "sets": list(s.sets), "curves": curves})
    return results


def plot_sensitivities(results: list[dict[str, Any]], out: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    paths = []
    for r in results:
        n = len(r["curves"])
        fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.2), squeeze=False)
        for ax, c in zip(axes[0], r["curves"]):
            xs = [p["x"] for p in c["points"] if p["mean"] is not None]
            ms = [p["mean"] for p in c["points"] if p["mean"] is not None]
            sds = [p["sd"] for p in c["points"] if p["mean"] is not None]
            ax.plot(xs, ms, marker="o")
            ax.fill_between(xs, [m - s for m, s in zip(ms, sds)], [m + s for m, s in zip(ms, sds)], alpha=0.2)
            ax.set_xlabel(r["param"])
            ax.set_ylabel(c["label"])
            ax.grid(alpha=0.3)
        fig.suptitle(f"{r['key']}: {r['why']}", fontsize=9)
        fig.tight_layout()
        p = out / f"sensitivity-{r['key']}.png"
        fig.savefig(p, dpi=110, metadata={"Software": None})
        plt.close(fig)
        paths.append(p)
    return paths


# ---------------------------------------------------------------------------------------- report


def _fmt(fmt: str, x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    try:
        return fmt.format(x)
    except (ValueError, TypeError):
        return str(x)


def render_markdown(title: str, results: list[dict[str, Any]], sens: list[dict[str, Any]],
                    fmt_of: Optional[dict[str, str]] = None) -> str:
    lines = [f"# {title}", "",
             "Simulated: mean ± sample sd over seeds. *calibration target*: a mechanism-level statistic the fake "
             "was fitted to; *prediction*: everything else, reported as it came out (no parameter was tuned to it). "
             "A paper value `n/r` is not reported in the text of our copy of the paper.", ""]
    for r in results:
        lines += [f"## {r['title']}", "",
                  f"{r['runs']} runs, {r['wall']:.0f} s wall ({r['simulated_seconds']:.0f} s of simulation)", "",
                  "| table | quantity | paper | simulated | kind |", "| --- | --- | --- | --- | --- |"]
        for c in r["cells"]:
            fmt = c.get("fmt") or "{:.3f}"
            paper = _fmt(fmt, c["paper"]) + (f" ± {_fmt(fmt, c['paper_sd'])}" if c["paper_sd"] is not None else "")
            sim = "—" if c["mean"] is None else f"{_fmt(fmt, c['mean'])} ± {_fmt(fmt, c['sd'])}"
            if c["n"] and c["n"] < len(c["values"]):
                sim += f" ({c['n']} of {len(c['values'])} seeds)"
            note = f" ({c['note']})" if c.get("note") else ""
            lines.append(f"| {c['table']} | {c['row']}{note} | {paper} | {sim} | {c['kind']} |")
        lines.append("")
    if sens:
        lines += ["## Assumptions: sensitivity of headlines", ""]
        for s in sens:
            lines += [f"### `{s['param']}` — {s['why']}", "",
                      f"Scenario `{s['scenario']}`" + (f", profile `{s['profile']}`" if s.get("profile") else "")
                      + (f", `{' '.join(s['sets'])}`" if s.get("sets") else "") +
                      f"; figure `sensitivity-{s['key']}.png`.", "",
                      "| " + s["param"] + " | " + " | ".join(c["label"] for c in s["curves"]) + " |",
                      "| --- |" + " --- |" * len(s["curves"])]
            xs = [p["x"] for p in s["curves"][0]["points"]]
            for i, x in enumerate(xs):
                cols = []
                for c in s["curves"]:
                    p = c["points"][i]
                    cols.append("—" if p["mean"] is None else f"{p['mean']:.3f} ± {p['sd']:.3f}")
                lines.append(f"| {x:g} | " + " | ".join(cols) + " |")
            lines.append("")
    return "\n".join(lines) + "\n"


def experiments(which: str, seeds: int, quick: bool) -> list[Experiment]:
    if which == "meshheal":
        return meshheal_experiments(seeds, quick)
    if which == "sac":
        from .reproduce_sac import sac_experiments

        return sac_experiments(seeds, quick)
    raise InputError("choose 'meshheal' or 'sac'", field="WHICH", value=which)


def sensitivities(which: str) -> list[Sensitivity]:
    if which == "meshheal":
        return meshheal_sensitivities()
    from .reproduce_sac import sac_sensitivities

    return sac_sensitivities()


def reproduce(which: str, out: Path, seeds: int = 5, quick: bool = False, workers: Optional[int] = None,
              only: Optional[list[str]] = None, sensitivity: bool = True, sens_seeds: int = 3,
              progress: Optional[Callable[[str], None]] = None) -> dict[str, Any]:
    workers = workers or min(2, os.cpu_count() or 1)
    exps = experiments(which, seeds, quick)
    if only:
        unknown = sorted(set(only) - {e.key for e in exps})
        if unknown:
            raise InputError(f"unknown experiment; choose from {[e.key for e in exps]}", field="--only",
                             value=unknown[0])
        exps = [e for e in exps if e.key in only]
    t0 = time.perf_counter()
    results = run_experiments(exps, out, workers, progress)
    sens = run_sensitivities(sensitivities(which), out, sens_seeds, workers, progress) if sensitivity else []
    figs = plot_sensitivities(sens, out) if sens else []
    report = {"which": which, "seeds": seeds, "quick": quick, "wall": time.perf_counter() - t0,
              "experiments": results, "sensitivity": sens, "figures": [p.name for p in figs]}
    title = {"meshheal": "MeshHeal (arXiv 2609.29015): paper vs simulated",
             "sac": "SAC and CP-WBFT (arXiv 2605.09076): paper vs simulated"}[which]
    (out / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True, default=str))
    (out / "report.md").write_text(render_markdown(title, results, sens))
    return report
