"""A wheel that works anywhere (issue 32 item 1): build it from a clean copy of the checkout, install
it (not editable) into a fresh venv and, from an empty folder outside the checkout, list the shipped
examples, copy one out, run it and write its report. Slow (a wheel build and a venv: 20-40 s).

The fresh venv gets the wheel only (--no-deps); the dependencies come from this interpreter's
site-packages through a .pth line (offline and fast; .ci/run installs the wheel with its
dependencies from the index instead). A .pth line adds the folder without running the .pth files in
it, so an editable meshsim there is not seen: `import meshsim` must find the wheel's copy.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# bytecode caches are copied on purpose: the wheel must leave them out (pyproject's exclude-package-data)
IGNORE = shutil.ignore_patterns(".git", ".venv*", "runs", "build", "dist", "*.egg-info", ".hypothesis",
                                ".pytest_cache", ".ci-*", "node_modules", "*.whl")

pytestmark = pytest.mark.slow


def _run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MESHSIM_DEBUG", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"{cmd} -> {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return r


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src") / "meshsim"
    shutil.copytree(ROOT, src, symlinks=True, ignore=IGNORE)  # the data links stay links, as in git
    dist = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)], cwd=dist)
    (whl,) = dist.glob("meshsim-*.whl")
    return whl


def test_the_wheel_holds_every_shipped_file_byte_for_byte(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        data = ROOT / "meshsim" / "data"
        seen = set()
        # every file under meshsim/data, through its links to the top-level scenarios/ and backends/
        for folder, dirs, files in os.walk(data, followlinks=True):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for f in files:
                path = Path(folder, f)
                name = f"meshsim/data/{path.relative_to(data).as_posix()}"
                assert name in names, f"{name} missing from the wheel"
                assert z.read(name) == path.read_bytes(), name
                seen.add(name.split("/")[2])
        assert {"scenarios", "backends", "datasets"} <= seen
        assert any(n.startswith("meshsim/workload/prompts/templates/") for n in names)
        # the reports' templates (issue 31), every one of them
        for pkg in ("plots", "uncertainty"):
            for f in (ROOT / "meshsim" / pkg / "templates").iterdir():
                assert z.read(f"meshsim/{pkg}/templates/{f.name}") == f.read_bytes(), f
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_a_fresh_venv_runs_a_shipped_example_and_its_report_from_an_empty_folder(wheel, tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    py = venv / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "--no-deps", "-q", str(wheel)], cwd=tmp_path)
    purelib = _run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   cwd=tmp_path).stdout.strip()
    Path(purelib, "meshsim-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    where = _run([str(py), "-c", "import meshsim; print(meshsim.__file__)"], cwd=empty).stdout.strip()
    assert where.startswith(str(venv)), f"imported {where}, not the wheel's copy"

    meshsim = str(venv / "bin" / "meshsim")
    listing = _run([meshsim, "scenarios"], cwd=empty).stdout
    assert "meshheal/staggered-math" in listing and "[MeshHeal Sec. 6.2, Tab. 3, Fig. C1]" in listing
    _run([meshsim, "scenarios", "copy", "meshheal/staggered-math", "."], cwd=empty)
    _run([meshsim, "run", "staggered-math.yaml", "--smoke", "-q"], cwd=empty)
    _run([meshsim, "report", "runs/meshheal-staggered-math"], cwd=empty)
    folder = empty / "runs" / "meshheal-staggered-math"
    assert (folder / "report.html").stat().st_size > 50_000
    prov = json.loads((folder / "provenance.json").read_text())
    for role, rec in prov["inputs"].items():  # profile and dataset: the wheel's copies, not the checkout's
        assert rec["path"].startswith(str(venv)), (role, rec["path"])
    # a shipped example by name, and calibrate's and reproduce's inputs, from the same empty folder
    _run([meshsim, "validate", "sac/sac-merg-7"], cwd=empty)
    _run([str(py), "-c", "from meshsim.paper.reproduce.core import ROOT; "
          "assert (ROOT / 'scenarios/meshheal/persistent-bbh.yaml').is_file(), ROOT"], cwd=empty)
    assert sorted(p.name for p in empty.iterdir()) == ["runs", "staggered-math.yaml"]
