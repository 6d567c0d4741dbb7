"""Record tables for a run folder that kept only its summary (``meshsim plot|report RUN --rerun``).

A sweep keeps ``summary.json`` and ``scenario.resolved.yaml`` per run by
default (output level ``summary``); the per-agent figures need the record
tables (``tasks``, ``states``, ``reviews``, ``events``). Without ``--rerun``
the figures say in one line which output level they need (exit 2); with it,
each seed that lacks them is run again from its ``scenario.resolved.yaml``
and seed, in this process, and its tables are written into the seed's folder:

- the rerun must reproduce the folder's ``summary.json`` byte for byte (runs
  are deterministic); if it does not (another meshsim version, a changed
  profile or dataset) nothing is written and the reason is one line;
- only the table files are written, each listed first in the folder's
  ``.meshsim-files.json`` (:class:`meshsim.io.runfolder.OwnFiles`); a table
  name already there and not listed is someone else's file: refused;
- the folder is locked while it is written (:class:`meshsim.io.runfolder.RunLock`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from ..core.errors import MeshsimError, RunFolderError
from .folder import RunFolder, RunSet

__all__ = ["rerun_records", "rerun_missing"]


def _base_dir(folder: Path) -> Path:
    """Where the scenario's relative inputs are found: the sweep's scenario file's
    folder (``SWEEP/runs/<point>/seed-<s>/``), else the run's scenario file's (provenance), else the folder."""
    from ..io.runfolder import read_json

    for up in list(folder.parents)[:3]:
        man = read_json(up / "manifest.json")
        if man and (folder.parent.parent == up / "runs" or folder.parent == up / "runs"):
            src = (man.get("scenario") or {}).get("source") if isinstance(man.get("scenario"), dict) else None
            if isinstance(src, str) and Path(src).parent.is_dir():
                return Path(src).parent
    for p in (folder, folder.parent):
        prov = read_json(p / "provenance.json")
        src = ((prov or {}).get("scenario") or {}).get("file") if isinstance((prov or {}).get("scenario"), dict) \
            else None
        if isinstance(src, str) and Path(src).parent.is_dir():
            return Path(src).parent
    return folder


def rerun_records(folder: Path | str) -> list[str]:
    """Run ``folder``'s seed again and write its record tables there (see the module doc);
    returns the names written."""
    from ..core.files import read_output_yaml
    from ..io.records import write_records
    from ..io.runfolder import OwnFiles, RunLock
    from ..simulate.runner import dump_json, run_one
    from ..scenario.model import parse_scenario

    folder = Path(folder)
    rf = RunFolder(folder)
    rf.require("summary.json", "scenario.resolved.yaml")
    src = folder / "scenario.resolved.yaml"
    data = read_output_yaml(src)
    seed = rf.seed
    if seed is None:
        raise RunFolderError("no seed in summary.json or scenario.resolved.yaml: cannot rerun it", file=str(folder))
    try:
        sc = parse_scenario(data, source=str(src), base_dir=_base_dir(folder))
    except MeshsimError as exc:
        raise RunFolderError(f"cannot rerun this seed: {exc}", file=str(src)) from None
    fmt = sc.output.format
    lock = RunLock(folder).acquire({"scenario": sc.name, "seed": seed, "rerun": True})
    try:
        res = run_one(sc, seed)
        if dump_json(res.summary) != (folder / "summary.json").read_text(encoding="utf-8"):
            raise RunFolderError("the rerun did not reproduce summary.json (made by another meshsim version, or a "
                                 "profile or dataset changed since); nothing written: run 'meshsim run' on "
                                 "scenario.resolved.yaml into another --out", file=str(folder))
        # only the tables the folder lacks (output level records keeps all but reviews): the others are
        # the same rows, and were written by the sweep
        keep = rf.output_level() == "records"
        tables = {n: rows for n, rows in {"events.jsonl": res.records, **res.tables}.items()
                  if not (keep and rf.has(n))}
        names = {n + (".gz" if fmt == "jsonl.gz" else "") for n in tables}
        own = OwnFiles(folder)
        other = {n[:-3] if n.endswith(".gz") else n + ".gz" for n in names}  # write_records removes the other form
        foreign = own.foreign(names | other)
        if foreign:
            raise RunFolderError(f"{foreign[0]} is there and was not written by meshsim (not in .meshsim-files.json);"
                                 " a rerun never replaces a file it did not write: move it aside", file=str(folder))
        own.claim(sorted(names))
        for name, rows in tables.items():
            write_records(folder, name, rows, fmt)
    finally:
        lock.release()
    return sorted(names)


def rerun_missing(rs: RunSet, seeds: Optional[list[int]] = None,
                  echo: Callable[[str], None] = lambda s: None) -> int:
    """:func:`rerun_records` for each seed of ``rs`` (or of ``seeds``) whose folder
    was kept below output level full; returns how many were rerun."""
    n = 0
    for s, rf in rs.runs.items():
        if seeds is not None and s not in seeds:
            continue
        # the per-agent figures read records of MeshHeal runs only (SAC's read the summary); a damaged
        # full folder is not repaired: its figures say what is missing
        if rf.protocol != "meshheal" or rf.output_level() == "full":
            continue
        echo(f"rerunning seed {s} with full records into {rf.path} …")
        written = rerun_records(rf.path)
        rf._cache.clear()
        echo(f"wrote {', '.join(written)}")
        n += 1
    return n
