"""Every malformed scenario in tests/data/bad_scenarios/ fails cleanly.

Each file starts with ``# expect: <substring>``. Both ``meshsim validate FILE``
and ``meshsim run FILE --out DIR`` must exit 2 with exactly one line on
stderr that starts with ``error:``, names the file and contains the expected
substring (normally the field path) -- never a traceback -- and ``run`` must
not leave a ``summary.json`` behind.

The commands are real subprocesses (the exit code and stderr are the
contract); they are started all at once by a module fixture, a few in
parallel, because interpreter start-up dominates their cost.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

BAD_DIR = Path(__file__).parent / "data" / "bad_scenarios"
BAD_FILES = sorted(BAD_DIR.glob("*.yaml"))
EXPECT_PREFIX = "# expect: "


def meshsim_cmd() -> list[str]:
    """The ``meshsim`` console script of this interpreter, else ``python -m meshsim.cli``."""
    exe = shutil.which("meshsim", path=str(Path(sys.executable).parent)) or shutil.which("meshsim")
    return [exe] if exe else [sys.executable, "-m", "meshsim.cli"]


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("MESHSIM_DEBUG", None)  # would turn internal errors into tracebacks
    env["COLUMNS"] = "200"
    return env


def expected_substring(path: Path) -> str:
    lines = path.read_text().splitlines()
    first = lines[0] if lines else ""
    assert first.startswith(EXPECT_PREFIX), f"{path.name}: first line must be '{EXPECT_PREFIX}<substring>'"
    expect = first[len(EXPECT_PREFIX):].strip()
    assert expect, f"{path.name}: empty expect substring"
    return expect


def test_folder_has_enough_cases():
    assert len(BAD_FILES) >= 15
    for path in BAD_FILES:  # every file carries its '# expect:' line
        expected_substring(path)


@pytest.fixture(scope="module")
def cli_results(tmp_path_factory):
    """Run validate and run on every bad file (in parallel); key: (file name, command)."""
    base = tmp_path_factory.mktemp("bad_runs")
    cmd = meshsim_cmd()
    env = cli_env()
    jobs = {}
    for path in BAD_FILES:
        out = base / path.stem
        jobs[(path.name, "validate")] = (cmd + ["validate", str(path)], out)
        jobs[(path.name, "run")] = (cmd + ["run", str(path), "--out", str(out)], out)

    def call(argv: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=base,
                              stdin=subprocess.DEVNULL, timeout=120)

    workers = max(2, min(8, (os.cpu_count() or 2) * 2))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {key: pool.submit(call, argv) for key, (argv, _) in jobs.items()}
        return {key: (fut.result(), jobs[key][1]) for key, fut in futures.items()}


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("path", BAD_FILES, ids=[p.stem for p in BAD_FILES])
def test_bad_scenario_fails_cleanly(path: Path, command: str, cli_results):
    expect = expected_substring(path)
    proc, out = cli_results[(path.name, command)]
    err = proc.stderr
    assert proc.returncode == 2, f"exit {proc.returncode}, stderr: {err!r}"
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    line = lines[0]
    assert line.startswith("error:"), line
    assert path.name in line, f"error does not name the file: {line}"
    assert expect in line, f"expected {expect!r} in: {line}"
    if command == "run":
        assert not out.exists() or not list(out.rglob("summary.json")), "a failed run wrote summary.json"
