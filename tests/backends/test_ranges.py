"""Every assumption of a shipped fake profile has a plausible range, and review
scores are an explicit distribution per reviewer model and output class
(issue 17; meshsim/backends/provenance.py, meshsim/backends/fake.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsim.core.calls import Request, TaskRef
from meshsim.backends.fake import (CLASSES, VERDICTS, FakeBackend, FakeProfile, SplitMix64, load_fake_profile,
                                   score_distribution)
from meshsim.backends.profiles import override_profile
from meshsim.backends.provenance import assumption_factors, explain_rows, factor_overrides, range_for
from meshsim.cli import main
from meshsim.core.errors import InputError
from tests.helpers import cli_runner as _runner

ROOT = Path(__file__).resolve().parents[2]
#: profiles excluded from the range checks (none: every shipped fake profile has its ranges)
NOT_YET: set[str] = set()


def _fake_profiles() -> list[Path]:
    out = []
    for p in sorted((ROOT / "backends").glob("*.yaml")):
        kind = (yaml.safe_load(p.read_text()) or {}).get("kind")
        if kind in ("fake", "fake_consensus") and p.stem not in NOT_YET:
            out.append(p)
    return out


FAKES = _fake_profiles()
MESHHEAL = [p for p in FAKES if yaml.safe_load(p.read_text()).get("kind") == "fake"]


def test_the_shipped_fakes_are_all_covered():
    names = {p.stem for p in FAKES}
    assert {"fake-default", "fake-pair-a", "fake-pair-b"} <= names


@pytest.mark.parametrize("path", FAKES, ids=lambda p: p.stem)
def test_every_assumption_has_a_range_and_only_assumptions_have_one(path):
    data = yaml.safe_load(path.read_text())
    rows = explain_rows(data)
    unranged = [r["path"] for r in rows if r["kind"] == "assumption" and range_for(r["path"], data) is None]
    assert not unranged, f"{path.name}: assumptions without a range: {unranged}"
    kinds = {r["path"]: r["kind"] for r in rows}
    factors = assumption_factors(data, str(path))
    assert factors
    for f in factors:
        assert f.why and len(f.why) > 20, f.name
        for leaf, value, lo, hi, _ in f.leaves:
            # a calibrated number follows from its target: it has no range of its own
            assert kinds[leaf] == "assumption", f"{path.name}: ranges.{f.name} covers {leaf} ({kinds[leaf]})"
            assert lo <= value <= hi, f"{path.name}: {leaf} = {value} outside its range [{lo}, {hi}]"


@pytest.mark.parametrize("path", MESHHEAL, ids=lambda p: p.stem)
def test_every_corner_of_the_ranges_is_a_valid_profile(path):
    """All factors low, all high, and each one alone at either end: the profile still
    loads (the classes of review.scores stay distributions)."""
    data = yaml.safe_load(path.read_text())
    factors = assumption_factors(data, str(path))
    corners = [{f.name: u for f in factors} for u in (0.0, 1.0)]
    corners += [{f.name: u} for f in factors for u in (0.0, 1.0)]
    for pos in corners:
        FakeProfile.model_validate(override_profile(data, factor_overrides(factors, pos)))


def test_explain_prints_ranges_and_the_factor_count():
    res = _runner().invoke(main, ["backends", "explain", "fake-default"])
    assert res.exit_code == 0, res.output
    data = yaml.safe_load((ROOT / "backends" / "fake-default.yaml").read_text())
    n = len(assumption_factors(data))
    assert f"{n} assumption factors" in res.output
    line = next(ln for ln in res.output.splitlines() if ln.strip().startswith("review.anchors.unverified "))
    assert "assumption" in line and "[0.5, 0.92]" in line
    line = next(ln for ln in res.output.splitlines() if ln.strip().startswith("models.strong.ttft "))
    assert "x[0.5, 2]" in line


def test_explain_exits_2_on_an_assumption_without_a_range(tmp_path):
    data = yaml.safe_load((ROOT / "backends" / "fake-default.yaml").read_text())
    del data["ranges"]["review.noise"]
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    res = _runner().invoke(main, ["backends", "explain", str(p)])
    assert res.exit_code == 2
    err = res.stderr if hasattr(res, "stderr") and res.stderr else res.output
    assert "review.noise" in err and "without a plausible range" in err
    # a range without a reason is refused too
    data["ranges"]["review.noise"] = {"low": 0.02, "high": 0.1}
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    res = _runner().invoke(main, ["backends", "explain", str(p)])
    assert res.exit_code == 2


# ------------------------------------------------------------------ review scores as a distribution


def _legacy(u: float, f: float, g: float) -> dict[str, dict[str, float]]:
    """The pre-issue-17 mechanism's distribution per class (uncritical, flag_error, sees_garbage)."""
    unv = {"sound": u, "error": (1 - u) * f, "unverified": (1 - u) * (1 - f)}
    return {"sound": {"sound": 1.0}, "wrong": {"error": 1.0}, "unverifiable": unv,
            "garbage": {"garbage": g, **{k: (1 - g) * v for k, v in unv.items()}}}


@pytest.mark.parametrize("role,legacy", [("strong", (0.245, 0.0, 0.9)), ("weak", (0.3, 0.2, 0.5))])
def test_default_distributions_are_the_former_mechanism(role, legacy):
    prof = load_fake_profile(ROOT / "backends" / "fake-default.yaml")
    want = _legacy(*legacy)
    for cls in CLASSES:
        got = score_distribution(prof.review, role, "contribute", cls)
        assert {k: v for k, v in got.items() if v} == pytest.approx({k: v for k, v in want[cls].items() if v})


def _review_req(seed: int, action: str = "contribute") -> Request:
    return Request(kind="review", agent="A1", model="strong", seed=seed,
                   task=TaskRef(index=1, id="t1", dataset="bbh", type="navigate"),
                   abilities=("spatial",), context={"action": action, "output_text": "x"})


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3), st.sampled_from(CLASSES))
def test_verdict_frequencies_follow_the_stated_distribution(ws, cls):
    """Drawn verdicts follow the table (stick-breaking over the listed order)."""
    tot = sum(ws) or 1.0
    probs = [w / tot * 0.9 for w in ws]
    table = {"sound": probs[0], "error": probs[1], "garbage": probs[2], "unverified": "rest"}
    data = yaml.safe_load((ROOT / "backends" / "fake-default.yaml").read_text())
    data["review"]["scores"]["strong"][cls] = table
    data["review"]["scores"]["strong"].pop("finalize", None)
    fb = FakeBackend(FakeProfile.model_validate(data), seed=1)
    n = 4000
    counts = dict.fromkeys(VERDICTS, 0)
    for i in range(n):
        counts[fb._draw_verdict(SplitMix64(i * 7919 + 1), "strong", "contribute", cls, _review_req(i))] += 1
    want = score_distribution(fb.profile.review, "strong", "contribute", cls)
    for v in VERDICTS:
        assert counts[v] / n == pytest.approx(want.get(v, 0.0), abs=0.035), (v, counts, want)


def test_common_share_makes_every_reader_agree():
    """A Finalize table with common: 1 gives every call on the same output the same verdict."""
    data = yaml.safe_load((ROOT / "backends" / "fake-default.yaml").read_text())
    data["review"]["scores"]["strong"]["finalize"]["sound"] = {"error": 0.3, "sound": "rest", "common": 1.0}
    fb = FakeBackend(FakeProfile.model_validate(data), seed=3)
    seen = set()
    for out in range(200):
        req = Request(kind="review", agent="A1", model="strong", seed=out,
                      task=TaskRef(index=out, id=f"t{out}", dataset="bbh", type="navigate"),
                      abilities=("spatial",), context={"action": "finalize", "output_text": f"out-{out}"})
        got = {fb._draw_verdict(SplitMix64(k), "strong", "finalize", "sound", req) for k in range(5)}
        assert len(got) == 1
        seen |= got
    assert seen == {"error", "sound"}  # outputs differ; the calls on one output agree


@pytest.mark.parametrize("table,msg", [
    ({"sound": 0.7, "error": 0.5}, "sum to 1.2"),
    ({"sound": 0.5, "error": 0.2}, "not 1"),
    ({"sound": 0.5, "maybe": 0.5}, "not a rubric verdict"),
    ({"sound": "rest", "error": "rest"}, "at most one 'rest'"),
    ({"sound": 0.5, "otherwise": "nothing"}, "must name a class"),
    ({"sound": 0.5, "error": "rest", "common": 2}, "common"),
])
def test_a_class_that_is_not_a_distribution_is_one_line(tmp_path, table, msg):
    data = yaml.safe_load((ROOT / "backends" / "fake-default.yaml").read_text())
    data["review"]["scores"]["weak"]["unverifiable"] = table
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(InputError) as e:
        load_fake_profile(p)
    assert msg in str(e.value) and "review.scores.weak.unverifiable" in str(e.value)


def test_otherwise_loops_and_the_former_review_block_are_refused(tmp_path):
    data = yaml.safe_load((ROOT / "backends" / "fake-default.yaml").read_text())
    data["review"]["scores"]["weak"]["unverifiable"] = {"sound": 0.5, "otherwise": "garbage"}
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(InputError, match="loops"):
        load_fake_profile(p)
    data = yaml.safe_load((ROOT / "backends" / "fake-default.yaml").read_text())
    data["models"]["weak"]["review"] = {"uncritical": 0.3, "flag_error": 0.2, "sees_garbage": 0.5}
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(InputError, match="review.scores") as e:
        load_fake_profile(p)
    assert "models.weak" in str(e.value)


def test_fit_recovers_the_unverifiable_distribution_from_binned_scores():
    """EM over the latent class: expected counts generated from a known table give it back."""
    from meshsim.backends.fit import _fit_unverifiable

    phi_r, phi_w = 0.1, 0.6
    U = {"sound": 0.3, "error": 0.14, "unverified": 0.56, "garbage": 0.0}
    obs = []
    for bucket, n, phi, own in (("correct", 2000, phi_r, "sound"), ("incorrect", 1000, phi_w, "error")):
        for v, p in U.items():
            k = round(n * (phi * p + (1 - phi) * (v == own)))
            obs += [(bucket, "contribute", v)] * k
    got, _ = _fit_unverifiable(obs, phi_r, phi_w, 0.0, False, iters=2000)
    assert got == pytest.approx(U, abs=0.01)
