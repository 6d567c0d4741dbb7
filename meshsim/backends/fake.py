"""Statistical model-backed fakes, calibrated to the MeshHeal paper.

A fake never waits and never talks to a network: it decides each call's
outcome from the profile's numbers, the call's own seed and a *task
difficulty* shared by every call on the same (task, ability), so that a
question that is hard for one strong call is hard for the others too (wrong
outputs that reach Takeover are the hard ones, as in App. C.5).

Outcomes by call kind (``Request.kind``):

* ``infer_abilities``: the true pair with probability ``infer.<model>``, else
  another documented pair (``context['pairs']``).
* ``contribute`` / ``finalize``: the produced half is correct with the
  model's accuracy for (dataset, task type) through a Gaussian copula on the
  task difficulty (correlation ``difficulty_rho``). A finalize answer is
  correct when its half is, every earlier half was (or the finalizer repairs
  a wrong draft: ``finalize.repair``), and the route covered the true pair.
* ``review`` / ``committee_round``: a score drawn around the reviewer
  model's mean for correct / incorrect outputs plus a per-task-type offset
  (so absolute scores differ across types and model pairs), clipped to [0, 1]
  and rounded to the rubric's granularity. Round 2 moves toward the other
  reviewer's round-1 score and toward the model's view of the truth.
* ``takeover_candidate``: correct with the writer's accuracy (same copula);
  ``synthesis``: correct with ``takeover.synthesis[k]`` for k correct
  candidates (the original answer kept if it was right, except with
  probability ``takeover.break``).
* tokens: per-kind prompt base + per-context-item growth, completion drawn
  around the kind's mean.
"""
from __future__ import annotations

import hashlib
import math
import random
from pathlib import Path
from statistics import NormalDist
from typing import Annotated, Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import InputError
from .profiles import hash_unit, load_validated, model_role
from .base import Backend, CallKind, LatencyModel, Request, Response, TaskRef
from .texts import Latent, TextStore

__all__ = ["FakeBackend", "FakeProfile", "load_fake_profile"]

_N = NormalDist()
P = Annotated[float, Field(ge=0.0, le=1.0)]


class _S(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSpec(_S):
    id: str
    ttft: Annotated[float, Field(ge=0)] = 0.5
    rate: Annotated[float, Field(gt=0)] = 60.0


class Acc(_S):
    strong: P
    weak: P
    types: dict[str, float] = {}  # additive offsets per task type
    #: absolute accuracy per task type and model role (``backends fit`` writes
    #: these); wins over ``strong``/``weak`` + ``types`` where given
    by_type: dict[str, dict[Literal["strong", "weak"], P]] = {}


class ScoreDist(_S):
    """Score (mean, sd) by the reviewed output's latent correctness; ``weak_incorrect``
    is for wrong outputs written by a weak model (garbage is easy to spot;
    a strong model's slip is not)."""

    correct: tuple[P, Annotated[float, Field(ge=0)]]  # mean, sd
    incorrect: tuple[P, Annotated[float, Field(ge=0)]]
    weak_incorrect: Optional[tuple[P, Annotated[float, Field(ge=0)]]] = None

    def pick(self, correct: bool, weak_output: bool) -> tuple[float, float]:
        if correct:
            return self.correct
        if weak_output and self.weak_incorrect is not None:
            return self.weak_incorrect
        return self.incorrect


class ReviewSpec(_S):
    strong: ScoreDist
    weak: ScoreDist
    type_offset_sd: Annotated[float, Field(ge=0)] = 0.03
    granularity: Annotated[float, Field(ge=0, le=0.5)] = 0.05
    #: P(one call scores a sound output 0): LLM judges sometimes anchor on a
    #: misreading; the median of three absorbs it, the sample sd flags it
    #: (s_u >= sigma_com triggers a committee).
    outlier: dict[str, P] = {"strong": 0.0, "weak": 0.0}


class CommitteeSpec(_S):
    agree_pull: P = 0.4
    truth_pull: dict[str, P] = {"strong": 0.5, "weak": 0.1}
    sd: Annotated[float, Field(ge=0)] = 0.05
    #: where round 2 settles for weak-model garbage after the exchange of
    #: explanations (None: the initial review mean). Deliberation moderates the
    #: harshest scores while keeping them below tau_to (App. C.5: the committee
    #: still flags 0.95 of degraded outputs).
    weak_incorrect_target: Optional[P] = None


class TakeoverSpec(_S):
    synthesis: tuple[P, P, P] = (0.1, 0.5, 0.85)  # P(correct) with 0, 1, 2 correct candidates
    break_: P = Field(0.03, alias="break")


class TokenSpec(_S):
    prompt: Annotated[int, Field(ge=0)]
    completion: Annotated[int, Field(ge=0)]
    per_context: Annotated[int, Field(ge=0)] = 0  # prompt tokens per context item (earlier outputs, ...)
    spread: Annotated[float, Field(ge=0)] = 0.25  # lognormal sigma of completion length


class FakeProfile(_S):
    kind: str = "fake"
    name: str
    description: str = ""
    models: dict[str, ModelSpec]
    accuracy: dict[str, Acc]  # per dataset name, "default" as fallback
    difficulty_rho: P = 0.6
    infer: dict[str, P] = {"strong": 0.97, "weak": 0.6}
    finalize_repair: dict[str, P] = {"strong": 0.1, "weak": 0.0}
    #: P(the finalizer's combination step goes wrong although its own half is
    #: right): an error the half-scoped Finalize review does not see (App. D.1).
    combine_error: dict[str, P] = {"strong": 0.0, "weak": 0.0}
    #: False (the paper calibration): a finalize or synthesis outcome is composed
    #: with the drafts and the route under it. True (profiles fitted from real
    #: runs, where an observer grades the final text): the drawn outcome is the
    #: task's outcome, with the per-type accuracy of graded final answers.
    graded: bool = False
    review: ReviewSpec
    committee: CommitteeSpec = CommitteeSpec()
    takeover: TakeoverSpec = TakeoverSpec()
    tokens: dict[str, TokenSpec]
    #: where each number comes from (meshsim.backends.provenance; `meshsim backends explain`)
    sources: dict[str, str] = {}


def load_fake_profile(path: str | Path) -> FakeProfile:
    path = Path(path)
    prof = load_validated(path, FakeProfile)
    for role in ("strong", "weak"):
        if role not in prof.models:
            raise InputError(f"profile needs a '{role}' model", file=str(path), field="models")
    if "default" not in prof.accuracy:
        raise InputError("profile needs 'accuracy.default'", file=str(path), field="accuracy")
    return prof


_M64 = (1 << 64) - 1


class SplitMix64:
    """A tiny deterministic PRNG for one call (seeding ``random.Random`` costs
    ~5 µs, more than the whole fake call; SplitMix64 seeds for free)."""

    __slots__ = ("s",)

    def __init__(self, seed: int):
        self.s = seed & _M64

    def random(self) -> float:
        self.s = z = (self.s + 0x9E3779B97F4A7C15) & _M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        return ((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0)

    def gauss(self, mu: float, sigma: float) -> float:
        u1 = self.random() or 5e-324
        return mu + sigma * math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * self.random())

    def randrange(self, n: int) -> int:
        return min(n - 1, int(self.random() * n))


_hash_unit = hash_unit
_role = model_role


class FakeBackend(Backend):
    synchronous = True

    def __init__(self, profile: FakeProfile, seed: int = 0, draw: int = 0):
        self.profile = profile
        # draw k > 0: an independent realisation of the model's outcomes on the
        # same run (same stream, same agents' choices); 0 keeps the run seed's own
        self.seed = seed if not draw else int(hashlib.blake2b(f"{seed}/{draw}".encode(), digest_size=8)
                                              .hexdigest(), 16)
        self._mix = 0 if not draw else self.seed
        self.name = f"fake:{profile.name}"
        self._lat = {role: LatencyModel(m.ttft, m.rate) for role, m in profile.models.items()}
        self._offsets: dict[tuple[str, str], float] = {}
        self._difficulty: dict[tuple[str, str], float] = {}
        self.texts = TextStore("fake")

    # -- interface -----------------------------------------------------------
    def latency_model(self, model: str) -> LatencyModel:
        return self._lat.get(_role(model), self._lat["strong"])

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "models": {k: v.id for k, v in self.profile.models.items()}}

    def complete_sync(self, req: Request) -> Response:
        rnd = SplitMix64(req.seed ^ self._mix)
        kind = req.kind
        fn = getattr(self, "_" + kind, None)
        if fn is None:
            return Response(error=f"fake backend has no model of call kind {kind!r}")
        fields, correct = fn(req, rnd)
        text = ""
        latent = fields.pop("_latent", None)
        if latent is not None:
            text = self.texts.put(req.task.id if req.task else "", req.seed, latent)
        pt, ct = self._tokens(kind, req, rnd)
        return Response(text=text, fields=fields, correct=correct, prompt_tokens=pt, completion_tokens=ct)

    def grade(self, task: TaskRef, text: str, action: Optional[str] = None) -> Optional[bool]:
        got = self.texts.get(task.id, text)
        if got is None:
            return None if action == "contribute" else False
        return got.final if got.final is not None else got.correct

    def forget(self, task_id: str) -> None:
        self.texts.forget(task_id)

    def _read(self, req: Request, text: Any) -> Latent:
        """Reading a text given in the prompt (an output under review, a draft, a candidate)."""
        return self.texts.read(req.task.id if req.task else "", text)

    # -- pieces ----------------------------------------------------------------
    def accuracy(self, model: str, dataset: str, task_type: str) -> float:
        acc = self.profile.accuracy.get(dataset) or self.profile.accuracy["default"]
        role = _role(model)
        fixed = acc.by_type.get(task_type, {}).get(role)
        if fixed is not None:
            return min(0.999, max(0.001, fixed))
        base = acc.strong if role == "strong" else acc.weak
        return min(0.999, max(0.001, base + acc.types.get(task_type, 0.0)))

    def _z_task(self, req: Request, ability: str) -> float:
        key = (req.task.id if req.task else "", ability)
        z = self._difficulty.get(key)
        if z is None:
            z = self._difficulty[key] = _N.inv_cdf(_hash_unit(self.seed, "difficulty", *key))
        return z

    def _solves(self, req: Request, rnd: random.Random, ability: str) -> bool:
        t = req.task
        acc = self.accuracy(req.model, t.dataset if t else "", t.type if t else "")
        rho = self.profile.difficulty_rho
        z = math.sqrt(rho) * self._z_task(req, ability) + math.sqrt(1 - rho) * rnd.gauss(0.0, 1.0)
        return z < _N.inv_cdf(acc)

    def _offset(self, model: str, task_type: str) -> float:
        key = (_role(model), task_type)
        off = self._offsets.get(key)
        if off is None:
            sd = self.profile.review.type_offset_sd
            u = _hash_unit(self.seed, "offset", *key)
            off = self._offsets[key] = _N.inv_cdf(u) * sd if sd else 0.0
        return off

    def _score(self, req: Request, rnd: random.Random, out: Latent) -> float:
        dist = getattr(self.profile.review, _role(req.model))
        mean, sd = dist.pick(out.correct, "incoherent" in out.features)
        mean += self._offset(req.model, req.task.type if req.task else "")
        x = rnd.gauss(mean, sd)
        if mean >= 0.5 and rnd.random() < self.profile.review.outlier.get(_role(req.model), 0.0):
            x = 0.0  # a sound output misread as broken (garbage is rarely misread as sound)
        return self._clip(x)

    def _clip(self, x: float) -> float:
        g = self.profile.review.granularity
        x = min(1.0, max(0.0, x))
        return round(round(x / g) * g, 4) if g else x

    # -- call kinds ------------------------------------------------------------
    def _infer_abilities(self, req, rnd):
        truth = tuple(req.task.required) if req.task else ()
        pairs = [tuple(p) for p in req.context.get("pairs", [])] or [truth]
        p_ok = self.profile.infer.get(_role(req.model), 0.9)
        if rnd.random() < p_ok or len(pairs) < 2:
            pair = truth
        else:
            others = [p for p in pairs if set(p) != set(truth)]
            pair = others[rnd.randrange(len(others))] if others else truth
        return {"pair": list(pair)}, set(pair) == set(truth)

    def _features(self, req: Request, ok: bool) -> frozenset:
        # a weak model's wrong output reads as garbage; a strong model's slip does not
        return frozenset({"incoherent"}) if (not ok and _role(req.model) == "weak") else frozenset()

    def _route_ok(self, req: Request) -> bool:
        """Did the route cover the true pair? The finalizer's prompt names the
        inferred requirement (``context['required']``); the task's truth is the fake's."""
        req_ab = req.context.get("required")
        if req_ab is None or req.task is None or not req.task.required:
            return True
        return set(req_ab) == set(req.task.required)

    def _drafts_ok(self, req: Request) -> bool:
        return all(self._read(req, d).correct for d in req.context.get("drafts") or ())

    def _contribute(self, req, rnd):
        ability = req.abilities[0] if req.abilities else ""
        # The half is judged against what was asked of it; a wrong inferred
        # pair hurts the final answer (route_ok), not this half.
        ok = self._solves(req, rnd, ability)
        return {"_latent": Latent(correct=ok, features=self._features(req, ok))}, ok

    def _finalize(self, req, rnd):
        ability = req.abilities[0] if req.abilities else ""
        ok = self._solves(req, rnd, ability)
        feats = self._features(req, ok)
        if self.profile.graded:
            # the drawn outcome is the task's (how `backends fit` tells a graded recording)
            return {"_latent": Latent(correct=ok, final=ok, features=feats), "graded": True}, ok
        drafts_ok = self._drafts_ok(req)
        route_ok = self._route_ok(req)
        final = ok and (drafts_ok or rnd.random() < self.profile.finalize_repair.get(_role(req.model), 0.0))
        if final and rnd.random() < self.profile.combine_error.get(_role(req.model), 0.0):
            final = False
        if not route_ok:
            final = final and rnd.random() < self.accuracy("weak", req.task.dataset, req.task.type)
        return {"_latent": Latent(correct=ok, final=final, features=feats)}, final

    def _review(self, req, rnd):
        return {"score": self._score(req, rnd, self._read(req, req.context.get("output_text")))}, None

    def _committee_round(self, req, rnd):
        ctx = req.context
        out = self._read(req, ctx.get("output_text"))
        correct = out.correct
        incoherent = "incoherent" in out.features
        if ctx.get("round", 1) == 1:
            return {"score": self._score(req, rnd, out), "explanation": ""}, None
        own, other = float(ctx["own"]), float(ctx["other"])
        c = self.profile.committee
        dist = getattr(self.profile.review, _role(req.model))
        weak_garbage = not correct and incoherent
        target = dist.pick(correct, incoherent)[0]
        if weak_garbage and c.weak_incorrect_target is not None and _role(req.model) == "strong":
            target = c.weak_incorrect_target
        v = own + c.agree_pull * (other - own) + c.truth_pull.get(_role(req.model), 0.0) * (target - own)
        return {"score": self._clip(v + rnd.gauss(0.0, c.sd))}, None

    def _takeover_candidate(self, req, rnd):
        ability = req.abilities[0] if req.abilities else ""
        ok = self._solves(req, rnd, ability)
        return {"_latent": Latent(correct=ok, features=self._features(req, ok))}, ok

    def _synthesis(self, req, rnd):
        cands = [self._read(req, c) for c in req.context.get("candidates") or ()]
        k = min(2, sum(1 for c in cands if c.correct))
        p = self.profile.takeover.synthesis[k]
        ok = rnd.random() < p
        if self._read(req, req.context.get("output_text")).correct and rnd.random() >= self.profile.takeover.break_:
            ok = True
        final = None
        if req.context.get("action") == "finalize":
            # graded: the synthesis text is the task's outcome; otherwise it is
            # only as good as the drafts and the route under it
            final = ok if self.profile.graded else bool(ok and self._drafts_ok(req) and self._route_ok(req))
        fields: dict[str, Any] = {"_latent": Latent(correct=ok, final=final, features=self._features(req, ok))}
        if self.profile.graded and final is not None:
            fields["graded"] = True
        return fields, (final if final is not None else ok)

    def _tokens(self, kind: str, req: Request, rnd: random.Random) -> tuple[int, int]:
        spec = self.profile.tokens.get(kind) or self.profile.tokens.get("default")
        if spec is None:
            return 0, 0
        items = int(req.context.get("context_items", 0))
        prompt = spec.prompt + spec.per_context * items
        completion = int(round(spec.completion * math.exp(rnd.gauss(0.0, spec.spread) - spec.spread ** 2 / 2)))
        return prompt, max(1, completion)
