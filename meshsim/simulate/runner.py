"""Run a scenario: check, build the world, fire events, write the run folder.

One pipeline, the scenario flowing down once: :func:`prepare` (every seed's
graph and the dry replay of its events) → :func:`build` (network, backend,
protocol, task stream: the first seed's world is built before the run folder
is touched) → the backend's preflight → :func:`simulate` → write.
:func:`validate` is the same minus simulate and write, so validate and run
agree on every input, and a run whose input is bad leaves nothing behind.

A run folder (as desmod's ``simulate()``) holds ``scenario.resolved.yaml``
(every default filled in; rerunning it reproduces the run), ``events.jsonl``
(the trace), ``summary.json``, ``provenance.json`` (versions, input hashes,
times: not compared) and, on failure, ``error.txt``. Every file is written
atomically (temp file + rename) and ``summary.json`` is written last, so its
presence means the run completed. The folder is locked while a run writes
it, and a completed seed is resumed only when scenario, inputs and meshsim
version match (:mod:`meshsim.io.runfolder`).
"""
from __future__ import annotations

import json
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import networkx as nx

from ..backends import BackendPlan
from ..backends.registry import backend_kind
from ..core import redact
from ..core.errors import InputError, MeshsimError, RunFolderError, SimulationError
from ..core.files import os_reason
from ..io.records import TableWriter, read_records, write_atomic, write_records
from ..io.runfolder import PROVENANCE, read_json, refuse_inputs_inside, remove_stale_tmp, scenario_inputs
from ..observe.aggregate import aggregate
from ..observe.attribution import BYZANTINE_EVENTS, attribute, reach_warnings, review_reach, without_liars
from ..scenario.model import CheckMemo, Scenario, build_graph, check_semantics, topology_seed
from .session import FolderSession, dump_json, portable_data, resolved_yaml
from .world import Progress, RunContext, RunResult, World, backend_plan, build, finite, simulate

__all__ = ["run", "run_one", "validate", "prepare", "Interrupted", "RunResult", "MultiRunResult", "RunContext",
           "write_atomic", "portable_data", "resolved_yaml", "dump_json", "build", "simulate"]


@dataclass
class MultiRunResult:
    runs: list[RunResult]
    aggregate: dict[str, Any]
    out: Optional[Path] = None

    @property
    def summary(self) -> dict[str, Any]:
        return self.aggregate


# --------------------------------------------------------------------------
# load -> check (prepare) -> build -> simulate -> write


class Interrupted(MeshsimError):
    """Ctrl-C during a run: completed seeds are kept, a rerun resumes (exit 130)."""

    exit_code = 130


#: topology kinds whose graph does not depend on the seed: checked once per run
_FIXED_KINDS = frozenset({"complete", "ring", "path", "star", "k_circulant", "file"})


def _topology_key(scenario: Scenario, seed: int) -> Any:
    return None if scenario.network.topology.kind in _FIXED_KINDS else topology_seed(scenario, seed)


def prepare(scenario: Scenario, seeds: list[int], memo: Optional[CheckMemo] = None) -> dict[int, nx.Graph]:
    """Every check that needs a graph, for every seed, before anything is
    built or written: the graph of each distinct topology (its seed is derived
    from the run seed unless pinned), its connectivity and limits, and the dry
    replay of the events against it (:func:`meshsim.scenario.model.check_semantics`).

    Returns the graph of the first seed (the others are rebuilt when they run,
    so a 5-seed run never holds five large graphs at once). ``memo``: the run's
    ``check_semantics`` memo (the backend's profile checked and planned once per run)."""
    keep: dict[int, nx.Graph] = {}
    seen: set = set()
    for k, s in enumerate(seeds):
        key = _topology_key(scenario, s)
        if key in seen:
            continue
        seen.add(key)
        try:
            G = build_graph(scenario, s)
            check_semantics(scenario, G, memo)
        except InputError as exc:
            if key is None or scenario.network.topology.seed is not None or len(seeds) == 1 and s == scenario.seed:
                raise
            # a random graph drawn from this seed: say which, and how to pin it
            raise type(exc)(f"{exc.message} (in the graph of seed {s}: a random topology is drawn from the run "
                            "seed unless network.topology.seed pins it)", file=exc.file, field=exc.field,
                            value=exc.value) from None
        if k == 0:
            keep[s] = G
    return keep


def _preflight(scenario: Scenario, plan: BackendPlan) -> None:
    """One request per endpoint a real backend will call (none for fakes and replays)."""
    if scenario.backend is None:
        return
    backend = plan.build(0)
    try:
        backend.preflight()
    except InputError as exc:
        if exc.file:
            raise
        raise InputError(exc.message, file=scenario.source, field="backend" + (f".{exc.field}" if exc.field else ""),
                         value=exc.value) from None
    finally:
        backend.close()


def _validate(scenario: Scenario, seed: Optional[int] = None, preflight: bool = True) -> dict[str, Any]:
    """Every step of :func:`run` before the clock starts, for every seed it
    would run: the checks (:func:`prepare`), building the world (network,
    backend, protocol setup, task stream) on each distinct graph, and the
    backend's preflight. Raises what ``run`` would raise before its first
    tick; returns the first graph's size."""
    seeds = [seed] if seed is not None else scenario.seed_list()
    memo = CheckMemo()
    graphs = prepare(scenario, seeds, memo)
    plan = backend_plan(scenario, memo)
    built: set = set()
    for s in seeds:
        key = _topology_key(scenario, s)
        if key not in built:  # a SAC setup checks robustness by MILP: once per graph, not per seed
            built.add(key)
            build(scenario, s, graphs.get(s), plan, memo).close()
    if preflight:
        _preflight(scenario, plan)
    G = graphs[seeds[0]]
    warnings: list[str] = []  # liars that can never reach their targets (issue 34), per distinct graph
    seen: set = set()
    for s in seeds if any(e.type in ("frame", "shield") for e in scenario.events) else ():
        key = _topology_key(scenario, s)
        if key in seen:
            continue
        seen.add(key)
        g = graphs.get(s)
        for w in reach_warnings(scenario, g if g is not None else build_graph(scenario, s)):
            if w not in warnings:
                warnings.append(w)
    return {"agents": G.number_of_nodes(), "links": G.number_of_edges(), "seeds": seeds, "warnings": warnings}


def _run_one(scenario: Scenario, seed: int, out: Optional[Path] = None,
             progress: Optional[Progress] = None, force: bool = False) -> RunResult:
    """Run one seed into the folder ``out`` (single-seed layout); see :func:`run`."""
    if out is None:
        memo = CheckMemo()
        G = prepare(scenario, [seed], memo).get(seed)
        plan = backend_plan(scenario, memo)
        return _run_seed(scenario, seed, None, progress, build(scenario, seed, G, plan, memo), None, None, plan)
    return _run(scenario, [seed], Path(out), progress, force, multi=False)  # type: ignore[return-value]


def _run_seed(scenario: Scenario, seed: int, folder: Optional[Path], progress: Optional[Progress],
              world: Optional[World], session: Optional[FolderSession] = None, G: Optional[nx.Graph] = None,
              plan: Optional[BackendPlan] = None, memo: Optional[CheckMemo] = None) -> RunResult:
    started = time.time()
    # a run folder's record tables are written while the run goes, into temp files that
    # take their names only when it completed: a failed or interrupted run leaves none
    writer = TableWriter(folder, scenario.output.format) if folder is not None and session is not None else None
    try:
        try:
            if world is None:
                world = build(scenario, seed, G, plan, memo)
            result = simulate(world, progress, writer)
            _attribute(scenario, seed, result, G, plan)
        except MeshsimError as exc:
            if folder is not None:
                _claim(session, folder, ["error.txt"])
                write_atomic(folder / "error.txt", f"{type(exc).__name__}: {exc}\n")
            raise
        except Exception as exc:
            if folder is not None:
                _claim(session, folder, ["error.txt"])
                write_atomic(folder / "error.txt", traceback.format_exc())
            raise SimulationError(f"internal error in seed {seed}: {type(exc).__name__}: {exc}"
                                  + (f" (traceback in {folder / 'error.txt'})" if folder else "")) from exc
        assert result is not None
        if writer is not None:
            assert folder is not None and session is not None
            result.out = folder
            fmt = scenario.output.format
            tables = ["events.jsonl"] + list(result.tables) + writer.names()
            session.own(folder).claim([t + (".gz" if fmt == "jsonl.gz" else "") for t in tables]
                                      + [PROVENANCE, "summary.json"])
            write_records(folder, "events.jsonl", result.records, fmt)
            for name, rows in result.tables.items():  # (none: the writer streamed them)
                write_records(folder, name, rows, fmt)
            writer.commit()
            write_atomic(folder / PROVENANCE, session.provenance(seed, started))
            write_atomic(folder / "summary.json", dump_json(result.summary))  # last: the run is complete
    finally:
        if writer is not None:
            writer.abort()  # (after a commit: nothing left to remove)
    return result


def _attribute(scenario: Scenario, seed: int, result: RunResult, G: Optional[nx.Graph],
               plan: Optional[BackendPlan] = None) -> None:
    """A run with Byzantine agents: its attack counts limited to what the attack caused, against
    the paired run of the same seed without the liars (in memory; issue 34, meshsim/observe/attribution.py)."""
    adv = result.summary.get("adversarial")
    if adv is None or not any(e.type in BYZANTINE_EVENTS for e in scenario.events):
        return  # (SAC's `adversarial` is about roles, not liar events: nothing to pair)
    kind = backend_kind(scenario.backend.kind) if scenario.backend is not None else None
    if kind is not None and kind.calls_out:
        # the paired run would call the endpoint again and write into the cassette (a replay of
        # the run would then be served the paired run's answers): counts stay as observed
        return
    if G is None:
        G = build_graph(scenario, seed)
    pair = without_liars(scenario)  # its trace is not kept: none (the trace level changes no outcome)
    pair = pair.model_copy(update={"output": pair.output.model_copy(update={"trace": "none"})})
    paired = simulate(build(pair, seed, G, plan))  # (the liars change no backend: the run's plan)
    result.summary["adversarial"] = attribute(adv, paired.tables.get("states.jsonl", []), review_reach(scenario, G))


def _claim(session: Optional[FolderSession], folder: Path, names: list[str]) -> None:
    if session is not None:
        session.own(folder).claim(names)


def _resumed(folder: Path, seed: int) -> RunResult:
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    return RunResult(seed, summary, read_records(folder, "events.jsonl"), folder, resumed=True)


def _run(scenario: Scenario, seeds: list[int], top: Path, progress: Optional[Progress], force: bool,
         multi: bool) -> RunResult | MultiRunResult:
    memo = CheckMemo()  # the checks of the backend and abilities, once per run
    graphs = prepare(scenario, seeds, memo)  # every check before the folder is touched,
    refuse_inputs_inside(top, scenario_inputs(scenario))  # (a run never writes among its inputs)
    session = FolderSession(scenario, top, seeds, multi, force)
    plan = backend_plan(scenario, memo)  # the plan the check made: the profile, loaded once for every seed
    first: Optional[World] = None
    if force or not (session.folder(seeds[0]) / "summary.json").exists():  # (a seed to resume needs no world)
        first = build(scenario, seeds[0], graphs.pop(seeds[0], None), plan, memo)  # and the first world built
    runs: list[RunResult] = []
    try:
        todo = session.open()
        if any(v == "run" for v in todo.values()):
            _preflight(scenario, plan)
        for k, s in enumerate(seeds):
            folder = session.folder(s)
            if todo[s] == "resume":
                runs.append(_resumed(folder, s))
                continue

            def seed_progress(kind: str, done: float, total: float, k=k) -> None:
                if progress is not None:
                    progress(kind, k + (done / total if total else 0), len(seeds))

            session.start(s)
            world, first = (first, None) if k == 0 else (None, first)
            runs.append(_run_seed(scenario, s, folder, seed_progress if progress else None, world, session,
                                  graphs.pop(s, None), plan, memo))
        if multi:
            session.wrote = True
            session.own(top).claim([PROVENANCE] + (["aggregate.json"] if len(seeds) > 1 else []))
            write_atomic(top / PROVENANCE, session.provenance(None, session.started, {
                "seeds": {str(r.seed): "resumed" if r.resumed else "ran" for r in runs}}))
        if multi and len(seeds) > 1:
            agg = {"scenario": scenario.name, "seeds": seeds, "metrics": aggregate([r.summary for r in runs])}
            write_atomic(top / "aggregate.json", dump_json(finite(agg)))
            return MultiRunResult(runs, agg, top)
        return runs[0]
    except KeyboardInterrupt:
        # Ctrl-C can land between a temp file's creation and its rename: we
        # still hold the lock, so tidy up now rather than at the next run
        try:
            remove_stale_tmp(top)
        except OSError:
            pass
        done = sum(1 for s in seeds if (session.folder(s) / "summary.json").exists())
        raise Interrupted(f"interrupted: {done} of {len(seeds)} seeds complete, rerun to resume") from None
    except OSError as exc:  # a full or read-only disk, a vanished folder: the path and the reason
        raise RunFolderError(f"cannot write the run folder: {os_reason(exc)}",
                             file=str(exc.filename or top)) from None
    finally:
        if first is not None:
            first.close()
        session.close()


def _is_multi_folder(top: Path) -> bool:
    if (top / "aggregate.json").exists() or any(d.is_dir() for d in top.glob("seed-*")):
        return True
    prov = read_json(top / PROVENANCE)
    return bool(prov) and prov.get("layout") == "seeds"


def _run_api(scenario: Scenario, seed: Optional[int] = None, out: Optional[str | Path] = None,
             progress: Optional[Progress] = None, force: bool = False,
             seed_folder: Optional[bool] = None) -> RunResult | MultiRunResult:
    """Run ``scenario``: one seed (``seed`` given, or ``seeds: 1``) or all its seeds.

    Every check (for every seed) runs before anything is built or written.
    With ``out``: a scenario with ``seeds: N > 1`` writes ``out/seed-<s>/``
    folders plus ``out/aggregate.json`` (mean ± sample std of every numeric
    summary field); a one-seed scenario writes ``out/`` itself. One ``seed``
    of a multi-seed scenario goes to ``out/seed-<s>/`` when ``out`` already is
    a multi-seed folder or ``seed_folder`` is true (``meshsim run --seed``:
    the layout is the scenario's), else to ``out/`` itself (a folder of its
    own, as from Python). Either way a folder never holds both layouts. The
    folder is locked while the run writes it; completed seeds are resumed when
    nothing they depend on changed (``force`` reruns them); see
    :mod:`meshsim.io.runfolder`.
    """
    all_seeds = scenario.seed_list()
    multi = len(all_seeds) > 1
    if multi and seed is not None and out is not None and not seed_folder and not _is_multi_folder(Path(out)):
        multi = False  # one seed into a folder of its own
    if seed is not None:
        seeds = [seed]
    else:
        seeds = all_seeds if multi else all_seeds[:1]
    if out is None:
        memo = CheckMemo()
        graphs = prepare(scenario, seeds, memo)
        plan = backend_plan(scenario, memo)
        first = build(scenario, seeds[0], graphs.pop(seeds[0], None), plan, memo)
        try:
            _preflight(scenario, plan)
            runs = [_run_seed(scenario, s, None, progress if len(seeds) == 1 else None,
                              first if k == 0 else None, None, graphs.pop(s, None), plan, memo)
                    for k, s in enumerate(seeds)]
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted: 0 of {len(seeds)} seeds written (no run folder)") from None
        finally:
            first.close()
        if len(runs) == 1:
            return runs[0]
        agg = {"scenario": scenario.name, "seeds": seeds, "metrics": aggregate([r.summary for r in runs])}
        return MultiRunResult(runs, agg, None)
    return _run(scenario, seeds, Path(out), progress, force, multi)


# The public entry points: an API key a run registers for scrubbing is
# forgotten when the run ends (meshsim.core.redact.scope), so it cannot go on
# masking the outputs of later runs in the same process.


def validate(scenario: Scenario, seed: Optional[int] = None, preflight: bool = True) -> dict[str, Any]:
    with redact.scope():
        return _validate(scenario, seed, preflight)


validate.__doc__ = _validate.__doc__


def run_one(scenario: Scenario, seed: int, out: Optional[Path] = None,
            progress: Optional[Progress] = None, force: bool = False) -> RunResult:
    with redact.scope():
        return _run_one(scenario, seed, out, progress, force)


run_one.__doc__ = _run_one.__doc__


def run(scenario: Scenario, seed: Optional[int] = None, out: Optional[str | Path] = None,
        progress: Optional[Progress] = None, force: bool = False,
        seed_folder: Optional[bool] = None) -> RunResult | MultiRunResult:
    with redact.scope():
        return _run_api(scenario, seed, out, progress, force, seed_folder)


run.__doc__ = _run_api.__doc__
