"""Defences of MeshHeal's detector against lying neighbours (issue 20), all off by default.

Pure rules (no simpy, no messages): the controller (:mod:`.agent`) and the
detector (:mod:`.detector`) call them with what the agent itself observed or
was told. MeshHeal (Sec. 4.2.2) trusts every neighbour's summary and every
reviewer's score; each rule below bounds what F liars can do to one of those
inputs. See docs/adversarial.md#defences.

* :func:`msr_trim` — W-MSR trimming (LeBlanc, Zhang, Koutsoukos & Sundaram,
  "Resilient asymptotic consensus in robust networks", IEEE JSAC 31(4), 2013;
  the rule SAC's filter adapts, SAC paper Sec. 4.1 and Property 4.3): drop the
  F highest and F lowest neighbour summaries before the reference
  q̄_{-i,T,s} and the pooled median / 25th percentile. ``trim_f``.
* :func:`k_witnessed` — isolation evidence from at least k distinct reviewers:
  the rule that a fact vouched for by k = F+1 distinct parties has at least
  one honest voucher (the f+1 matching replies a PBFT client waits for,
  Castro & Liskov, "Practical Byzantine Fault Tolerance", OSDI 1999, Sec. 4.1).
  The MeshHeal paper has no such rule; this is a meshsim addition. ``min_reviewers``.
* :func:`credibility`, :func:`committee_agreement`, :func:`evidence_score` —
  reviewer credibility from agreement with committees: a Beta-reputation count
  (Jøsang & Ismail, "The Beta Reputation System", Bled eConference 2002) of
  how often a reviewer's verdict matched the committee's outcome, used to
  down-weight or exclude that reviewer's scores, in the spirit of filtering
  raters who disagree with the majority (Whitby, Jøsang & Indulska,
  "Filtering out unfair ratings in Bayesian reputation systems", AAMAS 2004
  Trust workshop). Also a meshsim addition. ``credibility``, ``credibility_min``,
  ``credibility_prior``.
"""
from __future__ import annotations

from itertools import combinations
from typing import Iterable, Optional, Sequence

__all__ = ["msr_trim", "k_witnessed", "credibility", "committee_agreement", "evidence_score",
           "weighted_mean"]


def msr_trim(entries: Sequence[tuple[str, float]], f: int,
             short: str = "shrink") -> tuple[list[float], bool]:
    """W-MSR over neighbours: drop the f sources with the lowest values and the f
    with the highest, keep the rest (in input order).

    ``entries`` are ``(neighbour, value)`` pairs; one neighbour may send several
    (the pooled x̄_{j,T,s'} has one per ability s' it advertises), so the unit
    trimmed is the *neighbour*, not the value: first the f neighbours whose
    smallest value is lowest, then, of the rest, the f whose largest value is
    highest (ties by name). With at most f lying neighbours every kept value
    lies between the smallest and the largest honest value (the W-MSR / SAC
    Property 4.3 argument: whenever a liar is kept, an honest neighbour at
    least as extreme was dropped), and a liar cannot widen the cut by sending
    more keys.

    Fewer than 2f+1 neighbours: the guarantee cannot hold. ``short="shrink"``
    (default) trims as far as keeps at least one neighbour, ``(n-1)//2`` from
    each end (2 neighbours: nothing is dropped); ``"skip"`` keeps nothing, so
    the detector update sees an empty peer set and leaves the state unchanged
    (Sec. 4.2.2). Returns ``(kept values, full)``; ``full`` is False when the
    2f+1 neighbours were not there.
    """
    if f <= 0:
        return [v for _j, v in entries], True
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    for j, v in entries:
        if j in lo:
            lo[j] = min(lo[j], v)
            hi[j] = max(hi[j], v)
        else:
            lo[j] = hi[j] = v
    n = len(lo)
    full = n >= 2 * f + 1
    if full:
        k = f
    elif short == "skip":
        return [], False
    else:
        k = (n - 1) // 2
    drop = set(sorted(lo, key=lambda j: (lo[j], j))[:k])
    rest = [j for j in lo if j not in drop]
    drop |= set(sorted(rest, key=lambda j: (-hi[j], j))[:k])
    return [v for j, v in entries if j not in drop], full


def weighted_mean(values: Sequence[float], weights: Optional[Sequence[float]] = None) -> float:
    """Plain mean when ``weights`` is None (bit-for-bit ``sum / len``), else Σ w x / Σ w."""
    if weights is None:
        return sum(values) / len(values)
    tw = sum(weights)
    if tw <= 0:
        return sum(values) / len(values)
    return sum(w * x for w, x in zip(weights, values)) / tw


def k_witnessed(shortfalls: Sequence[float], witnesses: Sequence[Iterable[str]], k: int, m: float,
                spread: float, beta: float, weights: Optional[Sequence[float]] = None) -> bool:
    """Do the low scores behind a β crossing come from at least ``k`` distinct reviewers?

    Read in the strong sense: the crossing must survive discarding every score
    that any ``k-1`` reviewers took part in. For every set S of k-1 reviewers
    seen in the window, the mean of the remaining shortfalls must still give
    (x̄' - m) / spread >= β; a window with fewer than k distinct reviewers, or
    one that S empties, is not enough evidence. k = 1 is MeshHeal as
    published (always True). Cost: C(R, k-1) window means for R distinct
    reviewers in the window (R <= 3 x window), run only on a crossing.
    """
    if k <= 1:
        return True
    sets = [frozenset(w) for w in witnesses]
    reviewers = sorted(frozenset().union(*sets)) if sets else []
    if len(reviewers) < k:
        return False
    for S in combinations(reviewers, k - 1):
        out = set(S)
        keep = [i for i, w in enumerate(sets) if not (w & out)]
        if not keep:
            return False
        xs = [shortfalls[i] for i in keep]
        ws = [weights[i] for i in keep] if weights is not None else None
        if (weighted_mean(xs, ws) - m) / spread < beta:
            return False
    return True


def credibility(agree: float, disagree: float, prior: Sequence[float] = (4.0, 1.0)) -> float:
    """Beta-reputation expectation (a + a0) / (a + d + a0 + d0) of a reviewer's
    agreement with committees (Jøsang & Ismail 2002)."""
    a0, d0 = prior
    return (agree + a0) / (agree + disagree + a0 + d0)


def committee_agreement(initial_reviewer: Optional[str], q0: Optional[float], members: Sequence[str],
                        round1: Sequence[float], q: Optional[float], tau: float) -> list[tuple[str, bool]]:
    """Who agreed with a committee that ran to the end (Alg. 2 lines 5-7).

    The outcome is the committee's verdict, fail iff q <= tau (Takeover). The
    initial reviewer's verdict is q0 <= tau; each member's is its *round-1*
    score <= tau (given before it saw the other's, so an honest member is not
    credited for echoing). A reviewer is observed only when the committee had
    a member other than itself: a committee of one reviewer in two contexts
    (Sec. 4.2.1, one eligible reviewer) is no independent check of that
    reviewer, so a lone framer cannot confirm itself. No completed committee
    (``round1`` empty): no observation.
    """
    if q is None or not round1 or len(members) != len(round1):
        return []
    fail = q <= tau
    out = []
    if initial_reviewer is not None and q0 is not None and set(members) - {initial_reviewer}:
        out.append((initial_reviewer, (q0 <= tau) == fail))
    for j, v in zip(members, round1):
        if set(members) - {j}:
            out.append((j, (v <= tau) == fail))
    return out


def evidence_score(entries: Sequence[tuple[str, float]], cred: dict[str, float], mode: str,
                   cmin: float) -> Optional[tuple[float, float, frozenset]]:
    """The detector evidence from one assessment under a credibility rule.

    ``entries``: the scores that made q, with their reviewers (the initial
    reviewer's q0 alone, or both committee members' round-2 scores). Returns
    ``(q, weight, witnesses)`` or None when nothing credible is left.

    * ``exclude``: drop reviewers with credibility < ``cmin``; q is the mean of
      the rest, weight 1.
    * ``weight``: a reviewer below ``cmin`` counts with weight = its
      credibility (others 1); q is the weighted mean and the entry's weight in
      the detector window is the mean weight.
    """
    if mode == "exclude":
        kept = [(j, s) for j, s in entries if cred[j] >= cmin]
        if not kept:
            return None
        return sum(s for _j, s in kept) / len(kept), 1.0, frozenset(j for j, _s in kept)
    ws = [1.0 if cred[j] >= cmin else cred[j] for j, _s in entries]
    tw = sum(ws)
    if tw <= 0:
        return None
    q = sum(w * s for w, (_j, s) in zip(ws, entries)) / tw
    return q, tw / len(ws), frozenset(j for (j, _s), w in zip(entries, ws) if w > 0)
