"""Run folders that cannot mix: a lock, provenance, resume rules, stale files.

* **Lock.** A run holds an exclusive ``fcntl.flock`` on ``OUT/.meshsim.lock``
  for as long as it writes ``OUT``; a second run into the same folder fails at
  once (exit 2) naming the holder's pid, scenario and start time. The one lock
  of every folder meshsim writes: a sweep's (``.sweep.lock``), an uncertainty
  study's and a verdict's hold it under their own file names (issue 31). The kernel
  drops the lock when the process ends, however it ends (crash, kill -9), so
  a stale lock file never blocks anyone; the file stays (removing a lock file
  someone may be opening races with them).
* **Provenance.** Every completed seed folder holds ``provenance.json``: the
  meshsim version and git commit, Python and key package versions, the sha256
  of every input file (scenario, dataset and backend profiles, topology, task
  file, cassette) and wall-clock timings. It differs from run to run (times),
  so it is **not** part of the byte-identical comparison of run folders:
  :data:`NOT_COMPARED` and :func:`comparable_files` leave it out.
* **Resume** reuses a completed seed only when its resolved scenario, every
  input's hash and the meshsim version match; otherwise the run stops with
  the reason (``--force`` reruns). The git commit is recorded, not compared:
  a commit that changes no results (docs, tests) must not force every
  cached run to be redone; bump the version when results change.
  A cassette counts as unchanged when the bytes the run saw are still its
  prefix: later recordings only append.
* **Stale files.** Temporary files (``.NAME.XXXXXXXX.tmp``, NAME one of the
  run's own file names) left by a killed run are removed when the next run
  takes the lock.
* **Own files only** (issue 30). A folder a run writes keeps the names of the
  files meshsim put there in ``.meshsim-files.json``; clearing a seed for a
  rerun removes only those, and a run refuses (exit 2, before writing) a
  folder where a file it would write is there but not listed: it never
  overwrites or deletes a file it did not write. A folder written by an
  earlier meshsim (a ``provenance.json``, no list) is adopted as it is. An
  ``--out`` that is, contains or is reached through a link into a folder
  holding one of the scenario's inputs (the scenario file, task file,
  topology, profiles, cassette) is refused before anything is written
  (:func:`refuse_inputs_inside`).
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import sys
import time
from pathlib import Path
from typing import Any, Optional

from ..core.errors import RunFolderError
from ..core.files import file_digest, os_reason
from .records import write_atomic

__all__ = ["LOCK_NAME", "PROVENANCE", "OWN_FILES", "NOT_COMPARED", "comparable_files", "RunLock",
           "remove_stale_tmp", "environment", "compiled_modules", "input_record", "resume_problem", "read_json",
           "OwnFiles", "refuse_inputs_inside", "scenario_inputs"]

LOCK_NAME = ".meshsim.lock"
PROVENANCE = "provenance.json"
#: the names of the files meshsim wrote into a folder (see "Own files only")
OWN_FILES = ".meshsim-files.json"
#: run-folder files that differ between two runs of the same scenario and seed
#: (wall-clock times, the lock, the list of own files, which grows with reports):
#: every byte-identity check leaves them out
NOT_COMPARED = frozenset({PROVENANCE, LOCK_NAME, OWN_FILES})
_TMP = re.compile(r"^\.(.+)\.[A-Za-z0-9_]{8}\.tmp$")  # records._atomic's temp names (mkstemp)


def comparable_files(folder: Path | str) -> dict[str, bytes]:
    """``{name: bytes}`` of a run folder's files that must be byte-identical
    between two runs of the same scenario and seed (every file but
    :data:`NOT_COMPARED`)."""
    folder = Path(folder)
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.name not in NOT_COMPARED}


def read_json(path: Path) -> Optional[dict[str, Any]]:
    """A JSON object from ``path``; None when absent or unreadable as one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class RunLock:
    """An exclusive lock on a folder meshsim writes (see the module doc): ``name``
    is the lock file's, ``what`` names the command in the refusal (``in use by
    another meshsim sweep (pid ..., since ...)``)."""

    def __init__(self, folder: Path, name: str = LOCK_NAME, what: str = "run"):
        self.folder = Path(folder)
        self.path = self.folder / name
        self.what = what
        self.created: list[Path] = []  # folders this lock created (removed again if nothing was written)
        self._fd: Optional[int] = None

    def acquire(self, info: dict[str, Any]) -> "RunLock":
        missing = []
        p = self.folder
        while not p.exists() and p != p.parent:
            missing.append(p)
            p = p.parent
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunFolderError(f"cannot create the run folder: {os_reason(exc)}", file=str(self.folder)) from None
        self.created = missing
        if not self.folder.is_dir():
            raise RunFolderError("output path exists and is not a folder", file=str(self.folder))
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            self._undo()
            raise RunFolderError(f"cannot write the run folder: {os_reason(exc)}", file=str(self.folder)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(fd)
            os.close(fd)
            raise RunFolderError(f"in use by another meshsim {self.what} ({holder}); wait for it to finish or "
                                 "choose another --out", file=str(self.folder)) from None
        self._fd = fd
        try:
            text = json.dumps(dict(info, pid=os.getpid(), host=socket.gethostname(), since=_now()))
            os.ftruncate(fd, 0)
            os.pwrite(fd, text.encode("utf-8") + b"\n", 0)
        except OSError as exc:
            self.release()
            self._undo()
            raise RunFolderError(f"cannot write the run folder: {os_reason(exc)}", file=str(self.folder)) from None
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def release_unused(self) -> None:
        """Release; and when this run created the folder and wrote nothing in
        it, remove it again (a run that stopped before writing leaves nothing)."""
        fd = self._fd
        self.release()
        if fd is None or not self.created:
            return
        try:
            if [p.name for p in self.folder.iterdir()] == [self.path.name]:
                self.path.unlink()
                self._undo()
        except OSError:
            pass

    def _undo(self) -> None:
        for p in self.created:  # deepest first
            try:
                p.rmdir()
            except OSError:
                break

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
    except (OSError, ValueError, UnicodeDecodeError):
        info = {}
    if not isinstance(info, dict) or "pid" not in info:
        return "its details are not written yet"
    parts = [f"pid {info.get('pid')}"]
    if info.get("host") and info.get("host") != socket.gethostname():
        parts[0] += f" on {info['host']}"
    if info.get("scenario"):
        parts.append(f"scenario {info['scenario']!r}")
    if info.get("since"):
        parts.append(f"since {info['since']}")
    return ", ".join(parts)


def remove_stale_tmp(folder: Path, names: Optional[frozenset[str]] = None) -> int:
    """Remove temp files a killed run left in ``folder`` and its ``seed-*/``
    folders: only meshsim's own ``.NAME.XXXXXXXX.tmp`` whose NAME is one of
    ``names`` (default: a run folder's files). Call with the lock held."""
    n = 0
    folder = Path(folder)
    names = RUN_FILES if names is None else names
    dirs = [folder] + [d for d in folder.glob("seed-*") if d.is_dir() and not d.is_symlink()]
    for d in dirs:
        for p in d.iterdir():
            m = _TMP.match(p.name)
            if m and m.group(1) in names and p.is_file() and not p.is_symlink():
                try:
                    p.unlink()
                    n += 1
                except OSError:
                    pass
    return n


def stale_tmp(folder: Path, names: Optional[frozenset[str]]) -> list[Path]:
    """meshsim's own temp files (``.NAME.XXXXXXXX.tmp``, NAME in ``names``; None:
    any NAME, in a folder that is meshsim's own) in ``folder`` itself."""
    out: list[Path] = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return out
    for p in entries:
        m = _TMP.match(p.name)
        if m and (names is None or m.group(1) in names) and p.is_file() and not p.is_symlink():
            out.append(p)
    return out


# --------------------------------------------------------------------------
# own files, and outputs kept apart from inputs (issue 30)

#: the record tables a run may write (each as NAME.jsonl or NAME.jsonl.gz)
TABLES = ("events", "tasks", "reviews", "states", "rounds", "queries")
#: every file a run writes into a seed folder (or a single-seed run folder)
SEED_FILES = frozenset(("summary.json", "error.txt", PROVENANCE, "scenario.resolved.yaml", "report.html")
                       + tuple(f"{t}.jsonl{z}" for t in TABLES for z in ("", ".gz")))
#: ... and into the top of a multi-seed run folder
TOP_FILES = frozenset((PROVENANCE, "aggregate.json", "report.html"))
#: every name a run folder's own files may have (temp files are .NAME.XXXXXXXX.tmp)
RUN_FILES = SEED_FILES | TOP_FILES | {OWN_FILES}


class OwnFiles:
    """The files meshsim wrote into one folder, kept in ``OWN_FILES`` there.

    A name is listed *before* its file is first written (a run killed in
    between leaves a listed name without a file, which is harmless), so a
    later run knows which files are its own: :meth:`foreign` names the files
    it must not touch."""

    def __init__(self, folder: Path | str):
        self.folder = Path(folder)
        self.path = self.folder / OWN_FILES
        self.names: set[str] = set()
        self.listed = False  # the folder has a readable list
        data = read_json(self.path)
        if data is not None and isinstance(data.get("files"), list):
            self.names = {n for n in data["files"] if isinstance(n, str) and "/" not in n and n not in ("", ".", "..")}
            self.listed = True
        elif _legacy_run_folder(self.folder):
            # written by a meshsim from before the list: every run file there is its own
            self.names = {n for n in RUN_FILES if (self.folder / n).is_file()}

    def owns(self, name: str) -> bool:
        return name in self.names

    def foreign(self, names: frozenset[str] | set[str]) -> list[str]:
        """Those of ``names`` that exist in the folder (as anything, links included) and are not listed."""
        return sorted(n for n in names if n not in self.names and os.path.lexists(self.folder / n))

    def claim(self, names: frozenset[str] | set[str] | list[str]) -> None:
        """List ``names`` (written before the files are)."""
        new = set(names) - self.names
        if not new and self.listed:
            return
        self.names |= new
        self._save()

    def _save(self) -> None:
        write_atomic(self.path, json.dumps({"format": 1, "files": sorted(self.names)}, indent=1) + "\n")
        self.listed = True

    def remove(self, names: frozenset[str] | set[str]) -> None:
        """Remove those of ``names`` that are listed and are plain files
        (never a link, never a folder), and unlist them: a file someone puts
        there later under one of these names is theirs."""
        gone = set()
        for n in sorted(names):
            p = self.folder / n
            if n in self.names:
                if p.is_file() and not p.is_symlink():
                    p.unlink()
                if not os.path.lexists(p):
                    gone.add(n)
        self.names -= gone
        if gone and self.listed:
            self._save()


def _legacy_run_folder(folder: Path) -> bool:
    prov = read_json(folder / PROVENANCE)
    return prov is not None and bool(prov) and "meshsim" in prov and "inputs" in prov


def claim_report(folder: Path | str, name: str = "report.html") -> None:
    """A report written into a run folder joins its own files (a rerun may replace it)."""
    own = OwnFiles(folder)
    if own.listed and not own.owns(name):
        own.claim([name])


def scenario_inputs(sc: Any) -> list[Path]:
    """Every file ``sc`` reads: the scenario file itself and
    :func:`meshsim.scenario.model.input_files` (a BIG-bench task folder by its task.json)."""
    from ..scenario.model import input_files

    paths = [Path(sc.source)] if sc.source and Path(sc.source).is_file() else []
    paths += [p for p, _append in input_files(sc).values()]
    if sc.tasks is not None and sc.tasks.file:
        tf = Path(sc.tasks.file)
        if not tf.is_absolute() and sc.base_dir is not None:
            tf = sc.base_dir / tf
        if tf.is_dir():
            paths.append(tf / "task.json")
    return paths


def _locations(p: Path) -> set[Path]:
    """Where ``p`` is: its folder with links resolved, and the file a link at ``p`` points to."""
    p = Path(os.path.abspath(p))
    return {Path(os.path.realpath(p.parent)) / p.name, Path(os.path.realpath(p))}


def refuse_inputs_inside(out: Path | str, inputs: list[Path], option: str = "--out") -> None:
    """Refuse (one line, exit 2, nothing written) an output folder that is,
    contains or is reached through a link into a folder holding one of
    ``inputs``: clearing or writing it could replace or delete an input."""
    out = Path(out)
    target = Path(os.path.realpath(os.path.abspath(out)))
    for p in inputs:
        for loc in _locations(p):
            if loc == target or target in loc.parents:
                via = "" if Path(os.path.abspath(out)) == target else f" (it leads to {target})"
                raise RunFolderError(f"{option} holds an input of the scenario, {p}{via}; outputs go to a folder of "
                                     "their own: choose an --out outside the inputs' folders", file=str(out))


# --------------------------------------------------------------------------
# provenance


_ENV: Optional[dict[str, Any]] = None
_PACKAGES = ("simpy", "networkx", "numpy", "scipy", "pydantic", "pydantic-core", "pyyaml", "click", "httpx")


def _git_commit() -> tuple[Optional[str], Optional[bool]]:
    import subprocess

    here = Path(__file__).resolve().parents[2]
    if not (here / ".git").exists():
        return None, None
    try:
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5)
        if head.returncode != 0:
            return None, None
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
        return head.stdout.strip() or None, (bool(dirty.stdout.strip()) if dirty.returncode == 0 else None)
    except (OSError, subprocess.SubprocessError):
        return None, None


def environment() -> dict[str, Any]:
    """meshsim version, git commit (when run from a checkout), Python and key packages (cached)."""
    global _ENV
    if _ENV is None:
        from importlib import metadata

        from ..core.version import __version__

        pkgs = {}
        for name in _PACKAGES:
            try:
                pkgs[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
        commit, dirty = _git_commit()
        _ENV = {"meshsim": __version__, "git_commit": commit, "git_dirty": dirty,
                "python": sys.version.split()[0], "platform": sys.platform, "packages": pkgs}
        compiled = compiled_modules()
        if compiled:  # the compiled build (docs/scaling.md): same outputs, other timings (wall_seconds)
            _ENV["compiled"] = compiled
    return dict(_ENV)


def compiled_modules() -> list[str]:
    """meshsim's modules imported from compiled extensions (tests/benchmarks/build_compiled.py), by name."""
    return sorted(name for name, mod in list(sys.modules.items())
                  if name.startswith("meshsim.") and str(getattr(mod, "__file__", "") or "").endswith(".so"))


def input_record(path: Path, prefix: bool = False) -> dict[str, Any]:
    """What provenance keeps of an input file: path, size and sha256.
    ``prefix``: an append-only file (a cassette): later appends keep it valid."""
    try:
        size, digest = file_digest(path)
    except OSError as exc:
        return {"path": str(path), "error": os_reason(exc)}
    rec: dict[str, Any] = {"path": str(path), "bytes": size, "sha256": digest}
    if prefix:
        rec["append_only"] = True
    return rec


def _changed(name: str, old: dict[str, Any], new: Optional[dict[str, Any]]) -> Optional[str]:
    """Why input ``name`` no longer matches its record, or None."""
    if new is None:
        return f"input {name} ({old.get('path')}) is no longer used"
    if "sha256" not in old:
        return None
    if old.get("append_only"):
        path = Path(new["path"])
        try:
            n, digest = file_digest(path, upto=int(old.get("bytes", 0)))
        except OSError as exc:
            return f"{name} {path}: {os_reason(exc)}"
        if n < int(old.get("bytes", 0)) or digest != old["sha256"]:
            return f"{name} {path} changed (not only appended to) since the run"
        return None
    if new.get("sha256") != old["sha256"]:
        return f"{name} {new.get('path')} changed since the run (sha256 {old['sha256'][:12]}, now " \
               f"{str(new.get('sha256'))[:12]})"
    return None


def resume_problem(old: Optional[dict[str, Any]], now: dict[str, Any], inputs: dict[str, dict[str, Any]]) -> \
        Optional[str]:
    """Why a completed seed whose provenance is ``old`` must not be reused by a
    run in environment ``now`` with ``inputs`` (name -> record), or None."""
    if old is None:
        return f"it has no readable {PROVENANCE} (written by an older meshsim, or edited)"
    if old.get("meshsim") != now.get("meshsim"):
        return f"it was made by meshsim {old.get('meshsim')}, this is {now.get('meshsim')}"
    before = old.get("inputs") or {}
    for name in sorted(set(before) | set(inputs)):
        if name not in before:
            return f"this run reads {name} {inputs[name].get('path')}, which the completed run did not"
        why = _changed(name, before[name], inputs.get(name))
        if why:
            return why
    return None
