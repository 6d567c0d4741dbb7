"""Shipped data (issue 32 item 1): example scenarios, backend profiles and datasets are package data,
found by name from any folder; `meshsim scenarios` lists them and `meshsim scenarios copy` copies one
out to edit; a user's own backends/ still wins. The wheel itself: tests/acceptance/test_wheel.py (slow)."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from meshsim.backends import find_profile
from meshsim.cli import main
from meshsim.core.errors import InputError
from meshsim.core.bundled import copy_example, data_root, examples, find_example, scenario_arg, bundled

ROOT = Path(__file__).resolve().parents[2]


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def test_package_data_is_the_top_level_folders_one_source_of_truth():
    # meshsim/data/scenarios and meshsim/data/backends are links to the folders README and docs use:
    # an edit to either is an edit to both (the wheel test checks that setuptools copies them)
    for name in ("scenarios", "backends"):
        link = ROOT / "meshsim" / "data" / name
        assert link.is_symlink(), f"{link} should be a link to ../../{name}"
        assert link.resolve() == (ROOT / name).resolve()
    assert data_root() == ROOT / "meshsim" / "data"


def test_every_top_level_scenario_is_a_listed_example_with_description_and_section():
    listed = {e.name: e for e in examples()}
    files = {p.relative_to(ROOT / "scenarios").with_suffix("").as_posix()
             for p in (ROOT / "scenarios").rglob("*.yaml")}
    assert set(listed) == files
    for e in listed.values():
        assert e.description and "\n" not in e.description, e.name
        assert e.section, e.name
        assert e.path == (ROOT / "scenarios" / f"{e.name}.yaml").resolve()


@pytest.mark.parametrize("name, section", [
    ("meshheal/staggered-math", "MeshHeal Sec. 6.2, Tab. 3, Fig. C1"),
    ("meshheal/scale-288-sparse", "MeshHeal Sec. 6.3, Tab. 2b, Tab. B12"),
    ("sac/ablation-b1w2-sac", "SAC Tab. 7"),
    ("sac/sac-merg-7", "SAC Tab. 3"),
    ("compare/staggered-math", "MeshHeal Sec. 6.2, Tab. 3"),
    ("sweeps/window-min-obs", "MeshHeal Sec. 4.2.2"),
    ("adversarial/blackhole-6", "beyond the papers (docs/adversarial.md)"),
    ("meshheal/scale-5760-sparse", "beyond the papers (extends MeshHeal Sec. 6.3, Tab. 2b, Tab. B12)"),
    ("routing/sparse-failures", "beyond the papers"),
])
def test_paper_section_is_read_off_the_leading_comment(name, section):
    ex = find_example(name)
    assert ex is not None and ex.section == section


def test_names_resolve_with_or_without_folder_suffix_and_prefix():
    full = find_example("meshheal/scale-288-sparse")
    assert full is not None
    for alias in ("scale-288-sparse", "meshheal/scale-288-sparse.yaml", "scenarios/meshheal/scale-288-sparse.yaml"):
        assert find_example(alias) == full
    assert find_example("no-such-example") is None
    with pytest.raises(InputError, match="compare/staggered-math.*meshheal/staggered-math"):
        find_example("staggered-math")  # two examples share the file name


def test_profiles_and_scenarios_are_found_from_an_empty_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert find_profile("fake-default", None) == (ROOT / "backends" / "fake-default.yaml").resolve()
    assert find_profile("sac-default", tmp_path) == (ROOT / "backends" / "sac-default.yaml").resolve()
    from meshsim.paper.reproduce.core import ROOT as REPRO_ROOT
    from meshsim.paper.validation.sac import scenario_path

    assert (REPRO_ROOT / "scenarios/meshheal/persistent-math.yaml").is_file()
    assert scenario_path("sac-merg-7").resolve() == (ROOT / "scenarios/sac/sac-merg-7.yaml").resolve()
    assert bundled("scenarios/meshheal/persistent-bbh.yaml").is_file()  # calibrate's audit scenario


def test_a_users_own_backends_folder_wins_over_the_shipped_profile(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scen = copy_example("meshheal/persistent-math", tmp_path / "mine")
    own = tmp_path / "mine" / "backends" / "fake-default.yaml"
    own.parent.mkdir()
    own.write_text((ROOT / "backends" / "fake-default.yaml").read_text())
    assert find_profile("fake-default", scen.parent) == own  # beside the scenario
    cwd_own = tmp_path / "backends" / "fake-default.yaml"
    cwd_own.parent.mkdir()
    cwd_own.write_text(own.read_text())
    assert find_profile("fake-default", None) == Path("backends") / "fake-default.yaml"  # ./backends
    assert find_profile("fake-default", scen.parent) == own  # beside the scenario still first


def test_scenarios_lists_name_description_and_section():
    r = invoke("scenarios")
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("meshheal/staggered-math "))
    assert "A5 degrades at 127" in line and "[MeshHeal Sec. 6.2, Tab. 3, Fig. C1]" in line
    assert len([ln for ln in r.stdout.splitlines() if ln.strip()]) == len(examples())


def test_scenarios_copy_writes_the_example_and_never_overwrites(tmp_path):
    r = invoke("scenarios", "copy", "meshheal/staggered-math", str(tmp_path / "new"))
    assert r.exit_code == 0, r.output
    out = tmp_path / "new" / "staggered-math.yaml"
    assert out.read_bytes() == (ROOT / "scenarios/meshheal/staggered-math.yaml").read_bytes()
    out.write_text("mine\n")
    r = invoke("scenarios", "copy", "meshheal/staggered-math", str(tmp_path / "new"))
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and "not overwritten" in r.output
    assert out.read_text() == "mine\n"


@pytest.mark.parametrize("name, says", [("no-such", "no shipped example"), ("staggered-math", "several")])
def test_scenarios_copy_bad_name_is_one_line_exit_2(tmp_path, name, says):
    r = invoke("scenarios", "copy", name, str(tmp_path))
    assert r.exit_code == 2 and r.output.count("\n") == 1 and says in r.output
    assert not list(tmp_path.iterdir())


def test_a_copied_example_validates_from_its_own_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    copy_example("sac/sac-merg-7", tmp_path)
    r = invoke("validate", "sac-merg-7.yaml")
    assert r.exit_code == 0, r.output


def test_run_and_validate_take_a_shipped_name_but_a_file_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert scenario_arg("sac/sac-merg-7") == str((ROOT / "scenarios/sac/sac-merg-7.yaml").resolve())
    assert scenario_arg("scenarios/sac/sac-merg-7.yaml").endswith("scenarios/sac/sac-merg-7.yaml")
    (tmp_path / "sac").mkdir()
    (tmp_path / "sac" / "sac-merg-7").write_text("x")
    assert scenario_arg("sac/sac-merg-7") == "sac/sac-merg-7"  # an existing file is itself
    assert scenario_arg("missing.yaml") == "missing.yaml"  # the command then names the missing file
    r = invoke("validate", "routing/sparse-failures")
    assert r.exit_code == 0 and r.output.startswith("ok: ") and "sparse-failures.yaml" in r.output, r.output
