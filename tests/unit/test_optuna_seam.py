"""The search's dependence on Optuna beyond its everyday API is one module, meshsim/sweep/optuna_seam.py
(issue 31 item 4). These tests fail loudly, naming what moved, if an Optuna release changes what that module
relies on; the last keeps every other module of meshsim off Optuna's private attributes."""
from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from meshsim.sweep import optuna_seam  # noqa: E402
from meshsim.sweep.optuna_seam import CREATE_STUDY, CREATE_TRIAL, Trials, lock_path  # noqa: E402

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())  # (any tests/ depth)
PACKAGE = ROOT / "meshsim"
SEAM = PACKAGE / "sweep" / "optuna_seam.py"


def _loud(what: str) -> str:
    return (f"Optuna {optuna.__version__} changed {what}: meshsim/sweep/optuna_seam.py relies on it; update "
            "the seam (and pyproject's optuna range) to match")


def test_journal_operation_codes_are_optunas():
    from optuna.storages.journal import _storage

    ops = getattr(_storage, "JournalOperation", None)
    assert ops is not None, _loud("where it keeps the journal's operation codes (JournalOperation)")
    assert (ops.CREATE_STUDY, ops.CREATE_TRIAL) == (CREATE_STUDY, CREATE_TRIAL), \
        _loud("the journal's operation codes for creating a study and a trial")


def test_journal_lock_file_is_where_the_seam_looks(tmp_path):
    from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

    f = tmp_path / "study.journal"
    seen = []

    class Spy(JournalFileOpenLock):
        def acquire(self) -> bool:
            got = super().acquire()
            seen.append(sorted(p.name for p in tmp_path.iterdir()))
            return got

    backend = JournalFileBackend(str(f), lock_obj=Spy(str(f)))
    backend.append_logs([{"op_code": CREATE_STUDY, "worker_id": "w", "study_name": "s", "directions": [1]}])
    assert seen and lock_path(f).name in seen[0], _loud(f"the name of JournalFileOpenLock's lock file ({seen})")


def test_trials_sets_attributes_and_resumes_a_trial_through_the_public_storage(tmp_path):
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    f = tmp_path / "study.journal"
    storage = JournalStorage(JournalFileBackend(str(f)))
    study = optuna.create_study(storage=storage, study_name="s", directions=["minimize"])
    trials = Trials(study, storage)
    dist = optuna.distributions.FloatDistribution(0, 1)
    a = study.ask({"x": dist})
    b = study.ask({"x": dist})
    trials.set_user_attr(a, "batch", 3)
    frozen = study.get_trials(deepcopy=False)
    trials.set_user_attr(frozen[1], "point", "p1")
    assert [t.user_attrs for t in study.get_trials()] == [{"batch": 3}, {"point": "p1"}]
    live = trials.live(frozen[1])
    assert isinstance(live, optuna.trial.Trial) and live.number == b.number == 1, \
        _loud("optuna.trial.Trial(study, trial_id)")
    assert live.suggest_float("x", 0, 1) == b.params["x"]  # the trial's own, held value
    ops = [json.loads(line)["op_code"] for line in f.read_text().splitlines()]
    assert ops[0] == CREATE_STUDY and ops.count(CREATE_TRIAL) == 2, _loud("the journal's records")
    assert "trial_id" in inspect.signature(optuna.trial.Trial.__init__).parameters, \
        _loud("optuna.trial.Trial's constructor")


def _optuna_private_names() -> set[str]:
    """``_``-prefixed (not dunder) attributes of the Optuna objects the search handles."""
    from optuna.storages import BaseStorage, InMemoryStorage, JournalStorage

    names: set[str] = set()
    classes = [optuna.study.Study, optuna.trial.Trial, optuna.trial.FrozenTrial, BaseStorage, JournalStorage,
               InMemoryStorage, optuna.samplers.NSGAIISampler, optuna.samplers.BaseSampler]
    for cls in classes:
        for klass in cls.__mro__:
            if klass.__module__.startswith("optuna"):
                names |= set(vars(klass))
    study = optuna.create_study()
    t = study.ask()
    names |= set(vars(study)) | set(vars(t)) | set(vars(study.get_trials()[0]))
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _violations(text: str, names: set[str]) -> list[tuple[int, str]]:
    """``obj._name`` with ``_name`` one of Optuna's private attributes (``self._name`` is a class's own)
    and any import from one of Optuna's private modules."""
    alt = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    attr = re.compile(rf"(\w*)[)\]]?\.({alt})\b")
    private_module = re.compile(r"\boptuna(\.\w+)*\._\w+")
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        if private_module.search(code) or any(m.group(1) not in ("self", "cls") for m in attr.finditer(code)):
            out.append((n, line.strip()))
    return out


def test_the_scan_finds_private_use():
    names = _optuna_private_names()
    assert {"_storage", "_trial_id", "_study_id"} <= names
    text = "s = study._storage\nt._trial_id\nfrom optuna.storages.journal._storage import JournalOperation\n" \
           "self._storage = 1\n"
    assert [n for n, _ in _violations(text, names)] == [1, 2, 3]


def test_no_optuna_private_attribute_outside_the_seam():
    names = _optuna_private_names()
    bad = []
    for f in sorted(PACKAGE.rglob("*.py")):
        text = f.read_text()
        if f == SEAM or "optuna" not in text:
            continue
        bad += [f"{f.relative_to(ROOT)}:{n}: {line}" for n, line in _violations(text, names)]
    assert not bad, ("Optuna's private attributes outside meshsim/sweep/optuna_seam.py (use the public API, or "
                     "put the access in the seam, guarded by this file's tests):\n" + "\n".join(bad))
    assert not _violations(SEAM.read_text(), names), "the seam itself uses Optuna's public API only"
    assert optuna_seam.__all__
