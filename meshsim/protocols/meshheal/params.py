"""MeshHeal's parameters (Tab. B11 defaults; ``protocol.params``): a pydantic model, so not compiled
(the protocol itself is :mod:`.method`)."""
from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import BeforeValidator, Field, model_serializer

from ...core.strict import Strict

from ...core.errors import InputError
from ...core.types import parse_duration
from .detector import DETECTORS, RELATIVE, DetectorParams, detector_names

__all__ = ["MeshHealParams"]

#: a protocol time: a microsecond .. about 32 years (MAX_PARAM_SECONDS): a smaller one is below any
#: meaningful timescale, a larger one overflows timer arithmetic or never fires (issue 19)
_Dur = Annotated[float, BeforeValidator(parse_duration), Field(ge=1e-6, le=1e9)]
_Prob = Annotated[float, Field(ge=0.0, le=1.0)]


def _registered_detector(v: Any) -> str:
    """``detector``: a name of :data:`.detector.DETECTORS` (registered ones, not a fixed list)."""
    if not isinstance(v, str) or v not in DETECTORS:
        names = [repr(n) for n in detector_names()]
        raise ValueError("Input should be " + (", ".join(names[:-1]) + " or " if len(names) > 1 else "") + names[-1])
    return v


_Detector = Annotated[str, BeforeValidator(_registered_detector),
                      Field(json_schema_extra=lambda s: s.update(enum=detector_names()))]


class MeshHealParams(Strict):
    """Tab. B11 defaults; every field can be set in ``protocol.params``."""

    # fast timescale (Sec. 4.2.1, App. B.5)
    review: bool = True  # False: no review at all (with detector none: the no-healing control)
    review_calls: Annotated[int, Field(ge=1, le=9)] = 3
    tau_to: _Prob = 0.40
    sigma_com: Annotated[float, Field(ge=0.0, le=1e6)] = 0.55
    committee: bool = True  # False: single-reviewer ablation
    takeover: bool = True  # False: no-Takeover ablation
    # slow timescale (Sec. 4.2.2)
    detector: _Detector = RELATIVE  # a registered detector (.detector.register_detector)
    window: Annotated[int, Field(ge=1, le=100_000)] = 8
    min_obs: Annotated[int, Field(ge=1, le=100_000)] = 3
    # thresholds on a shortfall z-score: |z| beyond 1e6 never happens (bounded numbers, issue 19)
    alpha: Annotated[float, Field(ge=-1e6, le=1e6)] = 1.2
    beta: Annotated[float, Field(ge=-1e6, le=1e6)] = 2.0
    consecutive: Annotated[int, Field(ge=1, le=100_000)] = 2
    # Our reading of Sec. 4.2.2 (see docs/meshheal.md): x̄ over the agent's latest
    # `window` matched shortfalls and its consecutive-crossing count, both across
    # its (T, s) detectors; "key" keeps them per (T, s).
    count_scope: Literal["key", "agent"] = "agent"
    shortfall_scope: Literal["key", "agent"] = "agent"
    spread_floor: Annotated[float, Field(gt=0, le=1e6)] = 0.10
    probe_every: Annotated[int, Field(ge=1, le=10 ** 9)] = 10
    probe_clock: Literal["stream", "local"] = "stream"
    # App. C.2 / Tab. C5 warm-up: the first `warmup` tasks of the stream collect detector
    # evidence while every agent stays in ordinary routing (no transition, no probe).
    # The paper gives no length; 0 (off) keeps the runs as they were (docs/meshheal.md#warm-up).
    warmup: Annotated[int, Field(ge=0, le=10 ** 9)] = 0
    abs_watch: _Prob = 0.6
    abs_isolate: _Prob = 0.5
    cusum_k: Annotated[float, Field(ge=-1e6, le=1e6)] = 0.1
    cusum_h: Annotated[float, Field(ge=-1e6, le=1e6)] = 1.0
    cusum_target: _Prob = 0.85
    # routing (Sec. 4.1, App. B.7)
    route_limit: Annotated[int, Field(ge=1, le=255)] = 4
    infinity: Annotated[int, Field(ge=2, le=255)] = 16
    refresh: Optional[_Dur] = None  # periodic distance-vector refresh; None = triggered only
    route_timeout: Optional[_Dur] = None
    # transport
    ack_timeout: _Dur = 1.0
    retries: Annotated[int, Field(ge=0, le=100)] = 4
    review_timeout: _Dur = 900.0
    task_timeout: _Dur = 7200.0
    # defences against lying neighbours (issue 20; docs/adversarial.md#defences), all off by default
    trim_f: Annotated[int, Field(ge=0, le=1000)] = 0  # W-MSR: drop the F highest / lowest neighbour summaries
    trim_short: Literal["shrink", "skip"] = "shrink"  # fewer than 2F+1 neighbours: trim less / no update
    min_reviewers: Annotated[int, Field(ge=1, le=4)] = 1  # distinct reviewers behind an isolation's crossings
    credibility: Literal["off", "weight", "exclude"] = "off"  # reviewer credibility from committee agreement
    credibility_min: _Prob = 0.5
    credibility_prior: tuple[Annotated[float, Field(ge=0, le=1e6)], Annotated[float, Field(ge=0, le=1e6)]] = (4.0, 1.0)
    robustness_time_limit: Annotated[float, Field(gt=0, le=86400)] = 10.0  # trim_f > 0: the graph check's budget
    # defences against routing liars (issue 34; docs/adversarial.md#routing-defences), all off by default
    e2e_ack: bool = False  # end-to-end task acknowledgement back along the route, retry via another next hop
    e2e_timeout: _Dur = 600.0  # a first forwarder's wait for the ack (deeper ones wait less: routing_defences.py)
    e2e_retries: Annotated[int, Field(ge=0, le=16)] = 2
    rating: bool = False  # route around neighbours whose forwarded tasks were not acknowledged (needs e2e_ack)
    rate_min: _Prob = 0.5
    rate_prior: tuple[Annotated[float, Field(gt=0, le=1e6)], Annotated[float, Field(gt=0, le=1e6)]] = (2.0, 1.0)
    advert_check: bool = False  # ignore a neighbour's distance-0 advert for an ability it did not declare

    def detector_params(self) -> DetectorParams:
        return DetectorParams(window=self.window, min_obs=self.min_obs, alpha=self.alpha, beta=self.beta,
                              consecutive=self.consecutive, count_scope=self.count_scope,
                              shortfall_scope=self.shortfall_scope, spread_floor=self.spread_floor,
                              abs_watch=self.abs_watch, abs_isolate=self.abs_isolate, cusum_k=self.cusum_k,
                              cusum_h=self.cusum_h, cusum_target=self.cusum_target,
                              min_reviewers=self.min_reviewers)

    @model_serializer(mode="wrap")
    def _omit_defaults_of_defences(self, handler):
        # The issue-20 defences appear in a resolved scenario only when set, so
        # that runs without them resolve (and digest) exactly as before.
        data = handler(self)
        for name in _DEFENCE_FIELDS + _OMIT_AT_DEFAULT:
            if getattr(self, name) == type(self).model_fields[name].default:
                data.pop(name, None)
        return data

    @property
    def defended(self) -> bool:
        """Is any issue-20 defence on?"""
        return bool(self.trim_f) or self.min_reviewers > 1 or self.credibility != "off"

    def check(self, sc: Any, G: Any) -> None:
        if self.alpha >= self.beta:
            raise InputError("alpha must be < beta", field="protocol.params.alpha", value=self.alpha)
        if sum(self.credibility_prior) <= 0:
            raise InputError("credibility_prior needs a positive count ([agree, disagree])",
                             field="protocol.params.credibility_prior", value=list(self.credibility_prior))
        for name, on in (("trim_f", self.trim_f > 0), ("min_reviewers", self.min_reviewers > 1),
                         ("credibility", self.credibility == "weight")):
            if on and (self.detector != RELATIVE or not self.review):
                raise InputError(f"{name} acts on the relative detector's window: needs detector: relative and review: true",
                                 field=f"protocol.params.{name}", value=getattr(self, name))
        if self.rating and not self.e2e_ack:
            raise InputError("rating rates neighbours by end-to-end acks: needs e2e_ack: true",
                             field="protocol.params.rating", value=self.rating)
        if sc.tasks is None:
            raise InputError("meshheal needs a 'tasks' stream", field="tasks")
        if self.warmup and self.warmup >= sc.tasks.count:
            raise InputError(f"a warm-up of {self.warmup} tasks leaves no task of the {sc.tasks.count}-task stream "
                             "to detection", field="protocol.params.warmup", value=self.warmup)
        if sc.backend is None:
            raise InputError("meshheal needs a 'backend'", field="backend")


_DEFENCE_FIELDS = ("trim_f", "trim_short", "min_reviewers", "credibility", "credibility_min", "credibility_prior",
                   "robustness_time_limit",
                   "e2e_ack", "e2e_timeout", "e2e_retries", "rating", "rate_min", "rate_prior", "advert_check")
# later keys, likewise absent from a resolved scenario while off (runs digest as before)
_OMIT_AT_DEFAULT = ("warmup",)
