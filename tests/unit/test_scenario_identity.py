"""A scenario's identity (what decides whether a run folder may be resumed) is computed from the
model; it must be the identity of the ``scenario.resolved.yaml`` the run writes, read back (issue 31)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from meshsim.scenario.model import load_scenario
from meshsim.simulate.session import _identity_of, resolved_yaml, scenario_identity

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "scenarios").rglob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED[::7], ids=lambda p: str(p.relative_to(ROOT)))
def test_identity_from_the_model_is_the_written_files(path):
    sc = load_scenario(path)
    written = yaml.safe_load(resolved_yaml(sc, sc.seed))
    assert scenario_identity(sc) == _identity_of(written)
    assert _identity_of(yaml.safe_load(resolved_yaml(sc, sc.seed + 1))) == scenario_identity(sc)  # seeds aside


def test_identity_changes_with_the_scenario():
    sc = load_scenario(SHIPPED[0])
    other = load_scenario(SHIPPED[0], ["network.links.loss=0.125"])
    assert scenario_identity(sc) != scenario_identity(other)
