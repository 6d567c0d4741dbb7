"""Statistical fakes of the MeshHeal paper's models: one call, one conditional distribution.

A fake never waits and never talks to a network. Each call's outcome is a draw
from a distribution conditioned only on what a real call would have: the
task (the fake plays a model that sometimes finds the gold answer), the
calling agent's *own* model, the call kind, and the texts in its prompt —
which a fake "reads" by looking up the token another fake wrote
(:mod:`.texts`). Nothing about the producer of a text (its model, its
degraded state) is visible to a reader except what the text shows.

The latent variable behind every call is a **derivation**: does this call
work out the half of the task it is about (the ability ``s``)? It succeeds
with the calling model's *skill* for (dataset, task type), through a
Gaussian copula on a difficulty shared by every call on the same (task, s)
(``difficulty_rho``: a half that is hard for the producer is hard for its
reviewers and correctors too) and, for reviews, a lasting per-reviewer view
(``review.persist``: the three calls of one reviewer are not independent).

Conditional distributions, by call kind (``Request.kind``):

* ``infer_abilities`` — the documented true pair with probability
  ``models.<m>.infer``, else another documented pair.
* ``contribute`` / ``finalize`` — the produced half is *sound* iff the
  derivation succeeds. A failed derivation reads as unusable *garbage*
  (observable feature ``incoherent``) with probability ``models.<m>.garbage``,
  else as a coherent half with a concrete error. A Finalize commits a final
  answer: right iff its own half is sound, the route covered the true pair
  and every draft it combines is sound — or *repaired*: reading a readable but
  unsound draft, the finalizer re-derives the drafts' half itself with
  probability ``models.<m>.repair`` (issue 21; App. A: models solve unassigned
  abilities about as well as assigned ones), and that re-derivation succeeds
  through the same copula as every derivation. When the chain is broken the
  committed answer is still right by chance with probability
  ``guess.<dataset>`` (a multiple-choice answer picked among few options).
  Every call that commits a final answer (Finalize, a Takeover candidate or
  synthesis of one, SAC teams' refine) follows this one rule, for MeshHeal
  and every baseline alike.
* ``review`` (and committee round 1) — App. D.1's rubric as an explicit
  distribution. The reviewer re-derives the half; what it can tell puts the
  output in one of four *classes*: ``sound`` (its re-derivation succeeds and
  agrees), ``wrong`` (it succeeds and finds the concrete error),
  ``unverifiable`` (its own re-derivation fails: it cannot check the half,
  whatever the half is) and ``garbage`` (unusable text, feature
  ``incoherent``). ``review.scores.<reviewer model>.<class>`` states the
  probability of each rubric verdict (score bin: ``sound`` 1.00,
  ``unverified`` 0.50 "cannot verify", ``error`` 0.25, ``garbage`` 0.00, at
  the levels of ``review.anchors``); one bin may take the ``rest``, and
  ``otherwise: <class>`` hands the remaining mass to another class's
  distribution (unnoticed garbage is scored like a half the reviewer cannot
  verify). ``review.scores.<reviewer>.finalize.<class>`` replaces a class's
  distribution for Finalize outputs (App. D.1's Finalize card judges the
  combination and the committed answer too); a table's ``common`` share of
  the draw is the same for every call reviewing the same output (a trait of
  its text every reader sees). The verdict is drawn by visiting
  the listed bins in order (stick-breaking: one uniform per bin but the last);
  each call's score is its bin's level plus N(0, ``review.noise``), clipped
  and rounded to ``review.granularity``.
* ``committee_round`` round 2 — each member sees both round-1 scores and
  explanations. When they agree (within ``committee.agree``) it keeps its
  score; when they differ it re-checks: the other's explanation helps when
  it is right (skill boosted by ``committee.hint``) and misleads with
  probability ``committee.mislead`` when it is wrong (it then adopts the
  other's verdict).
* ``takeover_candidate`` — a correction: sound iff the writer's derivation
  succeeds (same copula: wrong outputs that reach Takeover are the hard ones).
* ``synthesis`` — a sound original is recognised and kept with probability
  ``takeover.recognize``; otherwise, with probability ``takeover.keep.<action>``
  the synthesizer anchors on the original output and restates it (a committed final answer
  anchors a synthesis more than a half does); otherwise it re-derives with
  help from every sound candidate (skill boosted by ``takeover.hint.<action>``
  per sound candidate): a success is a sound synthesis, a failure takes one of
  the candidates — uniformly, or, when the prompt shows scores
  (``candidate_scores``: SAC teams' refine, Eq. 4; MeshHeal's synthesis shows
  none), in proportion to each candidate's score with probability
  ``models.<m>.follow_scores`` (default 1, an assumption; 0 is uniform).
* ``select`` (baselines: AutoGen's speaker selection, AgentNet's router) —
  the prompt lists candidate agents with their declared abilities and names
  the abilities still needed (the caller's inferred requirement); with
  probability ``models.<m>.select`` the model picks uniformly among the
  candidates holding a needed ability, otherwise it slips and picks
  uniformly among all candidates; when the prompt shows each candidate's
  success rate for the task type (AgentNet's router), the pick within that
  set is in proportion to it instead of uniform with probability
  ``models.<m>.follow_rates`` (default 1; "Not Succeed Yet" counts as 0.5; an
  assumption: 0, rates ignored, is the other end). Nothing but the prompt is
  read.
* ``summarize`` (baselines: AutoGen's manager summarising the conversation
  into the answer it returns) — keeps the committed final answer of the text
  it is given with probability ``models.<m>.summary_keep``, else garbles it
  (then right only by chance, ``guess``).
* tokens — per-kind prompt base + growth per context item; completion
  lengths lognormal around the kind's mean.

A reply that commits a final answer carries it in ``fields['answer']`` as an
opaque identifier (equal answers, equal identifiers): what a parser extracts
from the text, which a vote may compare, without saying which one is right.

Every number in a profile carries its source (``sources:``,
``meshsim backends explain``); ``docs/backends.md`` explains the calibration.
"""
from __future__ import annotations

import hashlib
import math
from pathlib import Path
from statistics import NormalDist
from typing import Annotated, Any, Literal, Optional

from pydantic import Field, model_validator

from ..core.errors import InputError
from ..core.strict import Strict
from ..core.calls import Backend, LatencyModel, Request, Response, TaskRef
from .profiles import hash_unit, load_validated, model_role
from .texts import UNREADABLE, Latent, TextStore

__all__ = ["FakeBackend", "FakeProfile", "load_fake_profile", "ModelSpec", "TokenSpec", "SplitMix64",
           "CLASSES", "VERDICTS", "score_distribution"]

_N = NormalDist()
P = Annotated[float, Field(ge=0.0, le=1.0)]
#: a non-negative scale (seconds, score spreads): at most 1e6, so no draw or sum overflows (issue 19)
NonNeg = Annotated[float, Field(ge=0.0, le=1e6)]
INCOHERENT = frozenset({"incoherent"})
#: App. D.1 score anchors: "1.00 half is sound / 0.50 cannot verify or weak /
#: 0.25 concrete error / 0.00 unusable garbage"
VERDICTS = ("sound", "unverified", "error", "garbage")


class ModelSpec(Strict):
    """A model's identity and simulated latency (shared with the consensus fake)."""

    id: str
    ttft: NonNeg = 0.5
    rate: Annotated[float, Field(ge=1e-3, le=1e9)] = 60.0  # tokens/s: a slower one never finishes a reply


class MeshModel(ModelSpec):
    """One model's behaviour in every MeshHeal call."""

    #: P(a call derives its half soundly), per dataset name ("default" as fallback)
    skill: dict[str, P]
    #: absolute skill per dataset and task type (``backends fit`` writes these); wins where given
    skill_by_type: dict[str, dict[str, P]] = {}
    garbage: P = 0.0  # P(a failed derivation reads as unusable garbage: feature 'incoherent')
    infer: P = 0.9  # P(InferAbilities picks the documented true pair)
    #: P(a selection call picks an agent holding a needed ability named in its prompt)
    select: P = 0.9
    #: P(a summary of a committed final answer keeps that answer)
    summary_keep: P = 1.0
    #: baselines, issue 21 (assumptions; the shipped profiles state 1 with range 0 .. 1 in sources/ranges):
    #: P(a failed synthesis whose prompt shows each candidate's score - SAC teams' refine, Eq. 4 -
    #: takes a candidate in proportion to its score rather than uniformly)
    follow_scores: P = 1.0
    #: P(a selection whose prompt shows each candidate's success rate - AgentNet's router - picks
    #: in proportion to it rather than uniformly)
    follow_rates: P = 1.0
    #: P(a call committing a final answer, reading an unsound draft, re-derives that draft's half
    #: itself instead of building on it) - issue 21; the re-derivation then succeeds through the
    #: same copula as every derivation (a half its writer failed is a hard one). 0: a broken draft
    #: always breaks the final (the rule before issue 21; profiles that state nothing keep it)
    repair: P = 0.0

    @model_validator(mode="before")
    @classmethod
    def _moved_review(cls, data: Any) -> Any:
        if isinstance(data, dict) and "review" in data:
            raise ValueError(
                "review: a reviewer's behaviour moved to review.scores.<model>.<class>, P(verdict | class): "
                "uncritical u, flag_error f, sees_garbage g become unverifiable: {sound: u, error: (1-u) f, "
                "unverified: rest}, garbage: {garbage: g, otherwise: unverifiable} (docs/backends.md)")
        return data


#: what a reviewer can tell about the output it reviews (App. D.1's rubric re-derives the half)
CLASSES = ("sound", "wrong", "unverifiable", "garbage")
#: one score distribution: verdict (score bin) -> probability, or "rest"; key "otherwise" -> a class
ScoreTable = dict[str, Any]


class ReviewerScores(Strict):
    """P(rubric verdict | class of the output under review), for one reviewer model.
    Defaults are the rubric applied without error (an explicit profile states every class)."""

    sound: ScoreTable = {"sound": 1.0}
    wrong: ScoreTable = {"error": 1.0}
    unverifiable: ScoreTable = {"unverified": 1.0}
    garbage: ScoreTable = {"garbage": 1.0}
    #: classes whose distribution differs for Finalize outputs (App. D.1's Finalize card)
    finalize: dict[Literal["sound", "wrong", "unverifiable", "garbage"], ScoreTable] = {}


def compile_table(table: Any, where: str) -> tuple[tuple[tuple[str, float], ...], Optional[str]]:
    """((verdict, probability) in listed order, class taking the remaining mass or None).

    Raises ValueError naming ``where`` when the table is not a distribution."""
    if not isinstance(table, dict) or not table:
        raise ValueError(f"{where}: a score distribution is a mapping verdict -> probability")
    common = table.get("common", 0.0)
    if not isinstance(common, (int, float)) or isinstance(common, bool) or not 0.0 <= common <= 1.0:
        raise ValueError(f"{where}.common: a share in [0, 1] (got {common!r})")
    other = table.get("otherwise")
    if other is not None and other not in CLASSES:
        raise ValueError(f"{where}.otherwise: must name a class, one of {list(CLASSES)} (got {other!r})")
    rest = [k for k, v in table.items() if v == "rest"]
    entries: list[tuple[str, Any]] = []
    for k, v in table.items():
        if k in ("otherwise", "common"):
            continue
        if k not in VERDICTS:
            raise ValueError(f"{where}.{k}: not a rubric verdict, one of {list(VERDICTS)}")
        if v != "rest" and (not isinstance(v, (int, float)) or isinstance(v, bool) or not 0.0 <= v <= 1.0):
            raise ValueError(f"{where}.{k}: a probability in [0, 1] or 'rest' (got {v!r})")
        entries.append((k, v))
    if len(rest) > 1 or (rest and other is not None):
        raise ValueError(f"{where}: at most one 'rest', and not together with 'otherwise'")
    total = sum(float(v) for _, v in entries if v != "rest")
    if total > 1.0 + 1e-9:
        raise ValueError(f"{where}: probabilities sum to {total:g} > 1")
    if not rest and other is None and abs(total - 1.0) > 1e-6:
        raise ValueError(f"{where}: probabilities sum to {total:g}, not 1 (give one verdict 'rest', "
                         "or 'otherwise: <class>')")
    if other is not None and not entries and total == 0:
        raise ValueError(f"{where}: 'otherwise' alone: name the class's own verdicts")
    out = tuple((k, max(0.0, 1.0 - total) if v == "rest" else float(v)) for k, v in entries)
    return out, other


class ReviewSpec(Strict):
    #: score level of each verdict bin: App. D.1's anchors; ``unverified`` is where a
    #: reviewer that cannot verify puts its non-committal score
    anchors: dict[Literal["sound", "unverified", "error", "garbage"], P] = {
        "sound": 1.0, "unverified": 0.5, "error": 0.25, "garbage": 0.0}
    noise: NonNeg = 0.05  # sd of one call's score around its anchor
    granularity: Annotated[float, Field(ge=0, le=0.5)] = 0.05
    persist: P = 0.0  # share of a review call's non-difficulty variance that is the reviewer's lasting view
    #: P(verdict | reviewer model, class of the output), per model role (strong, weak)
    scores: dict[str, ReviewerScores] = {}

    @model_validator(mode="after")
    def _tables(self) -> "ReviewSpec":
        for role, rs in self.scores.items():
            for cls in CLASSES:
                compile_table(getattr(rs, cls), f"review.scores.{role}.{cls}")
            for cls, t in rs.finalize.items():
                compile_table(t, f"review.scores.{role}.finalize.{cls}")
            for action in ("contribute", "finalize"):
                for cls in CLASSES:  # 'otherwise' chains must end
                    seen = [cls]
                    nxt = _table_of(rs, action, cls)[1]
                    while nxt is not None:
                        if nxt in seen:
                            raise ValueError(f"review.scores.{role}: 'otherwise' loops: {' -> '.join(seen + [nxt])}")
                        seen.append(nxt)
                        nxt = _table_of(rs, action, nxt)[1]
        return self


def _raw_table(rs: ReviewerScores, action: str, cls: str) -> dict[str, Any]:
    t = rs.finalize.get(cls) if action == "finalize" else None  # type: ignore[call-overload]
    return t if t is not None else getattr(rs, cls)


def _table_of(rs: ReviewerScores, action: str, cls: str):
    return compile_table(_raw_table(rs, action, cls), cls)


class CommitteeSpec(Strict):
    agree: NonNeg = 0.3  # round-1 scores closer than this: each member keeps its verdict
    hint: P = 0.5  # a right explanation's help: skill -> 1 - (1 - skill)(1 - hint)
    mislead: P = 0.0  # P(a wrong explanation is adopted)


class TakeoverSpec(Strict):
    """Synthesis, by the replaced output's action: a committed final answer
    anchors a synthesis more than an intermediate half does."""

    #: help from each sound candidate to the synthesizer's own re-derivation
    hint: dict[Literal["contribute", "finalize"], P] = {"contribute": 0.5, "finalize": 0.5}
    #: the synthesizer anchors on the original output and restates it (else it re-derives)
    keep: dict[Literal["contribute", "finalize"], P] = {"contribute": 0.5, "finalize": 0.5}
    #: P(a sound original is recognised as sound and kept), before any anchoring
    recognize: P = 0.0


class TokenSpec(Strict):
    prompt: Annotated[int, Field(ge=0)]
    completion: Annotated[int, Field(ge=0)]
    per_context: Annotated[int, Field(ge=0)] = 0  # prompt tokens per context item (earlier outputs, ...)
    spread: NonNeg = 0.25  # lognormal sigma of completion length


class FakeProfile(Strict):
    kind: Literal["fake"] = "fake"
    name: str
    description: str = ""
    models: dict[str, MeshModel]
    #: P(a committed final answer is right although its chain is broken), per dataset
    guess: dict[str, P] = {"default": 0.0}
    difficulty_rho: P = 0.5
    #: sd, on the probit scale, of how much harder or easier a task type is than its
    #: dataset's average (the same for every model: a property of the benchmark)
    type_spread: NonNeg = 0.0
    #: False: a Finalize's outcome is composed from its own half, the drafts and the
    #: route. True (profiles fitted from real runs, where an observer graded final
    #: texts): skill is the probability that the committed final answer is right.
    graded: bool = False
    review: ReviewSpec = ReviewSpec()
    committee: CommitteeSpec = CommitteeSpec()
    takeover: TakeoverSpec = TakeoverSpec()
    tokens: dict[str, TokenSpec]
    #: where each number comes from (meshsim.backends.provenance; `meshsim backends explain`)
    sources: dict[str, str] = {}
    #: plausible [low, high] of each assumption and why (meshsim.backends.provenance; `meshsim uncertainty`)
    ranges: dict[str, Any] = {}


def load_fake_profile(path: str | Path) -> FakeProfile:
    path = Path(path)
    prof = load_validated(path, FakeProfile)
    for role in ("strong", "weak"):
        if role not in prof.models:
            raise InputError(f"profile needs a '{role}' model", file=str(path), field="models")
        if "default" not in prof.models[role].skill:
            raise InputError("needs a 'default' skill", file=str(path), field=f"models.{role}.skill")
        if role not in prof.review.scores:
            raise InputError(f"profile needs the '{role}' reviewer's score distributions", file=str(path),
                             field=f"review.scores.{role}")
    return prof


def score_distribution(review: ReviewSpec, role: str, action: str, cls: str) -> dict[str, float]:
    """P(verdict) of one reviewer model reviewing one class of output (``otherwise`` resolved)."""
    rs = review.scores.get(role) or ReviewerScores()
    out: dict[str, float] = {}
    mass, seen = 1.0, set()
    while cls is not None and cls not in seen:
        seen.add(cls)
        entries, nxt = _table_of(rs, action, cls)
        for k, p in entries:
            out[k] = out.get(k, 0.0) + mass * p
        mass *= max(0.0, 1.0 - sum(p for _, p in entries))
        cls = nxt
    return out



_M64 = (1 << 64) - 1
_MISSING = object()
_new = object.__new__


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
        # two draws of random(), inlined (the same arithmetic: this is on every fake call's path)
        self.s = z = (self.s + 0x9E3779B97F4A7C15) & _M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        u1 = ((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0) or 5e-324
        self.s = z = (self.s + 0x9E3779B97F4A7C15) & _M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        u2 = ((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0)
        return mu + sigma * math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * u2)

    def randrange(self, n: int) -> int:
        return min(n - 1, int(self.random() * n))


_role = model_role


def _boost(p: float, hint: float) -> float:
    return 1.0 - (1.0 - p) * (1.0 - hint)


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
        # hash draws that are pure functions of (seed, task, ...): memoized per task and
        # dropped with the task's texts (forget), so a long stream holds only open tasks'
        self._memo: dict[str, dict[Any, float]] = {}
        self._nearest: dict[float, str] = {}
        self._levels: dict[int, float] = {}  # score bin -> its level (_score)
        self._kinds: dict[str, Any] = {}  # call kind -> the method that models it
        self._token_specs: dict[str, Any] = {}  # call kind -> its TokenSpec (or None)
        self._type_z: dict[tuple[str, str], float] = {}
        self._thresholds: dict[tuple, float] = {}
        # (reviewer, action, class) -> (stick-breaking entries, 'otherwise' class, common share)
        self._tables: dict[tuple[str, str, str], tuple[tuple[tuple[str, float], ...], Optional[str], float]] = {}
        for role in profile.models:
            rs = profile.review.scores.get(role) or ReviewerScores()
            for action in ("contribute", "finalize"):
                for cls in CLASSES:
                    entries, nxt = _table_of(rs, action, cls)
                    # stick-breaking: P(this verdict | none of the earlier ones)
                    cond, left = [], 1.0
                    for k, p in entries:
                        cond.append((k, p / left if left > 0 else 1.0))
                        left -= p
                    self._tables[(role, action, cls)] = (tuple(cond), nxt,
                                                         float(_raw_table(rs, action, cls).get("common", 0.0)))
        self.texts = TextStore("fake")

    # -- interface -----------------------------------------------------------
    def latency_model(self, model: str) -> LatencyModel:
        return self._lat.get(_role(model), self._lat["strong"])

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "models": {k: v.id for k, v in self.profile.models.items()}}

    def complete_sync(self, req: Request) -> Response:
        rnd = _new(SplitMix64)  # SplitMix64(seed), without the constructor's frame
        rnd.s = (req.seed ^ self._mix) & _M64
        fn = self._kinds.get(req.kind)
        if fn is None:
            fn = self._kinds[req.kind] = getattr(self, "_" + req.kind, None)
        if fn is None:
            return Response(error=f"fake backend has no model of call kind {req.kind!r}")
        fields, correct = fn(req, rnd)
        text = ""
        latent = fields.pop("_latent", None)
        if latent is not None:
            text = self.texts.put(req.task.id if req.task else "", req.seed, latent)
            if latent.answer is not None and req.kind != "committee_round":
                # what a parser extracts from a final text: comparable, but opaque
                fields["answer"] = self._answer_id(req.task.id if req.task else "", latent.answer)
        pt, ct = self._tokens(req, rnd)
        return Response(text=text, fields=fields, correct=correct, prompt_tokens=pt, completion_tokens=ct)

    def _answer_id(self, task_id: str, answer: str) -> str:
        """An answer as a parser would hand it to a controller: the same answer to
        the same task gets the same identifier, and nothing tells the right one."""
        return "ans-" + hashlib.blake2b(f"{self.seed}/{task_id}/{answer}".encode(), digest_size=6).hexdigest()

    def grade(self, task: TaskRef, text: str, action: Optional[str] = None) -> Optional[bool]:
        got = self.texts.get(task.id, text)
        if got is None:
            return None if action == "contribute" else False
        return got.final if got.final is not None else got.correct

    def final_answer(self, task: TaskRef, text: str) -> Optional[str]:
        got = self.texts.get(task.id, text)
        return got.answer if got is not None else None

    def forget(self, task_id: str) -> None:
        self.texts.forget(task_id)
        self._memo.pop(task_id, None)

    def _task_memo(self, task_id: str) -> dict[Any, float]:
        memo = self._memo.get(task_id)
        if memo is None:
            memo = self._memo[task_id] = {}
        return memo

    # -- the model's side -------------------------------------------------------
    def model(self, req: Request):
        return self.profile.models[_role(req.model)]

    def skill(self, role: str, dataset: str, task_type: str) -> float:
        m = self.profile.models[_role(role)]
        fixed = m.skill_by_type.get(dataset, {}).get(task_type)
        if fixed is not None:
            return min(0.999, max(0.001, fixed))
        p = m.skill.get(dataset, m.skill["default"])
        return min(0.999, max(0.001, p))

    def _threshold(self, role: str, task: Optional[TaskRef]) -> float:
        """Probit threshold of a derivation by ``role`` on ``task``'s type."""
        ds, tt = (task.dataset, task.type) if task else ("", "")
        key = (role, ds, tt)
        th = self._thresholds.get(key)
        if th is None:
            th = _N.inv_cdf(self.skill(role, ds, tt))
            m = self.profile.models[role]
            if self.profile.type_spread and not m.skill_by_type.get(ds, {}).get(tt):
                th -= self.profile.type_spread * _type_difficulty(ds, tt)
            self._thresholds[key] = th
        return th

    def _z_task(self, task: Optional[TaskRef], ability: str) -> float:
        tid = task.id if task else ""
        memo = self._task_memo(tid)
        z = memo.get(ability)
        if z is None:
            z = memo[ability] = _N.inv_cdf(hash_unit(self.seed, "difficulty", tid, ability))
        return z

    def _derive(self, req: Request, rnd: SplitMix64, hint: float = 0.0, persist: float = 0.0,
                ability: Optional[str] = None) -> bool:
        """Does this call work out its half (or, given ``ability``, that half of the
        task)? (the copula draw behind every outcome)"""
        role = "weak" if req.model == "weak" else "strong"  # _role, inline: every derivation's path
        if ability is None:
            ability = req.abilities[0] if req.abilities else ""
        task = req.task
        th = self._thresholds.get((role, task.dataset, task.type) if task else (role, "", ""))
        if th is None:
            th = self._threshold(role, task)
        if hint:
            th = _N.inv_cdf(min(0.999, _boost(_N.cdf(th), hint)))
        rho = self.profile.difficulty_rho
        tid = task.id if task else ""
        memo = self._memo.get(tid)
        if memo is None:
            memo = self._memo[tid] = {}
        zt = memo.get(ability)
        if zt is None:
            zt = self._z_task(task, ability)
        z = math.sqrt(rho) * zt
        rest = 1.0 - rho
        if not persist:
            return z + math.sqrt(rest) * rnd.gauss(0.0, 1.0) < th  # rest * (1.0 - 0.0) == rest exactly
        vkey = ("view", req.agent, ability)
        view = memo.get(vkey)
        if view is None:  # the reviewer's lasting view: the same for its three calls
            view = memo[vkey] = _N.inv_cdf(hash_unit(self.seed, "view", req.agent, tid, ability))
        z += math.sqrt(rest * persist) * view
        z += math.sqrt(rest * (1.0 - persist)) * rnd.gauss(0.0, 1.0)
        return z < th

    def _read(self, req: Request, text: Any) -> Latent:
        """Reading a text given in the prompt (an output under review, a draft, a candidate):
        ``self.texts.read``, written out (several times on every review call's path)."""
        if not text:
            return UNREADABLE
        texts = self.texts._by_task.get(req.task.id if req.task else "")
        got = texts.get(text) if texts is not None else None
        return UNREADABLE if got is None else got

    def _half(self, req: Request, rnd: SplitMix64, ok: bool, final: Optional[bool] = None,
              answer: Optional[str] = None) -> Latent:
        garbage = not ok and rnd.random() < self.model(req).garbage
        return Latent(correct=ok, final=final, answer=answer, features=INCOHERENT if garbage else frozenset())

    def _route_ok(self, req: Request) -> bool:
        """Did the route cover the true pair? The prompt names the inferred
        requirement (``context['required']``); the task's truth is the fake's."""
        inferred = req.context.get("required")
        if inferred is None or req.task is None or not req.task.required:
            return True
        return set(inferred) == set(req.task.required)

    def _drafts(self, req: Request) -> str:
        """The earlier outputs the finalizer combines: ``sound`` (all present and
        sound), ``unsound`` (all readable, some with a wrong or unusable half) or
        ``missing`` (one is absent or unreadable: a failed call's empty text, or a
        stale memory or corrupted context that lost or garbled it)."""
        drafts = list(req.context.get("drafts") or ())
        if len(drafts) < int(req.context.get("context_items", 0) or 0):
            return "missing"
        state = "sound"
        for d in drafts:
            got = self._read(req, d)
            if not got.correct:
                if "empty" in got.features:
                    return "missing"
                state = "unsound"
        return state

    def _repaired(self, req: Request, rnd: SplitMix64) -> bool:
        """A finalizer whose own half is sound, reading an unsound draft: with
        probability ``models.<m>.repair`` it re-derives the half the drafts were to
        cover - every required ability other than its own - instead of building
        on them; each re-derivation is a derivation by its own model on that half
        (the task's shared difficulty: a half the draft's writer failed is hard
        for the finalizer too). App. A: models solve unassigned abilities about as
        well as assigned ones (docs/backends.md, "Repair at Finalize")."""
        p = self.model(req).repair
        if p <= 0.0 or rnd.random() >= p:  # no draw at 0: such profiles keep their streams
            return False
        own = set(req.abilities)
        others = [a for a in (req.task.required if req.task else ()) if a not in own] or list(req.abilities[:1])
        return all(self._derive(req, rnd, ability=a) for a in others)

    def _final(self, req: Request, rnd: SplitMix64, half_ok: bool) -> tuple[bool, str]:
        """The committed final answer: right by the chain (an unsound draft
        repaired, :meth:`_repaired`), or by chance."""
        if self.profile.graded:
            ok = half_ok
        else:
            ok = half_ok and self._route_ok(req)
            if ok:
                drafts = self._drafts(req)
                ok = drafts == "sound" or (drafts == "unsound" and self._repaired(req, rnd))
            if not ok and req.task is not None:
                ds = req.task.dataset
                ok = rnd.random() < self.profile.guess.get(ds, self.profile.guess.get("default", 0.0))
        # answers are identified so the observer can tell a changed answer from a kept one
        return ok, ("gold" if ok else f"wrong-{req.seed & 0xFFFFFFFF:08x}")

    # -- call kinds ------------------------------------------------------------
    def _infer_abilities(self, req, rnd):
        truth = tuple(req.task.required) if req.task else ()
        pairs = [tuple(p) for p in req.context.get("pairs", [])] or [truth]
        if rnd.random() < self.model(req).infer or len(pairs) < 2:
            pair = truth
        else:
            others = [p for p in pairs if set(p) != set(truth)]
            pair = others[rnd.randrange(len(others))] if others else truth
        return {"pair": list(pair)}, set(pair) == set(truth)

    def _contribute(self, req, rnd):
        ok = self._derive(req, rnd)
        return {"_latent": self._half(req, rnd, ok)}, ok

    def _finalize(self, req, rnd):
        ok = self._derive(req, rnd)
        final, answer = self._final(req, rnd, ok)
        fields: dict[str, Any] = {"_latent": self._half(req, rnd, ok, final=final, answer=answer)}
        if self.profile.graded:
            fields["graded"] = True  # the drawn outcome is the task's (how `backends fit` tells)
        return fields, final

    def _verdict(self, req: Request, rnd: SplitMix64, out: Latent, hint: float = 0.0) -> str:
        """A review call's rubric verdict: the output's class as this reviewer sees it,
        then a draw from ``review.scores.<reviewer>.<class>``."""
        if "incoherent" in out.features:
            cls = "garbage"
        elif self._derive(req, rnd, hint=hint, persist=self.profile.review.persist):
            cls = "sound" if out.correct else "wrong"
        else:
            cls = "unverifiable"
        action = "finalize" if req.context.get("action") == "finalize" else "contribute"
        return self._draw_verdict(rnd, _role(req.model), action, cls, req)

    def _draw_verdict(self, rnd: SplitMix64, role: str, action: str, cls: str, req: Optional[Request] = None) -> str:
        tables = self._tables
        for _ in range(len(CLASSES)):
            entries, nxt, common = tables[(role, action, cls)]
            last = len(entries) - 1
            for i, (verdict, p) in enumerate(entries):
                # the last listed verdict takes what is left without a draw (unless 'otherwise' follows)
                if (i == last and nxt is None) or (
                        rnd.random() if not common or req is None else self._uniform(rnd, common, req, cls, i)) < p:
                    return verdict
            if nxt is None:
                break
            cls = nxt
        return "unverified"

    def _uniform(self, rnd: SplitMix64, common: float, req: Optional[Request], cls: str, step: int) -> float:
        """One verdict draw; a table's ``common`` share of it is the same for every call
        reviewing the same output (what its text shows every reader)."""
        if not common or req is None:
            return rnd.random()
        tid = req.task.id if req.task else ""
        text = str(req.context.get("output_text"))
        memo = self._task_memo(tid)
        skey = ("verdict", text, cls, step)
        shared = memo.get(skey)
        if shared is None:  # what the text shows every reader: the same draw for every call on it
            shared = memo[skey] = hash_unit(self.seed, "verdict", tid, text, cls, step)
        if common >= 1.0:
            return shared
        z = math.sqrt(common) * _N.inv_cdf(shared) + math.sqrt(1.0 - common) * rnd.gauss(0.0, 1.0)
        return _N.cdf(z)

    def _score(self, rnd: SplitMix64, verdict: str) -> float:
        r = self.profile.review
        x = r.anchors[verdict] + (rnd.gauss(0.0, r.noise) if r.noise else 0.0)
        x = min(1.0, max(0.0, x))
        g = r.granularity
        if not g:
            return round(x, 4)
        k = round(x / g)  # the bin: an int; its rounded level is memoized (on every review call's path)
        level = self._levels.get(k)
        if level is None:
            level = self._levels[k] = round(k * g, 4)
        return level

    def _review(self, req, rnd):
        verdict = self._verdict(req, rnd, self._read(req, req.context.get("output_text")))
        return {"score": self._score(rnd, verdict)}, None

    def _committee_round(self, req, rnd):
        ctx = req.context
        out = self._read(req, ctx.get("output_text"))
        if int(ctx.get("round", 1)) == 1:
            verdict = self._verdict(req, rnd, out)
            # the explanation is text too: right when the verdict is (a reader can check the argument)
            right = (verdict == "sound") == out.correct if verdict != "unverified" else False
            expl = Latent(correct=right, answer=verdict,
                          features=frozenset({"unverified"}) if verdict == "unverified" else frozenset())
            return {"score": self._score(rnd, verdict), "_latent": expl}, None
        own, other = float(ctx.get("own", 0.5)), float(ctx.get("other", 0.5))
        c = self.profile.committee
        if abs(own - other) < c.agree:
            near = self._nearest.get(own)
            if near is None:
                near = self._nearest[own] = _nearest(self.profile.review.anchors, own)
            return {"score": self._score(rnd, near)}, None
        theirs = self._read(req, ctx.get("other_explanation"))
        if "unverified" in theirs.features or theirs.answer not in VERDICTS:
            verdict = self._verdict(req, rnd, out)
        elif theirs.correct:
            verdict = self._verdict(req, rnd, out, hint=c.hint)
        elif rnd.random() < c.mislead:
            verdict = str(theirs.answer)
        else:
            verdict = self._verdict(req, rnd, out)
        return {"score": self._score(rnd, verdict)}, None

    def _takeover_candidate(self, req, rnd):
        ok = self._derive(req, rnd)
        final = answer = None
        if req.context.get("action") == "finalize":
            final, answer = self._final(req, rnd, ok)
        return {"_latent": self._half(req, rnd, ok, final=final, answer=answer)}, \
            (final if final is not None else ok)

    def _synthesis(self, req, rnd):
        cands = [self._read(req, c) for c in req.context.get("candidates") or ()]
        orig = self._read(req, req.context.get("output_text"))
        t = self.profile.takeover
        finalize = req.context.get("action") == "finalize"
        act = "finalize" if finalize else "contribute"
        hint = 1.0 - (1.0 - t.hint.get(act, 0.5)) ** sum(1 for c in cands if c.correct)
        keep = t.keep.get(act, 0.5)
        if orig.correct and rnd.random() < t.recognize:
            pick = orig  # reading a sound original next to the candidates, it keeps it
        elif "empty" not in orig.features and (not cands or rnd.random() < keep):
            # anchored on the original: the synthesis restates it
            pick = orig
        elif self._derive(req, rnd, hint=hint):
            pick = None  # its own sound synthesis
        else:
            pick = (self._lean(cands, req.context.get("candidate_scores"), rnd, self.model(req).follow_scores)
                    if cands else orig)
        if pick is None:
            ok = True
            final, answer = self._final(req, rnd, True) if finalize else (None, None)
        else:
            ok = pick.correct
            final, answer = (pick.final, pick.answer) if finalize else (None, None)
            if finalize and final is None:  # an unreadable pick commits nothing usable
                final, answer = self._final(req, rnd, False)
        fields: dict[str, Any] = {"_latent": self._half(req, rnd, ok, final=final, answer=answer)}
        if self.profile.graded and finalize:
            fields["graded"] = True
        return fields, (final if final is not None else ok)

    @staticmethod
    def _lean(cands: list, scores: Any, rnd: SplitMix64, follow: float = 1.0) -> Any:
        """One of ``cands``: in proportion to the ``scores`` the prompt shows them with (with
        probability ``follow``: a model shown scores leans on the better-scored ones), else -
        no usable scores, or not following them - uniformly."""
        w = None
        if isinstance(scores, (list, tuple)) and len(scores) == len(cands):
            try:
                w = [max(0.0, float(v)) for v in scores]
            except (TypeError, ValueError):
                w = None
        if not w or sum(w) <= 0.0 or (follow < 1.0 and rnd.random() >= follow):
            return cands[rnd.randrange(len(cands))]
        u = rnd.random() * sum(w)
        for c, x in zip(cands, w):
            u -= x
            if u < 0.0:
                return c
        return cands[-1]

    def _select(self, req, rnd):
        """Pick one listed agent for the needed abilities (selection as a constrained choice)."""
        ctx = req.context
        cands = [c for c in ctx.get("candidates") or () if c.get("agent")]
        if not cands:
            return {"agent": None}, None
        needed = set(ctx.get("needed") or ())
        fit = [c for c in cands if needed & set(c.get("abilities") or ())]
        pool = fit if (fit and rnd.random() < self.model(req).select) else cands
        if all("success_rate" in c for c in pool):
            # AgentNet's router prompt shows each neighbour's success rate for the task type
            # (assumption: the pick leans on it in proportion; "Not Succeed Yet" counts as 0.5)
            w = [0.5 if c.get("success_rate") is None else max(0.0, float(c["success_rate"])) for c in pool]
            pick = self._lean(pool, w, rnd, self.model(req).follow_rates)
        else:
            pick = pool[rnd.randrange(len(pool))]
        return {"agent": pick["agent"]}, bool(needed & set(pick.get("abilities") or ()))

    def _summarize(self, req, rnd):
        """Restate the committed final answer of ``output_text`` (or garble it)."""
        orig = self._read(req, req.context.get("output_text"))
        if orig.final is not None and rnd.random() < self.model(req).summary_keep:
            latent = Latent(correct=orig.correct, final=orig.final, answer=orig.answer, features=orig.features)
        else:
            final, answer = self._final(req, rnd, False)
            latent = Latent(correct=False, final=final, answer=answer,
                            features=INCOHERENT if orig.final is None else frozenset())
        fields: dict[str, Any] = {"_latent": latent}
        if self.profile.graded:
            fields["graded"] = True
        return fields, latent.final

    def _tokens(self, req: Request, rnd: SplitMix64) -> tuple[int, int]:
        spec = self._token_specs.get(req.kind, _MISSING)
        if spec is _MISSING:
            t = self.profile.tokens.get(req.kind) or self.profile.tokens.get("default")
            # the spec's numbers as plain values (the same arithmetic, without attribute lookups per call)
            spec = self._token_specs[req.kind] = None if t is None else (
                t.prompt, t.per_context, t.completion, t.spread, t.spread ** 2 / 2)
        if spec is None:
            return 0, 0
        prompt, per_context, completion, spread, shift = spec
        items = int(req.context.get("context_items", 0) or 0)
        completion = int(round(completion * math.exp(rnd.gauss(0.0, spread) - shift)))
        return prompt + per_context * items, max(1, completion)


_TYPE_Z: dict[str, dict[str, float]] = {}


def _type_difficulty(dataset: str, task_type: str) -> float:
    """How much harder than its dataset's average a task type is, in sd units:
    a property of the benchmark, not of the run. The dataset's types get the
    normal quantiles (k + 1/2)/n in a hash-fixed order, so the offsets average
    to zero and the dataset's mean skill stays the profile's."""
    table = _TYPE_Z.get(dataset)
    if table is None:
        table = {}
        try:
            from ..workload.tasks import load_profile

            types = sorted(load_profile(dataset).types)
        except Exception:  # a task file's own types: no profile to spread over
            types = []
        if len(types) > 1:
            order = sorted(types, key=lambda t: hash_unit("type-difficulty", dataset, t))
            table = {t: _N.inv_cdf((k + 0.5) / len(order)) for k, t in enumerate(order)}
        _TYPE_Z[dataset] = table
    return table.get(task_type, 0.0)


def _nearest(anchors: dict[str, float], score: float) -> str:
    return min(anchors, key=lambda k: (abs(anchors[k] - score), k))
