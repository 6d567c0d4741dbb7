"""The Optuna study of a search: its sampler, its journal in the folder, its trials' parameters
(see :mod:`meshsim.sweep.search`; what goes beyond Optuna's public API is :mod:`meshsim.sweep.optuna_seam`)."""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Optional

from ...core.errors import RunFolderError
from ..optuna_seam import CREATE_STUDY, CREATE_TRIAL, Trials, lock_path
from .spec import JOURNAL, STUDY_NAME, SearchPlan, require_optuna


# ------------------------------------------------------------------------------------ the study


def seeded_sampler(sp: SearchPlan, number: int):
    """NSGA-II with a seed of its own for trial ``number`` (a resumed study asks what an uninterrupted one would)."""
    import numpy as np
    import optuna

    s = int(np.random.SeedSequence([int(sp.spec.seed) & 0xFFFFFFFF, int(number)]).generate_state(1)[0])
    with warnings.catch_warnings():  # Optuna 5 deprecates constraints_func (removed in 7); 4.x has nothing else
        warnings.simplefilter("ignore", FutureWarning)
        return optuna.samplers.NSGAIISampler(population_size=sp.spec.population, seed=s, constraints_func=_constraints)


def _suggest_all(sp: SearchPlan, trial) -> dict[str, Any]:
    """Every range's value of ``trial`` (those it already holds are returned as stored)."""
    out = {}
    for r in sp.spec.ranges:
        if r.kind == "int":
            out[r.path] = trial.suggest_int(r.path, int(r.low), int(r.high))
        else:
            out[r.path] = trial.suggest_float(r.path, float(r.low), float(r.high), log=r.kind == "log")
    return out


def trial_params(sp: SearchPlan, trials: Trials, t) -> dict[str, Any]:
    """A trial's raw parameters. One cut mid-ask by kill -9 (it holds the first
    few) gets the rest now, as the uninterrupted ask drew them: the sampler is
    reseeded for its number, its relative sample redone, and the independent
    draws of the parameters it holds are replayed before the missing ones."""
    if all(r.path in t.params for r in sp.spec.ranges):
        return dict(t.params)
    study = trials.study
    study.sampler = seeded_sampler(sp, t.number)
    trial = trials.live(t)
    for r in sp.spec.ranges:  # ask() suggests in range order: the held ones are a prefix
        if r.path not in t.params:
            break
        dist = r.distribution()
        if not dist.single() and r.path not in trial.relative_params:
            study.sampler.sample_independent(study, t, r.path, dist)
    return _suggest_all(sp, trial)


def _constraints(trial) -> list[float]:
    return list(trial.user_attrs.get("constraints") or [])


def open_study(sp: SearchPlan, out: Path) -> Trials:
    """Optuna's JournalStorage on ``out/study.journal`` (the caller holds the folder's lock): the study and
    its trials by number."""
    optuna = require_optuna()
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

    f = out / JOURNAL
    if f.exists():  # a line cut by kill -9 would corrupt the next append: drop it; a lock left behind is stale
        check_journal(f)
        data = f.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(f, "r+b") as fh:
                fh.truncate(data.rfind(b"\n") + 1)
    lock = lock_path(f)
    if lock.exists() or lock.is_symlink():
        lock.unlink()
    storage = JournalStorage(JournalFileBackend(str(f), lock_obj=JournalFileOpenLock(str(f))))
    try:
        study = optuna.create_study(storage=storage, study_name=STUDY_NAME, load_if_exists=True,
                                    directions=[o.direction for o in sp.spec.objectives], sampler=seeded_sampler(sp, 0))
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:  # records that do not replay
        raise _damaged(f, f"its records do not replay ({type(exc).__name__}: {str(exc)[:120]})") from None
    return Trials(study, storage)


def _damaged(f: Path, what: str) -> RunFolderError:
    return RunFolderError(f"damaged study journal: {what}; the finished runs stay in runs/: move {f.name} aside "
                          "and rerun the search to rebuild the study (its runs are reused)", file=str(f))


def check_journal(f: Path) -> None:
    """One line (exit 2) for a ``study.journal`` that is not Optuna's journal:
    a line that is not a JSON record with an ``op_code``. A last line cut
    short by ``kill -9`` (no newline) is not damage: it is dropped when the
    study opens. Issue 30."""
    if not f.is_file():
        if os.path.lexists(f):
            raise _damaged(f, "it is not a file")
        return
    try:
        data = f.read_bytes()
    except OSError as exc:
        raise RunFolderError(f"cannot read: {exc.strerror or exc}", file=str(f)) from None
    lines = data.split(b"\n")
    if lines and lines[-1]:  # cut short by kill -9: not a record yet
        lines.pop()
    creates: dict[bytes, int] = {}
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            raise _damaged(f, f"line {i} is not a JSON record") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("op_code"), int) or isinstance(rec["op_code"], bool):
            raise _damaged(f, f"line {i} is not an Optuna journal record (no op_code)")
        if rec["op_code"] in (CREATE_STUDY, CREATE_TRIAL):
            # a creation carries its own time stamp: the same line twice is a copy, and would add a trial
            if line in creates:
                raise _damaged(f, f"line {i} repeats line {creates[line]} (the same study or trial created twice)")
            creates[line] = i


def read_trials(out: Path) -> Optional[list]:
    """The study's trials without writing anything (dry run), or None."""
    f = out / JOURNAL
    if not f.is_file():
        return None
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import BaseJournalBackend

    class _ReadOnly(BaseJournalBackend):
        def read_logs(self, log_number_from):
            for i, line in enumerate(f.read_bytes().split(b"\n")):
                if i >= log_number_from and line.strip():
                    try:
                        yield json.loads(line)
                    except ValueError:  # the last line, cut short (check_journal refused any other)
                        return

        def append_logs(self, logs):  # pragma: no cover - never called by a read
            raise RuntimeError("read only")

    check_journal(f)
    try:
        study = optuna.load_study(study_name=STUDY_NAME, storage=JournalStorage(_ReadOnly()))
    except KeyError:
        return None
    except (IndexError, TypeError, ValueError, AttributeError) as exc:  # records that do not replay
        raise _damaged(f, f"its records do not replay ({type(exc).__name__}: {str(exc)[:120]})") from None
    return study.get_trials(deepcopy=False)


def check_study_compatible(old: dict, new: dict, folder: Path) -> None:
    from ..manifest import MANIFEST, check_compatible

    where = str(Path(folder) / MANIFEST)
    if "search" not in old:
        raise RunFolderError("the folder holds a grid sweep, not a search; use another --out", file=where)
    check_compatible(old, new, folder)
    a, b = old["search"], new["search"]
    for k in ("sampler", "seed", "batch", "ranges", "objectives", "constraints", "seeds"):
        if a.get(k) != b.get(k):
            raise RunFolderError(f"the folder holds a different search: {k} is {json.dumps(a.get(k))} there and "
                                 f"{json.dumps(b.get(k))} here (only --trials, --max-seeds and --refine-runs may "
                                 "change; use another --out)", file=where)
