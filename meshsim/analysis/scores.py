"""Per-output final-score distributions of a healthy and a degraded producer.

The closed forms of :mod:`.detector` need, for one producer, the pmf of the
final review score ``q`` of each of its outputs (Alg. 2: median of three
initial calls, committee mean when triggered, App. B.5) and of its shortfall
``x = q̄_{-i,T,s} - q`` (Sec. 4.2.2), in four cases: healthy or degraded,
and reviewed as a normal agent (committee only on ``q0 <= tau`` or
``s_u >= sigma``) or as a watched / probed one (committee always).

Three sources:

* :func:`from_backend` - a fixed-seed Monte Carlo of the review pipeline
  itself: the producer's Contribute call and :func:`review.assess` with
  :func:`review.serve_review` at two healthy reviewers, driven through the
  backend's call interface (``complete_sync``) with the models ``strong``
  (healthy) and ``weak`` (degraded). Nothing reads the profile's fields, so
  any behaviour model the FakeBackend implements is measured the same way.
* :func:`from_records` - the empirical final scores of a run folder
  (reviews.jsonl), split by the record's ``degraded`` flag (the run's events).
* a scenario: its backend and dataset go to :func:`from_backend`.

The reference ``q̄_{-i,T,s}`` is taken in the large-pool limit: the mean
healthy score of the output's task type (healthy i.i.d. neighbours, Sec.
4.2.2's P_{i,T,s} all normal).
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

import numpy as np

from ..core.errors import InputError

__all__ = ["Dist", "ScoreModel", "from_backend", "from_profile", "from_records", "cached_profile", "run_folders",
           "CASES"]

#: shortfalls live on a 1/40 lattice (the scores' 0.025 steps)
LATTICE_STEPS = 40

#: healthy / degraded producer, reviewed as a normal or as a watched (or probed) agent
CASES = ("healthy", "healthy_watched", "degraded", "degraded_watched")


@dataclass(frozen=True)
class Dist:
    """A pmf on sorted support points."""

    values: np.ndarray
    probs: np.ndarray

    @classmethod
    def of(cls, xs: Iterable[float], nd: int = 6) -> "Dist":
        arr = np.round(np.asarray(list(xs), dtype=float), nd)
        if arr.size == 0:
            raise ValueError("no values")
        v, c = np.unique(arr, return_counts=True)
        return cls(v, c / c.sum())

    @property
    def mean(self) -> float:
        return float(self.values @ self.probs)

    def sample(self, rng: np.random.Generator, size: Any) -> np.ndarray:
        return rng.choice(self.values, size=size, p=self.probs)

    def to_json(self) -> dict[str, list[float]]:
        return {"values": [float(v) for v in self.values], "probs": [float(p) for p in self.probs]}


@dataclass
class ScoreModel:
    """Scores and shortfalls of one producer in the four :data:`CASES`."""

    scores: dict[str, Dist]
    shortfalls: dict[str, Dist]
    source: str
    method: str
    n: dict[str, int] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "method": self.method, "n": self.n,
                "mean_score": {k: round(d.mean, 4) for k, d in self.scores.items()},
                "mean_shortfall": {k: round(d.mean, 4) for k, d in self.shortfalls.items()}}


def _build(rows: dict[str, list[tuple[str, float]]], source: str, method: str) -> ScoreModel:
    """rows[case] = [(task type, q)]; reference = mean healthy-normal q of the type."""
    by_type: dict[str, list[float]] = {}
    for t, q in rows["healthy"]:
        by_type.setdefault(t, []).append(q)
    overall = float(np.mean([q for _t, q in rows["healthy"]]))
    ref = {t: float(np.mean(v)) for t, v in by_type.items()}
    scores, shorts = {}, {}
    for case in CASES:
        got = rows[case]
        scores[case] = Dist.of(q for _t, q in got)
        # shortfalls on the scores' own lattice (0.025: committee means of a 0.05 grid): the type's
        # reference is rounded to it, which keeps the window sums on a lattice the chains follow exactly
        shorts[case] = Dist.of((round((ref.get(t, overall) - q) * LATTICE_STEPS) / LATTICE_STEPS for t, q in got),
                               nd=4)
    return ScoreModel(scores, shorts, source, method, {c: len(rows[c]) for c in CASES})


# ---------------------------------------------------------------------------------------------
# Monte Carlo of the review pipeline through the backend's call interface

class _LLM:
    """What review.py and execution.generate need of an LLM client, without a clock:
    synchronous calls (fakes and replays answer at once), per-agent seeds."""

    def __init__(self, backend: Any, agent: str, model: str, seed: int):
        self.backend, self.agent, self.model = backend, agent, model
        self._rnd = random.Random(f"{seed}/llm/{agent}")

    def request(self, kind: str, task: Any, abilities: Iterable[str], context: Optional[dict] = None,
                sample: int = 0):
        from ..core.calls import Request

        return Request(kind=kind, agent=self.agent, model=self.model, task=task, abilities=tuple(abilities),
                       context=context or {}, sample=sample, seed=self._rnd.getrandbits(62))

    def call(self, req):
        return self.backend.complete_sync(req)
        yield  # pragma: no cover - a generator that never waits

    def call_many(self, reqs):
        return [self.backend.complete_sync(r) for r in reqs]
        yield  # pragma: no cover


def _finish(gen) -> Any:
    """Run a protocol generator whose calls never wait."""
    try:
        next(gen)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("review pipeline waited: the backend is not synchronous")


class _Reviewer:
    def __init__(self, name: str, abilities: frozenset, llm: _LLM):
        self.name, self.K_orig, self.llm = name, abilities, llm
        self.K_sorted = tuple(sorted(abilities))


class _Producer:
    """The producing controller as review.assess sees it: two normal eligible reviewers."""

    def __init__(self, name: str, params: Any, llm: _LLM, reviewers: list[_Reviewer], seed: int, state: Any):
        from ..core.types import RoutingState

        self.name, self.params, self.llm = name, params, llm
        self.rnd = random.Random(f"{seed}/producer/{name}")
        self.K_orig = frozenset()
        self.reviewers = {r.name: r for r in reviewers}
        self.peer_state = {r.name: RoutingState.NORMAL for r in reviewers}
        self.state = state

    def eligible_reviewers(self, H):
        return sorted(self.reviewers)

    def ask(self, reviewer, req, y, H, X):
        (rep,) = yield from self.ask_all([reviewer], [req], y, H, X)
        return rep

    def ask_all(self, reviewers, reqs, y, H, X):
        from ..protocols.meshheal.review import serve_review

        out = []
        for name, req in zip(reviewers, reqs):
            body = dict(req, task=X.task, abilities=sorted(H), action=y.action, context_items=len(X.Y),
                        output_text=y.text, drafts=[o.text for o in X.Y], producer=self.name)
            out.append(_finish(serve_review(self.reviewers[name], body)))
        return out
        yield  # pragma: no cover

    def sink_record(self, kind, task_index, agent):
        pass


def from_backend(backend: Any, dataset: str = "bbh", n: int = 1200, seed: int = 0, params: Any = None,
                 source: str = "") -> ScoreModel:
    """Fixed-seed Monte Carlo of one output's review (Alg. 2) at a healthy (``strong``) and a degraded
    (``weak``) producer: ``n`` outputs each, over the dataset's task types in turn, each reviewed by
    two healthy (``strong``) reviewers. One run per output gives both the normal-state score (the
    committee runs only on its own triggers) and the watched/probe one (committee always): the
    committee's draws are the same whenever it runs in both."""
    from ..core.calls import TaskRef
    from ..protocols.execution import TaskState, generate
    from ..protocols.meshheal import MeshHealParams
    from ..protocols.meshheal.review import assess, committee_triggers
    from ..workload.tasks import load_profile
    from ..core.types import RoutingState

    params = params or MeshHealParams(takeover=False)  # Takeover changes the output, never q
    prof = load_profile(dataset)
    types = sorted(prof.types)
    every = frozenset(prof.abilities)
    rows: dict[str, list[tuple[str, float]]] = {c: [] for c in CASES}
    for cls, model in (("healthy", "strong"), ("degraded", "weak")):
        revs = [_Reviewer(f"R{k}", every, _LLM(backend, f"R{k}", "strong", seed)) for k in (1, 2)]
        prod = _Producer("P", params, _LLM(backend, "P", model, seed), revs, seed, RoutingState.WATCHED)
        for i in range(n):
            t = types[i % len(types)]
            pair = prof.types[t]
            s = pair[(i // len(types)) % 2]
            ref = TaskRef(index=i, id=f"oc-{cls}-{i}", type=t, dataset=prof.name, required=tuple(pair))
            X = TaskState(task=ref, R=tuple(pair))
            y = _finish(generate(prod.llm, "P", frozenset({s}), "contribute", frozenset({s}), X))
            a = _finish(assess(prod, y, frozenset({s}), X, False))
            if hasattr(backend, "forget"):
                backend.forget(ref.id)
            if a.q is None:
                continue
            own = committee_triggers(a.q0, a.s_u, False, False, params.tau_to, params.sigma_com)
            rows[cls + "_watched"].append((t, a.q))
            rows[cls].append((t, a.q if own else a.q0))
    return _build(rows, source or getattr(backend, "name", "backend"),
                  f"Monte Carlo of the review pipeline (seed {seed}, {n} outputs per producer, "
                  f"{dataset} task types, two healthy reviewers)")


def from_profile(profile: str | Path, dataset: str = "bbh", n: int = 1200, seed: int = 0,
                 params: Any = None) -> ScoreModel:
    """:func:`from_backend` with the fake backend a scenario's ``backend: {kind: fake, profile: ...}`` builds."""
    from ..backends import find_profile, make_backend

    path = find_profile(str(profile), None)
    backend = make_backend({"kind": "fake", "profile": str(path)}, seed, None)
    if not getattr(backend, "synchronous", False):
        raise InputError("the score model needs a synchronous backend (fake or replay)", file=str(path))
    return from_backend(backend, dataset, n, seed, params, source=str(path))


def run_folders(run_dir: str | Path) -> list[Path]:
    """The seed folders of a run folder (itself, or its ``seed-*`` folders) that hold reviews records."""
    from ..io.records import has_records

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError("not a run folder", file=str(run_dir))
    if has_records(run_dir, "reviews.jsonl"):
        return [run_dir]
    subs = sorted((d for d in run_dir.iterdir() if d.is_dir() and has_records(d, "reviews.jsonl")),
                  key=lambda d: (len(d.name), d.name))
    if not subs:
        raise InputError("no reviews records in the run folder (a MeshHeal run with output records)",
                         file=str(run_dir))
    return subs


def from_records(run_dir: str | Path) -> ScoreModel:
    """Empirical final scores of a run folder, healthy / degraded by each record's ``degraded`` flag
    (the run's degrade events); the ``_watched`` cases are outputs whose committee ran because the
    producer was watched or probed (with fewer than 30 of them, the normal-state scores stand in)."""
    from ..io.records import find_records, iter_records

    rows: dict[str, list[tuple[str, float]]] = {c: [] for c in CASES}
    for folder in run_folders(run_dir):
        for r in iter_records(find_records(folder, "reviews.jsonl")):
            q = r.get("q")
            if q is None:
                continue
            cls = "degraded" if r.get("degraded") else "healthy"
            trig = set(r.get("trigger") or ())
            forced = bool(r.get("probe")) or "watched" in trig or "probe" in trig
            rows[cls + ("_watched" if forced else "")].append((str(r.get("type", "")), float(q)))
    method = "empirical final scores of the run's reviews records"
    for cls in ("healthy", "degraded"):
        if not rows[cls]:
            raise InputError(f"no {cls} reviewed outputs in the run folder (the closed form needs both; a profile "
                             "or scenario gives them)", file=str(run_dir))
        if len(rows[cls + "_watched"]) < 30:
            rows[cls + "_watched"] = list(rows[cls])
            method += f"; {cls} watched/probe scores: too few, the normal-state ones stand in"
    return _build(rows, str(run_dir), method)


# ---------------------------------------------------------------------------------------------
# cache: the Monte Carlo takes about a second; its result depends only on the inputs below

def _cache_dir() -> Path:
    import os

    base = os.environ.get("MESHSIM_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME")
                                                           or os.path.expanduser("~/.cache"), "meshsim")
    return Path(base) / "scores"


def _cache_key(path: Path, dataset: str, n: int, seed: int) -> str:
    import hashlib

    from .. import backends
    from ..protocols import meshheal

    h = hashlib.sha256()
    # every source the Monte Carlo runs through: the backends (a behaviour model may live in any of
    # them), MeshHeal's review code, this file, and the profile
    code = sorted(Path(backends.__file__).parent.glob("*.py")) + sorted(Path(meshheal.__file__).parent.glob("*.py"))
    for f in [path] + code + [Path(__file__)]:
        h.update(Path(f).read_bytes())
    h.update(f"{dataset}/{n}/{seed}".encode())
    return h.hexdigest()[:24]


def _to_json(m: ScoreModel) -> str:
    return json.dumps({"scores": {c: d.to_json() for c, d in m.scores.items()},
                       "shortfalls": {c: d.to_json() for c, d in m.shortfalls.items()},
                       "source": m.source, "method": m.method, "n": m.n})


def _from_json(text: str) -> ScoreModel:
    d = json.loads(text)

    def dist(x: dict) -> Dist:
        return Dist(np.array(x["values"], dtype=float), np.array(x["probs"], dtype=float))

    return ScoreModel({c: dist(v) for c, v in d["scores"].items()}, {c: dist(v) for c, v in d["shortfalls"].items()},
                      d["source"], d["method"], d["n"])


def cached_profile(profile: str | Path, dataset: str = "bbh", n: int = 20000, seed: int = 0,
                   use_cache: bool = True) -> ScoreModel:
    """:func:`from_profile`, kept in ``$MESHSIM_CACHE/scores`` (default ``~/.cache/meshsim``) under a hash
    of the profile file, the backends' and MeshHeal's source, the dataset, n and seed."""
    from ..backends import find_profile

    path = find_profile(str(profile), None)
    key = _cache_key(path, dataset, n, seed)
    f = _cache_dir() / f"{key}.json"
    if use_cache and f.is_file():
        try:
            m = _from_json(f.read_text())
            m.source = str(path)
            return m
        except (ValueError, KeyError, OSError):
            pass  # a damaged cache entry: compute again
    m = from_profile(path, dataset, n, seed)
    if use_cache:
        try:
            from ..io.records import write_atomic

            write_atomic(f, _to_json(m))
        except Exception:  # noqa: BLE001 - a cache that cannot be written is not an error
            pass
    return m
