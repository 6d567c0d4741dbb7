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

from mypy_extensions import mypyc_attr

import hashlib
from math import exp as _exp, sqrt as _sqrt
from pathlib import Path
from statistics import NormalDist
from typing import Any, Literal, Optional

from ..core.errors import InputError
from ..core.calls import Backend, LatencyModel, Request, Response, TaskRef
# the profile's schema lives in .fake_profile; its names stay importable from here (__all__)
from .fake_profile import (CLASSES, INCOHERENT, VERDICTS, CommitteeSpec, FakeProfile, MeshModel,
                           ModelSpec, ReviewerScores, ReviewSpec, TakeoverSpec, TokenSpec, _raw_table, _table_of,
                           compile_table, load_fake, load_fake_profile, score_distribution)
from .fake_review import ReviewDraws
from .profiles import Rng, SplitMix64, find_profile, hash_unit, model_role, new_rng
from .registry import check_fields, register_backend
from .texts import UNREADABLE, Latent, TextStore

__all__ = ["FakeBackend", "FakeProfile", "load_fake_profile", "load_fake", "check_fake_spec", "make_fake",
           "ModelSpec", "MeshModel", "TokenSpec", "ReviewSpec", "ReviewerScores", "CommitteeSpec", "TakeoverSpec",
           "compile_table", "SplitMix64", "CLASSES", "VERDICTS", "score_distribution"]

_N = NormalDist()
_MISSING = object()
_NO_FEATURES: frozenset = frozenset()  # one shared empty set of features (immutable: nothing tells them apart)



_role = model_role


def _boost(p: float, hint: float) -> float:
    return 1.0 - (1.0 - p) * (1.0 - hint)


@mypyc_attr(allow_interpreted_subclasses=True)
class FakeBackend(ReviewDraws, Backend):
    synchronous = True

    def __init__(self, profile: FakeProfile, seed: int = 0, draw: int = 0,
                 overrides: Optional[dict[str, Any]] = None):
        self.profile = profile
        self.overrides = dict(overrides or {})  # named in describe(), as fake_consensus does
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
        out: dict[str, Any] = {"name": self.name, "models": {k: v.id for k, v in self.profile.models.items()}}
        if self.overrides:  # the summary's ``backend`` names the overridden profile fields
            out["overrides"] = {str(k): self.overrides[k] for k in sorted(self.overrides, key=str)}
        return out

    def complete_sync(self, req: Request) -> Response:
        rnd = new_rng(req.seed ^ self._mix)
        fn = self._kinds.get(req.kind)
        if fn is None:
            fn = self._kinds[req.kind] = getattr(self, "_" + req.kind, None)
        if fn is None:
            return Response(error=f"fake backend has no model of call kind {req.kind!r}")
        fields, correct = fn(req, rnd)
        text = ""
        latent = fields.pop("_latent", None)
        if latent is not None:
            tid = req.task.id if req.task else ""
            text = self.texts.put(tid, req.seed, latent)
            if latent.answer is not None and req.kind != "committee_round":
                # what a parser extracts from a final text: comparable, but opaque
                fields["answer"] = self._answer_id(tid, latent.answer)
        pt, ct = self._tokens(req, rnd)
        # positional (text, fields, correct, prompt_tokens, completion_tokens): cheaper than keywords, every call
        return Response(text, fields, correct, pt, ct)

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

    def _derive(self, req: Request, rnd: Rng, hint: float = 0.0, persist: float = 0.0,
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
        z = _sqrt(rho) * zt
        rest = 1.0 - rho
        if not persist:
            return z + _sqrt(rest) * rnd.gauss(0.0, 1.0) < th  # rest * (1.0 - 0.0) == rest exactly
        vkey = ("view", req.agent, ability)
        view = memo.get(vkey)
        if view is None:  # the reviewer's lasting view: the same for its three calls
            view = memo[vkey] = _N.inv_cdf(hash_unit(self.seed, "view", req.agent, tid, ability))
        z += _sqrt(rest * persist) * view
        z += _sqrt(rest * (1.0 - persist)) * rnd.gauss(0.0, 1.0)
        return z < th

    def _read(self, req: Request, text: Any) -> Latent:
        """Reading a text given in the prompt (an output under review, a draft, a candidate)."""
        return self.texts.read(req.task.id if req.task else "", text)

    def _half(self, req: Request, rnd: Rng, ok: bool, final: Optional[bool] = None,
              answer: Optional[str] = None) -> Latent:
        garbage = not ok and rnd.random() < self.model(req).garbage
        # positional (correct, final, answer, features): on every worker call's path
        return Latent(ok, final, answer, INCOHERENT if garbage else _NO_FEATURES)

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

    def _repaired(self, req: Request, rnd: Rng) -> bool:
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

    def _final(self, req: Request, rnd: Rng, half_ok: bool) -> tuple[bool, str]:
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
        act: Literal["contribute", "finalize"] = "finalize" if finalize else "contribute"
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
    def _lean(cands: list, scores: Any, rnd: Rng, follow: float = 1.0) -> Any:
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

    def _tokens(self, req: Request, rnd: Rng) -> tuple[int, int]:
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
        completion = round(completion * _exp(rnd.gauss(0.0, spread) - shift))  # round(float) is an int already
        return prompt + per_context * items, (completion if completion > 1 else 1)  # max(1, .), without a call


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





def check_fake_spec(spec: dict[str, Any], base_dir: Optional[Path], need_key: bool = True) -> FakeProfile:
    """``backend: {kind: fake, profile, draw, overrides}``; returns the profile it loaded."""
    check_fields(spec, {"kind", "profile", "draw", "overrides"})
    draw = spec.get("draw", 0)
    if not isinstance(draw, int) or isinstance(draw, bool) or draw < 0:
        raise InputError("must be an integer >= 0", field="draw", value=spec.get("draw"))
    if not spec.get("profile"):
        raise InputError("a fake backend needs 'profile'", field="profile")
    # overrides: {dotted.profile.path: value}, as for fake_consensus (sweeps of review quality)
    return load_fake(find_profile(spec["profile"], base_dir), spec.get("overrides"))


def make_fake(spec: dict[str, Any], seed: int, base_dir: Optional[Path], need_key: bool,
              profile: FakeProfile) -> FakeBackend:
    return FakeBackend(profile, seed=seed, draw=int(spec.get("draw", 0)), overrides=spec.get("overrides"))


register_backend("fake", check_fake_spec, make_fake, ranged_profile=FakeProfile)
