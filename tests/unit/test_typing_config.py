"""The type check .ci/run runs (``python -m mypy``, issue 31 item 3) names files that exist, and the package
says it is typed. A module moved without its entry here would make mypy fail in CI (or check less)."""
from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())  # (any tests/ depth)


def _mypy() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def test_every_checked_path_exists():
    files = _mypy()["files"]
    assert files and not [f for f in files if not (ROOT / f).exists()]


def test_every_strict_module_exists_and_is_checked():
    files = [ROOT / f for f in _mypy()["files"]]
    for override in _mypy()["overrides"]:
        for mod in override["module"]:
            parts = mod.removesuffix(".*").split(".")
            base = ROOT.joinpath(*parts)
            found = base if mod.endswith(".*") and base.is_dir() else base.with_suffix(".py")
            assert found.exists(), f"[tool.mypy] override names {mod}, which is not there"
            assert any(found == f or f in found.parents for f in files), f"{mod} is strict but not checked"


def test_the_package_ships_py_typed():
    assert (ROOT / "meshsim" / "py.typed").is_file()
    pkg_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in pkg_data["meshsim"]


def test_ci_runs_mypy_after_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index(".venv-test/bin/python -m pytest\n") < ci.index(".venv-test/bin/python -m mypy\n")
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(d.startswith("mypy") for d in extra)
