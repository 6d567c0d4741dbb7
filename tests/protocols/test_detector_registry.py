"""Issue 31 item 2: detectors are a registry, like protocols, events, topologies and backends
(tests/backends/test_backend_registry.py).

Adding one is one new module and one registration, nothing else edited: each test here
registers a dummy detector (as a new module would when imported) and runs it through the code
that looks detectors up by name: MeshHeal's agents, the scenario check, the closed forms, the
detector view.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import meshsim
from meshsim.core.errors import InputError
from meshsim.protocols.meshheal.detector import DETECTORS, DetectorParams, NoDetector, register_detector

ROOT = Path(__file__).resolve().parents[2]
BLACKHOLE = ROOT / "scenarios" / "adversarial" / "blackhole-6.yaml"


class _CountingDetector(NoDetector):
    """A new detector: never changes state (like ``none``), counting the updates it is fed."""

    updates = 0

    def update_lists(self, task_type, ability, q, mus, pool, act=True):
        type(self).updates += 1
        return super().update_lists(task_type, ability, q, mus, pool, act)


@pytest.fixture
def dummy_detector():
    _CountingDetector.updates = 0
    register_detector("dummy", _CountingDetector, None)
    yield
    del DETECTORS["dummy"]


def test_a_registered_detector_runs_a_scenario(dummy_detector, tmp_path):
    sc = meshsim.load_scenario(BLACKHOLE, ["protocol.params.detector=dummy"], smoke=True)
    res = meshsim.run(sc, seed=1, out=tmp_path)
    assert _CountingDetector.updates > 0  # MeshHeal's agents fed the registered detector
    assert all(a["isolated_at"] is None for a in res.summary["agents"].values())  # it never isolates
    # the detector view knows from the registration that this detector never acts
    from meshsim.core.errors import RunFolderError
    from meshsim.plots.healing import detector_view

    with pytest.raises(RunFolderError, match="no detector"):
        detector_view(tmp_path, "A1")


def test_scenario_check_lists_the_registered_detectors(dummy_detector):
    from meshsim.protocols.meshheal import MeshHealParams

    with pytest.raises(ValueError) as exc:
        MeshHealParams(detector="bogus")
    assert "'relative', 'absolute', 'cusum', 'none' or 'dummy'" in str(exc.value)
    assert MeshHealParams(detector="dummy").detector == "dummy"
    assert "dummy" in MeshHealParams.model_json_schema()["properties"]["detector"]["enum"]


def test_the_closed_forms_name_the_detectors_they_cover(dummy_detector):
    from meshsim.analysis.detector import oc_kinds, operating_characteristics
    from meshsim.analysis.scores import ScoreModel

    assert oc_kinds() == ["relative", "absolute", "cusum"]  # no closed form for the dummy: not offered
    with pytest.raises(InputError, match="choose relative, absolute or cusum") as exc:
        operating_characteristics(ScoreModel.__new__(ScoreModel), DetectorParams(), "dummy")
    assert exc.value.value == "dummy"
