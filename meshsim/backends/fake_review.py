"""The MeshHeal fake's review calls: App. D.1's rubric as an explicit distribution.

A reviewer re-derives the half under review; what it can tell puts the
output in a class (sound, wrong, unverifiable, garbage) and its verdict is a
draw from ``review.scores.<reviewer>.<class>`` (stick-breaking over the
listed bins), its score the verdict's level plus noise; committee round 2
reads the other member's explanation (:mod:`.fake`'s docstring states each
distribution). :class:`ReviewDraws` is the part of
:class:`~meshsim.backends.fake.FakeBackend` that draws them.
"""
from __future__ import annotations

from mypy_extensions import mypyc_attr

import math
from statistics import NormalDist
from typing import Any, Mapping, Optional

from ..core.calls import Request
from .fake_profile import CLASSES, VERDICTS, FakeProfile
from .profiles import Rng, hash_unit, model_role
from .texts import Latent

__all__ = ["ReviewDraws"]

_N = NormalDist()
_role = model_role


@mypyc_attr(allow_interpreted_subclasses=True)
class ReviewDraws:
    """Review and committee calls of the MeshHeal fake (a part of :class:`FakeBackend`, which
    sets the attributes below and provides ``_derive``, ``_read`` and ``_task_memo``)."""

    profile: FakeProfile
    seed: int
    _levels: dict[int, float]
    _nearest: dict[float, str]
    #: (reviewer, action, class) -> (stick-breaking entries, 'otherwise' class, common share)
    _tables: dict[tuple[str, str, str], tuple[tuple[tuple[str, float], ...], Optional[str], float]]

    def _derive(self, req: Request, rnd: Rng, hint: float = 0.0, persist: float = 0.0,
                ability: Optional[str] = None) -> bool:
        raise NotImplementedError

    def _read(self, req: Request, text: Any) -> Latent:
        raise NotImplementedError

    def _task_memo(self, task_id: str) -> dict[Any, float]:
        raise NotImplementedError

    def _verdict(self, req: Request, rnd: Rng, out: Latent, hint: float = 0.0) -> str:
        """A review call's rubric verdict: the output's class as this reviewer sees it,
        then a draw from ``review.scores.<reviewer>.<class>``."""
        if "incoherent" in out.features:
            cls = "garbage"
        elif self._derive(req, rnd, hint=hint, persist=self.profile.review.persist):
            cls = "sound" if out.correct else "wrong"
        else:
            cls = "unverifiable"
        action = "finalize" if req.context.get("action") == "finalize" else "contribute"
        # _role, inline: every review call's path
        return self._draw_verdict(rnd, "weak" if req.model == "weak" else "strong", action, cls, req)

    def _draw_verdict(self, rnd: Rng, role: str, action: str, cls: str, req: Optional[Request] = None) -> str:
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

    def _uniform(self, rnd: Rng, common: float, req: Optional[Request], cls: str, step: int) -> float:
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

    def _score(self, rnd: Rng, verdict: str) -> float:
        r = self.profile.review
        # (no typing.cast here: at run time it is a Python call, on every review call's path)
        x = r.anchors[verdict] + (rnd.gauss(0.0, r.noise) if r.noise else 0.0)  # type: ignore[index]
        x = min(1.0, max(0.0, x))
        g = r.granularity
        if not g:
            return round(x, 4)
        k = round(x / g)  # the bin: an int; its rounded level is memoized (on every review call's path)
        level = self._levels.get(k)
        if level is None:
            level = self._levels[k] = round(k * g, 4)
        return level

    def _review(self, req: Request, rnd: Rng) -> tuple[dict[str, Any], Any]:
        verdict = self._verdict(req, rnd, self._read(req, req.context.get("output_text")))
        return {"score": self._score(rnd, verdict)}, None

    def _committee_round(self, req: Request, rnd: Rng) -> tuple[dict[str, Any], Any]:
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

def _nearest(anchors: Mapping[Any, float], score: float) -> str:
    return min(anchors, key=lambda k: (abs(anchors[k] - score), k))
