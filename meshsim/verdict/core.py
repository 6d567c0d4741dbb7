"""Planning and running a verdict (docs/verdict.md).

A verdict folder holds one sweep folder per size (``OUT/<scenario name>/``,
:mod:`meshsim.sweep`: manifest, resume, executors), each with

* the **held-out runs**: every candidate at the profile's own values, at every
  held-out seed;
* the **band runs**: every candidate at each assumption sample (a position in
  the backend profile's ``ranges:``, :mod:`meshsim.uncertainty`'s factors), at
  the first ``band_seeds`` held-out seeds (common random numbers).

A run is a sweep run: cached by the hash of the scenario it runs, so a rerun
(after ``kill -9`` too) redoes no finished run, and the same run is never run
twice. ``verdict.json`` and ``verdict.md`` are written last, from the runs'
``summary.json`` only: the same invocation gives the same bytes.
"""
from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from ..core.errors import InputError, RunFolderError
from ..io.records import write_atomic
from .common import FORMAT, PLAN, REPORT, VERDICT, seeds_text
from .constraints import DEFAULT_CONSTRAINTS, Constraint, parse_constraint

__all__ = ["Candidate", "Size", "VerdictPlan", "plan_verdict", "run_verdict", "VerdictOutcome", "FORMAT", "VERDICT",
           "REPORT", "PLAN", "DEFAULT_SAMPLES", "DEFAULT_BAND_SEEDS", "folder_status"]

#: assumption samples and the seeds each runs (meshsim reproduce's band uses the same: reproduce.bands)
DEFAULT_SAMPLES = 20
DEFAULT_BAND_SEEDS = 3
_MISSING = object()


@dataclass
class Candidate:
    name: str  # given | scenario | recommended | front-<rank>
    values: dict[str, Any]  # path -> value, applied over the base (empty: the base as it is)
    origin: str  # where it comes from, in words
    shown: dict[str, Any] = field(default_factory=dict)  # what the table prints (the --set values for 'given')


@dataclass
class Size:
    label: str  # its folder under OUT
    file: Path
    source: str
    base_dir: Path
    name: str
    agents: int
    base: dict[str, Any]  # raw scenario data after --smoke and --set
    sha256: str
    held: dict[str, Any] = field(default_factory=dict)  # candidate -> sweep Point (profile values)
    band: dict[tuple[str, int], Any] = field(default_factory=dict)  # (candidate, sample) -> sweep Point
    axes: list[str] = field(default_factory=list)


@dataclass
class VerdictPlan:
    sizes: list[Size]
    candidates: list[Candidate]
    seeds: list[int]
    band_seeds: list[int]
    positions: list[dict[str, float]]  # assumption samples: factor -> u in [0, 1]
    assumptions: dict[str, Any]  # where the factors and positions come from
    constraints: list[Constraint]
    default_constraints: bool
    search: Optional[dict[str, Any]]  # the search the candidates come from, and its seeds
    tuned_on: list[int]
    warnings: list[str] = field(default_factory=list)

    @property
    def held_runs(self) -> int:
        return sum(len(s.held) * len(self.seeds) for s in self.sizes)

    @property
    def band_runs(self) -> int:
        return sum(len({p.key for p in s.band.values()}) * len(self.band_seeds) for s in self.sizes)

    @property
    def runs(self) -> int:
        return self.held_runs + self.band_runs

    def identity(self) -> dict[str, Any]:
        """What the folder is a verdict of (``verdict.plan.json``): no path, no time."""
        from ..core.version import __version__

        return {"format": FORMAT, "meshsim": __version__,
                "sizes": [{"label": s.label, "scenario": s.name, "file": s.file.name, "sha256": s.sha256,
                           "agents": s.agents} for s in self.sizes],
                "candidates": [{"name": c.name, "values": c.values, "origin": c.origin} for c in self.candidates],
                "seeds": self.seeds, "band_seeds": self.band_seeds, "samples": len(self.positions),
                "constraints": [c.text for c in self.constraints]}


# ------------------------------------------------------------------------------------ planning


def _seed_list(text: str, option: str) -> list[int]:
    from ..scenario.fields import parse_seeds

    try:
        v = parse_seeds(text)
    except ValueError as exc:
        raise InputError(str(exc), field=option, value=text) from None
    if not isinstance(v, list):  # a count: seeds from the scenario's own, i.e. the ones a search starts from
        raise InputError("a verdict needs the held-out seeds themselves, not a count: a list or a range such as "
                         "70001-70010", field=option, value=text)
    return v


def read_search(folder: str | Path, front: Optional[int]) -> tuple[list[Candidate], dict[str, Any]]:
    """The candidates of a search folder (its recommendation, then its front by rank, at most ``front`` of
    those) and what the verdict keeps of the search: its scenario's name, its seeds (every run it made)."""
    from ..sweep.manifest import read_manifest
    from ..sweep.search import FRONT, RECOMMENDED
    from ..uncertainty.tables import read_csv

    d = Path(folder)
    where = {"field": "--from", "value": str(folder)}
    if not d.is_dir():
        raise InputError("not a folder", **where)
    try:
        m = read_manifest(d)
    except RunFolderError as exc:
        raise InputError(f"not a search folder ({exc})", **where) from None
    if m is None or "search" not in m:
        raise InputError("not a search folder (no manifest.json of meshsim sweep --search)", **where)
    rf = d / RECOMMENDED
    if not rf.is_file():
        raise InputError("the search has not finished (no recommended.json): rerun it to finish", **where)
    from ..core.files import read_text

    try:
        rec = json.loads(read_text(rf, "profile", limit=4 * 2 ** 20))  # a few hundred bytes when meshsim wrote it
    except ValueError:
        raise InputError("not valid JSON", file=str(rf)) from None
    if not isinstance(rec, dict) or not isinstance(rec.get("values"), dict) or not rec["values"]:
        raise InputError("the search recommends nothing (no feasible front point)", file=str(rf))
    paths = list(rec["values"])
    cands = [Candidate("recommended", dict(rec["values"]), f"recommended.json (front rank {rec.get('rank')})")]
    points = m.get("points") or {}
    rows = read_csv(d / FRONT) if (d / FRONT).is_file() else []
    taken = 0
    for r in sorted(rows, key=lambda r: r.get("rank") or 0):
        if r.get("point") == rec.get("point") or (front is not None and taken >= front):
            continue
        vals = points.get(r.get("point"))
        if not isinstance(vals, dict) or any(p not in vals for p in paths):
            raise InputError("a front point the manifest does not hold", file=str(d / FRONT), field="point",
                             value=r.get("point"))
        cands.append(Candidate(f"front-{r['rank']}", {p: vals[p] for p in paths}, f"front.csv rank {r['rank']}"))
        taken += 1
    seeds = sorted({int(s) for _k, s in m.get("runs", [])} | set((m.get("search") or {}).get("seeds") or []))
    info = {"scenario": (m.get("scenario") or {}).get("name"), "seeds": seeds, "rule": rec.get("rule"),
            "front_points": len(rows), "candidates": [c.name for c in cands]}
    return cands, info


def _given(sets: list[str]) -> dict[str, Any]:
    """The ``--set`` items as {path: value} (for the table; values as YAML reads them)."""
    from ..core.files import parse_value

    out = {}
    for item in sets:
        p, _sep, v = item.partition("=")
        out[p.strip()] = parse_value(v, "--set", p.strip(), lenient=True)
    return out


def plan_verdict(scenarios: list[str], sets: list[str] | tuple[str, ...] = (), from_dir: Optional[str] = None,
                 seeds: Optional[str] = None, constraints: list[str] | tuple[str, ...] = (),
                 bands: Optional[str] = None, samples: int = DEFAULT_SAMPLES, band_seeds: int = DEFAULT_BAND_SEEDS,
                 front: Optional[int] = None, tuned_on: Optional[str] = None, design_seed: int = 1,
                 smoke: bool = False, budget: Optional[int] = None) -> VerdictPlan:
    """Check everything (constraints, seeds, the search, the sizes, every point) and lay out the runs.
    Writes nothing; a bad input is one :class:`InputError`."""
    cons = [parse_constraint(c) for c in constraints] or [parse_constraint(c) for c in DEFAULT_CONSTRAINTS]
    if not scenarios:
        raise InputError("give at least one SCENARIO", field="SCENARIO")
    if seeds is None:
        raise InputError("give the held-out seeds (e.g. --seeds 70001-70010): seeds no search or doc used",
                         field="--seeds")
    seed_list = _seed_list(seeds, "--seeds")
    if samples < 0:
        raise InputError("must be >= 0", field="--samples", value=samples)
    if band_seeds < 1:
        raise InputError("must be >= 1", field="--band-seeds", value=band_seeds)
    if front is not None and front < 0:
        raise InputError("must be >= 0", field="--front", value=front)
    if front is not None and from_dir is None:
        raise InputError("--front chooses among a search's front points: it goes with --from", field="--front",
                         value=front)
    if bands is not None and samples == 0:
        raise InputError("--bands gives assumption samples, --samples 0 asks for none", field="--bands",
                         value=bands)
    search = None
    if from_dir is not None:
        cands, search = read_search(from_dir, front)
    elif sets:
        given = _given(list(sets))
        cands = [Candidate("given", {}, "--set", given)]
    else:
        cands = [Candidate("scenario", {}, "the scenario's own values")]
    tuned = _seed_list(tuned_on, "--tuned-on") if tuned_on is not None else []
    used = set(tuned) | set(search["seeds"] if search else [])
    overlap = sorted(set(seed_list) & used)
    if overlap:
        by = (f"the search in {from_dir} ran seeds {seeds_text(search['seeds'])}" if search and
              set(overlap) & set(search["seeds"]) else f"--tuned-on names {seeds_text(tuned)}")
        raise InputError(f"held-out seeds must be disjoint from every seed the thresholds were chosen on: "
                         f"{seeds_text(overlap)} overlap ({by}); choose others", field="--seeds", value=seeds)
    plan = VerdictPlan([], cands, seed_list, seed_list[:band_seeds], [], {}, cons, not constraints, search, tuned)
    if len(seed_list) == 1:
        plan.warnings.append(f"one held-out seed ({seed_list[0]}): no interval over seeds for a mean; "
                             "P(...) and proportions keep their exact intervals")
    labels: set[str] = set()
    for path in scenarios:
        size = _size(path, list(sets), smoke, labels)
        plan.sizes.append(size)
    _positions(plan, bands, samples, design_seed)
    held = len(plan.sizes) * len(cands) * len(seed_list)
    band = len(plan.sizes) * len(cands) * len(plan.positions) * len(plan.band_seeds)
    from ..sweep.spec import MAX_RUNS

    if held + band > MAX_RUNS:
        raise InputError(f"the verdict plans {held + band:,} runs, more than {MAX_RUNS:,}: fewer seeds or samples",
                         field="--seeds", value=seeds)
    if budget is not None and held + band > budget:  # before any point is built or anything written
        raise InputError(f"the verdict plans {held + band:,} runs ({held:,} held-out, {band:,} over the "
                         f"assumptions), more than the budget: fewer seeds, samples (--samples), candidates "
                         f"(--front) or sizes", field="--budget", value=budget)
    for size in plan.sizes:
        _points(plan, size)
    paths = [c.path for c in cons if c.path]
    if paths:
        _check_paths(plan, paths)
    return plan


def _size(path: str, sets: list[str], smoke: bool, labels: set[str]) -> Size:
    from ..scenario.model import build_graph, parse_scenario, read_scenario_data, scenario_data

    p = Path(path)
    source = str(p)
    raw = read_scenario_data(p)
    base = scenario_data(raw, source, sets, smoke)
    sc = parse_scenario(copy.deepcopy(base), source, p.parent)
    agents = build_graph(sc, sc.seed).number_of_nodes()
    label, k = _safe(sc.name), 2
    while label in labels:
        label, k = f"{_safe(sc.name)}-{k}", k + 1
    labels.add(label)
    digest = hashlib.sha256(json.dumps(base, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return Size(label, p, source, p.parent, sc.name, agents, base, digest)


def _safe(name: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "scenario"


def _factors(size: Size) -> tuple[Path, dict[str, Any], list[Any]]:
    """(profile, the scenario's own backend.overrides, the profile's assumption factors)."""
    from ..backends.provenance import assumption_factors, load_profile_data
    from ..uncertainty.core import profile_of

    prof, over = profile_of(size.base, size.source, size.base_dir)
    data = load_profile_data(prof)
    if not data.get("ranges"):
        raise InputError("the profile declares no assumption ranges (a 'ranges:' block): no band to run; give "
                         "--samples 0", file=str(prof), field="ranges")
    return prof, over, assumption_factors(data, str(prof))


def _positions(plan: VerdictPlan, bands: Optional[str], samples: int, design_seed: int) -> None:
    """The assumption samples: a stored study's own Latin-hypercube samples over its top factors (--bands),
    else a Latin hypercube over every factor of the first size's profile."""
    if samples == 0:
        plan.assumptions = {"source": "none", "samples": 0, "factors": []}
        return
    _prof, _over, factors = _factors(plan.sizes[0])
    if bands is not None:
        from ..paper.reproduce.bands import joint_positions
        from ..uncertainty import is_uncertainty_folder

        d = Path(bands)
        if not is_uncertainty_folder(d) or not (d / "samples.csv").is_file():
            raise InputError("not a finished uncertainty folder (no uncertainty.json or samples.csv); make one "
                             "with meshsim uncertainty", field="--bands", value=bands)
        states, positions, available = joint_positions([d], samples)
        top = list(states[0].get("top") or [])
        if not top or not positions:
            raise InputError("the study holds no band samples over its top factors", field="--bands", value=bands)
        known = {f.name: f for f in factors}
        for t in top:
            if t not in known:
                raise InputError(f"the study's factor '{t}' is not a range of this scenario's profile",
                                 field="--bands", value=bands)
        stored = {f["name"]: (f["low"], f["high"]) for f in states[0].get("factors", [])}
        for t in top:
            if t in stored and tuple(stored[t]) != (known[t].low, known[t].high):
                raise InputError(f"the study's range of '{t}' ({stored[t][0]:g}-{stored[t][1]:g}) is not the "
                                 f"profile's ({known[t].low:g}-{known[t].high:g}) any more; rerun the study",
                                 field="--bands", value=bands)
        if len(positions) < samples:
            plan.warnings.append(f"the study holds {available} band samples: {len(positions)} used, not {samples}")
        plan.positions = positions
        plan.assumptions = {"source": "uncertainty study", "study_scenario": states[0]["scenario"]["name"],
                            "factors": [{"name": t, "low": known[t].low, "high": known[t].high} for t in top],
                            "samples": len(positions), "design": "the study's own Latin-hypercube samples"}
        return
    from ..uncertainty.design import lhs_design

    rows = lhs_design(len(factors), samples, design_seed)
    plan.positions = [{f.name: u for f, u in zip(factors, row)} for row in rows]
    plan.assumptions = {"source": "every range of the profile",
                        "factors": [{"name": f.name, "low": f.low, "high": f.high} for f in factors],
                        "samples": samples, "design": f"Latin hypercube, design seed {design_seed}"}


def _points(plan: VerdictPlan, size: Size) -> None:
    """Every candidate at the profile's values and at each assumption sample, validated as sweep points."""
    from ..backends.provenance import factor_overrides
    from ..simulate.runner import portable_data
    from ..scenario.model import (CheckMemo, build_graph, check_semantics, get_path, parse_scenario, set_path,
                                  topology_seed)
    from ..sweep.core import Point, point_key

    graphs: dict[str, Any] = {}
    memo = CheckMemo()

    def point(data: dict[str, Any], values: dict[str, Any], what: str) -> Point:
        try:
            sc = parse_scenario(data, size.source, size.base_dir)
            gkey = json.dumps([sc.network.model_dump(mode="json"), sc.agents.model_dump(mode="json"),
                               sc.tasks.model_dump(mode="json") if sc.tasks else None,
                               topology_seed(sc, plan.seeds[0])], sort_keys=True, default=str)
            if gkey not in graphs:
                graphs[gkey] = build_graph(sc, plan.seeds[0])
            check_semantics(sc, graphs[gkey], memo)
        except InputError as exc:
            raise InputError(f"{what} is not a valid scenario: {exc}", file=size.source) from None
        portable = portable_data(sc)
        shown = {p: get_path(portable, p, v) for p, v in values.items()}
        return Point(point_key(portable), shown, portable)

    leaves: list[str] = []
    factors: list[Any] = []
    base_over: dict[str, Any] = {}
    if plan.positions:
        _prof, base_over, factors = _factors(size)
        names = {f.name for f in factors}
        for name in plan.positions[0]:
            if name not in names:
                raise InputError(f"the assumption factor '{name}' is not a range of this scenario's profile",
                                 file=size.source, field="backend.profile")
        used = [f for f in factors if f.name in plan.positions[0]]
        leaves = [leaf for f in used for leaf, *_ in f.leaves]
    cand_paths = list(dict.fromkeys(p for c in plan.candidates for p in c.values))
    size.axes = cand_paths + [f"backend.overrides.{leaf}" for leaf in leaves]
    for c in plan.candidates:
        data = copy.deepcopy(size.base)
        for p, v in c.values.items():
            set_path(data, p, v, "--from")
        size.held[c.name] = point(copy.deepcopy(data), dict(c.values), f"candidate {c.name}")
        for j, pos in enumerate(plan.positions):
            d2 = copy.deepcopy(data)
            over = dict(base_over)
            over.update(factor_overrides(factors, pos))
            d2.setdefault("backend", {})["overrides"] = over
            vals = dict(c.values)
            vals.update({f"backend.overrides.{leaf}": over.get(leaf, _MISSING) for leaf in leaves})
            vals = {k: v for k, v in vals.items() if v is not _MISSING}
            size.band[(c.name, j)] = point(d2, vals, f"candidate {c.name} at assumption sample {j}")


def _check_paths(plan: VerdictPlan, paths: list[str]) -> None:
    """A constraint's summary path names a number of the first size's summary (its smoke size, one run)."""
    import difflib

    from ..simulate.runner import run_one
    from ..scenario.model import parse_scenario, scenario_data
    from ..sweep.results import flatten
    from ..core.dotted import MISSING, get_path

    size = plan.sizes[0]
    small = scenario_data(copy.deepcopy(size.base), size.source, None, smoke=True)
    summary = json.loads(json.dumps(run_one(parse_scenario(small, size.source, size.base_dir),
                                            plan.seeds[0]).summary, default=str))
    known = sorted(flatten(summary))
    for p in paths:
        v = get_path(summary, p, MISSING)
        text = next(c.text for c in plan.constraints if c.path == p)
        if v is MISSING:
            close = difflib.get_close_matches(p, known, n=2)
            raise InputError("not a number of this scenario's summary.json"
                             + (f" (did you mean {', '.join(close)}?)" if close else ""),
                             field="--constraint", value=text)
        if v is not None and not isinstance(v, (bool, int, float)):
            raise InputError("names a group, not a number, of summary.json", field="--constraint", value=text)


# ------------------------------------------------------------------------------------ running


def _sweep_plan(size: Size, points: list[Any], seeds: list[int]):
    from ..sweep.core import Plan
    from ..sweep.spec import Axis, SweepSpec

    spec = SweepSpec(axes=[Axis(tuple(size.axes), ())] if size.axes else [], seeds=list(seeds), output="summary")
    plan = Plan(size.file, size.source, size.base_dir, size.name, size.base, spec, list(seeds))
    seen: set[str] = set()
    for p in points:
        if p.key not in seen:
            seen.add(p.key)
            plan.points.append(p)
    return plan


def stage_plans(plan: VerdictPlan, size: Size) -> list[Any]:
    """The size's two sweep plans: held-out (every seed), band (the band seeds)."""
    out = [_sweep_plan(size, list(size.held.values()), plan.seeds)]
    if size.band:
        out.append(_sweep_plan(size, list(size.band.values()), plan.band_seeds))
    return out


def folder_status(plan: VerdictPlan, out: Path) -> tuple[int, Optional[str]]:
    """(runs of the plan the folder already holds, why it would be refused), read-only."""
    from ..sweep.core import sweep_status

    refused = _refusal(out)
    if refused is not None:
        return 0, refused
    done = 0
    for size in plan.sizes:
        for sp in stage_plans(plan, size):
            st = sweep_status(sp, out / size.label)
            if st.refused:
                return 0, st.refused
            done += sum(len(v) for v in st.done.values())
    return done, None


#: the verdict holds its folder (its sweeps lock their own subfolders)
LOCK = ".verdict.lock"


def _refusal(out: Path) -> Optional[str]:
    if out.exists() and not out.is_dir():
        return str(RunFolderError("output path exists and is not a folder", file=str(out)))
    if out.is_dir() and not (out / PLAN).is_file() and any(p for p in out.iterdir() if p.name != LOCK):
        return str(RunFolderError("folder exists, is not empty and holds no verdict (verdict.plan.json); choose "
                                  "another --out", file=str(out)))
    return None


@dataclass
class VerdictOutcome:
    out: Path
    total: int
    resumed: int
    failed: int
    failures: list[dict[str, Any]]
    verdict: dict[str, Any]
    written: list[Path]


def run_verdict(plan: VerdictPlan, out: str | Path, executor: str = "local", workers: Optional[int] = None,
                scheduler: Optional[str] = None, quiet: bool = False, live: Optional[bool] = None,
                echo: Callable[[str], None] = lambda s: None, every: float = 10.0,
                announce: Optional[Callable[[int], None]] = None) -> VerdictOutcome:
    """Run what the folder does not hold yet, then judge and write verdict.json and verdict.md.
    ``announce(done)`` is called once the folder and the executor are accepted, before the first run."""
    from ..sweep.core import run_sweep
    from ..sweep.folder import lock_folder
    from .judge import judge_plan
    from .report import markdown

    out = Path(out)
    refused = _refusal(out)
    if refused is not None:
        raise RunFolderError(refused)
    done, refused = folder_status(plan, out)
    if refused is not None:
        raise RunFolderError(refused)
    lock = lock_folder(out, LOCK, "verdict", {"scenario": ", ".join(s.name for s in plan.sizes)})
    failures: list[dict[str, Any]] = []
    try:
        write_atomic(out / PLAN, json.dumps(plan.identity(), indent=1) + "\n")
        if announce is not None:
            announce(done)
        for size in plan.sizes:
            for i, sp in enumerate(stage_plans(plan, size)):
                echo(f"verdict: {size.label} ({size.agents} agents): "
                     + ("held-out seeds" if i == 0 else f"{len(plan.positions)} assumption samples"))
                res = run_sweep(sp, out / size.label, executor=executor, workers=workers, scheduler=scheduler,
                                quiet=quiet, live=live, echo=echo, every=every)
                failures += [f for f in res.failures]
        verdict = judge_plan(plan, out)
        write_atomic(out / VERDICT, json.dumps(verdict, indent=1, sort_keys=False) + "\n")
        write_atomic(out / REPORT, markdown(verdict))
    finally:
        lock.release()
    return VerdictOutcome(out, plan.runs, done, len(failures), failures, verdict, [out / VERDICT, out / REPORT])
