"""A run folder's session: the lock, the layout (one seed, or ``seed-<s>/`` folders),
the resume plan, provenance, and the resolved scenario each seed folder holds
(``scenario.resolved.yaml``, whose identity decides what may be resumed;
:mod:`meshsim.io.runfolder`)."""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Optional

import yaml

from ..core import redact
from ..core.errors import RunFolderError
from ..core.files import read_output_yaml
from ..io.records import json_default, write_atomic
from ..io.runfolder import (OWN_FILES, PROVENANCE, SEED_FILES, TOP_FILES, OwnFiles, RunLock, environment,
                            input_record, read_json, remove_stale_tmp, resume_problem)
from ..scenario.model import Scenario, input_files

__all__ = ["FolderSession", "dump_json", "portable_data", "resolved_yaml", "scenario_identity"]


def dump_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, allow_nan=False, default=json_default) + "\n"


def portable_data(scenario: Scenario) -> dict[str, Any]:
    """The resolved scenario as plain data, with the files it names (tasks file,
    cassette) made absolute: what a sweep's workers receive, and what
    ``scenario.resolved.yaml`` holds (with the run's seed)."""
    data = scenario.resolved()
    # files named relative to the scenario: absolute, so the resolved scenario
    # runs from its run folder (or `backends fit` re-runs it) as it ran here
    base = scenario.base_dir
    t = data.get("tasks")
    if base is not None and isinstance(t, dict) and t.get("file") and not Path(t["file"]).is_absolute():
        t["file"] = str((base / t["file"]).resolve())
    b = data.get("backend")
    if base is not None and isinstance(b, dict) and b.get("cassette") and not Path(b["cassette"]).is_absolute():
        b["cassette"] = str((base / b["cassette"]).resolve())
    return data


def resolved_yaml(scenario: Scenario, seed: int) -> str:
    """The text of ``scenario.resolved.yaml`` for ``seed``."""
    return _resolved_yaml(scenario, seed)


def _resolved_data(scenario: Scenario) -> dict[str, Any]:
    from ..backends.registry import backend_kind

    data = portable_data(scenario)
    b = data.get("backend")
    kind = backend_kind(b.get("kind")) if isinstance(b, dict) else None
    if isinstance(b, dict) and kind is not None:
        # where replies come from (cassette or endpoint) is not part of what was
        # run: a recorded run and its replay resolve to the same scenario
        for field in kind.unresolved:
            b.pop(field, None)
    return data


def _resolved_yaml(scenario: Scenario, seed: int) -> str:
    # secrets leave by field (URL credentials, header values), whatever their length
    data = redact.structural(_resolved_data(scenario))
    data["seed"] = seed
    data["seeds"] = 1
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def scenario_identity(scenario: Scenario) -> Optional[str]:
    """The identity of ``scenario`` (:func:`_identity_of`), from the model: what its
    ``scenario.resolved.yaml`` gives when read back, without writing and re-reading it."""
    return _identity_of(redact.structural(_resolved_data(scenario)))


def _identity_of(data: Any) -> Optional[str]:
    """What makes two runs 'the same scenario' whatever their seeds: a hash of
    the resolved scenario without ``seed`` and ``seeds``."""
    if not isinstance(data, dict):
        return None
    d = {k: v for k, v in data.items() if k not in ("seed", "seeds")}
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def _folder_identity(folder: Path) -> Optional[str]:
    try:
        return _identity_of(read_output_yaml(folder / "scenario.resolved.yaml"))
    except RunFolderError:
        return None


def _clear(own: OwnFiles) -> None:
    """Before a seed (re)runs: remove the files an earlier run wrote into its
    folder (so a rerun of another scenario leaves none of the old run's tables
    behind), and only those (runfolder.OwnFiles)."""
    own.remove(SEED_FILES)


class FolderSession:
    """One ``run`` into a run folder: the lock, the layout, the resume plan,
    provenance. Every refusal happens before the first seed is simulated."""

    def __init__(self, scenario: Scenario, top: Path, seeds: list[int], multi: bool, force: bool):
        self.scenario = scenario
        self.top = top
        self.seeds = seeds
        self.multi = multi
        self.force = force
        self.identity = scenario_identity(scenario)
        self.env = environment()
        self.inputs = {role: input_record(p, prefix) for role, (p, prefix) in input_files(scenario).items()}
        self.lock = RunLock(top)
        self.started = time.time()
        self.wrote = False
        self._own: dict[Path, OwnFiles] = {}

    def own(self, folder: Path) -> OwnFiles:
        """The list of meshsim's files in ``folder``: a name joins it before its file is written."""
        if folder not in self._own:
            self._own[folder] = OwnFiles(folder)
        return self._own[folder]

    def folder(self, seed: int) -> Path:
        return self.top / f"seed-{seed}" if self.multi else self.top

    # -- before any seed runs ------------------------------------------------
    def open(self) -> dict[int, str]:
        """Refuse a folder holding files meshsim did not write under the names
        the run writes; lock, check the layout, remove stale temp files, decide
        per seed ``run`` or ``resume`` (or refuse)."""
        self._check_own()
        self.lock.acquire({"scenario": self.scenario.name})
        remove_stale_tmp(self.top)
        self._check_layout()
        return {s: self._plan(s) for s in self.seeds}

    def _check_own(self) -> None:
        """A file the run would write, replace or remove that meshsim did not write stops the run (issue 30)."""
        folders = [(self.top, TOP_FILES)] if self.multi else []
        folders += [(self.folder(s), SEED_FILES) for s in self.seeds]
        for folder, names in folders:
            if folder != self.top and os.path.islink(folder):
                raise RunFolderError("is a link; a seed folder is the run's own: remove the link or choose "
                                     "another --out", file=str(folder))
            if not folder.is_dir():
                continue  # (not there yet; a path that is no folder: RunLock says so)
            foreign = OwnFiles(folder).foreign(names)
            if foreign:
                raise RunFolderError(f"holds {foreign[0]}, which meshsim did not write (it is not listed in "
                                     f"{OWN_FILES}); a run never replaces or deletes a file it did not write: "
                                     "move it, or choose another --out", file=str(folder))

    def _check_layout(self) -> None:
        top, out = self.top, str(self.top)
        seed_dirs = sorted(d for d in top.glob("seed-*") if d.is_dir())
        single = (top / "summary.json").exists() or (top / "scenario.resolved.yaml").exists()
        if self.multi:
            if single:
                raise RunFolderError(f"holds a single-seed run, and this scenario has seeds: {self.scenario.seeds} "
                                     "(its runs go to seed-<s>/ folders); choose another --out", file=out)
            top_prov = read_json(top / PROVENANCE)
            ident = top_prov.get("scenario", {}).get("identity") if top_prov else None
            if ident and ident != self.identity and not self.force:
                raise RunFolderError(f"holds runs of a different scenario "
                                     f"({top_prov.get('scenario', {}).get('name')!r}); use --force to rerun the "
                                     "seeds into it, or choose another --out", file=out)
            ours = {f"seed-{s}" for s in self.seed_list_all()}
            for d in seed_dirs:
                if d.name not in ours and (d / "summary.json").exists() and _folder_identity(d) != self.identity:
                    raise RunFolderError(f"holds {d.name}/ of a different scenario, which this run would not "
                                         "replace (the folder would mix two scenarios); choose another --out",
                                         file=out)
        elif seed_dirs or (top / "aggregate.json").exists():
            raise RunFolderError("holds a multi-seed run (seed-<s>/ folders), and this scenario has one seed; "
                                 "choose another --out", file=out)

    def seed_list_all(self) -> list[int]:
        return self.scenario.seed_list() if self.multi else self.seeds

    def _plan(self, seed: int) -> str:
        folder = self.folder(seed)
        if not (folder / "summary.json").exists() or self.force:
            return "run"
        try:
            old = (folder / "scenario.resolved.yaml").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            old = None
        if old != _resolved_yaml(self.scenario, seed):
            raise RunFolderError("folder holds a completed run of a different scenario or seed; "
                                 "use --force to overwrite or choose another --out", file=str(folder))
        why = resume_problem(read_json(folder / PROVENANCE), self.env, self.inputs)
        if why:
            raise RunFolderError(f"holds a completed run that cannot be resumed: {why}; use --force to rerun it, "
                                 "or choose another --out", file=str(folder))
        return "resume"

    # -- per seed ------------------------------------------------------------
    def start(self, seed: int) -> Path:
        folder = self.folder(seed)
        folder.mkdir(parents=True, exist_ok=True)
        self.wrote = True
        own = self.own(folder)
        _clear(own)
        own.claim(["scenario.resolved.yaml"])
        write_atomic(folder / "scenario.resolved.yaml", _resolved_yaml(self.scenario, seed))
        return folder

    def provenance(self, seed: Optional[int], started: float, extra: Optional[dict[str, Any]] = None) -> str:
        inputs = dict(self.inputs)
        if "cassette" in inputs:  # as the run left it: what a resume must still find as its prefix
            inputs["cassette"] = input_record(Path(inputs["cassette"]["path"]), prefix=True)
        src = Path(self.scenario.source)
        rec: dict[str, Any] = {
            "format": 1, **self.env,
            "layout": "seeds" if self.multi else "single",
            "scenario": {"name": self.scenario.name, "file": str(src), "identity": self.identity,
                         **({k: v for k, v in input_record(src).items() if k != "path"} if src.is_file() else {})},
            "inputs": inputs,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "wall_seconds": round(time.time() - started, 3),
        }
        if seed is not None:
            rec["seed"] = seed
        rec.update(extra or {})
        return dump_json(rec)

    def close(self) -> None:
        if self.wrote:
            self.lock.release()
        else:
            self.lock.release_unused()
