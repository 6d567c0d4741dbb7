"""tests/ stays in layers (tests/README.md): a test module lives in a layer folder, never at the top,
and every layer is a package named in the README's table (so `from tests.helpers import` resolves)."""
from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _layers_in_readme() -> set[str]:
    return set(re.findall(r"^\| `(\w+)/` \|", (TESTS / "README.md").read_text(), flags=re.M))


def test_no_test_module_sits_at_the_top_of_tests():
    flat = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert not flat, f"{flat}: move each into a layer of tests/ (tests/README.md says which holds what)"


def test_every_folder_with_tests_is_a_layer_package_named_in_the_readme():
    layers = _layers_in_readme()
    assert {"unit", "protocols", "acceptance", "safety"} <= layers  # the table was read
    holding = {p.parent for p in TESTS.rglob("test_*.py")}
    for d in holding:
        rel = d.relative_to(TESTS).as_posix()
        assert rel in layers, f"tests/{rel}/ holds tests but is not a layer of tests/README.md"
        assert (d / "__init__.py").is_file(), f"tests/{rel}/ has no __init__.py"
    assert (TESTS / "__init__.py").is_file()


def test_every_test_file_named_in_the_checkout_exists():
    """A test moved to another layer leaves no stale path behind in the docs, the code or CI."""
    root = TESTS.parent
    where = [root / "README.md", root / "pyproject.toml", root / ".ci" / "run", *sorted((root / "docs").glob("*.md")),
             *sorted((root / "docs").glob("*.py")), *sorted((root / "meshsim").rglob("*.py")),
             *sorted(TESTS.rglob("*.py")), *sorted((TESTS / "data").rglob("*.yaml"))]
    named = {(p.relative_to(root).as_posix(), m) for p in where
             for m in re.findall(r"\btests/[\w/]+\.py\b", p.read_text(errors="replace"))}
    assert len(named) > 10  # the search reads what it should
    stale = sorted((p, m) for p, m in named if not (root / m).is_file())
    assert not stale, f"paths of test files that do not exist (file, path): {stale}"
