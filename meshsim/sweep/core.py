"""Planning and running a sweep (docs/sweeps.md).

:func:`plan_sweep` reads the spec, expands the grid and validates every point
against the scenario (static checks and those that need the graph): a point
that fails (α ≥ β) is *skipped* with its reason, never a crash; a path that
names nothing, an empty grid or a malformed range is an input error.
:func:`run_sweep` resumes what the folder already holds, connects the
executor, writes the manifest, runs the rest and writes the tidy tables.

A run's identity is a hash of the resolved scenario it runs (its folder is
``runs/<point>/seed-<s>/``): the same scenario is never run twice, whatever
grid reached it; a run is finished when its ``summary.json`` (written last,
atomically) sits beside the expected ``scenario.resolved.yaml``.
"""
from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from ..core.errors import InputError, RunFolderError
from ..io.records import write_atomic, write_records
from .executors import make_executor
from .folder import check_folder, open_folder, run_dir, summary_ok
from .manifest import FORMAT, check_compatible, read_manifest
from .progress import SweepProgress
from .results import TIMING, write_results
from .spec import MAX_RUNS, OUTPUT_LEVELS, SweepSpec, build_spec, parse_axis_arg, read_sweep_file, spec_from_section

__all__ = ["Point", "Plan", "plan_sweep", "run_sweep", "SweepOutcome", "short_names", "point_label", "resume_args",
           "sweep_status", "SweepStatus", "MIN_SEEDS"]

_MISSING = object()
#: seeds per point when neither the sweep section nor --seeds names them (the scenario's, topped up)
MIN_SEEDS = 5


@dataclass
class Point:
    key: str
    values: dict[str, Any]  # swept path -> value as the resolved scenario holds it
    data: dict[str, Any]  # the resolved scenario (files absolute): what workers receive


@dataclass
class Plan:
    scenario_path: Path
    source: str
    base_dir: Path
    name: str
    base: dict[str, Any]  # raw scenario data after --smoke and the base --set overrides
    spec: SweepSpec
    seeds: list[int]
    points: list[Point] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    #: what the user should know before the runs start (e.g. one seed per point)
    warnings: list[str] = field(default_factory=list)
    #: the arguments of plan_sweep that made this plan (the file as an absolute path): kept in the
    #: manifest so that ``meshsim sweep --out DIR`` reruns the same command (:func:`resume_args`)
    command: dict[str, Any] = field(default_factory=dict)

    @property
    def runs(self) -> list[tuple[str, int]]:
        return [(p.key, s) for p in self.points for s in self.seeds]

    def manifest(self) -> dict[str, Any]:
        from ..core.version import __version__

        return {"format": FORMAT, "meshsim": __version__, "scenario": {"name": self.name, "source": self.source},
                "base": self.base, "axes": self.spec.paths, "output": self.spec.output,
                "points": {p.key: p.values for p in self.points}, "skipped": self.skipped,
                "runs": [[k, s] for k, s in self.runs], "command": self.command}


@dataclass
class SweepOutcome:
    out: Path
    total: int
    resumed: int
    ok: int
    failed: int
    skipped: int
    failures: list[dict[str, Any]]
    written: list[Path]


def short_names(paths: list[str]) -> dict[str, str]:
    """Each swept path by its last component (``alpha``), or longer when that is ambiguous."""
    out = {}
    for p in paths:
        parts = p.split(".")
        k = 1
        while k < len(parts) and sum(1 for q in paths if q.split(".")[-k:] == parts[-k:]) > 1:
            k += 1
        out[p] = ".".join(parts[-k:])
    return out


def point_label(values: dict[str, Any], names: Optional[dict[str, str]] = None) -> str:
    names = names or short_names(list(values))
    return " ".join(f"{names.get(p, p)}={_fmt(v)}" for p, v in values.items())


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return json.dumps(v, default=str) if isinstance(v, (dict, list)) else str(v)


def point_key(data: dict[str, Any]) -> str:
    """A point's id: a hash of the redacted scenario it runs (its folder's name under ``runs/``)."""
    from ..core.redact import structural

    # the redacted form (secrets by field), as the run's scenario.resolved.yaml holds it: a rotated
    # token or password is the same point, and no hash of a secret names a folder
    d = {k: v for k, v in structural(data).items() if k not in ("seed", "seeds", "smoke")}
    text = json.dumps(d, sort_keys=True, default=str, separators=(",", ":"))
    return "p-" + hashlib.sha256(text.encode()).hexdigest()[:12]


# ------------------------------------------------------------------------------------ planning


def plan_sweep(path: str | Path, grid: tuple[str, ...] | list[str] = (), zips: tuple[str, ...] | list[str] = (),
               seeds: Optional[str] = None, sets: tuple[str, ...] | list[str] = (), output: Optional[str] = None,
               smoke: bool = False) -> Plan:
    """Read the spec (file section, then the command line's axes replace it) and validate every point."""
    from ..scenario.fields import parse_seeds
    from ..scenario.model import (CheckMemo, build_graph, check_semantics, get_path, parse_scenario, scenario_data,
                                  set_path, topology_seed)
    from ..simulate.runner import portable_data

    path = Path(path)
    scen_path, raw, section, section_source = read_sweep_file(path)
    source = str(scen_path)
    file_spec = spec_from_section(section, section_source, smoke) if section is not None else None
    origin: dict[str, dict[str, Any]] = {}
    if grid or zips:
        g = [parse_axis_arg(x, "--grid") for x in grid]
        z = [parse_axis_arg(x, "--zip") for x in zips]
        spec = build_spec(g, [dict(z)] if z else [], file_spec.seeds if file_spec else None,
                          file_spec.sets if file_spec else [], output or (file_spec.output if file_spec else None),
                          {"field": "--grid"})
        for p, _v in g:
            origin[p] = {"field": "--grid", "value": p}
        for p, _v in z:
            origin[p] = {"field": "--zip", "value": p}
    elif file_spec is not None:
        spec = file_spec
        if output:
            if output not in OUTPUT_LEVELS:
                raise InputError(f"unknown output level; choose one of {', '.join(OUTPUT_LEVELS)}",
                                 field="--output", value=output)
            spec.output = output
        for p in spec.paths:
            origin[p] = {"file": section_source, "field": f"sweep.grid.{p}"}
    else:
        spec = SweepSpec()
    if not spec.axes:
        raise InputError("empty grid: give --grid PATH=VALUES (or --zip), or a 'sweep: {grid: ...}' section "
                         "in the file", field="--grid", value=str(path))
    if seeds is not None:
        try:
            spec.seeds = parse_seeds(seeds)
        except ValueError as exc:
            raise InputError(str(exc), field="--seeds", value=seeds) from None
    spec.sets = list(spec.sets) + list(sets)

    base = scenario_data(raw, source, spec.sets, smoke)
    base_dir = scen_path.parent
    base_sc = parse_scenario(copy.deepcopy(base), source, base_dir)
    if spec.seeds is None:
        # statistics per point need seeds: the scenario's own, topped up to MIN_SEEDS consecutive ones
        seed_list = list(base_sc.seed_list())
        while len(seed_list) < MIN_SEEDS:
            seed_list.append(max(seed_list) + 1)
    elif isinstance(spec.seeds, int):
        seed_list = [base_sc.seed + k for k in range(spec.seeds)]
    else:
        seed_list = list(spec.seeds)

    npoints = 1
    for axis in spec.axes:
        npoints *= len(axis.values)
    if npoints * len(seed_list) > MAX_RUNS:  # budget before work (issue 19): not after a million plans
        raise InputError(f"{npoints:,} points x {len(seed_list):,} seeds = {npoints * len(seed_list):,} runs, more "
                         f"than {MAX_RUNS:,}; fewer seeds or points",
                         **({"field": "--seeds", "value": seeds} if seeds is not None else
                            {"file": section_source, "field": "sweep.seeds"} if spec.seeds is not None else
                            {"file": source, "field": "seeds"}))
    graphs: dict[str, Any] = {}
    memo = CheckMemo()

    def check(data: dict[str, Any]):
        sc = parse_scenario(data, source, base_dir)
        gkey = json.dumps([sc.network.model_dump(mode="json"), sc.agents.model_dump(mode="json"),
                           sc.tasks.model_dump(mode="json") if sc.tasks else None,
                           topology_seed(sc, seed_list[0])], sort_keys=True, default=str)
        if gkey not in graphs:
            graphs[gkey] = build_graph(sc, seed_list[0])
        check_semantics(sc, graphs[gkey], memo)
        return sc

    # a path the scenario does not hold (even as a default) must be one it accepts
    resolved = base_sc.resolved()
    for axis in spec.axes:
        for i, p in enumerate(axis.paths):
            if get_path(resolved, p, _MISSING) is not _MISSING:
                continue
            trial = copy.deepcopy(base)
            set_path(trial, p, axis.values[0][i], source)
            try:
                check(trial)
            except InputError as exc:
                where = origin.get(p, {"field": "--grid", "value": p})
                raise InputError(f"unknown path ({exc})", **where) from None

    plan = Plan(scen_path, source, base_dir, base_sc.name, base, spec, seed_list)
    plan.command = {"path": str(path.resolve()), "grid": list(grid), "zip": list(zips), "seeds": seeds,
                    "set": list(sets), "output": output, "smoke": bool(smoke)}
    if len(seed_list) == 1:
        plan.warnings.append(f"one seed per point (seed {seed_list[0]}): no standard errors, intervals or paired "
                             f"differences, and seed noise reads as an effect; statistics need seeds "
                             f"(--seeds {MIN_SEEDS} or more)")
    seen: set[str] = set()
    for pt in spec.points():
        data = copy.deepcopy(base)
        for p, v in pt.items():
            set_path(data, p, v, source)
        try:
            sc = check(data)
        except InputError as exc:
            plan.skipped.append({"values": pt, "reason": str(exc)})
            continue
        portable = portable_data(sc)
        key = point_key(portable)
        if key in seen:
            continue  # the same scenario twice (2 and 2.0)
        seen.add(key)
        values = {p: get_path(portable, p, v) for p, v in pt.items()}
        plan.points.append(Point(key, values, portable))
    if not plan.points:
        first = plan.skipped[0]
        raise InputError(f"every point of the grid fails validation ({len(plan.skipped)} points); the first, "
                         f"{point_label(first['values'])}: {first['reason']}", field="--grid")
    return plan


# ------------------------------------------------------------------------------------ running


def write_run(out: Path, res: dict[str, Any], fmt: str) -> None:
    """Write one finished (or failed) run's files into its folder (:func:`.folder.run_dir`); summary.json last."""
    from ..io.runfolder import SEED_FILES, stale_tmp

    d = run_dir(out, res["point"], int(res["seed"]))
    d.mkdir(parents=True, exist_ok=True)
    for stale in ("summary.json", "error.txt", TIMING):
        if (d / stale).is_file() and not (d / stale).is_symlink():
            (d / stale).unlink()
    for tmp in stale_tmp(d, SEED_FILES | {TIMING}):  # meshsim's own temp files only
        tmp.unlink()
    if res.get("resolved"):
        write_atomic(d / "scenario.resolved.yaml", res["resolved"])
    if res.get("wall") is not None:  # measured in the worker; apart from summary.json (results.TIMING)
        write_atomic(d / TIMING, json.dumps({"wall_seconds": round(res["wall"], 3),
                                             "cpu_seconds": round(res["cpu"], 3)}) + "\n")
    if res["status"] == "ok":
        for name, rows in res.get("tables", {}).items():
            write_records(d, name, rows, fmt)
        write_atomic(d / "summary.json", res["summary"])  # last: its presence means the run completed
    else:
        write_atomic(d / "error.txt", res["error"] + "\n" + (res.get("detail") or ""))


class _Expected(dict):
    """Every run's ``scenario.resolved.yaml`` text, ``{(point, seed): text}``,
    made when first looked up (``[]``; ``.get`` only reads): a run is finished
    when its folder holds this beside a summary.json, so only runs with a
    summary need it here. A fresh run's text is made by its worker, in
    parallel (the same function of the same data), not here before the first
    run (~7 ms a run: 0.9 s of a 128-run sweep, issue 33)."""

    def __init__(self, plan: Plan):
        super().__init__()
        self._plan = plan
        self._points = {p.key: p for p in plan.points}
        self._parsed: dict[str, Any] = {}

    def __missing__(self, key: tuple[str, int]) -> str:
        from ..scenario.model import parse_scenario
        from ..simulate.runner import resolved_yaml

        point, seed = key
        if point not in self._parsed:
            self._parsed[point] = parse_scenario(copy.deepcopy(self._points[point].data), self._plan.source,
                                                 self._plan.base_dir)
        text = self[key] = resolved_yaml(self._parsed[point], seed)
        return text


def _expected(plan: Plan) -> dict[tuple[str, int], str]:
    """Every run's ``scenario.resolved.yaml`` text (:class:`_Expected`, made when looked up)."""
    return _Expected(plan)


#: the size cap (files.LIMITS) of each input a scenario names (scenario.input_files roles)
_INPUT_KINDS = {"topology": "topology", "tasks": "tasks", "cassette": "cassette", "dataset": "profile",
                "profile": "profile", "inner": "profile"}


def _shipped_inputs(plan: Plan, remote: bool) -> dict[str, dict[str, bytes]]:
    """``{point: {path: bytes}}``: :func:`point_inputs` of every point of the plan."""
    cache: dict[str, Optional[bytes]] = {}
    return {p.key: point_inputs(p.data, plan.source, plan.base_dir, remote, cache) for p in plan.points}


def point_inputs(data: dict[str, Any], source: str, base_dir: Path, remote: bool,
                 cache: dict[str, Optional[bytes]]) -> dict[str, bytes]:
    """The content of every input file a point's scenario names (topology,
    task file, dataset and backend profiles, a cassette replayed read-only),
    by the path the worker will look it up under (files.shipped). Each file is
    read once (``cache``), within its size cap (files.LIMITS). A file that
    cannot be read is left out: the worker meets the error a local run would,
    and the run fails with it. A cassette a run would append to (modes
    ``record``, ``record-missing``) stays a path, for it can only be written
    where it is: a sweep against a scheduler address (``remote``) refuses it."""
    from ..core.files import read_bytes
    from ..scenario.model import input_files, parse_scenario

    sc = parse_scenario(copy.deepcopy(data), source, base_dir)
    spec = sc.backend.model_dump() if sc.backend is not None else {}
    found = input_files(sc)
    if sc.tasks is not None and sc.tasks.file:  # a BIG-bench task folder: its task.json is what is read
        tf = Path(sc.tasks.file)
        tf = tf if tf.is_absolute() else base_dir / tf
        if tf.is_dir():
            found["tasks"] = (tf / "task.json", False)
    files: dict[str, bytes] = {}
    for role, (path, append_only) in found.items():
        if append_only and spec.get("mode", "record-missing") != "replay":
            if remote:
                raise InputError("a sweep on a Dask scheduler replays cassettes read-only (its workers may be on "
                                 "other machines): set backend.mode to replay, or record with a local sweep",
                                 file=source, field="backend.mode", value=spec.get("mode", "record-missing"))
            continue
        key = str(path)
        if key not in cache:
            try:
                cache[key] = read_bytes(path, _INPUT_KINDS.get(role, "profile"))
            except InputError:
                cache[key] = None
        content = cache[key]
        if content is not None:
            files[key] = content
    return files


def _finished(out: Path, key: str, seed: int, expected: dict[tuple[str, int], str]) -> bool:
    d = run_dir(out, key, seed)
    r = d / "scenario.resolved.yaml"
    return summary_ok(d / "summary.json") and r.is_file() and _text(r) == expected[(key, seed)]


def _text(f: Path) -> Optional[str]:
    try:
        return f.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def resume_args(out: str | Path, sets: tuple[str, ...] | list[str] = (), axes: bool = False) -> dict[str, Any]:
    """The arguments of :func:`plan_sweep` (``path``, ``grid``, ``zips``,
    ``seeds``, ``sets``, ``output``, ``smoke``) of the last sweep command that
    wrote the folder ``out``, from its manifest: ``meshsim sweep --out DIR``
    resumes without retyping the grid. The manifest keeps no secrets: a
    ``--set`` whose value it withheld must be among ``sets`` (given again), and
    a withheld ``--grid`` / ``--zip`` needs new axes (``axes``)."""
    out = Path(out)
    m = read_manifest(out) if out.is_dir() else None
    if m is None:
        raise InputError("not a sweep folder (no manifest.json): give the SCENARIO to start a sweep there",
                         file=str(out))
    cmd = m.get("command")
    if not isinstance(cmd, dict) or not cmd.get("path"):
        raise InputError("this folder's manifest predates resuming without the grid: rerun the sweep command "
                         "that made it (SCENARIO and its --grid options)", file=str(out / "manifest.json"))
    if not Path(cmd["path"]).is_file():
        raise InputError("the scenario this sweep was made from is gone", file=str(out / "manifest.json"),
                         field="command.path", value=cmd["path"])
    seeds = cmd.get("seeds")
    if isinstance(seeds, str) and seeds.strip().isdigit():  # written when a bare number was a count (issue 29)
        ran = {r[1] for r in m.get("runs") or [] if isinstance(r, list) and len(r) == 2}
        if len(ran) == int(seeds) and ran != {int(seeds)}:
            seeds = f"count:{int(seeds)}"
    withheld = [str(w) for w in cmd.get("withheld") or []]
    given = {str(x).split("=", 1)[0].strip() for x in sets}
    for w in withheld:
        if w.startswith("--") and not axes or not w.startswith("--") and w not in given:
            opt = f"{w} PATH=..." if w.startswith("--") else f"--set {w}=..."
            raise InputError(f"the manifest keeps no secrets: give {opt} again to resume this sweep",
                             file=str(out / "manifest.json"), field="command.withheld", value=w)
    kept = [x for x in cmd.get("set") or [] if str(x).split("=", 1)[0].strip() not in withheld]
    return {"path": cmd["path"], "grid": list(cmd.get("grid") or []), "zips": list(cmd.get("zip") or []),
            "seeds": seeds, "sets": kept, "output": cmd.get("output"),
            "smoke": bool(cmd.get("smoke"))}


@dataclass
class SweepStatus:
    """What ``run_sweep`` would do with a folder (``--dry-run``; nothing is written)."""

    out: Path
    done: dict[str, list[int]]  # point -> seeds finished
    failed: dict[str, list[int]]  # point -> seeds whose last attempt failed (rerun)
    pending: dict[str, list[int]]  # point -> seeds not run yet (failed ones included)
    others: int  # runs the folder holds from earlier grids, outside this plan
    refused: Optional[str]  # why run_sweep would refuse the folder, one line


def sweep_status(plan: Plan, out: str | Path) -> SweepStatus:
    """Done / pending / refused for ``plan`` in ``out``, read-only."""
    out = Path(out)
    refused = None
    old = None
    try:
        old = check_folder(plan, out)
        if old is not None:
            check_compatible(old, plan.manifest(), out)
    except RunFolderError as exc:
        refused = str(exc)
    expected = _expected(plan)
    done: dict[str, list[int]] = {}
    failed: dict[str, list[int]] = {}
    pending: dict[str, list[int]] = {}
    for key, seed in plan.runs:
        if refused is None and out.is_dir() and _finished(out, key, seed, expected):
            done.setdefault(key, []).append(seed)
            continue
        pending.setdefault(key, []).append(seed)
        if refused is None and (run_dir(out, key, seed) / "error.txt").is_file():
            failed.setdefault(key, []).append(seed)
    mine = set(plan.runs)
    others = sum(1 for k, s in (old or {}).get("runs", []) if (k, s) not in mine) if refused is None else 0
    return SweepStatus(out, done, failed, pending, others, refused)


def run_sweep(plan: Plan, out: str | Path, executor: str = "local", workers: Optional[int] = None,
              scheduler: Optional[str] = None, quiet: bool = False, live: Optional[bool] = None,
              echo: Callable[[str], None] = lambda s: None, every: float = 10.0,
              announce: Optional[Callable[[], None]] = None, reference: Any = None) -> SweepOutcome:
    """Run every unfinished run of ``plan`` into ``out`` and write its tables.

    ``announce`` is called once everything that can refuse the sweep (the
    folder, the executor) has passed, before the first run: a refused sweep
    prints its one error line and nothing else. SIGTERM stops it as an
    exception would (exit code 143): the runs in flight are abandoned and
    the workers stopped (:mod:`.lifeline`)."""
    from .lifeline import sigterm_exits

    with sigterm_exits():
        return _run_sweep(plan, out, executor, workers, scheduler, quiet, live, echo, every, announce, reference)


def _run_sweep(plan: Plan, out: str | Path, executor: str, workers: Optional[int], scheduler: Optional[str],
               quiet: bool, live: Optional[bool], echo: Callable[[str], None], every: float,
               announce: Optional[Callable[[], None]], reference: Any = None) -> SweepOutcome:
    out = Path(out)
    left: dict[str, Any] = {}

    def connect() -> Any:  # once the folder passed its checks: what is left to run, then the executor
        left["expected"] = expected = _expected(plan)
        left["todo"] = todo = [r for r in plan.runs if not _finished(out, *r, expected)]
        # Dask workers may sit on other machines: they get the input files' content, read here once
        left["shipped"] = _shipped_inputs(plan, remote=scheduler not in (None, "", "local")) \
            if todo and executor == "dask" else None
        return make_executor(executor, workers, scheduler) if todo else None  # connect before writing anything

    folder = open_folder(plan, out, plan.manifest(), connect)
    expected, todo, shipped, ex = left["expected"], left["todo"], left["shipped"], folder.executor
    manifest = folder.manifest
    failures: list[dict[str, Any]] = []
    ok = 0
    try:
        if announce is not None:
            announce()
        total = len(plan.runs)
        echo(f"sweep: {len(plan.points)} points x {len(plan.seeds)} seeds = {total} runs"
             + (f", {total - len(todo)} already done" if len(todo) < total else "")
             + (f"; {ex.describe()}" if ex is not None else ""))
        fmts = {p.key: (p.data.get("output") or {}).get("format", "jsonl.gz") for p in plan.points}
        by_run = {(p.key, s): p for p in plan.points for s in plan.seeds}
        tasks = [{"point": k, "seed": s, "scenario": by_run[(k, s)].data, "source": plan.source,
                  "base_dir": str(plan.base_dir), "level": plan.spec.output,
                  "resolved": expected.get((k, s))}  # None: the worker makes it (_Expected)
                 for k, s in todo]
        if shipped is not None:
            for t in tasks:
                t["files"] = shipped[t["point"]]
        if ex is not None:
            ex.notify = echo
        progress = SweepProgress(total, total - len(todo), live=live, quiet=quiet, every=every)
        if todo:
            progress.start()
            aborted = True
            try:
                for res in ex.run(tasks):
                    if not res.get("resolved"):  # a run whose worker died, or failed before making it
                        res["resolved"] = expected[(res["point"], int(res["seed"]))]
                    write_run(out, res, fmts[res["point"]])
                    if res["status"] == "ok":
                        ok += 1
                    else:
                        failures.append(res)
                    progress.advance(res["status"] == "ok")
                aborted = False
            finally:
                progress.close()
                folder.close_executor(aborted)
        written = write_results(out, manifest, reference)  # reference: summary.csv's paired differences
    finally:
        folder.close()
    return SweepOutcome(out, len(plan.runs), len(plan.runs) - len(todo), ok, len(failures), len(plan.skipped),
                        failures, written)
