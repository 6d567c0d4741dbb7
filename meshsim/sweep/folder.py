"""Opening a sweep folder for writing: one way for the grid sweep, the search, the uncertainty study and
the verdict (issue 31 item 5).

Each opens its folder the same way (:func:`open_folder`): refused before anything is written (among the
inputs, not a folder, not empty and no sweep's, a different sweep's), then the executor connected, then the
folder locked (:func:`lock_folder`: :class:`meshsim.io.runfolder.RunLock`, the one lock of every folder
meshsim writes, which names its holder), then, under the lock, the manifest read again, merged and written,
stale temp files and damaged summaries cleared. A run's folder is ``runs/<point>/seed-<s>/`` (:func:`run_dir`).
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from ..core.errors import RunFolderError
from ..io.runfolder import RunLock
from .manifest import check_compatible, merge, read_manifest, write_manifest

__all__ = ["SWEEP_LOCK", "run_dir", "summary_ok", "repair_runs", "plan_inputs", "check_folder", "remove_stale_tmp",
           "lock_folder", "OpenFolder", "open_folder"]

#: the lock file of a sweep folder (a search's too)
SWEEP_LOCK = ".sweep.lock"


def run_dir(out: Path, key: str, seed: int) -> Path:
    """The folder of one run of a sweep: ``runs/<point>/seed-<s>/``."""
    return out / "runs" / key / f"seed-{seed}"


def summary_ok(f: Path) -> bool:
    """``f`` is a whole summary.json (a JSON object): a damaged one (cut
    short, edited) makes its run unfinished, so it is run again (issue 30)."""
    if not f.is_file():
        return False
    try:
        return isinstance(json.loads(f.read_text(encoding="utf-8")), dict)
    except (OSError, ValueError, RecursionError):
        return False


def repair_runs(out: Path, manifest: dict[str, Any]) -> int:
    """Remove the damaged summary.json (:func:`summary_ok`) of every run the
    manifest lists, so that the run counts as not run and is run again; a
    finished run is never touched. Call with the folder's lock held.
    Returns how many were removed."""
    n = 0
    for key, seed in manifest.get("runs", []):
        f = run_dir(out, key, seed) / "summary.json"
        if f.is_file() and not f.is_symlink() and not summary_ok(f):
            f.unlink()
            n += 1
    return n


def plan_inputs(plan: Any) -> list[Path]:
    """Every file a sweep plan (:class:`meshsim.sweep.core.Plan`) reads: the sweep file, the scenario and
    what each point's scenario names (runfolder.scenario_inputs)."""
    from ..io.runfolder import scenario_inputs
    from ..scenario.model import parse_scenario

    paths = [plan.scenario_path] + ([Path(plan.command["path"])] if plan.command.get("path") else [])
    seen: set[str] = set()
    parsed: set[str] = set()
    for data in [plan.base] + [p.data for p in plan.points]:
        # only what names files decides them: each distinct combination is parsed once
        key = json.dumps([data.get(k) for k in ("network", "agents", "tasks", "backend")], sort_keys=True,
                         default=str)
        if key in parsed:
            continue
        parsed.add(key)
        sc = parse_scenario(copy.deepcopy(data), plan.source, plan.base_dir)
        for f in scenario_inputs(sc):
            if str(f) not in seen:
                seen.add(str(f))
                paths.append(f)
    return paths


def check_folder(plan: Any, out: Path) -> Optional[dict[str, Any]]:
    """The checks of a sweep folder before anything is written: not among the
    inputs (runfolder.refuse_inputs_inside), a folder, empty or a sweep's.
    Returns its manifest (None: a new folder)."""
    from ..io.runfolder import refuse_inputs_inside

    refuse_inputs_inside(out, plan_inputs(plan))
    if out.exists() and not out.is_dir():
        raise RunFolderError("output path exists and is not a folder", file=str(out))
    old = read_manifest(out) if out.is_dir() else None
    if old is None and out.is_dir() and any(p for p in out.iterdir() if p.name != SWEEP_LOCK):
        raise RunFolderError("folder exists, is not empty and holds no sweep (manifest.json); "
                             "choose another --out", file=str(out))
    return old


def remove_stale_tmp(out: Path) -> None:
    """Temp files a killed sweep left at the top of its folder (``.NAME.XXXXXXXX.tmp``, meshsim's own
    pattern; the folder is a sweep's: its manifest says so)."""
    from ..io.runfolder import stale_tmp

    for tmp in stale_tmp(out, None):
        tmp.unlink()


def lock_folder(out: Path, name: str, what: str, info: dict[str, Any]) -> RunLock:
    """Hold ``out`` (made if missing) for this process: a second meshsim ``what`` on it is refused, one line
    naming the holder (pid, host, ``info``'s scenario, since when). Released by :meth:`RunLock.release`, and by
    the OS however the process ends."""
    return RunLock(out, name, what).acquire(info)


@dataclass
class OpenFolder:
    """A sweep folder held for writing: its merged manifest (written), the executor (None: nothing to run)
    and the lock."""

    manifest: dict[str, Any]
    executor: Any
    lock: RunLock

    def close_executor(self, aborted: bool = False) -> None:
        """Stop the executor (abandoning what it runs when ``aborted``); once."""
        ex, self.executor = self.executor, None
        if ex is not None:
            ex.close(abort=aborted)

    def close(self, aborted: bool = False) -> None:
        """Stop the executor if it still runs, then release the folder."""
        try:
            self.close_executor(aborted)
        finally:
            self.lock.release()


def open_folder(plan: Any, out: Path, new: dict[str, Any], connect: Callable[[], Any], what: str = "sweep",
                compatible: Callable[[dict[str, Any], dict[str, Any], Path], None] = check_compatible,
                combine: Callable[[Optional[dict[str, Any]], dict[str, Any]], dict[str, Any]] = merge,
                precheck: Optional[Callable[[], None]] = None) -> OpenFolder:
    """Open ``out`` for the sweep ``plan`` whose manifest is ``new``, in this order (a refusal writes nothing):

    1. :func:`check_folder`, and ``compatible(old, new, out)`` with the manifest it holds; then ``precheck()``;
    2. ``connect()``: the executor (None when nothing will run), before anything is written;
    3. the lock (:func:`lock_folder`; the executor is closed when it is refused);
    4. under the lock: the manifest read again and checked, ``combine(old, new)`` written, stale temp files
       and damaged summaries removed.

    The caller closes the result (:meth:`OpenFolder.close`) when it is done."""
    old = check_folder(plan, out)
    if old is not None:
        compatible(old, new, out)
    if precheck is not None:
        precheck()
    ex = connect()
    try:
        lock = lock_folder(out, SWEEP_LOCK, what, {"scenario": plan.name})
    except BaseException:
        if ex is not None:
            ex.close()
        raise
    opened = OpenFolder(new, ex, lock)
    try:
        old = read_manifest(out)  # under the lock now
        if old is not None:
            compatible(old, new, out)
        opened.manifest = combine(old, new)
        remove_stale_tmp(out)
        repair_runs(out, opened.manifest)
        write_manifest(out, opened.manifest)
    except BaseException:
        opened.close(aborted=True)
        raise
    return opened
