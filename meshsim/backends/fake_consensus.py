"""Statistical fake for consensus tasks (SAC, CP-WBFT): single LLM calls as
conditional distributions (papers/sac-2605.09076.md; docs/sac.md "Behaviour model").

Each call kind is a conditional distribution of what one call of a model
returns, given the query, the calling model (``Request.model``: strong or
weak) and what the prompt shows; it never reads another agent's role, the
call's purpose in the protocol, or anything the real prompt lacks. Only the
per-group initial accuracies are calibrated (paper: Tab. 1-5, 11-12 Init /
IAA columns); every other number is an ``assumption`` with a range
(``sources:`` and ``ranges:`` in the profile, ``meshsim backends explain
sac-default``).

**Behaviour per model** (issue 17). Accuracy is per (dataset, role); how a
model scores, refines and states confidence belongs to the model itself, so
``score``, ``refine``, ``confidence`` and ``aggregate`` are keyed by model and
``pairs`` names the model playing each role on each dataset (paper Sec. 5.2:
gpt-4o-mini / gpt-3.5-turbo on MATH level 4, Qwen3-4B / Qwen2.5-1.5B-Instruct
on MATH-500, ...). A profile without ``pairs`` keys them by role.

**Latent correctness** (every solve, including the ones inside φ and
refine). A query has a difficulty D (standard normal, stratified over blocks
of ``STRATA`` queries); a model has a lasting view V of each query (a
standard normal per (model, query), the same for every agent running that
model: same weights, same prompt, the authors sample at temperature 0.1 with
a fixed seed); each call adds its own noise e. A solve is correct iff
``sqrt(d) D + sqrt(p_m) V + sqrt(1 - d - p_m) e < inv_Phi(acc)``, so its
marginal accuracy is ``acc`` (the calibrated number) whatever d and p_m are;
d (``latent.difficulty``) sets how much models agree on which queries are
hard, p_m (``latent.persist``) how often the same model repeats itself.

**Wrong answers** come from the query's ranked distractors (numeric: near
misses and a few far ones; choices: the other options) with weights
1/k^``wrong.zipf``, picked through the model's lasting view as well, so two
wrong agents often agree and a model that is wrong twice is mostly wrong the
same way.

Call kinds:

* ``sac_answer`` — a solve with the model's accuracy for the dataset.
  Byzantine material (``context['attack']``): ``cached`` — the weak model's
  precomputed answer to the same query (accuracy ``accuracy.<d>.adversary``,
  the authors' ``fixed`` mode); ``ood`` — a cached answer to another
  question (observable feature ``off_topic``; equal to the truth with
  ``ood_hit``); ``plausible_wrong`` — distractor number ``rank``;
  ``persuasive`` — distractor 0 in an insistent, authoritative text
  (feature ``persuasive`` with probability ``features.persuasive``).
* ``sac_score`` — φ as the authors' prompt defines it (App. B.1): with
  probability ``solves`` the scorer solves the query itself (a fresh solve,
  same latents) and scores the proposed answer from ``agree`` or
  ``disagree`` by whether it equals its own solution; otherwise it answers
  without solving (``unsolved``). A text visibly about another question
  scores from ``off_topic``. Scores are N(mean, sd) clipped to [0, 1] and
  rounded to ``granularity.score``; with ``parse_fail`` no number.
* ``sac_refine`` — the model writes a new solution given its current answer
  and the retained answers with their scores (App. B.2): it returns answer a
  with probability proportional to W(a), where the current answer gets
  ``anchor``, the model's own fresh solve gets ``resolve``, and each retained
  answer gets ``susceptibility + follow * score ** power`` (plus ``sway`` if
  its text is ``persuasive``): a retained wrong answer pulls with
  ``susceptibility`` whatever its score.
* ``cpwbft_answer`` — a solve (the same draw as ``sac_answer`` with the same
  seed) plus a verbal confidence: N(mean, sd) by whether the answer is right
  (``confidence.<model>.correct`` / ``wrong``), rounded to
  ``granularity.confidence``; with ``parse_fail`` no confidence.
* ``cpwbft_aggregate`` (CP-WBFT ``aggregation: llm``) — the refine rule with
  the reported confidences in place of scores (``aggregate.<model>``), the
  own answer counting its own confidence as well; the reply carries a new
  verbal confidence for the chosen answer.
* tokens: per-kind prompt base + per-context-item growth, completion drawn
  around the kind's mean.
"""
from __future__ import annotations

import math
import random
from pathlib import Path
from statistics import NormalDist
from typing import Annotated, Any, Optional

from pydantic import Field, model_validator

from ..core.errors import InputError
from ..core.strict import Strict
from ..core.calls import Backend, LatencyModel, Request, Response, TaskRef
from .fake import ModelSpec, TokenSpec
from .profiles import find_profile, hash_unit, load_validated, model_role
from .registry import check_fields, register_backend
from .texts import Latent, TextStore

__all__ = ["ConsensusFakeBackend", "ConsensusProfile", "load_consensus_profile", "check_consensus_spec",
           "make_consensus", "CPWBFT_ANSWER", "CPWBFT_AGGREGATE", "BEHAVIOUR", "models_used", "factors_in_use"]

_N = NormalDist()
STRATA = 50  # queries per difficulty stratum block
CPWBFT_ANSWER = "cpwbft_answer"
CPWBFT_AGGREGATE = "cpwbft_aggregate"
P = Annotated[float, Field(ge=0.0, le=1.0)]
Pos = Annotated[float, Field(ge=0.0, le=1e6)]  # weights and spreads: at most 1e6, nothing overflows (issue 19)
MeanSd = tuple[P, Pos]


class DatasetAcc(Strict):
    """P(a solve is correct | model, dataset), and the adversary's cached answers."""

    strong: P
    weak: P
    #: accuracy of the weak model's precomputed answer an ``adversarial`` agent replays
    adversary: P = 0.0
    #: P(an off-topic cached answer equals the truth); None: 0 (numeric) or 1/len(choices)
    ood_hit: Optional[P] = None


class LatentSpec(Strict):
    #: share of the correctness latent common to every model on a query
    difficulty: P = 0.5
    #: share fixed per (model, query): the same model answering the same query again
    persist: dict[str, P] = {"strong": 0.4, "weak": 0.3}


class WrongSpec(Strict):
    # numeric answers: distinct wrong answers per query; at most 100, since the near misses come from
    # a few hundred integers around the truth (more would loop forever: issue 19)
    distractors: Annotated[int, Field(ge=1, le=100)] = 6
    zipf: Pos = 1.0  # weight of the k-th distractor: 1 / k^zipf


class ScoreSpec(Strict):
    """φ_i(x, r) of one model (App. B.1)."""

    solves: P  # P(the scorer actually solves the query before scoring)
    agree: MeanSd  # proposed answer equals the scorer's own solution
    disagree: MeanSd  # it does not
    unsolved: MeanSd  # scored without solving
    off_topic: MeanSd  # the text is visibly about another question
    parse_fail: P = 0.0


class WeighSpec(Strict):
    """How a model weighs its own answer against shown ones (refine, LLM aggregation)."""

    anchor: Pos  # weight of the current (own) answer
    resolve: Pos  # weight of the model's own fresh solution in this call
    follow: Pos  # weight of a shown answer per unit of score ** power
    power: Pos  # how sharply the shown score / confidence steers
    susceptibility: Pos  # pull of any shown answer, whatever its score
    sway: Pos  # extra pull of a shown text with the ``persuasive`` feature
    parse_fail: P = 0.0


class ConfidenceSpec(Strict):
    """Verbal self-reported confidence in a solve (CP-WBFT)."""

    correct: MeanSd
    wrong: MeanSd
    parse_fail: P = 0.0


class Granularity(Strict):
    score: Annotated[float, Field(ge=0, le=0.5)] = 0.05
    confidence: Annotated[float, Field(ge=0, le=0.5)] = 0.05


class FeatureSpec(Strict):
    """P(the producing adversary's text shows the feature it aims for)."""

    persuasive: P = 1.0
    off_topic: P = 1.0


class Pair(Strict):
    """The models (keys of the behaviour sections) in the strong and weak roles on one dataset."""

    strong: str
    weak: str


#: sections whose entries are per model (the role's model on the query's dataset: ``pairs``)
BEHAVIOUR = ("score", "refine", "confidence", "aggregate")


class ConsensusProfile(Strict):
    kind: str = "fake_consensus"
    name: str
    description: str = ""
    models: dict[str, ModelSpec]
    accuracy: dict[str, DatasetAcc]  # per dataset name, "default" as fallback
    latent: LatentSpec = LatentSpec()
    wrong: WrongSpec = WrongSpec()
    granularity: Granularity = Granularity()
    score: dict[str, ScoreSpec]
    refine: dict[str, WeighSpec]
    confidence: dict[str, ConfidenceSpec]
    aggregate: dict[str, WeighSpec]
    features: FeatureSpec = FeatureSpec()
    tokens: dict[str, TokenSpec]
    #: dataset -> the models playing strong and weak there ("default" as fallback); the
    #: behaviour sections are keyed by these names. Without it, by role (strong / weak).
    pairs: dict[str, Pair] = {"default": Pair(strong="strong", weak="weak")}
    #: the real model behind each behaviour key (a label for explain and docs)
    model_ids: dict[str, str] = {}
    #: where each number comes from (meshsim.backends.provenance; `meshsim backends explain`)
    sources: dict[str, str] = {}
    #: plausible [low, high] of each assumption and why (meshsim.backends.provenance; `meshsim uncertainty`)
    ranges: dict[str, Any] = {}

    @model_validator(mode="after")
    def _shares(self) -> "ConsensusProfile":
        for m, p in self.latent.persist.items():
            if self.latent.difficulty + p > 1.0:
                raise ValueError(f"latent.difficulty + latent.persist.{m} must be at most 1")
        if "default" not in self.pairs:
            raise ValueError("pairs needs a 'default' entry (the pair of any dataset not listed)")
        for ds, pair in self.pairs.items():
            for role in ("strong", "weak"):
                m = getattr(pair, role)
                for section in BEHAVIOUR:
                    if m not in getattr(self, section):
                        raise ValueError(f"pairs.{ds}.{role} names model '{m}' but {section}.{m} is missing")
        return self

    def model_for(self, role: str, dataset: Optional[str]) -> str:
        """The behaviour key of the model playing ``role`` (strong / weak) on ``dataset``."""
        pair = self.pairs.get(dataset or "default") or self.pairs["default"]
        return getattr(pair, role)


def load_consensus_profile(path: str | Path, overrides: Optional[dict[str, Any]] = None) -> ConsensusProfile:
    path = Path(path)
    if overrides:
        _check_behaviour_overrides(None, overrides, path)
    prof = load_validated(path, ConsensusProfile, overrides)
    if prof.kind != "fake_consensus":
        raise InputError("not a fake_consensus profile", file=str(path), field="kind", value=prof.kind)
    for role in ("strong", "weak"):
        if role not in prof.models:
            raise InputError(f"profile needs 'models.{role}'", file=str(path), field="models")
    for role in ("strong", "weak"):
        if role not in prof.latent.persist:
            raise InputError(f"profile needs 'latent.persist.{role}'", file=str(path), field="latent.persist")
    if "default" not in prof.accuracy:
        raise InputError("profile needs 'accuracy.default'", file=str(path), field="accuracy")
    return prof


def models_used(data: dict[str, Any], datasets: list[str]) -> set[str]:
    """Behaviour keys of the models that play a role on any of ``datasets`` (raw profile data)."""
    pairs = data.get("pairs") or {"default": {"strong": "strong", "weak": "weak"}}
    out: set[str] = set()
    for ds in datasets:
        pair = pairs.get(ds) or pairs.get("default") or {}
        out.update(str(pair[r]) for r in ("strong", "weak") if r in pair)
    return out


def factors_in_use(factors: list, data: dict[str, Any], datasets: list[str]) -> list:
    """The assumption factors (``provenance.assumption_factors``) that can move a run on
    ``datasets``: a factor all of whose numbers belong to models that play no role
    there (``score.gpt-5.solves`` on MATH-500), or to another dataset's accuracy
    (``accuracy.hmmt.weak``), is dropped, so that a screening spends no samples on it."""
    used = models_used(data, datasets)
    # another dataset's own accuracy (accuracy.hmmt.weak, an assumption) moves nothing here either
    other_sets = set(data.get("accuracy") or {}) - set(datasets) - {"default"}

    def idle(path: str) -> bool:
        parts = path.split(".")
        return len(parts) > 1 and ((parts[0] in BEHAVIOUR and parts[1] not in used)
                                   or (parts[0] == "accuracy" and parts[1] in other_sets))

    return [f for f in factors if not all(idle(p) for p, *_ in f.leaves)]


def _check_behaviour_overrides(prof: Optional[ConsensusProfile], overrides: Optional[dict[str, Any]],
                               path: Optional[Path] = None) -> None:
    """An override by role (``refine.strong.sway``) of a profile whose behaviour is per
    model: a one-line error naming the models to use instead."""
    if not overrides:
        return
    if prof is None:
        from ..core.files import load_yaml

        data = load_yaml(path, "profile")
        keys = data.get("score") if isinstance(data, dict) else None
        if not isinstance(keys, dict):
            return
        models = [str(k) for k in keys]
    else:
        models = list(prof.score)
    for k in overrides:
        parts = str(k).split(".")
        if len(parts) >= 2 and parts[0] in BEHAVIOUR and parts[1] in ("strong", "weak") and parts[1] not in models:
            raise InputError(f"behaviour is per model in this profile: use {parts[0]}.<model>.{'.'.join(parts[2:])}"
                             f" with a model of {models}", field=f"overrides.{k}", value=overrides[k])


_role = model_role


class ConsensusFakeBackend(Backend):
    synchronous = True

    def __init__(self, profile: ConsensusProfile, seed: int = 0, overrides: Optional[dict[str, Any]] = None):
        self.profile = profile
        self.seed = seed
        self.overrides = dict(overrides or {})
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
        out: dict[str, Any] = {"name": self.name, "models": {k: v.id for k, v in self.profile.models.items()}}
        if self.overrides:
            out["overrides"] = {str(k): self.overrides[k] for k in sorted(self.overrides, key=str)}
        return out

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
        """What a reader notices in a received text (reading it = looking up its token)."""
        got = self.texts.get(req.task.id, text)
        return got.features if got is not None else frozenset()

    def _who(self, req: Request) -> str:
        """The calling model's behaviour key: its role's model on the query's dataset."""
        return self.profile.model_for(_role(req.model), req.task.dataset if req.task is not None else None)

    def _answered(self, req: Request, a: Optional[str], features: frozenset = frozenset(), **extra: Any):
        truth = str(req.task.answer)
        fields = {"answer": a, "_latent": Latent(correct=a == truth, answer=a, features=features)}
        fields.update(extra)
        return fields, a == truth

    # -- latents ---------------------------------------------------------------
    def accuracy(self, model: str, dataset: str) -> DatasetAcc:
        return self.profile.accuracy.get(dataset) or self.profile.accuracy["default"]

    def _difficulty(self, task) -> float:
        """The query's difficulty D (a standard normal), stratified over blocks of
        ``STRATA`` consecutive queries so that every block spans the whole
        difficulty range once (a benchmark's difficulty mix, with less
        seed-to-seed noise in initial accuracy than independent draws)."""
        z = self._z.get(task.id)
        if z is None:
            block, pos = divmod(max(task.index, 1) - 1, STRATA)
            perm = self._strata.get(block)
            if perm is None:
                perm = self._strata[block] = list(range(STRATA))
                random.Random(int(hash_unit(self.seed, "strata", block) * 2 ** 52)).shuffle(perm)
            u = (perm[pos] + hash_unit(self.seed, "difficulty", task.id)) / STRATA
            z = self._z[task.id] = _N.inv_cdf(u)
        return z

    def _view(self, what: str, model: str, task) -> float:
        """A model's lasting view of a query (standard normal; same for every agent on that model)."""
        return _N.inv_cdf(hash_unit(self.seed, what, model, task.id))

    def _latent(self, task, model: str, rnd: random.Random) -> float:
        lat = self.profile.latent
        d, p = lat.difficulty, lat.persist[model]
        return (math.sqrt(d) * self._difficulty(task) + math.sqrt(p) * self._view("view", model, task)
                + math.sqrt(max(0.0, 1.0 - d - p)) * rnd.gauss(0.0, 1.0))

    def _solve(self, task, model: str, rnd: random.Random, p: Optional[float] = None) -> str:
        """One solve of ``task`` by ``model``: the truth or one of its distractors."""
        if p is None:
            acc = self.accuracy(model, task.dataset)
            p = acc.weak if model == "weak" else acc.strong
        p = min(0.999, max(0.001, p))
        if self._latent(task, model, rnd) < _N.inv_cdf(p):
            return str(task.answer)
        return self._wrong(task, model, rnd)

    def distractors(self, task) -> tuple[list[str], list[float]]:
        """The query's wrong answers, most common first, and their weights."""
        got = self._distractors.get(task.id)
        if got is not None:
            return got
        truth = str(task.answer)
        if task.choices:
            wrong = [c for c in task.choices if c != truth]
            wrong.sort(key=lambda c: hash_unit(self.seed, "distractor", task.id, c))
        else:
            wrong = []
            base = _int_of(truth)
            k = 0
            while len(wrong) < self.profile.wrong.distractors:
                k += 1
                u = hash_unit(self.seed, "distractor", task.id, k)
                # near misses (sign, off-by-one, factor slips) and a few far ones
                cand = base + int(round((u - 0.5) * (20 if k % 3 else 400)))
                s = str(cand)
                if s != truth and s not in wrong:
                    wrong.append(s)
        weights = [1.0 / (k + 1) ** self.profile.wrong.zipf for k in range(len(wrong))]
        got = self._distractors[task.id] = (wrong, weights)
        return got

    def _wrong(self, task, model: str, rnd: random.Random) -> str:
        """A distractor, picked through the model's lasting view (its usual mistake)
        with the same fixed share as its correctness, so it tends to repeat itself."""
        wrong, weights = self.distractors(task)
        lat = self.profile.latent
        s = min(1.0, lat.difficulty + lat.persist[model])
        z = math.sqrt(s) * self._view("mistake", model, task) + math.sqrt(1.0 - s) * rnd.gauss(0.0, 1.0)
        u = _N.cdf(z) * sum(weights)
        for w, c in zip(weights, wrong):
            u -= w
            if u < 0:
                return c
        return wrong[-1]

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

    def _granular(self, x: float, g: float) -> float:
        x = min(1.0, max(0.0, x))
        return round(round(x / g) * g, 4) if g else round(x, 4)

    # -- call kinds ------------------------------------------------------------
    def _sac_answer(self, req: Request, rnd: random.Random):
        task = req.task
        model = _role(req.model)
        attack = req.context.get("attack")
        feats = self.profile.features
        if attack == "cached":
            # the authors' "fixed" Byzantine mode: the weak model's precomputed answer to this query
            acc = self.accuracy("weak", task.dataset)
            return self._answered(req, self._solve(task, "weak", rnd, acc.adversary))
        if attack == "ood":
            # a cached answer to another question: visibly off-topic to a reader
            a = self._ood_answer(task, rnd)
            return self._answered(req, a, frozenset({"off_topic"}) if rnd.random() < feats.off_topic
                                  else frozenset())
        if attack == "plausible_wrong":
            wrong = self.distractors(task)[0]
            return self._answered(req, wrong[int(req.context.get("rank", 0)) % len(wrong)])
        if attack == "persuasive":
            wrong = self.distractors(task)[0]
            return self._answered(req, wrong[0], frozenset({"persuasive"}) if rnd.random() < feats.persuasive
                                  else frozenset())
        return self._answered(req, self._solve(task, model, rnd))

    def _sac_score(self, req: Request, rnd: random.Random):
        """φ_i(x, r): the prompt shows the query and the proposed response only."""
        model = _role(req.model)
        spec = self.profile.score[self._who(req)]
        resp = req.context.get("response") or {}
        answer = resp.get("answer")
        if rnd.random() < spec.parse_fail:
            return {"score": None}, None
        if "off_topic" in self._features(req, resp.get("text")):
            dist = spec.off_topic
        elif rnd.random() < spec.solves:
            mine = self._solve(req.task, model, rnd)
            dist = spec.agree if (answer is not None and str(answer) == mine) else spec.disagree
        else:
            dist = spec.unsolved
        return {"score": self._granular(rnd.gauss(*dist), self.profile.granularity.score)}, None

    def _weigh(self, req: Request, spec: WeighSpec, own: Optional[str], own_w: float,
               shown: list[tuple[Optional[str], float, Any]], rnd: random.Random) -> Optional[str]:
        """P(answer a) ∝ W(a): own answer, own fresh solution, shown answers by score/confidence."""
        support: dict[str, float] = {}
        if own is not None:
            support[str(own)] = own_w
        mine = self._solve(req.task, _role(req.model), rnd)
        support[mine] = support.get(mine, 0.0) + spec.resolve
        for a, s, text in shown:
            if a is None:
                continue
            w = spec.susceptibility + spec.follow * max(0.0, min(1.0, s)) ** spec.power
            if spec.sway and "persuasive" in self._features(req, text):
                w += spec.sway
            support[str(a)] = support.get(str(a), 0.0) + w
        cands = sorted(a for a, w in support.items() if w > 0)
        if not cands:
            return own
        return rnd.choices(cands, weights=[support[a] for a in cands])[0]

    def _sac_refine(self, req: Request, rnd: random.Random):
        spec = self.profile.refine[self._who(req)]
        ctx = req.context
        if rnd.random() < spec.parse_fail:
            return {"answer": None}, None
        own = (ctx.get("own") or {}).get("answer")
        shown = [(r.get("answer"), _num(r.get("score"), 0.5), r.get("text")) for r in ctx.get("retained", [])]
        return self._answered(req, self._weigh(req, spec, own, spec.anchor, shown, rnd))

    def _confidence(self, who: str, correct: bool, rnd: random.Random) -> Optional[float]:
        spec = self.profile.confidence[who]
        if rnd.random() < spec.parse_fail:
            return None
        return self._granular(rnd.gauss(*(spec.correct if correct else spec.wrong)),
                              self.profile.granularity.confidence)

    def _cpwbft_answer(self, req: Request, rnd: random.Random):
        # the solve is drawn first, exactly as in sac_answer: with the same call
        # seed both protocols start from the same answers (common random numbers)
        fields, ok = self._sac_answer(req, rnd)
        fields["confidence"] = self._confidence(self._who(req), bool(ok), rnd)
        return fields, ok

    def _cpwbft_aggregate(self, req: Request, rnd: random.Random):
        who = self._who(req)
        spec = self.profile.aggregate[who]
        ctx = req.context
        if rnd.random() < spec.parse_fail:
            return {"answer": None, "confidence": None}, None
        own = ctx.get("own") or {}
        own_c = _num(own.get("confidence"), 0.0)
        shown = [(r.get("answer"), _num(r.get("confidence"), 0.0), r.get("text")) for r in ctx.get("peers", [])]
        a = self._weigh(req, spec, own.get("answer"), spec.anchor + spec.follow * own_c ** spec.power, shown, rnd)
        fields, ok = self._answered(req, a)
        fields["confidence"] = self._confidence(who, bool(ok), rnd)
        return fields, ok

    def _tokens(self, req: Request, rnd: random.Random) -> tuple[int, int]:
        spec = self.profile.tokens.get(req.kind) or self.profile.tokens.get("default")
        if spec is None:
            return 0, 0
        items = int(req.context.get("context_items", 0))
        prompt = spec.prompt + spec.per_context * items
        completion = int(round(spec.completion * math.exp(rnd.gauss(0.0, spec.spread) - spec.spread ** 2 / 2)))
        return prompt, max(1, completion)


def _num(v: Any, default: float) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return default


def _int_of(text: str) -> int:
    try:
        return int(float(text))
    except ValueError:
        return int(hash_unit("int", text) * 1000)


def check_consensus_spec(spec: dict[str, Any], base_dir: Optional[Path], need_key: bool = True) -> ConsensusProfile:
    """``backend: {kind: fake_consensus, profile, overrides}``; returns the profile it loaded."""
    check_fields(spec, {"kind", "profile", "overrides"})
    if not spec.get("profile"):
        raise InputError("a fake_consensus backend needs 'profile'", field="profile")
    # overrides: {dotted.profile.path: value}, one profile field changed (sensitivity sweeps)
    return load_consensus_profile(find_profile(spec["profile"], base_dir), spec.get("overrides"))


def make_consensus(spec: dict[str, Any], seed: int, base_dir: Optional[Path], need_key: bool,
                   profile: ConsensusProfile) -> ConsensusFakeBackend:
    return ConsensusFakeBackend(profile, seed=seed, overrides=spec.get("overrides"))


register_backend("fake_consensus", check_consensus_spec, make_consensus, ranged_profile=ConsensusProfile,
                 factors_in_use=factors_in_use)
