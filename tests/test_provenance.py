"""Every shipped backend profile says where each of its numbers comes from (issue 10, acceptance 1)."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from meshsim.backends.provenance import explain_rows, load_profile_data, missing_sources
from meshsim.cli import main

ROOT = Path(__file__).resolve().parents[1]
PROFILES = sorted((ROOT / "backends").glob("*.yaml"))
#: profiles still being given their sources (issue 10, MeshHeal half): the lead removes this
PENDING = {"fake-default.yaml"}


def _pending(p: Path) -> bool:
    return p.name in PENDING or p.name.startswith("fake-pair-")


def test_there_are_profiles():
    assert any(p.name == "sac-default.yaml" for p in PROFILES)


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.xfail(
    _pending(p), reason="MeshHeal fake profiles get their sources in the MeshHeal half of issue 10", strict=False))
    for p in PROFILES], ids=[p.name for p in PROFILES])
def test_every_number_has_a_source(path):
    data = load_profile_data(path)
    assert explain_rows(data), "a profile with no numbers"
    assert missing_sources(data) == []
    res = CliRunner().invoke(main, ["backends", "explain", str(path)])
    assert res.exit_code == 0, res.output


def test_sac_default_calibrates_only_call_level_targets():
    """Numbers of the SAC fake are either the paper's call-level initial accuracies
    or assumptions: no 'calibrated' source (nothing is fitted to a protocol outcome)."""
    rows = explain_rows(load_profile_data(ROOT / "backends" / "sac-default.yaml"))
    kinds = {r["kind"] for r in rows}
    assert kinds <= {"paper", "assumption"}
    assert all(r["path"].startswith("accuracy.") for r in rows if r["kind"] == "paper")
    forbidden = ("BFTI", "H-Maj", "FAA", "RA ", "per-round")
    assert not any(w in r["source"] for r in rows for w in forbidden if r["kind"] != "assumption")
