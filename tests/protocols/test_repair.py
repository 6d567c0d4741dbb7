"""Repair at Finalize (issue 21, build item 2): a finalizer reading an unsound draft
re-derives the drafts' half itself with probability ``models.<m>.repair``
(MeshHeal App. A / Tab. A1: models solve unassigned abilities about as well as
assigned ones; docs/backends.md, "Repair at Finalize"), and every method's
final-answer calls go through that one rule (meshsim/backends/fake.py
``FakeBackend._final``)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

import meshsim
from meshsim.core.calls import Request, TaskRef
from meshsim.backends.fake import FakeBackend, load_fake_profile
from meshsim.backends.texts import Latent
from meshsim.protocols.baselines import METHODS

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "backends" / "fake-default.yaml"
N = 2000


def _backend(repair: float, strong_skill: float = 0.999, weak_skill: float = 0.001, seed: int = 3) -> FakeBackend:
    prof = load_fake_profile(DEFAULT).model_copy(deep=True)
    prof.models["strong"].skill = {"default": strong_skill}
    prof.models["weak"].skill = {"default": weak_skill}
    prof.models["strong"].repair = repair
    return FakeBackend(prof, seed=seed)


def _task(k: int, dataset: str = "math") -> TaskRef:
    # MATH: guess 0, so a broken chain is never right by chance
    return TaskRef(index=k, id=f"{dataset}/t/{k}", type="t", answer=None, required=("a", "b"), dataset=dataset)


def _draft(fb: FakeBackend, task: TaskRef, model: str, seed: int) -> tuple[str, bool]:
    r = fb.complete_sync(Request(kind="contribute", agent="A3", model=model, task=task, abilities=("a",),
                                 context={"required": ["a", "b"], "context_items": 0, "drafts": []}, seed=seed))
    return r.text, bool(r.correct)


def _finalize(fb: FakeBackend, task: TaskRef, drafts: list, seed: int, items: int | None = None,
              kind: str = "finalize") -> tuple[bool, bool]:
    """(final right, own half sound) of one final-answer call by a strong finalizer holding b."""
    ctx = {"required": ["a", "b"], "context_items": len(drafts) if items is None else items, "drafts": drafts}
    if kind != "finalize":
        ctx["action"] = "finalize"
    r = fb.complete_sync(Request(kind=kind, agent="A1", model="strong", task=task, abilities=("b",),
                                 context=ctx, seed=seed))
    got = fb.texts.get(task.id, r.text)
    return bool(r.correct), bool(got.correct)


def _rate_given_unsound(fb: FakeBackend, kind: str = "finalize") -> tuple[int, int]:
    """Right finals among calls whose own half is sound, each reading a weak writer's unsound draft."""
    right = n = 0
    for k in range(N):
        task = _task(k)
        text, ok = _draft(fb, task, "weak", seed=10_000 + k)
        if ok:
            continue
        final, own = _finalize(fb, task, [text], seed=50_000 + k, kind=kind)
        if own:
            n += 1
            right += final
    return right, n


def _within(right: int, n: int, p: float) -> bool:
    """Binomial: within 4 sd of p (deterministic seeds: a fixed outcome, the bound says it is not luck)."""
    sd = math.sqrt(max(p * (1 - p), 1e-4) / n)
    return abs(right / n - p) <= 4 * sd + 1e-9


@pytest.mark.parametrize("repair", [0.0, 0.5, 1.0])
def test_finalizer_repairs_an_unsound_draft_with_probability_repair(repair):
    """A strong finalizer (skill 0.999, so its own half and a re-derivation almost always succeed)
    reading a 1B writer's unsound draft commits the right answer with probability ~ repair."""
    fb = _backend(repair)
    right, n = _rate_given_unsound(fb)
    assert n > 0.9 * N
    expected = repair * 0.999  # the re-derivation of the draft's half succeeds with the finalizer's skill
    assert _within(right, n, expected), (repair, right, n)
    if repair == 0.0:
        assert right == 0  # the rule before issue 21: a broken draft breaks the final (MATH: no guess)


def test_repair_probability_is_per_model_the_finalizers_own():
    """The finalizer's model decides: a weak finalizer uses models.weak.repair, not the strong one's."""
    prof = load_fake_profile(DEFAULT).model_copy(deep=True)
    for role in ("strong", "weak"):
        prof.models[role].skill = {"default": 0.999}
    prof.models["strong"].repair, prof.models["weak"].repair = 1.0, 0.0
    fb = FakeBackend(prof, seed=5)
    got = {"strong": 0, "weak": 0}
    for k in range(300):
        task = _task(k)
        # the draft: an unusable half (what a 1B writer's failed derivation reads as)
        bad = fb.texts.put(task.id, 9_000_000 + k, Latent(correct=False, features=frozenset({"incoherent"})))
        for role in got:
            res = fb.complete_sync(Request(kind="finalize", agent="A1", model=role, task=task, abilities=("b",),
                                           context={"required": ["a", "b"], "context_items": 1, "drafts": [bad]},
                                           seed=20_000 * (role == "weak") + k))
            got[role] += bool(res.correct)
    assert got["weak"] == 0
    assert got["strong"] > 280


def test_a_missing_or_unreadable_draft_is_not_repaired():
    """Repair needs a draft it can read: a draft lost from the context (stale memory) or one that
    is not a text any model wrote (a failed call's empty text, a corrupted context) breaks the chain."""
    fb = _backend(1.0)
    for k in range(200):
        task = _task(k)
        assert _finalize(fb, task, [], seed=k, items=1)[0] is False  # context_items 1, no draft
        assert _finalize(fb, task, [""], seed=k)[0] is False  # an empty text
        assert _finalize(fb, task, ["<garbled 1234>"], seed=k)[0] is False


def test_a_sound_draft_needs_no_repair_and_draws_nothing():
    """With sound drafts the repair probability is never consulted: outputs are the same for any value."""
    a, b = _backend(0.0, weak_skill=0.999), _backend(1.0, weak_skill=0.999)
    for k in range(200):
        task = _task(k)
        ta, oka = _draft(a, task, "weak", seed=k)
        tb, okb = _draft(b, task, "weak", seed=k)
        assert (ta, oka) == (tb, okb)
        if oka:
            assert _finalize(a, task, [ta], seed=7 + k) == _finalize(b, task, [tb], seed=7 + k)


@pytest.mark.parametrize("kind", ["takeover_candidate", "synthesis"])
def test_every_call_committing_a_final_answer_follows_the_same_rule(kind):
    """A Takeover candidate for a Finalize output, and a synthesis of one, commit a final answer
    through the same rule (same call, same rule: MeshHeal's Takeover, SAC teams' refine)."""
    for repair in (0.0, 1.0):
        fb = _backend(repair)
        if kind == "synthesis":
            fb.profile.takeover.keep = {"contribute": 0.0, "finalize": 0.0}  # re-derive, never restate
            fb.profile.takeover.recognize = 0.0
        right, n = _rate_given_unsound(fb, kind=kind)
        assert n > 0.5 * N
        assert _within(right, n, repair * 0.999), (kind, repair, right, n)


def test_a_half_its_writer_failed_is_hard_for_the_repairing_finalizer_too():
    """The re-derivation goes through the task's shared difficulty (the copula): the finalizer
    repairs a strong writer's failed half (a hard one) far less often than a 1B writer's."""
    fb = _backend(1.0, strong_skill=0.9, weak_skill=0.03)
    rates = {}
    for writer in ("strong", "weak"):
        right = n = 0
        for k in range(6000):
            task = _task(100_000 * (writer == "weak") + k)
            text, ok = _draft(fb, task, writer, seed=k)
            if ok:
                continue
            final, own = _finalize(fb, task, [text], seed=300_000 + k)
            if own:
                n += 1
                right += final
        rates[writer] = right / n
    assert rates["weak"] > 0.8  # about the finalizer's skill: a 1B failure says little about the half
    assert rates["strong"] < rates["weak"] - 0.25


def test_shipped_profiles_state_repair_for_both_models():
    for name in ("fake-default", "fake-pair-a", "fake-pair-b"):
        prof = load_fake_profile(ROOT / "backends" / f"{name}.yaml")
        assert prof.models["strong"].repair > 0.9 and prof.models["weak"].repair < 0.1, name
        for role in ("strong", "weak"):
            assert prof.models[role].follow_rates == 1.0 and prof.models[role].follow_scores == 1.0


def test_every_method_finalizes_through_the_repair_rule(monkeypatch, tmp_path):
    """MeshHeal and every baseline: their final answers pass the same rule - each method's run
    consults it on finalizers facing an unsound draft, and some of those repairs succeed."""
    seen: list = []
    orig = FakeBackend._repaired

    def spy(self, req, rnd):
        ok = orig(self, req, rnd)
        seen.append((req.kind, req.model, ok))
        return ok

    monkeypatch.setattr(FakeBackend, "_repaired", spy)
    compare = ROOT / "scenarios" / "compare" / "persistent-bbh.yaml"
    by_method = {}
    for m in METHODS:
        seen.clear()
        sc = meshsim.load_scenario(compare, [] if m == "meshheal" else [f"protocol={{name: {m}}}"], smoke=True)
        meshsim.run(sc, seed=2, out=tmp_path / m)
        by_method[m] = list(seen)
    for m, calls in by_method.items():
        assert calls, f"{m}: no final answer met an unsound draft"
        assert {kind for kind, _, _ in calls} <= {"finalize", "takeover_candidate", "synthesis"}, m
    assert sum(ok for calls in by_method.values() for _, _, ok in calls) > 0
