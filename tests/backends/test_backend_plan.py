"""Issue 31 item 5: a run loads its backend's profile once, not once per seed and step
(the scenario check makes the plan; the preflight and each seed's world build from it)."""
from __future__ import annotations

from pathlib import Path

import pytest

import meshsim
from meshsim.backends import fake, make_backend, plan_backend

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
BLACKHOLE = ROOT / "scenarios" / "adversarial" / "blackhole-6.yaml"


@pytest.fixture
def loads(monkeypatch):
    seen: list[str] = []
    real = fake.load_fake

    def counting(path, overrides=None):
        seen.append(str(path))
        return real(path, overrides)

    monkeypatch.setattr(fake, "load_fake", counting)
    return seen


@pytest.mark.parametrize("out", [True, False])
def test_the_profile_is_loaded_as_often_for_three_seeds_as_for_one(loads, tmp_path, out):
    counts = []
    for seeds in (1, 3):
        loads.clear()
        sc = meshsim.load_scenario(BLACKHOLE, [f"seeds={seeds}"], smoke=True)
        res = meshsim.run(sc, out=tmp_path / f"s{seeds}" if out else None)
        assert len(getattr(res, "runs", [res])) == seeds
        counts.append(len(loads))
    # once: the scenario's check plans the backend, and every seed's world, the preflight and
    # the paired runs that attribute the liars' effect build from that plan
    assert counts == [1, 1]


def test_a_plan_builds_per_seed_backends_from_one_profile(loads):
    plan = plan_backend({"kind": "fake", "profile": "fake-default"}, ROOT)
    a, b = plan.build(1), plan.build(2)
    assert len(loads) == 1 and a.profile is b.profile and a.seed != b.seed
    # the same backend as one built from scratch
    assert make_backend({"kind": "fake", "profile": "fake-default"}, 1, ROOT).describe() == a.describe()
    assert plan_backend(None, None).build(0).describe() == {"name": "null"}


def test_run_one_and_validate_load_the_profile_once(loads):
    from meshsim.simulate.runner import run_one, validate

    sc = meshsim.load_scenario(BLACKHOLE, ["seeds=3"], smoke=True)
    run_one(sc, sc.seed_list()[0])  # in memory, with the paired run of the liars' effect
    assert len(loads) == 1
    loads.clear()
    validate(sc)  # every seed's world built and the preflight, from the check's plan
    assert len(loads) == 1
