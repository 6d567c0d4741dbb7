"""``meshsim uncertainty``: how far each prediction moves over the assumption
ranges of its backend profile (docs/uncertainty.md).

Two stages on the sweep engine (:mod:`meshsim.sweep`), into one sweep folder:

1. *screening*: the base sample (the profile as it is) and Morris trajectories
   over every ``ranges:`` factor -> ``ranking.csv`` (mu*, sigma, mu* 95 %
   bootstrap half-width per metric and factor);
2. *band*: the top factors (by mu*, normalised per metric) at their low and high
   ends (the tornado) and a Latin hypercube over them -> ``bands.csv`` (5-95 %
   band of the per-sample seed means) beside the seed noise of the base sample.

Every sample is a sweep point whose ``backend.overrides`` are
:func:`meshsim.backends.provenance.factor_overrides` of its positions, run at
the same seeds (common random numbers): a run is cached and resumed like any
sweep run, the designs are seeded, so a rerun (after ``kill -9`` too) redoes
no finished run and writes byte-identical tables.
"""
from __future__ import annotations

import copy
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..backends.provenance import Factor, assumption_factors, factor_overrides, load_profile_data
from ..core.dotted import MISSING, get_path
from ..core.errors import InputError, RunFolderError
from ..io.records import write_atomic
from ..sweep.results import csv_text
from .design import Allocation, allocate, end_design, lhs_design, morris_analyze, morris_design
from .tables import BANDS, FORMAT, RANKING, SAMPLES, STATE, TORNADO, read_csv, read_state

if TYPE_CHECKING:
    from ..scenario.model import CheckMemo

__all__ = ["Study", "Sample", "plan_uncertainty", "check_metrics", "run_uncertainty", "UncertaintyOutcome",
           "STATE", "RANKING", "BANDS", "SAMPLES", "TORNADO", "FORMAT", "read_state", "read_csv",
           "DEFAULT_BUDGET", "DEFAULT_TOP", "classify", "metric_value", "MIN_NOISE_SEEDS", "noise_warning"]

#: runs (samples x seeds); sized so that persistent-math (about 0.4 s of CPU a run) finishes within 30 min
#: on 2 cores with its 5 seeds (docs/uncertainty.md, "Budget")
DEFAULT_BUDGET = 3000
DEFAULT_TOP = 5
#: metrics used when none is named, those the scenario's summary holds
DEFAULT_METRICS = ("detection.false_isolations", "detection.delay_mean", "accuracy.overall", "bfti", "faa")
BAND_Q = (0.05, 0.5, 0.95)
#: seeds below which the base sample's sd is not reported as seed noise: a sd from 2 runs is one
#: difference (issue 29: 0 on staggered-math where 10 seeds range 1-5 false isolations)
MIN_NOISE_SEEDS = 3
UNCLASSIFIED = f"unclassified: fewer than {MIN_NOISE_SEEDS} seeds"


@dataclass
class Sample:
    index: int
    stage: str  # base | morris | end | lhs
    positions: list[Optional[float]]  # per factor: u in [0, 1], None = the profile's value
    trajectory: Optional[int] = None
    key: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Study:
    scenario_path: Path
    source: str
    base_dir: Path
    name: str
    base: dict[str, Any]  # raw scenario data after --smoke and --set
    protocol: str
    profile_path: Path
    factors: list[Factor]
    seeds: list[int]
    metrics: list[str]
    papers: dict[str, float]
    alloc: Allocation
    design_seed: int
    base_overrides: dict[str, Any]
    axes: list[str]  # backend.overrides.<leaf> of every number a factor covers
    leaf_base: dict[str, Any]  # each such number's value at the base
    samples: list[Sample] = field(default_factory=list)  # base + Morris (the band's come after screening)
    memo: dict[str, Any] = field(default_factory=dict)  # the base graph and the parsed profile
    checks: Optional[CheckMemo] = None  # check_semantics' memo (made on the first sample)

    @property
    def k(self) -> int:
        return len(self.factors)

    def state(self, top: Optional[list[int]] = None) -> dict[str, Any]:
        from ..core.version import __version__

        a = self.alloc
        return {"format": FORMAT, "meshsim": __version__,
                "scenario": {"name": self.name, "source": self.source},
                "profile": str(self.profile_path), "seeds": self.seeds, "metrics": self.metrics,
                "paper": self.papers, "design_seed": self.design_seed,
                "budget": {"runs": a.budget, "used": a.runs, "samples": a.samples, "base": 1,
                           "morris_trajectories": a.trajectories, "morris_samples": a.morris, "ends": a.ends,
                           "lhs": a.lhs, "top": a.top},
                "factors": [{"name": f.name, "low": f.low, "high": f.high, "scale": f.scale is not None,
                             "covers": [p for p, *_ in f.leaves], "why": f.why} for f in self.factors],
                "top": None if top is None else [self.factors[i].name for i in top]}


# ------------------------------------------------------------------------------------ planning


def profile_of(base: dict[str, Any], source: str, base_dir: Path) -> tuple[Path, dict[str, Any]]:
    from ..backends import find_profile
    from ..backends.registry import backend_kind, ranged_kinds

    b = base.get("backend") if isinstance(base, dict) else None
    kind = backend_kind(b.get("kind")) if isinstance(b, dict) else None
    if not isinstance(b, dict) or kind is None or kind.ranged_profile is None:
        raise InputError("meshsim uncertainty varies the assumption ranges of a fake backend profile; this "
                         f"scenario's backend is not {' or '.join(repr(k) for k in ranged_kinds())}",
                         file=source, field="backend.kind",
                         value=(b or {}).get("kind") if isinstance(b, dict) else b)
    prof = b.get("profile")
    if not prof:
        raise InputError("a fake backend needs 'profile'", file=source, field="backend.profile")
    try:
        path = find_profile(str(prof), base_dir)
    except InputError as exc:
        raise InputError(exc.message, file=source, field="backend.profile", value=prof) from None
    return path, dict(b.get("overrides") or {})


def plan_uncertainty(path: str | Path, metrics: list[str] | tuple[str, ...] = (), budget: Optional[int] = None,
                     seeds: Optional[str] = None, top: int = DEFAULT_TOP, design_seed: int = 1,
                     sets: list[str] | tuple[str, ...] = (), smoke: bool = False,
                     papers: Optional[dict[str, float]] = None) -> Study:
    """Read the scenario and its profile's factors, split the budget and lay out the screening samples
    (each validated as a sweep point). Writes nothing; metrics are checked by :func:`check_metrics`."""
    from ..scenario.fields import parse_seeds
    from ..scenario.model import parse_scenario, read_scenario_data, scenario_data

    from .design import require_salib

    require_salib()
    scen_path = Path(path)
    source = str(scen_path)
    raw = read_scenario_data(scen_path)
    base = scenario_data(raw, source, list(sets), smoke)
    base_dir = scen_path.parent
    base_sc = parse_scenario(copy.deepcopy(base), source, base_dir)
    if seeds is None:
        seed_list = base_sc.seed_list()
    else:
        try:
            s = parse_seeds(seeds)
        except ValueError as exc:
            raise InputError(str(exc), field="--seeds", value=seeds) from None
        seed_list = [base_sc.seed + i for i in range(s)] if isinstance(s, int) else list(s)
    prof_path, base_over = profile_of(base, source, base_dir)
    data = load_profile_data(prof_path)
    if not data.get("ranges"):
        raise InputError("the profile declares no assumption ranges (a 'ranges:' block; docs/backends.md): "
                         "nothing to vary", file=str(prof_path), field="ranges")
    factors = assumption_factors(data, str(prof_path))
    from ..backends.registry import backend_kind

    in_use = getattr(backend_kind(data.get("kind")), "factors_in_use", None)
    if in_use is not None:
        # SAC / CP-WBFT: factors of models that play no role on the scenario's dataset move
        # nothing; screening them would only spend samples (fake_consensus.factors_in_use)
        params = base_sc.protocol.params
        ds = getattr(params, "dataset", None)
        if isinstance(ds, str):
            factors = in_use(factors, data, [ds])
    if top < 1:
        raise InputError("must be >= 1", field="--top", value=top)
    alloc = allocate(DEFAULT_BUDGET if budget is None else int(budget), len(seed_list), len(factors), top)
    axes, leaf_base = [], {}
    for f in factors:
        for leaf, value, *_ in f.leaves:
            axes.append(f"backend.overrides.{leaf}")
            v = base_over.get(leaf, value)
            leaf_base[leaf] = int(v) if isinstance(v, float) and f.leaves[0][4] and v == int(v) else v
    study = Study(scen_path, source, base_dir, base_sc.name, base, base_sc.protocol.name, prof_path, factors,
                  seed_list, list(dict.fromkeys(metrics)), dict(papers or {}), alloc, int(design_seed), base_over,
                  axes, leaf_base)
    for m in study.papers:
        if m not in study.metrics and study.metrics:
            raise InputError("a paper value for a metric not asked for (add --metric)", field="--paper", value=m)
    study.samples.append(Sample(0, "base", [None] * study.k))
    for i, row in enumerate(morris_design(study.k, alloc.trajectories, study.design_seed)):
        study.samples.append(Sample(len(study.samples), "morris", list(row), trajectory=i // (study.k + 1)))
    for s in study.samples:
        _point(study, s)
    return study


def _point(study: Study, s: Sample) -> None:
    """Fill ``s.key``, ``s.values`` and ``s.data``: the sample as a validated sweep point."""
    from ..simulate.runner import portable_data
    from ..scenario.model import CheckMemo, check_semantics, parse_scenario
    from ..sweep.core import point_key

    positions = {f.name: u for f, u in zip(study.factors, s.positions) if u is not None}
    over = dict(study.base_overrides)
    over.update(factor_overrides(study.factors, positions))
    data = copy.deepcopy(study.base)
    if over:
        data["backend"]["overrides"] = over
    try:
        sc = parse_scenario(data, study.source, study.base_dir)
        if study.checks is None:
            study.checks = CheckMemo()
        if over and s.stage != "base":
            _check_profile(study, sc, over, study.checks)
        graph = study.memo.get("graph")
        if graph is None:
            from ..scenario.model import build_graph

            graph = study.memo["graph"] = build_graph(sc, study.seeds[0])
        check_semantics(sc, graph, study.checks)
    except InputError as exc:
        where = ", ".join(f"{n}={u:g}" for n, u in positions.items()) or "the profile's values"
        raise InputError(f"the ranges make an invalid profile at sample {s.index} ({where}): {exc}",
                         file=str(study.profile_path), field="ranges") from None
    portable = portable_data(sc)
    s.key, s.data = point_key(portable), portable
    s.values = {f"backend.overrides.{leaf}": over.get(leaf, v) for leaf, v in study.leaf_base.items()}


def _check_profile(study: Study, sc: Any, over: dict[str, Any], checks: CheckMemo) -> None:
    """The profile with ``over`` applied validates, from the file parsed once (parsing it per sample
    is most of a plan's time); check_semantics then finds the backend checked. The base sample checks
    the file itself the ordinary way."""
    from ..backends.profiles import override_profile

    if "profile" not in study.memo:
        from ..backends.registry import BACKENDS
        from ..core.files import load_yaml

        model = BACKENDS[study.base["backend"]["kind"]].ranged_profile  # (profile_of checked it has one)
        study.memo["profile"] = (model, load_yaml(study.profile_path, "profile"))
    model, data = study.memo["profile"]
    from pydantic import ValidationError

    try:
        model.model_validate(override_profile(data, over, study.profile_path.stem))
    except ValidationError as exc:
        e = exc.errors(include_url=False)[0]
        raise InputError(e["msg"].removeprefix("Value error, "),
                         field=".".join(str(x) for x in e["loc"]) or None) from None
    checks.backend_checked(sc)


def _band_samples(study: Study, top: list[int]) -> list[Sample]:
    out: list[Sample] = []
    n = len(study.samples)
    for row in end_design(top, study.k):
        out.append(Sample(n + len(out), "end", row))
    for lhs_row in lhs_design(len(top), study.alloc.lhs, study.design_seed):
        pos: list[Optional[float]] = [None] * study.k
        for i, u in zip(top, lhs_row):
            pos[i] = u
        out.append(Sample(n + len(out), "lhs", pos))
    for s in out:
        _point(study, s)
    return out


# ------------------------------------------------------------------------------------ metrics


def metric_value(summary: dict[str, Any], path: str) -> Optional[float]:
    """A summary's number at dotted ``path`` (booleans as 0/1); None when missing, null or not finite."""
    v = get_path(summary, path, None)
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    return None


def check_metrics(study: Study) -> dict[str, Any]:
    """Run the base scenario once in memory (its ``smoke`` size when it has one, first seed) and check that
    every metric names a number of its summary; with no metric named, take the defaults it holds."""
    from ..simulate.runner import run_one
    from ..scenario.model import parse_scenario, scenario_data

    small = scenario_data(copy.deepcopy(study.base), study.source, None, smoke=True)
    sc = parse_scenario(small, study.source, study.base_dir)
    summary = json.loads(json.dumps(run_one(sc, study.seeds[0]).summary, default=str))
    if not study.metrics:
        study.metrics = [m for m in DEFAULT_METRICS if get_path(summary, m, MISSING) is not MISSING]
        if not study.metrics:
            raise InputError("no default metric in this scenario's summary; name one", field="--metric")
    from ..sweep.results import flatten

    known = sorted(flatten(summary))
    for m in study.metrics:
        v = get_path(summary, m, MISSING)
        if v is MISSING:
            import difflib

            close = difflib.get_close_matches(m, known, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else " (see a run's summary.json)"
            raise InputError(f"not a number of this scenario's summary.json{hint}", field="--metric", value=m)
        if v is not None and not isinstance(v, (bool, int, float)):
            raise InputError("names a group, not a number, of summary.json (give a dotted path to a number)",
                             field="--metric", value=m)
    for m in study.papers:
        if m not in study.metrics:
            raise InputError("a paper value for a metric not asked for (add --metric)", field="--paper", value=m)
    return summary


# ------------------------------------------------------------------------------------ running


@dataclass
class UncertaintyOutcome:
    out: Path
    total: int
    resumed: int
    failed: int
    failures: list[dict[str, Any]]
    ranking: list[dict[str, Any]]
    bands: list[dict[str, Any]]
    top: list[str]
    written: list[Path]


def _sweep_plan(study: Study, samples: list[Sample]):
    from ..sweep.core import Plan, Point
    from ..sweep.spec import Axis, SweepSpec

    spec = SweepSpec(axes=[Axis(tuple(study.axes), ())], seeds=list(study.seeds), output="summary")
    plan = Plan(study.scenario_path, study.source, study.base_dir, study.name, study.base, spec, study.seeds)
    seen = set()
    for s in samples:
        if s.key not in seen:  # Morris trajectories may share a sample
            seen.add(s.key)
            plan.points.append(Point(s.key, s.values, s.data))
    return plan


#: the whole study holds its folder (the sweep stages lock it too, one at a time, under their own name)
LOCK = ".uncertainty.lock"


def run_uncertainty(study: Study, out: str | Path, executor: str = "local", workers: Optional[int] = None,
                    scheduler: Optional[str] = None, quiet: bool = False, live: Optional[bool] = None,
                    echo: Callable[[str], None] = lambda s: None, every: float = 10.0,
                    announce: Optional[Callable[[], None]] = None) -> UncertaintyOutcome:
    """Screen, pick the top factors, run the band, write the tables, figure and report."""
    from ..io.runfolder import RunLock
    from ..sweep.core import run_sweep
    from ..sweep.folder import check_folder, lock_folder

    out = Path(out)
    check_folder(_sweep_plan(study, study.samples), out)  # refused before the first line is printed
    lock: Optional[RunLock] = None
    failures: list[dict[str, Any]] = []

    def started() -> None:
        nonlocal lock
        lock = lock_folder(out, LOCK, "uncertainty", {"scenario": study.name})
        write_atomic(out / STATE, json.dumps(study.state(), indent=1) + "\n")
        if announce is not None:
            announce()

    try:
        echo(f"screening: base + {study.alloc.trajectories} Morris trajectories over {study.k} factors")
        r1 = run_sweep(_sweep_plan(study, study.samples), out, executor=executor, workers=workers,
                       scheduler=scheduler, quiet=quiet, live=live, echo=echo, every=every, announce=started)
        ranking, top = rank(study, out)
        band = _band_samples(study, top)
        echo(f"band: {', '.join(study.factors[i].name for i in top)} at their ends and {study.alloc.lhs} "
             "Latin-hypercube samples")
        r2 = run_sweep(_sweep_plan(study, study.samples + band), out, executor=executor, workers=workers,
                       scheduler=scheduler, quiet=quiet, live=live, echo=echo, every=every)
        failures = r2.failures  # stage 2 reran stage 1's failed runs too
        samples = study.samples + band
        bands = band_rows(study, out, samples)
        written = write_outputs(study, out, ranking, bands, samples, top)
    finally:
        if lock is not None:
            lock.release()
    # stage 2 lists every run: what it found finished, less what stage 1 just ran, was there before
    return UncertaintyOutcome(out, r2.total, r2.resumed - r1.ok, len(failures), failures, ranking, bands,
                              [study.factors[i].name for i in top], written)


# ------------------------------------------------------------------------------------ analysis


def _values(out: Path, key: str, seeds: list[int], metric: str) -> list[Optional[float]]:
    vals = []
    for s in seeds:
        f = out / "runs" / key / f"seed-{s}" / "summary.json"
        vals.append(metric_value(_summary(f), metric) if f.is_file() else None)
    return vals


_CACHE: dict[str, dict[str, Any]] = {}


def _summary(f: Path) -> dict[str, Any]:
    k = str(f)
    if k not in _CACHE:
        try:
            _CACHE[k] = json.loads(f.read_text())
        except ValueError:
            raise RunFolderError("not valid JSON", file=str(f)) from None
    return _CACHE[k]


def _mean(xs: list[Optional[float]]) -> Optional[float]:
    v = [x for x in xs if x is not None]
    return statistics.fmean(v) if v else None


def rank(study: Study, out: Path) -> tuple[list[dict[str, Any]], list[int]]:
    """ranking.csv rows (per metric, factors by mu* descending) and the top factors' indices."""
    _CACHE.clear()
    morris = [s for s in study.samples if s.stage == "morris"]
    k = study.k
    rows: list[dict[str, Any]] = []
    norm: list[list[float]] = []
    for m in study.metrics:
        Y = [_mean(_values(out, s.key, study.seeds, m)) for s in morris]
        X = [s.positions for s in morris]
        keep = [t for t in range(study.alloc.trajectories)
                if all(y is not None for y in Y[t * (k + 1):(t + 1) * (k + 1)])]
        if len(keep) >= 2:
            Xk = [X[t * (k + 1) + j] for t in keep for j in range(k + 1)]
            Yk = [Y[t * (k + 1) + j] for t in keep for j in range(k + 1)]
            st = morris_analyze(k, Xk, Yk, study.design_seed)  # type: ignore[arg-type]
        else:
            nan = [math.nan] * k
            st = {"mu": nan, "mu_star": nan, "sigma": nan, "mu_star_conf": nan}
        order = sorted(range(k), key=lambda i: (-_finite(st["mu_star"][i]), i))
        top_mu = max((_finite(x) for x in st["mu_star"]), default=0.0)
        norm.append([_finite(x) / top_mu if top_mu > 0 else 0.0 for x in st["mu_star"]])
        for r, i in enumerate(order, 1):
            f = study.factors[i]
            rows.append({"metric": m, "rank": r, "factor": f.name, "mu_star": _num(st["mu_star"][i]),
                         "mu_star_conf": _num(st["mu_star_conf"][i]), "sigma": _num(st["sigma"][i]),
                         "mu": _num(st["mu"][i]), "trajectories": len(keep), "low": f.low, "high": f.high,
                         "scale": f.scale is not None, "numbers": len(f.leaves)})
    score = [max((n[i] for n in norm), default=0.0) for i in range(k)]
    top = sorted(sorted(range(k), key=lambda i: (-score[i], i))[:study.alloc.top])
    names = {study.factors[i].name for i in top}
    for row in rows:
        row["in_band"] = row["factor"] in names
    return rows, top


def _finite(x: float) -> float:
    return x if x is not None and math.isfinite(x) else -1.0


def _num(x: Any) -> Optional[float]:
    return float(x) if x is not None and math.isfinite(float(x)) else None


def classify(paper: Optional[float], p5: Optional[float], p95: Optional[float], seed_sd: Optional[float]) -> str:
    """robust agreement (paper inside a band no wider than 2 seed sd), robust disagreement (paper outside
    the 5-95 % band), assumption-bound (inside a wider band); '' without a paper value or a band."""
    if paper is None or p5 is None or p95 is None:
        return ""
    if paper < p5 or paper > p95:
        return "robust disagreement"
    if seed_sd is not None and p95 - p5 <= 2.0 * seed_sd:
        return "robust agreement"
    return "assumption-bound"


def band_rows(study: Study, out: Path, samples: list[Sample]) -> list[dict[str, Any]]:
    from ..observe.aggregate import quantile

    _CACHE.clear()
    base = samples[0]
    lhs = [s for s in samples if s.stage == "lhs"]
    rows = []
    for m in study.metrics:
        bv = [x for x in _values(out, base.key, study.seeds, m) if x is not None]
        means = [x for x in (_mean(_values(out, s.key, study.seeds, m)) for s in lhs) if x is not None]
        # fewer than MIN_NOISE_SEEDS: no seed noise is reported, and nothing is classified against it
        sd = statistics.stdev(bv) if len(bv) >= MIN_NOISE_SEEDS else None
        q = [quantile(means, p) for p in BAND_Q]
        paper = study.papers.get(m)
        cls = classify(paper, q[0], q[2], sd)
        if sd is None and cls and cls != "robust disagreement":  # outside the band needs no seed noise
            cls = UNCLASSIFIED
        rows.append({"metric": m, "base_mean": statistics.fmean(bv) if bv else None, "seed_sd": sd,
                     "seed_se": sd / math.sqrt(len(bv)) if sd is not None else None, "n_seeds": len(bv),
                     "band_p5": q[0], "band_p50": q[1], "band_p95": q[2],
                     "band_min": min(means) if means else None, "band_max": max(means) if means else None,
                     "band_sd": statistics.stdev(means) if len(means) > 1 else None, "n_samples": len(means),
                     "paper": paper, "class": cls})
    return rows


def noise_warning(n_seeds: int) -> Optional[str]:
    """The loud line ``meshsim uncertainty`` prints with fewer than :data:`MIN_NOISE_SEEDS` seeds, else None."""
    if n_seeds >= MIN_NOISE_SEEDS:
        return None
    return (f"warning: --seeds: {n_seeds} seed{'s' if n_seeds != 1 else ''}: the band is compared with seed noise "
            f"only from {MIN_NOISE_SEEDS} seeds on (a sd of 2 runs is one difference); bands.csv leaves seed_sd "
            f"and seed_se empty and classifies only a paper value outside the band")


def sample_rows(study: Study, out: Path, samples: list[Sample]) -> tuple[list[str], list[dict[str, Any]]]:
    _CACHE.clear()
    cols = ["sample", "stage", "trajectory", "point"] + [f.name for f in study.factors]
    for m in study.metrics:
        cols += [m, f"{m}.n"]
    rows = []
    for s in samples:
        r: dict[str, Any] = {"sample": s.index, "stage": s.stage, "trajectory": s.trajectory, "point": s.key}
        for f, u in zip(study.factors, s.positions):
            r[f.name] = u
        for m in study.metrics:
            vals = [x for x in _values(out, s.key, study.seeds, m) if x is not None]
            r[m] = statistics.fmean(vals) if vals else None
            r[f"{m}.n"] = len(vals)
        rows.append(r)
    return cols, rows


RANKING_COLUMNS = ["metric", "rank", "factor", "mu_star", "mu_star_conf", "sigma", "mu", "trajectories", "in_band",
                   "low", "high", "scale", "numbers"]
BAND_COLUMNS = ["metric", "base_mean", "seed_sd", "seed_se", "n_seeds", "band_p5", "band_p50", "band_p95", "band_min",
                "band_max", "band_sd", "n_samples", "paper", "class"]


def write_outputs(study: Study, out: Path, ranking: list[dict[str, Any]], bands: list[dict[str, Any]],
                  samples: list[Sample], top: list[int]) -> list[Path]:
    from .report import write_report

    written = []
    write_atomic(out / STATE, json.dumps(study.state(top), indent=1) + "\n")
    for name, cols, rows in ((RANKING, RANKING_COLUMNS, ranking), (BANDS, BAND_COLUMNS, bands),
                             (SAMPLES, *sample_rows(study, out, samples))):
        write_atomic(out / name, csv_text(cols, rows))
        written.append(out / name)
    written += write_report(out)
    return written
