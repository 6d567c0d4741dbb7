"""Statistical fake for consensus tasks (SAC, CP-WBFT), calibrated to the SAC paper.

Like :mod:`.fake` it never waits and never talks to a network: each call's
outcome follows from the profile's numbers, the call's own seed and a
*difficulty* shared by every call on the same query (so a query that is hard
for one agent is hard for all, and wrong answers cluster on hard queries).
Difficulties are stratified over blocks of ``STRATA`` consecutive queries, so
a run's initial accuracies sit close to the profile's numbers on every seed.

Answer space (``TaskRef.choices`` empty: free-form numeric answers; else one
of the choices). Every query has a fixed, ranked list of *distractors* — the
wrong answers models actually give — drawn with Zipf weights ``1/k^zipf``, so
two wrong agents often give the *same* wrong answer (majority votes can be
wrong, and "wrong but equal" answers reinforce each other in consensus).

Call kinds (``Request.kind``; the caller's model role is ``Request.model``):

* ``sac_answer`` — correct with the model's accuracy for the dataset through
  a Gaussian copula on the query difficulty (correlation ``difficulty_rho``);
  a wrong answer is a distractor. ``context['attack']``: ``"ood"`` returns a
  cached answer to an out-of-distribution query (equal to the truth with
  probability ``ood_hit``; its text is about another question: latent
  ``ood``); ``"plausible_wrong"`` returns distractor number ``context['rank']``
  (the most common wrong answer for rank 0).
* ``sac_score`` — phi_i(x, r): the scorer *verifies* the response (success
  with probability ``score.<role>.verify`` through the same copula); a
  verified response is scored from the ``correct`` / ``incorrect`` / ``ood``
  distribution; an unverified one is judged by agreement with the scorer's
  own current answer (``context['own_answer']``). Answers equal to the
  scorer's own get ``own_bias`` on top (self-preference). Scores are clipped
  to [0, 1] and rounded to ``granularity``; with probability ``parse_fail``
  the reply has no number (``fields['score'] = None``).
* ``sac_refine`` — the model weighs its own answer (``anchor`` x self-score)
  and each retained response (its score) by answer, and picks answer ``a``
  with probability proportional to ``support(a) ** sharpness``; with
  probability ``parse_fail`` no answer can be extracted.
* ``cpwbft_aggregate`` — the same with sender-reported confidences as
  weights (responses visibly about another question count ``ood_weight``),
  except that the model adopts the most confident answer (if at least as
  confident as its own) with probability ``follow_max / k``, k being the
  number of different answers sharing that top confidence (the "select
  high-confidence responses" behaviour the SAC paper attributes to CP-WBFT;
  conflicting 1.0 claims persuade less).
* tokens: per-kind prompt base + per-context-item growth, completion drawn
  around the kind's mean.

Calibration targets and how each number was set: ``docs/sac.md``.
"""
from __future__ import annotations

import math
import random
from pathlib import Path
from statistics import NormalDist
from typing import Annotated, Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from ..errors import InputError
from .profiles import hash_unit, load_validated, model_role
from .base import Backend, LatencyModel, Request, Response, TaskRef
from .fake import ModelSpec, TokenSpec
from .texts import Latent, TextStore

__all__ = ["ConsensusFakeBackend", "ConsensusProfile", "load_consensus_profile"]

_N = NormalDist()
STRATA = 50  # queries per difficulty stratum block
P = Annotated[float, Field(ge=0.0, le=1.0)]
Pos = Annotated[float, Field(ge=0.0)]
MeanSd = tuple[P, Pos]


class _S(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DatasetAcc(_S):
    strong: P
    weak: P
    #: P(an adversary's cached out-of-distribution answer equals the truth);
    #: None: 0 for numeric answers, 1/len(choices) for multiple choice.
    ood_hit: Optional[P] = None


class ScoreSpec(_S):
    verify: P
    correct: MeanSd
    incorrect: MeanSd
    ood: MeanSd
    own_bias: float = 0.0
    parse_fail: P = 0.0
    #: share of the non-difficulty variance of "can verify" that is the scorer's
    #: lasting view of the query (same every round) rather than per-call noise
    persist: P = 0.0


class RefineSpec(_S):
    anchor: Pos = 1.0
    sharpness: Pos = 2.0
    parse_fail: P = 0.0


class AggregateSpec(RefineSpec):
    follow_max: P = 0.0
    #: weight factor of a response that is visibly about another question
    #: (an adversary's out-of-distribution replay) in the weighted part
    ood_weight: P = 1.0


class WrongSpec(_S):
    distractors: Annotated[int, Field(ge=1)] = 6  # numeric answers: how many distinct wrong answers
    zipf: Pos = 1.0  # weight of the k-th distractor: 1 / k^zipf


class ConsensusProfile(_S):
    kind: str = "fake_consensus"
    name: str
    description: str = ""
    models: dict[str, ModelSpec]
    accuracy: dict[str, DatasetAcc]  # per dataset name, "default" as fallback
    difficulty_rho: P = 0.5
    wrong: WrongSpec = WrongSpec()
    granularity: Annotated[float, Field(ge=0, le=0.5)] = 0.05
    score: dict[str, ScoreSpec]
    refine: dict[str, RefineSpec]
    aggregate: dict[str, AggregateSpec]
    tokens: dict[str, TokenSpec]
    #: where each number comes from (meshsim.backends.provenance; `meshsim backends explain`)
    sources: dict[str, str] = {}


def load_consensus_profile(path: str | Path) -> ConsensusProfile:
    path = Path(path)
    prof = load_validated(path, ConsensusProfile)
    if prof.kind != "fake_consensus":
        raise InputError("not a fake_consensus profile", file=str(path), field="kind", value=prof.kind)
    for section in ("models", "score", "refine", "aggregate"):
        for role in ("strong", "weak"):
            if role not in getattr(prof, section):
                raise InputError(f"profile needs '{section}.{role}'", file=str(path), field=section)
    if "default" not in prof.accuracy:
        raise InputError("profile needs 'accuracy.default'", file=str(path), field="accuracy")
    return prof


_hash_unit = hash_unit
_role = model_role


class ConsensusFakeBackend(Backend):
    synchronous = True

    def __init__(self, profile: ConsensusProfile, seed: int = 0):
        self.profile = profile
        self.seed = seed
        self.name = f"fake_consensus:{profile.name}"
        self._lat = {role: LatencyModel(m.ttft, m.rate) for role, m in profile.models.items()}
        self._z: dict[str, float] = {}
        self._strata: dict[int, list[int]] = {}
        self._distractors: dict[str, tuple[list[str], list[float]]] = {}
        self.texts = TextStore("fake")

    # -- interface -----------------------------------------------------------
    def latency_model(self, model: str) -> LatencyModel:
        return self._lat.get(_role(model), self._lat["strong"])

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "models": {k: v.id for k, v in self.profile.models.items()}}

    def complete_sync(self, req: Request) -> Response:
        rnd = random.Random(req.seed)
        fn = getattr(self, "_" + req.kind, None)
        if fn is None or req.task is None:
            return Response(error=f"fake_consensus backend has no model of call kind {req.kind!r}")
        fields, correct = fn(req, rnd)
        text = ""
        latent = fields.pop("_latent", None)
        if latent is not None:
            text = self.texts.put(req.task.id, req.seed, latent)
        pt, ct = self._tokens(req, rnd)
        return Response(text=text, fields=fields, correct=correct, prompt_tokens=pt, completion_tokens=ct)

    def grade(self, task: TaskRef, text: str, action: Optional[str] = None) -> Optional[bool]:
        got = self.texts.get(task.id, text)
        return got.correct if got is not None else None

    def forget(self, task_id: str) -> None:
        self.texts.forget(task_id)

    def _features(self, req: Request, text: Any) -> frozenset:
        got = self.texts.get(req.task.id, text)
        return got.features if got is not None else frozenset()

    def _answered(self, req: Request, a: Optional[str], features: frozenset = frozenset()):
        truth = str(req.task.answer)
        return {"answer": a, "_latent": Latent(correct=a == truth, answer=a, features=features)}, a == truth

    # -- the answer space ------------------------------------------------------
    def accuracy(self, model: str, dataset: str) -> DatasetAcc:
        return self.profile.accuracy.get(dataset) or self.profile.accuracy["default"]

    def _difficulty(self, task) -> float:
        """The query's difficulty (a standard normal), stratified over blocks of
        ``STRATA`` consecutive queries so that every block spans the whole
        difficulty range once (a benchmark's difficulty mix, with less
        seed-to-seed noise in initial accuracy than independent draws)."""
        z = self._z.get(task.id)
        if z is None:
            block, pos = divmod(max(task.index, 1) - 1, STRATA)
            perm = self._strata.get(block)
            if perm is None:
                perm = self._strata[block] = list(range(STRATA))
                random.Random(int(_hash_unit(self.seed, "strata", block) * 2 ** 52)).shuffle(perm)
            u = (perm[pos] + _hash_unit(self.seed, "difficulty", task.id)) / STRATA
            z = self._z[task.id] = _N.inv_cdf(u)
        return z

    def _succeeds(self, task, p: float, rnd: random.Random, agent: str = "", persist: float = 0.0) -> bool:
        """A Gaussian-copula draw with marginal ``p``: the query's difficulty (share
        ``difficulty_rho``), then the agent's own lasting view of the query (share
        ``persist`` of the rest), then this call's noise."""
        p = min(0.999, max(0.001, p))
        rho = self.profile.difficulty_rho
        z = math.sqrt(rho) * self._difficulty(task)
        if persist:
            u = _N.inv_cdf(_hash_unit(self.seed, "view", agent, task.id))
            z += math.sqrt((1 - rho) * persist) * u
        z += math.sqrt((1 - rho) * (1 - persist)) * rnd.gauss(0.0, 1.0)
        return z < _N.inv_cdf(p)

    def distractors(self, task) -> tuple[list[str], list[float]]:
        """The query's wrong answers, most common first, and their weights."""
        got = self._distractors.get(task.id)
        if got is not None:
            return got
        truth = str(task.answer)
        if task.choices:
            wrong = [c for c in task.choices if c != truth]
            wrong.sort(key=lambda c: _hash_unit(self.seed, "distractor", task.id, c))
        else:
            wrong = []
            base = _int_of(truth)
            k = 0
            while len(wrong) < self.profile.wrong.distractors:
                k += 1
                u = _hash_unit(self.seed, "distractor", task.id, k)
                # near misses (sign, off-by-one, factor slips) and a few far ones
                cand = base + int(round((u - 0.5) * (20 if k % 3 else 400)))
                s = str(cand)
                if s != truth and s not in wrong:
                    wrong.append(s)
        weights = [1.0 / (k + 1) ** self.profile.wrong.zipf for k in range(len(wrong))]
        got = self._distractors[task.id] = (wrong, weights)
        return got

    def _wrong(self, task, rnd: random.Random) -> str:
        wrong, weights = self.distractors(task)
        return rnd.choices(wrong, weights=weights)[0]

    def _ood_answer(self, task, rnd: random.Random) -> str:
        acc = self.accuracy("weak", task.dataset)
        truth = str(task.answer)
        hit = acc.ood_hit
        if hit is None:
            hit = 1.0 / len(task.choices) if task.choices else 0.0
        if rnd.random() < hit:
            return truth
        if task.choices:
            wrong = [c for c in task.choices if c != truth]
            return wrong[rnd.randrange(len(wrong))]
        while True:  # an answer to some other problem: not one of this query's distractors
            s = str(rnd.randrange(1000, 100000))
            if s != truth and s not in self.distractors(task)[0]:
                return s

    # -- call kinds ------------------------------------------------------------
    def _sac_answer(self, req: Request, rnd: random.Random):
        task = req.task
        truth = str(task.answer)
        attack = req.context.get("attack")
        weak = _role(req.model) == "weak"
        if attack == "ood":
            # a cached answer to another question: visibly off-topic to a reader
            return self._answered(req, self._ood_answer(task, rnd), frozenset({"off_topic"}))
        if attack == "plausible_wrong":
            wrong = self.distractors(task)[0]
            return self._answered(req, wrong[int(req.context.get("rank", 0)) % len(wrong)])
        acc = self.accuracy(req.model, task.dataset)
        p = acc.weak if weak else acc.strong
        return self._answered(req, truth if self._succeeds(task, p, rnd) else self._wrong(task, rnd))

    def _sac_score(self, req: Request, rnd: random.Random):
        spec = self.profile.score[_role(req.model)]
        ctx = req.context
        resp = ctx.get("response") or {}
        answer = resp.get("answer")
        off_topic = "off_topic" in self._features(req, resp.get("text"))
        own = ctx.get("own_answer")
        truth = str(req.task.answer)
        if rnd.random() < spec.parse_fail:
            return {"score": None}, None
        if self._succeeds(req.task, spec.verify, rnd, req.agent, spec.persist):
            dist = spec.ood if off_topic else (spec.correct if answer == truth else spec.incorrect)
        else:  # cannot verify: judged by agreement with the scorer's own answer
            dist = spec.correct if (answer is not None and answer == own) else spec.incorrect
        mean, sd = dist
        if answer is not None and answer == own:
            mean += spec.own_bias
        return {"score": self._clip(rnd.gauss(mean, sd))}, None

    def _clip(self, x: float) -> float:
        g = self.profile.granularity
        x = min(1.0, max(0.0, x))
        return round(round(x / g) * g, 4) if g else round(x, 4)

    def _choose(self, own: Optional[str], own_w: float, peers: list[tuple[str, float]], spec: RefineSpec,
                rnd: random.Random) -> Optional[str]:
        support: dict[str, float] = {}
        if own is not None:
            support[own] = spec.anchor * own_w
        for a, w in peers:
            if a is not None:
                support[a] = support.get(a, 0.0) + w
        if not support:
            return own
        cands = sorted(support)
        weights = [max(support[a], 1e-9) ** spec.sharpness for a in cands]
        return rnd.choices(cands, weights=weights)[0]

    def _sac_refine(self, req: Request, rnd: random.Random):
        spec = self.profile.refine[_role(req.model)]
        ctx = req.context
        if rnd.random() < spec.parse_fail:
            return {"answer": None}, None
        own = ctx.get("own") or {}
        peers = [(r.get("answer"), float(r.get("score", 0.0))) for r in ctx.get("retained", [])]
        a = self._choose(own.get("answer"), float(own.get("score", 0.5)), peers, spec, rnd)
        return self._answered(req, a)

    def _cpwbft_aggregate(self, req: Request, rnd: random.Random):
        spec = self.profile.aggregate[_role(req.model)]
        ctx = req.context
        if rnd.random() < spec.parse_fail:
            return {"answer": None}, None
        own = ctx.get("own") or {}
        raw = ctx.get("peers", [])
        peers = [(r.get("answer"), float(r.get("confidence", 0.0))) for r in raw]
        own_a, own_c = own.get("answer"), float(own.get("confidence", 0.5))
        top = max((c for _, c in peers), default=0.0)
        best = sorted({a for a, c in peers if c == top and a is not None})
        if best and top >= own_c and rnd.random() < spec.follow_max / len(best):
            a = best[rnd.randrange(len(best))]  # adopt the most confident answer (less often when they disagree)
        else:  # not persuaded: weigh them all
            weighed = [(a, c * (spec.ood_weight if "off_topic" in self._features(req, r.get("text")) else 1.0))
                       for (a, c), r in zip(peers, raw)]
            a = self._choose(own_a, own_c, weighed, spec, rnd)
        return self._answered(req, a)

    def _tokens(self, req: Request, rnd: random.Random) -> tuple[int, int]:
        spec = self.profile.tokens.get(req.kind) or self.profile.tokens.get("default")
        if spec is None:
            return 0, 0
        items = int(req.context.get("context_items", 0))
        prompt = spec.prompt + spec.per_context * items
        completion = int(round(spec.completion * math.exp(rnd.gauss(0.0, spec.spread) - spec.spread ** 2 / 2)))
        return prompt, max(1, completion)


def _int_of(text: str) -> int:
    try:
        return int(float(text))
    except ValueError:
        return int(_hash_unit("int", text) * 1000)
