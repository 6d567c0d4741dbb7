"""Every malformed scenario in tests/data/bad_scenarios/ fails cleanly.

Each file starts with ``# expect: <substring>``. Both ``meshsim validate FILE``
and ``meshsim run FILE --out DIR`` must exit 2 with exactly one line on
stderr that starts with ``error:``, names the file and contains the expected
substring (normally the field path) -- never a traceback -- and ``run`` must
not leave a ``summary.json`` behind.

The commands run in-process through click's CliRunner (the same ``main`` the
console script calls: its exit code and stderr are the contract); one case
also goes through the installed ``meshsim`` entry point as a subprocess, and
tests/test_cli.py holds more of those.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshsim.cli import main

BAD_DIR = Path(__file__).parent / "data" / "bad_scenarios"
BAD_FILES = sorted(BAD_DIR.glob("*.yaml"))
EXPECT_PREFIX = "# expect: "


def meshsim_cmd() -> list[str]:
    """The ``meshsim`` console script of this interpreter, else ``python -m meshsim.cli``."""
    exe = shutil.which("meshsim", path=str(Path(sys.executable).parent)) or shutil.which("meshsim")
    return [exe] if exe else [sys.executable, "-m", "meshsim.cli"]


def expected_substring(path: Path) -> str:
    lines = path.read_text().splitlines()
    first = lines[0] if lines else ""
    assert first.startswith(EXPECT_PREFIX), f"{path.name}: first line must be '{EXPECT_PREFIX}<substring>'"
    expect = first[len(EXPECT_PREFIX):].strip()
    assert expect, f"{path.name}: empty expect substring"
    return expect


def check_one_line(code: int, err: str, path: Path) -> None:
    assert code == 2, f"exit {code}, stderr: {err!r}"
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    line = lines[0]
    assert line.startswith("error:"), line
    assert path.name in line, f"error does not name the file: {line}"
    expect = expected_substring(path)
    assert expect in line, f"expected {expect!r} in: {line}"


def test_folder_has_enough_cases():
    assert len(BAD_FILES) >= 15
    for path in BAD_FILES:  # every file carries its '# expect:' line
        expected_substring(path)


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("path", BAD_FILES, ids=[p.stem for p in BAD_FILES])
def test_bad_scenario_fails_cleanly(path: Path, command: str, tmp_path, monkeypatch):
    monkeypatch.delenv("MESHSIM_DEBUG", raising=False)  # would turn internal errors into tracebacks
    monkeypatch.chdir(tmp_path)
    out = tmp_path / path.stem
    argv = ["validate", str(path)] if command == "validate" else ["run", str(path), "--out", str(out)]
    # catch_exceptions=False: an exception escaping main() fails the test with its traceback
    res = CliRunner().invoke(main, argv, catch_exceptions=False, env={"COLUMNS": "200"})
    check_one_line(res.exit_code, res.stderr, path)
    if command == "run":
        assert not out.exists() or not list(out.rglob("summary.json")), "a failed run wrote summary.json"


@pytest.mark.parametrize("command", ["validate", "run"])
def test_installed_entry_point_fails_cleanly(command: str, tmp_path):
    """The console script itself: exit 2 and one line, for one bad file."""
    path = BAD_FILES[0]
    env = dict(os.environ)
    env.pop("MESHSIM_DEBUG", None)
    argv = ["validate", str(path)] if command == "validate" else ["run", str(path), "--out", str(tmp_path / "o")]
    proc = subprocess.run(meshsim_cmd() + argv, capture_output=True, text=True, env=env, cwd=tmp_path,
                          stdin=subprocess.DEVNULL, timeout=120)
    check_one_line(proc.returncode, proc.stderr, path)
