"""What a sweep worker does with one task: rebuild the scenario from the data
it was sent (never from a path), run one seed in memory, and send back the
files of the run folder as text and rows. The parent process alone writes the
sweep folder, so a worker may run on another machine (Dask) and a killed
worker leaves nothing half-written.

Module-level and importable, so that process pools and Dask can ship it by
reference. Executors send runs in batches (:func:`run_batch`, sized by
:func:`batch_sizes`): one message per batch, not per run, and a worker that
has imported :data:`PRELOAD` once runs every batch it gets without importing
again (issue 33).
"""
from __future__ import annotations

import math
import os
import time
import traceback
from pathlib import Path
from typing import Any, Callable

__all__ = ["run_task", "run_batch", "batch_sizes", "split", "failure", "PRELOAD", "BATCH_MAX"]

#: what a run imports (found by running one): a process pool's workers get them before their first run
#: (forked from a process that has them), so no worker spends its first run importing
PRELOAD = ("meshsim.sweep.worker", "meshsim.simulate.runner", "meshsim.scenario.model", "meshsim.graphs.build",
           "meshsim.workload.tasks", "meshsim.core.bundled", "numpy.random")
#: the most runs in one batch: about 4 s of six-agent runs, so the progress display still moves
BATCH_MAX = 8

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

    m0 = time.monotonic()
    t0, c0 = time.perf_counter(), time.process_time()
    # the input files' content, read once by the sweep's client (Dask): served in memory under the
    # paths the scenario names, so a worker that cannot see them runs exactly as a local run
    with shipped(task.get("files")):
        res = _run_task(task)
    res["wall"], res["cpu"] = time.perf_counter() - t0, time.process_time() - c0
    # where and when the run ran (pid, start, end on the system-wide monotonic clock): for the sweep bench's
    # overhead accounting only; the sweep never writes it anywhere
    res["clock"] = (os.getpid(), m0, time.monotonic())
    return res


def run_batch(tasks: list[dict[str, Any]], fn: Callable[[dict[str, Any]], dict[str, Any]] = run_task
              ) -> list[dict[str, Any]]:
    """``fn`` of each task, in order: what one executor message carries."""
    return [fn(t) for t in tasks]


def batch_sizes(n: int, workers: int, most: int = BATCH_MAX) -> list[int]:
    """Split ``n`` runs into batches for ``workers`` workers, largest first
    (guided self-scheduling): each batch is a ``2 * workers``-th of the runs
    still unassigned, at most ``most`` and at least 1. Early batches are large
    (one message and one result per ``most`` runs); the last ones are single
    runs, so no worker idles long while another finishes a big batch."""
    sizes: list[int] = []
    left = n
    while left > 0:
        k = max(1, min(most, math.ceil(left / (2 * max(1, workers))), left))
        sizes.append(k)
        left -= k
    return sizes


def split(tasks: list[Any], workers: int, most: int = BATCH_MAX) -> list[list[Any]]:
    """``tasks`` cut into consecutive batches of :func:`batch_sizes`."""
    out, i = [], 0
    for k in batch_sizes(len(tasks), workers, most):
        out.append(tasks[i:i + k])
        i += k
    return out


def _run_task(task: dict[str, Any]) -> dict[str, Any]:
    from ..core.errors import InputError, MeshsimError
    from ..simulate.runner import dump_json, resolved_yaml, run_one
    from ..scenario.model import parse_scenario

    seed = int(task["seed"])
    try:
        base = Path(task["base_dir"]) if task.get("base_dir") else None
        sc = parse_scenario(task["scenario"], task.get("source", "<sweep>"), base)
        # the sweep sends the text when it has made it already (to compare a run's folder with it): the
        # same function of the same data, not made twice (~7 ms a run)
        resolved = task.get("resolved") or resolved_yaml(sc, seed)
        task = {**task, "resolved": resolved}  # a run that fails from here on keeps it beside its error
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
