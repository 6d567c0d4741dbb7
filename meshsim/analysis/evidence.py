"""Which reviews isolated an agent: the evidence behind each isolation, read from a run's records.

MeshHeal's relative detector (Sec. 4.2.2, App. B.5) isolates agent i when
z = (x̄ − m) / max(m − p25, floor) reaches β on ``consecutive`` updates in a
row; x̄ is the mean of i's latest ``window`` matched shortfalls
x = q̄ − q, and each q is the final score of one of i's reviewed outputs:
the initial reviewer's median q0, or the mean of the two committee members'
round-2 scores when a committee ran to the end (Alg. 2). So an isolation is
explained by the reviews in that window: who scored them, whether that
reviewer was degraded, and its own routing state at that moment.

This module rebuilds that window, as an outside observer, from what the run
records (docs/outputs.md): ``reviews.jsonl`` (each output's reviewers, scores
and the detector updates it fed, in record order, which is the order the
detector saw them), ``states.jsonl`` (every routing-state change, with its
simulated time) and the degradation intervals of ``summary.json``. Nothing
is re-simulated. Per isolation it gives the window's entries, each reviewer's
part in it, and whether that reviewer was *pivotal*: the window without the
scores it took part in no longer reaches β (the same leave-reviewers-out test
as the ``min_reviewers`` defence, :func:`meshsim.protocols.meshheal.defences.k_witnessed`,
at k = 2). The rebuilt x̄ and z are checked against the recorded ones; under
``credibility: weight`` the weights are not recorded, so an isolation is then
marked ``exact: false`` and no reviewer is called pivotal; under
``credibility: exclude`` a reviewer whose score the producer dropped is still
listed (credibility is not recorded either), while x̄ and z stay exact.

A reviewer is *degraded* at a review when the review's task lies in one of
its injected degradation intervals [b, r) (a change at task k takes effect
from k, as for detection delay); its *state* is its own routing state at the
review's simulated time (``states.jsonl``); ``view`` is the producer's view
of it when it chose its reviewers (``reviewer_views``).

Pure functions over record rows (:func:`explain_records`, usable in-process
by metrics code) and a run-folder reader (:func:`explain_folder`); docs in
docs/meshheal.md#collapse and docs/outputs.md. ``meshsim explain RUN_DIR``
prints it.
"""
from __future__ import annotations

import json
from bisect import bisect_right
from collections import deque
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from ..core.errors import InputError, RunFolderError
from ..core.names import node_order
from ..io.records import find_records, iter_records

__all__ = ["Witness", "Entry", "ReviewerPart", "Isolation", "Miss", "Explanation", "witnesses_of",
           "explain_records", "explain_folder", "seed_folders", "intervals_from_summary", "format_explanation"]

NORMAL, ISOLATED = "normal", "isolated"
#: |recorded − rebuilt| above this: the window was not rebuilt exactly (weights not recorded)
_TOL = 1e-9


@dataclass(frozen=True)
class Witness:
    """One reviewer's part in one final score q."""

    reviewer: str
    score: float  # its score: q0 of the initial review (median of its calls), or its round-2 score
    role: str  # "initial" | "committee"
    degraded: bool  # injected degradation at the review's task
    state: str  # its own routing state at the review's time (states.jsonl)
    view: Optional[str]  # the producer's view of its state when reviewers were chosen (reviewer_views)


@dataclass(frozen=True)
class Entry:
    """One detector update in a window: one matched (T, s) of one reviewed output."""

    task: int
    t: float
    type: str
    ability: str
    probe: bool
    output_correct: Optional[bool]
    q: float  # the review's final score (docs/outputs.md, reviews.jsonl ``q``)
    shortfall: float  # x = q̄ − q as the detector computed it
    z: Optional[float]
    blocked: bool
    witnesses: tuple[Witness, ...]

    @property
    def degraded_only(self) -> bool:
        """Every score behind q came from a degraded reviewer."""
        return bool(self.witnesses) and all(w.degraded for w in self.witnesses)


@dataclass(frozen=True)
class ReviewerPart:
    """A reviewer's part in one isolation's window."""

    reviewer: str
    entries: int  # window entries whose q it took part in
    mean_score: float  # mean of its scores in those entries
    degraded_entries: int  # ... of which it was degraded at the review
    states: tuple[str, ...]  # its own routing states at those reviews (distinct, in order seen)
    z_without: Optional[float]  # z of the window without those entries (None: nothing left, or not exact)
    pivotal: Optional[bool]  # the window without them stays below beta (None: not exact)


@dataclass(frozen=True)
class Isolation:
    """One state change to isolated and the evidence behind it."""

    agent: str
    task: int
    t: float
    old: str  # state before
    healthy: bool  # not degraded at the task (a false isolation when True)
    ability: str  # the (T, s) whose update isolated it
    type: str
    z: float
    xbar: float
    m: float
    p25: float
    spread: float  # max(m − p25, spread_floor)
    beta: float
    crossings: tuple[int, ...]  # tasks of the consecutive updates with z >= beta that isolated it
    window: tuple[Entry, ...]
    reviewers: tuple[ReviewerPart, ...]
    exact: bool  # rebuilt x̄ and z match the recorded ones
    #: other agents seen (so far in the records) holding an ability of the window, neither the agent nor one
    #: of the window's reviewers: (agent, degraded, own state) at the isolation. Only normal neighbours may
    #: review (Sec. 4.2.1): a healthy holder that is watched or isolated leaves the reviewing to the others.
    bystanders: tuple[tuple[str, bool, str], ...] = ()

    @property
    def degraded_only(self) -> int:
        """Window entries scored only by degraded reviewers."""
        return sum(e.degraded_only for e in self.window)


@dataclass(frozen=True)
class Miss:
    """A degradation interval never detected, and what its outputs met (listed only when the agent
    produced at least one output in it)."""

    agent: str
    degraded_at: int
    recovered_at: Optional[int]
    outputs: int  # its outputs with a review record in [b, r)
    unreviewed: int  # ... with no reachable eligible reviewer (no score, no detector update)
    degraded_only: int  # ... scored only by degraded reviewers
    max_z: Optional[float]
    blocked: int  # beta crossings not counted (min_reviewers)


@dataclass(frozen=True)
class Explanation:
    seed: Optional[int]
    scenario: Optional[str]
    params: dict[str, Any]
    isolations: tuple[Isolation, ...]
    misses: tuple[Miss, ...]
    collapse: Optional[dict[str, Any]] = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for iso, src in zip(d["isolations"], self.isolations):
            iso["degraded_only"] = src.degraded_only
        return d


# ------------------------------------------------------------------------------------ pure core


def witnesses_of(review: Mapping[str, Any]) -> list[tuple[str, float, str]]:
    """``(reviewer, score, role)`` behind a review's final score q (Alg. 2): the two
    committee members' round-2 scores when a committee ran to the end, else the
    initial reviewer's q0. [] for an unreviewed output."""
    reviewers = list(review.get("reviewers") or [])
    r2 = list(review.get("round2") or [])
    if review.get("committee") and r2 and len(reviewers) >= 1 + len(r2):
        return [(j, float(s), "committee") for j, s in zip(reviewers[1:1 + len(r2)], r2)]
    if reviewers and review.get("q0") is not None:
        return [(reviewers[0], float(review["q0"]), "initial")]
    return []


class _States:
    """Each agent's routing state at a simulated time, from states.jsonl."""

    def __init__(self, states: Iterable[Mapping[str, Any]]):
        per: dict[str, list[tuple[float, int, str]]] = {}
        for s in states:
            per.setdefault(s["agent"], []).append((float(s.get("t", 0.0)), int(s["task"]), s["new"]))
        for v in per.values():
            v.sort(key=lambda x: x[0])  # stable: record order among equal times
        self.rows = per
        self.times = {a: [t for t, _k, _n in v] for a, v in per.items()}
        self.new = {a: [n for _t, _k, n in v] for a, v in per.items()}

    def at(self, agent: str, t: float) -> str:
        ts = self.times.get(agent)
        if not ts:
            return NORMAL
        i = bisect_right(ts, t)
        return self.new[agent][i - 1] if i else NORMAL

    def isolated_during(self, agent: str, b: int, r: int) -> bool:
        """Isolated at some task of [b, r): already isolated at b, or a change to
        isolated at a task in [b, r) (metrics.self_healing's c_i exists)."""
        before = NORMAL
        for _t, k, new in self.rows.get(agent, ()):
            if k < b:
                before = new
            elif k < r and new == ISOLATED:
                return True
        return before == ISOLATED


def _degraded(intervals: Mapping[str, Sequence[tuple[int, int]]], agent: str, k: int) -> bool:
    return any(b <= k < r for b, r in intervals.get(agent, ()))


def _param(params: Mapping[str, Any], name: str, default: Any) -> Any:
    v = params.get(name)
    return default if v is None else v


def explain_records(reviews: Iterable[Mapping[str, Any]], states: Iterable[Mapping[str, Any]],
                    intervals: Mapping[str, Sequence[tuple[int, int]]], params: Mapping[str, Any],
                    agent: Optional[str] = None, n_tasks: Optional[int] = None, seed: Optional[int] = None,
                    scenario: Optional[str] = None, collapse: Optional[dict[str, Any]] = None) -> Explanation:
    """The evidence of every isolation (of ``agent`` only, when given) and every
    undetected degradation interval.

    ``reviews``: reviews.jsonl rows in record order (streamed once; only each
    agent's last ``window`` matched updates are kept); ``states``: states.jsonl
    rows; ``intervals``: agent -> [(b, r)] injected degradation (r = N+1 when
    never recovered); ``params``: the run's ``protocol.params`` (MeshHeal's
    defaults where absent); ``n_tasks``: N, for ``Miss.recovered_at``.
    """
    from ..protocols.meshheal.detector import RELATIVE

    if _param(params, "detector", RELATIVE) != RELATIVE or not _param(params, "review", True):
        raise InputError("the evidence view reads the relative detector's window; this run's detector is "
                         f"{_param(params, 'detector', RELATIVE)!r} with review {_param(params, 'review', True)}",
                         field="protocol.params.detector")
    window = int(_param(params, "window", 8))
    beta = float(_param(params, "beta", 2.0))
    floor = float(_param(params, "spread_floor", 0.10))
    consecutive = int(_param(params, "consecutive", 2))
    per_key_x = _param(params, "shortfall_scope", "agent") == "key"
    per_key_count = _param(params, "count_scope", "agent") == "key"
    weighted = _param(params, "credibility", "off") == "weight"
    st = _States(list(states))

    wins: dict[Any, deque] = {}
    runs: dict[Any, list[int]] = {}  # consecutive crossings (tasks) per count scope
    prev: dict[str, str] = {}
    out: list[Isolation] = []
    miss_acc: dict[tuple[str, int], dict[str, Any]] = {}
    spans = {a: list(v) for a, v in intervals.items()}

    def open_span(a: str, k: int) -> Optional[tuple[str, int]]:
        for b, r in spans.get(a, ()):
            if b <= k < r:
                return (a, b)
        return None

    holders: dict[str, set[str]] = {}
    for rev in reviews:
        a = rev["agent"]
        k = int(rev["task"])
        for s_ in rev.get("abilities") or ():
            holders.setdefault(s_, set()).update([a, *(rev.get("reviewers") or ())])
        sp = open_span(a, k)
        if sp is not None:
            m = miss_acc.setdefault(sp, {"outputs": 0, "unreviewed": 0, "degraded_only": 0, "max_z": None,
                                         "blocked": 0})
            m["outputs"] += 1
        dets = rev.get("detector") or []
        if rev.get("q") is None or not dets:
            if sp is not None and rev.get("q") is None:
                miss_acc[sp]["unreviewed"] += 1
            for d in dets:
                prev[a] = d.get("state", prev.get(a, NORMAL))
            continue
        t = float(rev.get("t", 0.0))
        views = rev.get("reviewer_views") or {}
        wit = tuple(Witness(j, s, role, _degraded(intervals, j, k), st.at(j, t), views.get(j))
                    for j, s, role in witnesses_of(rev))
        if sp is not None and wit and all(w.degraded for w in wit):
            miss_acc[sp]["degraded_only"] += 1
        for d in dets:
            old = prev.get(a, NORMAL)
            new = d.get("state", old)
            prev[a] = new
            if not d.get("matched"):
                continue
            key = (a, rev.get("type"), d.get("ability"))
            wkey = key if per_key_x else a
            ckey = key if per_key_count else a
            e = Entry(k, t, str(rev.get("type")), str(d.get("ability")), bool(rev.get("probe")),
                      rev.get("output_correct"), float(rev["q"]), float(d["shortfall"]), d.get("z"),
                      bool(d.get("blocked")), wit)
            win = wins.get(wkey)
            if win is None:
                win = wins[wkey] = deque(maxlen=window)
            win.append(e)
            z = d.get("z")
            if sp is not None:
                if z is not None:
                    mz = miss_acc[sp]["max_z"]
                    miss_acc[sp]["max_z"] = z if mz is None else max(mz, z)
                miss_acc[sp]["blocked"] += int(bool(d.get("blocked")))
            if z is not None:  # an update that reached the transition rule (enough matched, a pool)
                if z >= beta and not d.get("blocked"):
                    runs.setdefault(ckey, []).append(k)
                else:
                    runs[ckey] = []
            if new == ISOLATED and old != ISOLATED:
                crossings = tuple(runs.get(ckey, [])[-consecutive:])
                for rk in [rk for rk in runs if rk == a or (isinstance(rk, tuple) and rk[0] == a)]:
                    runs[rk] = []  # the detector resets its counts on isolation
                if agent is None or a == agent:
                    iso = _isolation(a, k, t, old, not _degraded(intervals, a, k), e, d, tuple(win),
                                     beta, floor, crossings, weighted)
                    seen = {a} | {r.reviewer for r in iso.reviewers}
                    near = set().union(*(holders.get(w.ability, set()) for w in iso.window)) - seen
                    by = tuple((j, _degraded(intervals, j, k), st.at(j, t)) for j in sorted(near, key=node_order))
                    out.append(replace(iso, bystanders=by))
    misses = []
    for (a, b), acc in sorted(miss_acc.items(), key=lambda kv: (node_order(kv[0][0]), kv[0][1])):
        r = next(r for bb, r in spans[a] if bb == b)
        if (agent is not None and a != agent) or st.isolated_during(a, b, r):
            continue
        misses.append(Miss(a, b, r if n_tasks is None or r <= n_tasks else None, acc["outputs"],
                           acc["unreviewed"], acc["degraded_only"], acc["max_z"], acc["blocked"]))
    return Explanation(seed, scenario, dict(params), tuple(out), tuple(misses), collapse)


def _isolation(a: str, k: int, t: float, old: str, healthy: bool, e: Entry, d: Mapping[str, Any],
               win: tuple[Entry, ...], beta: float, floor: float, crossings: tuple[int, ...],
               weighted: bool) -> Isolation:
    m, p25, z, xbar = float(d["m"]), float(d["p25"]), float(d["z"]), float(d["xbar"])
    spread = max(m - p25, floor)
    xs = [w.shortfall for w in win]
    exact = (not weighted and abs(sum(xs) / len(xs) - xbar) <= _TOL * max(1.0, abs(xbar))
             and abs((xbar - m) / spread - z) <= _TOL * max(1.0, abs(z)))
    parts: dict[str, dict[str, Any]] = {}
    for i, w_e in enumerate(win):
        for w in w_e.witnesses:
            p = parts.setdefault(w.reviewer, {"idx": [], "scores": [], "deg": 0, "states": []})
            if not p["idx"] or p["idx"][-1] != i:
                p["idx"].append(i)
                p["deg"] += int(w.degraded)
            p["scores"].append(w.score)
            if w.state not in p["states"]:
                p["states"].append(w.state)
    rows = []
    for j, p in parts.items():
        z_wo: Optional[float] = None
        pivotal: Optional[bool] = None
        if exact:
            rest = [x for i, x in enumerate(xs) if i not in set(p["idx"])]
            z_wo = (sum(rest) / len(rest) - m) / spread if rest else None
            pivotal = z_wo is None or z_wo < beta
        rows.append(ReviewerPart(j, len(p["idx"]), sum(p["scores"]) / len(p["scores"]), p["deg"],
                                 tuple(p["states"]), z_wo, pivotal))
    rows.sort(key=lambda r: (-r.entries, node_order(r.reviewer)))
    return Isolation(a, k, t, old, healthy, e.ability, e.type, z, xbar, m, p25, spread, beta, crossings, win,
                     tuple(rows), exact)


# ------------------------------------------------------------------------------------ run folders


def intervals_from_summary(summary: Mapping[str, Any]) -> dict[str, list[tuple[int, int]]]:
    """agent -> [(b, r)] from summary.json's ``agents`` (r = N+1 when never recovered)."""
    n = int(summary.get("tasks") or 0)
    out: dict[str, list[tuple[int, int]]] = {}
    for a, rec in (summary.get("agents") or {}).items():
        if not isinstance(rec, dict):
            continue
        for ep in rec.get("intervals") or [rec]:
            b = ep.get("degraded_at")
            if b is None:
                continue
            r = ep.get("recovered_at")
            out.setdefault(a, []).append((int(b), int(r) if r is not None else n + 1))
    return out


def seed_folders(path: Path | str, seed: Optional[int] = None) -> list[Path]:
    """The single-seed folders of a run folder: itself, or its ``seed-N`` folders in seed order
    (``seed``: only that one; an InputError when the folder has no such seed)."""
    p = Path(path)
    if not p.is_dir():
        raise RunFolderError("run folder not found" if not p.exists() else "not a folder", file=str(p))
    if (p / "summary.json").is_file():
        if seed is not None and _json(p / "summary.json").get("seed") != seed:
            raise InputError("no such seed in the run folder", file=str(p), field="--seed", value=seed)
        return [p]
    seeds = []
    for d in p.iterdir():
        tail = d.name[5:] if d.name.startswith("seed-") else ""
        if tail.isdigit() and (d / "summary.json").is_file():
            seeds.append((int(tail), d))
    if not seeds:
        raise RunFolderError("no summary.json here and no seed-N/ folder holding one (give a run folder)",
                             file=str(p))
    if seed is not None:
        seeds = [(s, d) for s, d in seeds if s == seed]
        if not seeds:
            raise InputError("no such seed in the run folder", file=str(p), field="--seed", value=seed)
    return [d for _s, d in sorted(seeds)]


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunFolderError("missing", file=str(path)) from None
    except ValueError as exc:
        raise RunFolderError(f"not valid JSON ({exc})", file=str(path)) from None


def explain_folder(path: Path | str, agent: Optional[str] = None) -> Explanation:
    """:func:`explain_records` of one seed's run folder (summary.json, scenario.resolved.yaml,
    reviews and states tables); one :class:`RunFolderError` line when something is missing."""
    from ..core.files import read_output_yaml

    p = Path(path)
    summary = _json(p / "summary.json")
    scen_file = p / "scenario.resolved.yaml"
    if not scen_file.exists():
        raise RunFolderError("missing", file=str(scen_file))
    scen = read_output_yaml(scen_file)
    proto = (scen or {}).get("protocol") or {} if isinstance(scen, dict) else {}
    if proto.get("name") != "meshheal":
        raise RunFolderError(f"the evidence view reads MeshHeal's reviews; this run's protocol is "
                             f"{proto.get('name')!r}", file=str(scen_file))
    rev, sts = find_records(p, "reviews.jsonl"), find_records(p, "states.jsonl")
    for name, f in (("reviews.jsonl", rev), ("states.jsonl", sts)):
        if f is None:
            raise RunFolderError(f"{name} missing (a sweep keeps it only with --output full; rerun the seed "
                                 "with meshsim run)", file=str(p))
    if agent is not None and agent not in (summary.get("agents") or {}) and \
            not any(r.get("agent") == agent for r in iter_records(sts)):
        raise InputError("this agent never changed state and never degraded in the run: nothing to explain",
                         field="--agent", value=agent)
    params = dict(proto.get("params") or {})
    seed = summary.get("seed")
    return explain_records(iter_records(rev), list(iter_records(sts)), intervals_from_summary(summary), params,
                           agent=agent, n_tasks=summary.get("tasks"), seed=seed if isinstance(seed, int) else None,
                           scenario=summary.get("scenario"), collapse=summary.get("collapse"))


# ------------------------------------------------------------------------------------ text


def _g(x: Optional[float], d: int = 3) -> str:
    return "–" if x is None else f"{x:.{d}g}"


def format_explanation(ex: Explanation, rows: bool = True) -> str:
    """The console text of ``meshsim explain``: per isolation a header, the reviewers' parts and
    (``rows``) the window's entries; then the undetected degradation intervals."""
    lines = []
    head = f"seed {ex.seed}" if ex.seed is not None else "run"
    n_false = sum(1 for i in ex.isolations if i.healthy)
    lines.append(f"{head}: {len(ex.isolations)} isolation{'s' if len(ex.isolations) != 1 else ''} "
                 f"({n_false} while healthy)"
                 + (f"; COLLAPSE from task {ex.collapse.get('first_at')}" if (ex.collapse or {}).get("occurred")
                    else ""))
    for iso in ex.isolations:
        who = "healthy: a false isolation" if iso.healthy else "degraded"
        lines.append("")
        lines.append(f"{iso.agent} isolated at task {iso.task} ({who}): z {iso.z:.3g} >= beta {iso.beta:g} on "
                     f"{len(iso.crossings)} consecutive update{'s' if len(iso.crossings) != 1 else ''} "
                     f"(tasks {', '.join(map(str, iso.crossings))}); x̄ {iso.xbar:.3g} over {len(iso.window)} "
                     f"outputs, peers' m {iso.m:.3g}, spread {iso.spread:.3g}")
        lines.append(f"  {iso.degraded_only} of {len(iso.window)} window scores came only from degraded reviewers"
                     + ("" if iso.exact else "; window not rebuilt exactly (weights not recorded): no pivot test"))
        if iso.bystanders:
            lines.append("  other holders of these abilities: " + ", ".join(
                f"{j} {'degraded' if dg else 'healthy'} {s}" for j, dg, s in iso.bystanders)
                + " (only normal neighbours review)")
        lines.append(f"  {'reviewer':<10} {'degraded':>8} {'state':<16} {'outputs':>7} {'mean score':>10} "
                     f"{'z without':>9}  pivotal")
        for r in iso.reviewers:
            deg = "yes" if r.degraded_entries == r.entries else ("no" if not r.degraded_entries else
                                                                 f"{r.degraded_entries}/{r.entries}")
            piv = "–" if r.pivotal is None else ("yes" if r.pivotal else "no")
            lines.append(f"  {r.reviewer:<10} {deg:>8} {'/'.join(r.states):<16} {r.entries:>7} "
                         f"{r.mean_score:>10.3f} {_g(r.z_without):>9}  {piv}")
        if rows:
            lines.append(f"  {'task':>6} {'type':<22} {'ability':<24} {'q':>6} {'x':>7} {'z':>6}  reviewers "
                         "(score, degraded?, own state)")
            for e in iso.window:
                ws = "; ".join(f"{w.reviewer} {w.score:g}{' DEG' if w.degraded else ''} {w.state}"
                               for w in e.witnesses)
                lines.append(f"  {e.task:>6} {e.type[:22]:<22} {e.ability[:24]:<24} {e.q:>6.3f} {e.shortfall:>7.3f} "
                             f"{_g(e.z):>6}  {ws}")
    for m in ex.misses:
        lines.append("")
        lines.append(f"{m.agent} degraded from task {m.degraded_at}"
                     + (f" to {m.recovered_at}" if m.recovered_at is not None else "")
                     + f", never isolated: {m.outputs} outputs, {m.unreviewed} with no eligible reviewer "
                       f"(no score, no detector update), {m.degraded_only} scored only by degraded reviewers; "
                       f"max z {_g(m.max_z)}" + (f"; {m.blocked} crossings blocked" if m.blocked else ""))
    return "\n".join(lines)
