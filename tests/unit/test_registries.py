"""Issue 31 item 2: backends and detectors are registries, like protocols, events and topologies.

Adding one is one new module and one registration, nothing else edited: each test here
registers a dummy (as a new module would when imported) and runs it through the code
that looks kinds up by name.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

import meshsim
from meshsim.backends import BACKENDS, make_backend, register_backend
from meshsim.backends.fake import FakeBackend, check_fake_spec
from meshsim.core.errors import InputError
from meshsim.protocols.meshheal.detector import DETECTORS, DetectorParams, NoDetector, register_detector

ROOT = Path(__file__).resolve().parents[2]
BLACKHOLE = ROOT / "scenarios" / "adversarial" / "blackhole-6.yaml"


class _CountingBackend(FakeBackend):
    """A new backend kind: MeshHeal's fake, counting the calls it answers."""

    def __init__(self, *a: Any, **kw: Any):
        super().__init__(*a, **kw)
        self.name = "dummy"
        self.answered = 0

    def complete_sync(self, req):
        self.answered += 1
        return super().complete_sync(req)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "answered": self.answered}


def _check(spec: dict[str, Any], base_dir: Optional[Path], need_key: bool):
    if spec.get("loud"):
        raise InputError("a dummy backend is quiet", field="loud", value=spec["loud"])
    return check_fake_spec({"kind": "fake", "profile": spec["profile"]}, base_dir, need_key)


def _build(spec: dict[str, Any], seed: int, base_dir: Optional[Path], need_key: bool, loaded: Any):
    return _CountingBackend(loaded, seed=seed)


@pytest.fixture
def dummy_backend():
    register_backend("dummy", _check, _build)
    yield
    del BACKENDS["dummy"]


def test_a_registered_backend_runs_a_scenario(dummy_backend, tmp_path):
    sc = meshsim.load_scenario(BLACKHOLE, ["backend={kind: dummy, profile: fake-default}"], smoke=True)
    res = meshsim.run(sc, seed=1, out=tmp_path)
    assert res.summary["backend"]["name"] == "dummy"
    assert res.summary["backend"]["answered"] > 0  # the run's calls went to the new kind
    assert res.summary["tasks"] > 0


def test_a_registered_backend_checks_its_own_spec(dummy_backend, tmp_path):
    sc = meshsim.load_scenario(BLACKHOLE, ["backend={kind: dummy, profile: fake-default, loud: 1}"], smoke=True)
    with pytest.raises(InputError) as exc:
        meshsim.run(sc, seed=1, out=tmp_path)
    assert exc.value.field == "backend.loud" and exc.value.file == str(BLACKHOLE)


def test_unknown_backend_kind_lists_the_registered_ones(dummy_backend):
    with pytest.raises(InputError) as exc:
        make_backend({"kind": "nope"}, 0, None)
    assert exc.value.field == "kind"
    assert "'dummy'" in exc.value.message and "'fake'" in exc.value.message


def test_fake_overrides_are_described_without_patching_the_backend():
    over = {"models.strong.id": "x"}
    b = make_backend({"kind": "fake", "profile": "fake-default", "overrides": over}, 0, ROOT)
    assert type(b).describe is FakeBackend.describe and "describe" not in vars(b)
    assert b.describe()["overrides"] == over
    assert b.describe()["models"]["strong"] == "x"
    assert "overrides" not in make_backend({"kind": "fake", "profile": "fake-default"}, 0, ROOT).describe()


# -- detectors ---------------------------------------------------------------------------------

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


# -- discovery: a new module with its registration call, nothing else edited -------------------------

_MODULES = {
    "meshsim.backends": ("reg31_backend", "zz31", '''
from .fake import FakeBackend, check_fake_spec
from .registry import register_backend


class Zz31Backend(FakeBackend):
    answered = 0

    def complete_sync(self, req):
        type(self).answered += 1
        return super().complete_sync(req)


def check(spec, base_dir, need_key):
    return check_fake_spec({"kind": "fake", "profile": spec["profile"]}, base_dir, need_key)


def build(spec, seed, base_dir, need_key, loaded):
    return Zz31Backend(loaded, seed=seed)


register_backend("zz31", check, build)
'''),
    "meshsim.graphs": ("reg31_graph", "zz31_wheel", '''
import networkx as nx

from .registry import need, register_generator


def wheel(params, seed):
    return nx.wheel_graph(need(params, "n", "zz31_wheel", low=4))


register_generator("zz31_wheel", wheel)
'''),
    "meshsim.protocols.meshheal": ("reg31_detector", "zz31", '''
from .detector import NoDetector, register_detector


class Zz31Detector(NoDetector):
    updates = 0

    def update_lists(self, task_type, ability, q, mus, pool, act=True):
        type(self).updates += 1
        return super().update_lists(task_type, ability, q, mus, pool, act)


register_detector("zz31", Zz31Detector, None)
'''),
}


@pytest.fixture
def plugged(tmp_path, monkeypatch):
    """Each dummy module in a folder of its own, appended to its package's ``__path__``; nothing
    imports it or registers it by hand. Afterwards its module and registration are removed."""
    import importlib
    import sys

    from meshsim.graphs import GENERATORS

    registries = {"meshsim.backends": BACKENDS, "meshsim.graphs": GENERATORS, "meshsim.protocols.meshheal": DETECTORS}
    for package, (mod, name, source) in _MODULES.items():
        assert name not in dict.keys(registries[package])  # not registered before any lookup
        folder = tmp_path / mod
        folder.mkdir()
        (folder / f"{mod}.py").write_text(source)
        pkg = importlib.import_module(package)
        monkeypatch.setattr(pkg, "__path__", [*pkg.__path__, str(folder)])
    yield
    for package, (mod, name, _source) in _MODULES.items():
        sys.modules.pop(f"{package}.{mod}", None)
        dict.pop(registries[package], name, None)


def test_new_modules_are_found_by_name(plugged):
    from meshsim.graphs import GENERATORS, build

    assert "zz31" in BACKENDS and "zz31_wheel" in GENERATORS and "zz31" in DETECTORS
    assert list(BACKENDS)[:5] == ["fake", "null", "fake_consensus", "openai", "replay"]  # built-ins keep their order
    assert build("zz31_wheel", {"n": 5}, 0).number_of_edges() == 8
    with pytest.raises(InputError) as exc:
        make_backend({"kind": "nope"}, 0, None)
    assert "'zz31'" in exc.value.message


def test_new_modules_run_a_scenario(plugged, tmp_path):
    import sys

    sc = meshsim.load_scenario(BLACKHOLE, ["backend={kind: zz31, profile: fake-default}",
                                           "network.topology={kind: zz31_wheel, n: 6}",
                                           "protocol.params.detector=zz31"], smoke=True)
    res = meshsim.run(sc, seed=1, out=tmp_path / "run")
    assert res.summary["tasks"] > 0
    assert sys.modules["meshsim.backends.reg31_backend"].Zz31Backend.answered > 0  # the run's calls went to it
    assert sys.modules["meshsim.protocols.meshheal.reg31_detector"].Zz31Detector.updates > 0  # agents fed it
    assert res.summary["network"]["links"] == 10  # the wheel on 6 agents: 5 spokes and a 5-ring


def test_discovery_skips_modules_that_register_nothing():
    """A package's other modules (graphs.reach: scipy) are not imported by a lookup."""
    import subprocess
    import sys

    code = ("import sys; from meshsim.graphs import GENERATORS; 'ring' in GENERATORS; "
            "print('meshsim.graphs.reach' in sys.modules, 'meshsim.backends.fit' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", "import meshsim.backends as b; b.BACKENDS.get('fake'); " + code],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_what_a_kind_can_do_is_declared_at_its_registration():
    """No kind is named at the places that ask what a backend does: a new fake declaring a ranged
    profile is varied by meshsim uncertainty like the built-in ones."""
    from meshsim.backends.fake_profile import FakeProfile
    from meshsim.backends.registry import ranged_kinds
    from meshsim.uncertainty.core import profile_of

    assert [k.name for k in BACKENDS.values() if k.calls_out] == ["openai", "replay"]
    with pytest.raises(InputError, match="not 'fake' or 'fake_consensus'"):
        profile_of({"backend": {"kind": "dummy_ranged", "profile": "fake-default"}}, "s.yaml", ROOT)
    register_backend("dummy_ranged", _check, _build, ranged_profile=FakeProfile)
    try:
        assert ranged_kinds() == ["fake", "fake_consensus", "dummy_ranged"]
        path, over = profile_of({"backend": {"kind": "dummy_ranged", "profile": "fake-default"}}, "s.yaml", ROOT)
        assert path.name == "fake-default.yaml" and over == {}
    finally:
        del BACKENDS["dummy_ranged"]
