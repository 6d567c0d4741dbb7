"""What a sweep worker does with one task: rebuild the scenario from the data
it was sent (never from a path), run one seed in memory, and send back the
files of the run folder as text and rows. The parent process alone writes the
sweep folder, so a worker may run on another machine (Dask) and a killed
worker leaves nothing half-written.

Module-level and importable, so that process pools and Dask can ship it by
reference.
"""
from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

__all__ = ["run_task", "failure"]

#: per-record tables each output level keeps (``None``: all of them)
_TABLES = {"summary": (), "records": None, "full": None}


def failure(task: dict[str, Any], error: str, detail: str = "") -> dict[str, Any]:
    """The result of a task that did not produce a summary."""
    return {"point": task["point"], "seed": task["seed"], "status": "failed", "error": error.replace("\n", " "),
            "detail": detail, "resolved": task.get("resolved"), "summary": None, "tables": {}, "wall": None,
            "cpu": None}


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """Run ``task`` (``scenario`` data, ``source``, ``base_dir``, ``seed``,
    ``level``, ``point``, and ``files``: the content of the input files by
    path, when the executor ships them); never raises for a failing run: the
    error is the result.

    ``wall`` and ``cpu`` are the run's wall-clock and CPU seconds measured
    here, in the worker (CPU: this process's, threads included, e.g. an HTTP
    backend's event loop); they go to the run folder's ``timing.json`` and the
    ``wall_seconds`` / ``cpu_seconds`` columns of results.csv, never into
    ``summary.json``, which stays byte-identical across reruns."""
    from ..core.files import shipped

    t0, c0 = time.perf_counter(), time.process_time()
    # the input files' content, read once by the sweep's client (Dask): served in memory under the
    # paths the scenario names, so a worker that cannot see them runs exactly as a local run
    with shipped(task.get("files")):
        res = _run_task(task)
    res["wall"], res["cpu"] = time.perf_counter() - t0, time.process_time() - c0
    return res


def _run_task(task: dict[str, Any]) -> dict[str, Any]:
    from ..core.errors import InputError, MeshsimError
    from ..simulate.runner import dump_json, resolved_yaml, run_one
    from ..scenario.model import parse_scenario

    seed = int(task["seed"])
    try:
        base = Path(task["base_dir"]) if task.get("base_dir") else None
        sc = parse_scenario(task["scenario"], task.get("source", "<sweep>"), base)
        resolved = resolved_yaml(sc, seed)
        res = run_one(sc, seed)
    except MeshsimError as exc:
        # bad input needs no traceback; a simulation error wraps a bug whose traceback is the cause chain
        detail = "" if isinstance(exc, InputError) else "".join(traceback.format_exception(exc))
        return failure(task, f"{type(exc).__name__}: {exc}", detail)
    except Exception as exc:  # a bug in the simulator: keep the traceback next to the run
        return failure(task, f"internal error: {type(exc).__name__}: {exc}", traceback.format_exc())
    level = task.get("level", "summary")
    tables: dict[str, list] = {}
    if level != "summary":
        tables["events.jsonl"] = res.records
        for name, rows in res.tables.items():
            if level == "records" and name.startswith("reviews"):
                continue
            tables[name] = rows
    return {"point": task["point"], "seed": seed, "status": "ok", "error": None, "detail": "",
            "resolved": resolved, "summary": dump_json(res.summary), "tables": tables}
