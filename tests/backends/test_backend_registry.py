"""Issue 31 item 2: backends are a registry, like protocols, events, topologies and detectors
(tests/protocols/test_detector_registry.py).

Adding one is one new module and one registration, nothing else edited: each test here
registers a dummy backend (as a new module would when imported) and runs it through the code
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
