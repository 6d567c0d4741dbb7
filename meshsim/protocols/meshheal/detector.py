"""MeshHeal's slow timescale: the peer-relative degradation detector.

Pure logic (no simpy, no messages): a controller feeds it its own final
review scores and the summaries its direct neighbours sent, and gets back its
new routing state. Equations are Sec. 4.2.2 / App. B.5:

* reference   q̄_{-i,T,s} = mean_{j ∈ P_{i,T,s}} μ_{j,T,s}         (normal neighbours with
  recent matched outputs)
* shortfall   x_{i,t,s} = q̄_{-i,T,s} - q_{i,t}
* mean        x̄_{i,T,s} = mean of the latest ``window`` (8) shortfalls
* normal range: pool x̄_{j,T,s'} of normal neighbours over all s' of type T;
  m = median, p25 = 25th percentile
* z_{i,T,s} = (x̄_{i,T,s} - m) / max(m - p25, 0.10)
* transitions (α = 1.2, β = 2.0): normal→watched at z ≥ α; watched→normal at
  z < α; normal/watched→isolated after two consecutive updates with z ≥ β
  (count resets when z < β); isolated→watched at one update with z < β;
  fewer than 3 matched observations or an empty peer set → unchanged.
* warm-up (App. C.2, Tab. C5): an update with ``act=False`` collects the
  evidence (scores, shortfalls, matched counts, the CUSUM sum) and reports z,
  but applies no transition and counts no crossing; the first acting update
  after it decides on the windows the warm-up filled.

``AbsoluteDetector`` and ``CusumDetector`` are the Sec. 6.4 comparison rules;
``NoDetector`` never changes state (the no-healing control).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Literal, NamedTuple, Optional, Protocol

from ...core.calldata import rebuilt
from ...core.discovery import Registry
from ...core.types import RoutingState
from .defences import k_witnessed, weighted_mean

NORMAL, WATCHED, ISOLATED = RoutingState.NORMAL, RoutingState.WATCHED, RoutingState.ISOLATED

__all__ = ["DetectorParams", "PeerSummary", "Update", "RelativeDetector", "AbsoluteDetector",
           "CusumDetector", "NoDetector", "percentile", "median", "make_detector", "Detector", "DetectorKind",
           "DETECTORS", "register_detector", "detector_names", "RELATIVE", "ABSOLUTE", "CUSUM", "NONE"]


@dataclass(frozen=True)
class DetectorParams:
    window: int = 8  # shortfalls (and scores) kept per (T, s)  (Tab. B11)
    min_obs: int = 3  # matched observations before any transition
    alpha: float = 1.2  # watch threshold on z
    beta: float = 2.0  # isolation threshold on z
    consecutive: int = 2  # updates with z >= beta needed to isolate
    spread_floor: float = 0.10  # floor of m - p25
    count_scope: str = "key"  # consecutive z >= beta counted per (T, s) detector or per agent
    shortfall_scope: str = "key"  # x̄ over the (T, s) detector's shortfalls, or the agent's latest ones
    # absolute / CUSUM comparison rules (Sec. 6.4)
    abs_watch: float = 0.6  # mean recent score below this -> watched
    abs_isolate: float = 0.5  # ... below this on `consecutive` updates -> isolated
    cusum_k: float = 0.1  # allowance
    cusum_h: float = 1.0  # decision threshold
    cusum_target: float = 0.85  # expected healthy score
    # issue 20 defence (off at 1): a beta crossing counts only if its low scores
    # come from >= min_reviewers distinct reviewers (defences.k_witnessed)
    min_reviewers: int = 1


class PeerSummary(NamedTuple):
    """What neighbour j last told us about (T, s): μ_{j,T,s}, x̄_{j,T,s}, matched count."""

    mu: Optional[float]
    xbar: Optional[float]
    n: int


@dataclass(slots=True)
class Update:  # not frozen: one per detector update, 3x cheaper to build (issue 22)
    """One detector update: what it saw and what it decided (for reviews.jsonl)."""

    matched: bool
    shortfall: Optional[float]
    xbar: Optional[float]
    m: Optional[float]
    p25: Optional[float]
    z: Optional[float]
    state: RoutingState
    changed: bool
    blocked: bool = False  # a z >= beta crossing not counted: too few distinct reviewers (min_reviewers)

    def __init__(self, matched: bool, shortfall: Optional[float], xbar: Optional[float], m: Optional[float],
                 p25: Optional[float], z: Optional[float], state: RoutingState, changed: bool,
                 blocked: bool = False) -> None:
        # written out: compiled, it is native; the one dataclasses generates runs interpreted (docs/scaling.md)
        self.matched = matched
        self.shortfall = shortfall
        self.xbar = xbar
        self.m = m
        self.p25 = p25
        self.z = z
        self.state = state
        self.changed = changed
        self.blocked = blocked

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuilt(self)


def median(values: list[float]) -> float:
    return percentile(values, 50.0)


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), without numpy's overhead."""
    return _percentile_sorted(sorted(values), q)


def _percentile_sorted(xs: list[float], q: float) -> float:
    """:func:`percentile` of values already sorted (one sort for several percentiles)."""
    if not xs:
        raise ValueError("percentile of an empty list")
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


class _Base:
    def __init__(self, params: DetectorParams | None = None):
        self.p = params or DetectorParams()
        self.state = NORMAL
        self.scores: dict[tuple[str, str], deque] = {}
        self.shortfalls: dict[tuple[str, str], deque] = {}
        self.matched: dict[tuple[str, str], int] = {}
        self.over_beta = 0
        self.over_beta_key: dict[tuple[str, str], int] = {}
        # issue 20 defences, parallel to ``shortfalls``: who reviewed each score,
        # and its weight (kept only once a weight other than 1 was given)
        self.witnesses: dict[tuple[str, str], deque] = {}
        self.weights: dict[tuple[str, str], deque] = {}
        self._next_witnesses: frozenset = frozenset()
        self._next_weight = 1.0

    # what this agent advertises to neighbours about (T, s)
    def mu(self, key: tuple[str, str]) -> Optional[float]:
        d = self.scores.get(key)
        return sum(d) / len(d) if d else None

    def _skey(self, key: tuple[str, str]) -> tuple[str, str]:
        return key if self.p.shortfall_scope == "key" else ("*", "*")

    def xbar(self, key: tuple[str, str]) -> Optional[float]:
        d = self.shortfalls.get(self._skey(key))
        # "enough matched evidence": per (T, s) for per-key means; for the
        # agent-level mean, the agent's matched observations in total.
        n = self.matched.get(key, 0) if self.p.shortfall_scope == "key" else sum(self.matched.values())
        if not d or n < self.p.min_obs:
            return None
        wd = self.weights.get(self._skey(key))
        return sum(d) / len(d) if wd is None else weighted_mean(d, wd)

    def summary(self, key: tuple[str, str]) -> PeerSummary:
        return PeerSummary(self.mu(key), self.xbar(key), self.matched.get(key, 0))

    def _record_score(self, key: tuple[str, str], q: float) -> None:
        d = self.scores.get(key)
        if d is None:
            d = self.scores[key] = deque(maxlen=self.p.window)
        d.append(q)

    def _set(self, new: RoutingState) -> bool:
        changed = new != self.state
        self.state = new
        return changed

    def update(self, task_type: str, ability: str, q: float,
               peers: dict[str, dict[tuple[str, str], PeerSummary]], act: bool = True) -> Update:
        """Apply one final review score q_{i,t} for (T, s).

        ``peers`` maps each *normal* direct neighbour to its latest summaries;
        controllers with many neighbours pass the two lists directly to
        :meth:`update_lists` from their own indexes.
        """
        key = (task_type, ability)
        mus = [sm.mu for summ in peers.values() if (sm := summ.get(key)) is not None and sm.mu is not None]
        pool = [sm.xbar for summ in peers.values() for (t, _s), sm in summ.items()
                if t == task_type and sm.xbar is not None]
        return self.update_lists(task_type, ability, q, mus, pool, act)

    def update_lists(self, task_type: str, ability: str, q: float, mus: list[float],
                     pool: list[float], act: bool = True) -> Update:
        """``mus``: μ_{j,T,s} of P_{i,T,s}; ``pool``: x̄_{j,T,s'} of C_{i,T}.
        ``act=False`` (warm-up): collect the evidence, leave the state as it is."""
        raise NotImplementedError

    def note_evidence(self, witnesses: frozenset = frozenset(), weight: float = 1.0) -> None:
        """Who reviewed the score of the next :meth:`update_lists` call, and its
        weight in the window (issue 20 defences; only the relative detector uses them)."""
        self._next_witnesses = witnesses
        self._next_weight = weight


class RelativeDetector(_Base):
    """Peer-relative detector (Sec. 4.2.2, App. B.5)."""

    def update_lists(self, task_type: str, ability: str, q: float, mus: list[float],
                     pool: list[float], act: bool = True) -> Update:
        p = self.p
        key = (task_type, ability)
        # Reference from normal neighbours with recent matched outputs (P_{i,T,s}).
        self._record_score(key, q)
        if not mus:
            self._next_witnesses, self._next_weight = frozenset(), 1.0
            return Update(False, None, None, None, None, None, self.state, False)
        x = sum(mus) / len(mus) - q
        skey = self._skey(key)
        d = self.shortfalls.get(skey)
        if d is None:
            d = self.shortfalls[skey] = deque(maxlen=p.window)
        d.append(x)
        self.matched[key] = self.matched.get(key, 0) + 1
        wd = self._track_evidence(skey)
        xbar = sum(d) / len(d) if wd is None else weighted_mean(d, wd)
        # Normal range: pooled x̄_{j,T,s'} of normal neighbours over all abilities of T (C_{i,T}).
        if self.matched[key] < p.min_obs or not pool:
            return Update(True, x, xbar, None, None, None, self.state, False)
        xs = sorted(pool)  # one sort for both percentiles (every update's path)
        m = _percentile_sorted(xs, 50.0)  # the median
        p25 = _percentile_sorted(xs, 25.0)
        spread = max(m - p25, p.spread_floor)
        z = (xbar - m) / spread
        if not act:  # warm-up: evidence only; no crossing counted, no transition
            return Update(True, x, xbar, m, p25, z, self.state, False)
        blocked = False
        if p.min_reviewers > 1 and z >= p.beta:
            blocked = not k_witnessed(d, self.witnesses[skey], p.min_reviewers, m, spread, p.beta,
                                      self.weights.get(skey))
        changed = self._transition(z, key, crossing=not blocked)
        return Update(True, x, xbar, m, p25, z, self.state, changed, blocked)

    def _track_evidence(self, skey: tuple[str, str]) -> Optional[deque]:
        """Record the pending :meth:`note_evidence` beside the shortfall just appended;
        return the weights window, or None while every weight has been 1 (plain mean)."""
        p = self.p
        w = self._next_weight
        if p.min_reviewers > 1:
            wit = self.witnesses.get(skey)
            if wit is None:
                wit = self.witnesses[skey] = deque(maxlen=p.window)
            wit.append(self._next_witnesses)
        wd = self.weights.get(skey)
        if wd is None and w != 1.0:
            # first weight other than 1: the earlier entries of the window had weight 1
            wd = self.weights[skey] = deque([1.0] * (len(self.shortfalls[skey]) - 1), maxlen=p.window)
        if wd is not None:
            wd.append(w)
        self._next_witnesses, self._next_weight = frozenset(), 1.0
        return wd

    def _transition(self, z: float, key: tuple[str, str], crossing: bool = True) -> bool:
        p = self.p
        s = self.state
        # Consecutive crossings of beta: per (T, s) detector by default (each
        # (T, s) keeps "a separate detector", App. B.5), or per agent. A crossing
        # without enough distinct reviewers (min_reviewers) does not count.
        over = z >= p.beta and crossing
        if p.count_scope == "key":
            count = self.over_beta_key[key] = self.over_beta_key.get(key, 0) + 1 if over else 0
        else:
            count = self.over_beta = self.over_beta + 1 if over else 0
        if s is ISOLATED:
            if z < p.beta:
                return self._set(WATCHED)  # recovery probe passed
            return False
        if count >= p.consecutive:
            self.over_beta = 0
            self.over_beta_key.clear()
            return self._set(ISOLATED)
        if s is NORMAL and z >= p.alpha:
            return self._set(WATCHED)
        if s is WATCHED and z < p.alpha:
            return self._set(NORMAL)
        return False


class AbsoluteDetector(_Base):
    """Fixed thresholds on the agent's own recent mean score (Sec. 6.4 comparison)."""

    def update_lists(self, task_type: str, ability: str, q: float, mus: list[float],
                     pool: list[float], act: bool = True) -> Update:
        p = self.p
        key = (task_type, ability)
        self._record_score(key, q)
        self.matched[key] = self.matched.get(key, 0) + 1
        mu = self.mu(key)
        if self.matched[key] < p.min_obs or not act:
            return Update(True, None, None, None, None, None, self.state, False)
        assert mu is not None  # (a score was just recorded)
        bad = mu < p.abs_isolate
        self.over_beta = self.over_beta + 1 if bad else 0
        s = self.state
        if s is ISOLATED:
            changed = self._set(WATCHED) if not bad else False
        elif self.over_beta >= p.consecutive:
            self.over_beta = 0
            changed = self._set(ISOLATED)
        elif s is NORMAL and mu < p.abs_watch:
            changed = self._set(WATCHED)
        elif s is WATCHED and mu >= p.abs_watch:
            changed = self._set(NORMAL)
        else:
            changed = False
        return Update(True, None, None, None, None, None, self.state, changed)


class CusumDetector(_Base):
    """One-sided CUSUM on the score deficit (Page 1954; Sec. 6.4 comparison)."""

    def __init__(self, params=None):
        super().__init__(params)
        self.cusum = 0.0

    def update_lists(self, task_type: str, ability: str, q: float, mus: list[float],
                     pool: list[float], act: bool = True) -> Update:
        p = self.p
        key = (task_type, ability)
        self._record_score(key, q)
        self.matched[key] = self.matched.get(key, 0) + 1
        self.cusum = max(0.0, self.cusum + (p.cusum_target - q) - p.cusum_k)
        s = self.state
        if not act:  # warm-up: the sum accumulates, the state stays
            changed = False
        elif s is ISOLATED:
            changed = self._set(WATCHED) if self.cusum < p.cusum_h else False
        elif self.cusum >= 2 * p.cusum_h:
            changed = self._set(ISOLATED)
        elif s is NORMAL and self.cusum >= p.cusum_h:
            changed = self._set(WATCHED)
        elif s is WATCHED and self.cusum < p.cusum_h:
            changed = self._set(NORMAL)
        else:
            changed = False
        return Update(True, None, None, None, None, self.cusum, self.state, changed)


class NoDetector(_Base):
    """Never changes state: the no-healing control."""

    def update_lists(self, task_type: str, ability: str, q: float, mus: list[float],
                     pool: list[float], act: bool = True) -> Update:
        self._record_score((task_type, ability), q)
        return Update(False, None, None, None, None, None, self.state, False)


class Detector(Protocol):
    """What a MeshHeal agent (:mod:`.agent`) calls on its detector and reads from it."""

    state: RoutingState
    #: the agent's own recent final scores per (task type, ability): what it advertises (μ)
    scores: dict[tuple[str, str], deque]

    def summary(self, key: tuple[str, str]) -> PeerSummary: ...

    def note_evidence(self, witnesses: frozenset = frozenset(), weight: float = 1.0) -> None: ...

    def update_lists(self, task_type: str, ability: str, q: float, mus: list[float],
                     pool: list[float], act: bool = True) -> Update: ...


@dataclass(frozen=True)
class DetectorKind:
    """A registered detector: ``protocol.params.detector: NAME`` builds ``make(params)``.

    ``watches``: the evidence its rule is a statistic of, which the analysis
    (:mod:`meshsim.analysis`) draws for it: ``shortfall`` (peer-relative:
    q̄ of the neighbours minus the agent's own score), ``score`` (the agent's
    own scores), or ``None`` for a detector that never changes state."""

    name: str
    make: Callable[[DetectorParams], Detector]
    watches: Optional[Literal["shortfall", "score"]]


#: detector name -> its kind, in registration order (scenario checks and the CLI list them so)
#: (a lookup first imports every module of the package that calls register_detector: meshsim.core.discovery)
DETECTORS: Registry[DetectorKind] = Registry(__package__ or "meshsim.protocols.meshheal", "register_detector")


def register_detector(name: str, make: Callable[[DetectorParams], Detector],
                      watches: Optional[Literal["shortfall", "score"]]) -> DetectorKind:
    """Add a detector (see :class:`DetectorKind`): one registration, nothing else edited."""
    kind = DetectorKind(name, make, watches)
    DETECTORS[name] = kind
    return kind


def detector_names(acting: bool = False) -> list[str]:
    """The registered detectors' names; ``acting``: only those that change state."""
    return [k.name for k in DETECTORS.values() if not acting or k.watches is not None]


def make_detector(kind: str, params: DetectorParams) -> Detector:
    return DETECTORS[kind].make(params)


RELATIVE, ABSOLUTE, CUSUM, NONE = "relative", "absolute", "cusum", "none"
register_detector(RELATIVE, RelativeDetector, "shortfall")  # Sec. 4.2.2, the published rule
register_detector(ABSOLUTE, AbsoluteDetector, "score")  # Sec. 6.4 comparison
register_detector(CUSUM, CusumDetector, "score")  # Sec. 6.4 comparison
register_detector(NONE, NoDetector, None)  # the no-healing control
