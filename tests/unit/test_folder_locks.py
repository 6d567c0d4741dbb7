"""One folder lock, naming its holder, for every folder meshsim writes (issue 31 item 5): a run's, a sweep's
(a search's too), an uncertainty study's and a verdict's all hold :class:`meshsim.io.runfolder.RunLock`."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from meshsim.core.errors import RunFolderError
from meshsim.io.runfolder import LOCK_NAME, RunLock
from meshsim.sweep.folder import SWEEP_LOCK, lock_folder
from meshsim.uncertainty.core import LOCK as UNCERTAINTY_LOCK
from meshsim.verdict.core import LOCK as VERDICT_LOCK

PACKAGE = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file()) / "meshsim"


@pytest.mark.parametrize("name, what", [(LOCK_NAME, "run"), (SWEEP_LOCK, "sweep"),
                                        (UNCERTAINTY_LOCK, "uncertainty"), (VERDICT_LOCK, "verdict")])
def test_a_held_folder_is_refused_naming_the_holder(tmp_path, name, what):
    out = tmp_path / "deep" / "out"
    held = lock_folder(out, name, what, {"scenario": "the-holder"})
    try:
        with pytest.raises(RunFolderError) as err:
            lock_folder(out, name, what, {"scenario": "the-second"})
        msg = str(err.value)
        assert f"in use by another meshsim {what} (pid {os.getpid()}" in msg
        assert "scenario 'the-holder'" in msg and re.search(r"since \d{4}-\d\d-\d\dT", msg)
        assert "\n" not in msg
    finally:
        held.release()
    lock_folder(out, name, what, {"scenario": "the-second"}).release()  # free again once released
    assert (out / name).is_file()


def test_one_lock_implementation():
    """No folder lock of its own anywhere else (the three ``_Lock`` classes were folded into RunLock)."""
    own = []
    for f in sorted(PACKAGE.rglob("*.py")):
        text = f.read_text()
        if f.name == "runfolder.py" and f.parent.name == "io":
            assert "class RunLock" in text
            continue
        if re.search(r"\bflock\(|^class \w*Lock\b", text, re.M):
            own.append(str(f.relative_to(PACKAGE)))
    assert not own, f"folder locks outside meshsim/io/runfolder.py: {own}"
    assert RunLock.__init__.__defaults__ == (LOCK_NAME, "run")
