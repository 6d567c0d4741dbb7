"""``meshsim sweep SCENARIO --search optuna``: a noise-aware search for
settings (detector thresholds) on the sweep's executors (docs/sweeps.md,
"Search").

- **Ranges** ``PATH=LOW:HIGH[:float|int|log]`` span the search space;
  **objectives** (``--minimize`` / ``--maximize`` a ``results.csv`` metric)
  and **constraints** (``METRIC<=V``, ``>=``, ``==``) say what is good.
- The sampler is Optuna's NSGA-II (multi-objective, constraint-aware:
  feasible trials dominate infeasible ones). Trials are asked in **batches of
  a fixed size** (NSGA-II's population, one generation per batch), every
  trial of a batch is evaluated, and the batch is told in trial-number order:
  what is asked never depends on which run finished first, so the study is
  the same on one worker, a process pool or Dask. The sampler is reseeded
  for every trial from (search seed, trial number), so a resumed study asks
  what the uninterrupted one would have. A draw the scenario rejects
  (α ≥ β) is told FAIL at once and replaced in its batch.
- **Common random numbers:** every trial runs the same seeds, so two trials
  differ by their parameters, not by their luck; a trial's objective values
  are means over those seeds.
- Every trial's seeds are ordinary sweep runs (``runs/<point>/seed-<s>/``,
  listed in ``manifest.json``): ``results.csv``, ``summary.csv``, ``meshsim
  plot`` and ``meshsim report`` work on a search folder as on a grid.
- The study lives in the folder (``study.journal``, Optuna's JournalStorage
  on an append-only file: each write is one fsync'd line, a line cut by
  ``kill -9`` is dropped on reopen). A rerun tells no finished trial again
  and reuses every finished run.
- **Constraints:** ``==`` holds on every seed of a point (``detection.missed==0``:
  no run missed an agent), ``<=`` / ``>=`` on the mean over its seeds; both over
  every seed the point ran, refinement seeds included.
- **Seed refinement:** the current recommendation and its contenders (points
  no objective yet tells apart from it, :func:`meshsim.sweep.stats.distinguishable`,
  paired on shared seeds) get more seeds (the next seeds after the trials' ones,
  the same for every point), the recommendation recomputed after each round,
  until it is told apart from every contender, each has ``max_seeds``, or the
  refinement's run budget is spent. The ends of the front, already told apart,
  get none.
- **Recommendation** (:func:`_choose`): among the feasible front points, drop
  those another front point dominates by the interval rule; keep those not
  distinguishably worse than the best on the second objective (then the third,
  …); take the best 95 % bound on the first objective and every kept point it
  does not beat distinguishably; of those, the best means on the later
  objectives. Intervals of rates and counts are clipped to their range.
"""
from __future__ import annotations

import copy
import json
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from ..core.errors import InputError, RunFolderError
from ..io.records import write_atomic
from .optuna_seam import CREATE_STUDY, CREATE_TRIAL, Trials, lock_path
from .stats import Interval, clip, distinguishable, interval, metric_bounds

__all__ = ["Range", "Objective", "Constraint", "SearchSpec", "SearchPlan", "SearchOutcome", "parse_range",
           "parse_constraint", "plan_search", "run_search", "describe_search", "JOURNAL", "FRONT", "TRIALS",
           "RECOMMENDED", "default_batch"]

JOURNAL, FRONT, TRIALS, RECOMMENDED = "study.journal", "front.csv", "trials.csv", "recommended.json"
STUDY_NAME = "meshsim-search"
KINDS = ("float", "int", "log")
#: significant digits a float parameter is rounded to before it runs (the value reported and --set)
DIGITS = 4


# ------------------------------------------------------------------------------------ the spec


@dataclass(frozen=True)
class Range:
    path: str
    low: float
    high: float
    kind: str = "float"  # float (uniform), int (uniform integers), log (log-uniform floats)

    def text(self) -> str:
        return f"{self.path}={_num(self.low)}:{_num(self.high)}" + (f":{self.kind}" if self.kind != "float" else "")

    def distribution(self):
        from optuna.distributions import FloatDistribution, IntDistribution

        if self.kind == "int":
            return IntDistribution(int(self.low), int(self.high))
        return FloatDistribution(float(self.low), float(self.high), log=self.kind == "log")

    def applied(self, raw: Any) -> Any:
        """The value that runs: an integer, or a float rounded to DIGITS significant digits."""
        if self.kind == "int":
            return int(raw)
        v = float(f"{float(raw):.{DIGITS}g}")
        return min(max(v, float(self.low)), float(self.high))

    def probes(self) -> list[Any]:
        if self.kind == "int":
            return [int(self.low), int(round((self.low + self.high) / 2)), int(self.high)]
        mid = math.sqrt(self.low * self.high) if self.kind == "log" else (self.low + self.high) / 2
        return [float(self.low), self.applied(mid), float(self.high)]


@dataclass(frozen=True)
class Objective:
    metric: str
    direction: str  # minimize | maximize

    @property
    def sign(self) -> float:
        return 1.0 if self.direction == "minimize" else -1.0


@dataclass(frozen=True)
class Constraint:
    metric: str
    op: str
    value: float

    def text(self) -> str:
        return f"{self.metric}{self.op}{_num(self.value)}"

    def violation(self, x: float) -> float:
        """Optuna's convention: <= 0 is feasible."""
        if self.op == "<=":
            return x - self.value
        if self.op == ">=":
            return self.value - x
        return abs(x - self.value)

    def holds(self, x: Optional[float]) -> bool:
        return x is not None and math.isfinite(x) and self.violation(x) <= 1e-12

    def holds_on(self, seeds: dict[int, float]) -> bool:
        """On a point's seed values: ``==`` on every seed (``detection.missed==0``: no seed missed an agent),
        ``<=`` / ``>=`` on their mean (a bound on an average rate; its interval is reported beside it)."""
        if not seeds:
            return False
        if self.op == "==":
            return all(self.holds(x) for x in seeds.values())
        return self.holds(sum(seeds.values()) / len(seeds))

    def seed_violation(self, seeds: dict[int, float]) -> float:
        """What the sampler is told (<= 0 feasible): ``==`` the worst seed's distance, else the mean's."""
        if not seeds:
            return math.inf
        if self.op == "==":
            return max(self.violation(x) for x in seeds.values())
        return self.violation(sum(seeds.values()) / len(seeds))


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(float(v))


def parse_range(text: str) -> Range:
    """``PATH=LOW:HIGH`` (float), ``PATH=LOW:HIGH:int`` or ``PATH=LOW:HIGH:log``."""
    from .spec import _check_path

    where = {"field": "--range", "value": text}
    if "=" not in text:
        raise InputError("expected PATH=LOW:HIGH[:int|:log], e.g. protocol.params.alpha=0.8:2.5", **where)
    path, spec = text.split("=", 1)
    path = _check_path(path, where)
    parts = [p.strip() for p in spec.split(":")]
    kind = "float"
    if len(parts) == 3:
        kind = parts[2].lower()
        parts = parts[:2]
        if kind not in KINDS:
            raise InputError(f"unknown range kind '{kind}'; choose one of {', '.join(KINDS)}", **where)
    if len(parts) != 2 or not all(parts):
        raise InputError("malformed range: expected LOW:HIGH[:int|:log], e.g. 0.8:2.5 or 4:16:int", **where)
    try:
        low, high = float(parts[0]), float(parts[1])
    except ValueError:
        raise InputError("malformed range: LOW and HIGH must be numbers", **where) from None
    if not (math.isfinite(low) and math.isfinite(high)):
        raise InputError("malformed range: LOW and HIGH must be finite", **where)
    if not low < high:
        raise InputError("malformed range: HIGH must be above LOW", **where)
    if kind == "int":
        if not (low.is_integer() and high.is_integer()):
            raise InputError("an int range needs integer ends", **where)
        return Range(path, int(low), int(high), kind)
    if kind == "log" and low <= 0:
        raise InputError("a log range needs LOW > 0", **where)
    return Range(path, low, high, kind)


_CONSTRAINT = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*(<=|>=|==)\s*(\S+)\s*$")


def parse_constraint(text: str) -> Constraint:
    m = _CONSTRAINT.match(text)
    where = {"field": "--constraint", "value": text}
    if not m:
        raise InputError("expected METRIC<=VALUE, METRIC>=VALUE or METRIC==VALUE, e.g. 'detection.missed==0'",
                         **where)
    try:
        v = float(m.group(3))
    except ValueError:
        raise InputError("the bound must be a number", **where) from None
    if not math.isfinite(v):
        raise InputError("the bound must be finite", **where)
    return Constraint(m.group(1), m.group(2), v)


def default_batch(trials: int) -> int:
    """NSGA-II's population (trials asked at once): a sixth of the budget, 4 to 16."""
    return max(4, min(16, trials // 6))


@dataclass
class SearchSpec:
    ranges: list[Range]
    objectives: list[Objective]
    constraints: list[Constraint] = field(default_factory=list)
    trials: int = 60
    batch: Optional[int] = None
    seed: int = 0
    max_seeds: Optional[int] = None  # default: SearchPlan.max_seeds
    refine_runs: Optional[int] = None  # default: SearchPlan.refine_runs

    def identity(self, seeds: list[int]) -> dict[str, Any]:
        """What a rerun may not change (the budget, --trials, --max-seeds and --refine-runs, may)."""
        return {"sampler": "optuna.NSGAIISampler", "seed": self.seed, "batch": self.batch,
                "ranges": [r.text() for r in self.ranges],
                "objectives": [f"{o.direction} {o.metric}" for o in self.objectives],
                "constraints": [c.text() for c in self.constraints], "seeds": list(seeds)}


@dataclass
class SearchPlan:
    plan: Any  # a core.Plan: base scenario, seeds, source (its points are probes, never run)
    spec: SearchSpec
    metrics: Optional[set[str]] = None  # the metric names a run reports (None: not probed)

    @property
    def seeds(self) -> list[int]:
        return list(self.plan.seeds)

    @property
    def extra_seeds(self) -> list[int]:
        """The seeds refinement adds, in order (the same for every point)."""
        s = self.seeds
        n = max(0, self.max_seeds - len(s))
        start = max(s) + 1
        return list(range(start, start + n))

    @property
    def max_seeds(self) -> int:
        """``--max-seeds``; default twice the trials' seeds, at least 4 more (sized for the 30-minute
        acceptance search: docs/sweeps.md#search)."""
        n = len(self.seeds)
        return max(self.spec.max_seeds or max(2 * n, n + 4), n)

    @property
    def refine_runs(self) -> int:
        """``--refine-runs``: runs the refinement may add; default a quarter of the trials' runs."""
        if self.spec.refine_runs is not None:
            return self.spec.refine_runs
        return -(-self.spec.trials * len(self.seeds) // 4)

    @property
    def seed_step(self) -> int:
        """Seeds a refinement round adds: the trials' number of seeds, at least 2."""
        return max(2, len(self.seeds))

    def manifest(self) -> dict[str, Any]:
        m = self.plan.manifest()
        m["axes"] = [r.path for r in self.spec.ranges]
        m["points"], m["runs"], m["skipped"] = {}, [], []
        m["search"] = dict(self.spec.identity(self.seeds), trials=self.spec.trials, max_seeds=self.max_seeds,
                           refine_runs=self.refine_runs)
        return m


@dataclass
class SearchOutcome:
    out: Path
    trials: int
    complete: int
    invalid: int
    failed_trials: int
    runs: int  # runs this invocation executed
    resumed_trials: int
    failed_runs: int
    refinement_runs: int
    front: list[dict[str, Any]]
    recommended: Optional[dict[str, Any]]
    written: list[Path]
    failures: list[dict[str, Any]] = field(default_factory=list)


# ------------------------------------------------------------------------------------ planning


def _require_optuna():
    try:
        import optuna
    except ImportError:
        raise InputError("--search optuna needs Optuna, which the 'search' extra installs: "
                         "pip install 'meshsim[search]'", field="--search", value="optuna") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def plan_search(path: str | Path, ranges: list[str], objectives: list[tuple[str, str]], constraints: list[str],
                seeds: Optional[str] = None, sets: tuple[str, ...] | list[str] = (), output: Optional[str] = None,
                smoke: bool = False, trials: int = 60, batch: Optional[int] = None, seed: int = 0,
                max_seeds: Optional[int] = None, probe: bool = True,
                refine_runs: Optional[int] = None) -> SearchPlan:
    """Parse and check a search: ranges, objectives, constraints, the scenario (as
    :func:`plan_sweep` reads it, seeds by the sweep's default) and the metric names."""
    from .core import plan_sweep

    _require_optuna()
    if not ranges:
        raise InputError("a search needs at least one --range PATH=LOW:HIGH", field="--range")
    rs = [parse_range(r) for r in ranges]
    dup = [r.path for i, r in enumerate(rs) if r.path in [q.path for q in rs[:i]]]
    if dup:
        raise InputError("the same path has two ranges", field="--range", value=dup[0])
    if not objectives:
        raise InputError("a search needs at least one --minimize METRIC or --maximize METRIC", field="--minimize")
    objs = [Objective(m.strip(), d) for d, m in objectives]
    for o in objs:
        if not o.metric:
            raise InputError("empty metric name", field=f"--{o.direction}")
    names = [o.metric for o in objs]
    if len(set(names)) != len(names):
        raise InputError("the same metric is an objective twice", field="--minimize",
                         value=[n for i, n in enumerate(names) if n in names[:i]][0])
    cons = [parse_constraint(c) for c in constraints]
    if trials < 1:
        raise InputError("must be >= 1", field="--trials", value=trials)
    b = batch if batch is not None else default_batch(trials)
    if b < 2:
        raise InputError("must be >= 2 (NSGA-II's population)", field="--batch", value=b)
    # the scenario, base overrides and seeds exactly as a grid sweep reads them; the probe points (every
    # range at its low, middle and high end together) check that the paths exist and some setting is valid
    zips = [f"{r.path}={json.dumps([r.probes()[k] for k in range(3)])}" for r in rs]
    try:
        plan = plan_sweep(path, (), zips, seeds, sets, output, smoke)
    except InputError as exc:
        if exc.field == "--zip":
            raise InputError(exc.message, file=exc.file, field="--range", value=exc.value) from None
        if exc.message.startswith("every point of the grid fails validation"):
            raise InputError("no setting probed at the ranges' low, middle and high ends is valid; "
                             + exc.message.split("; the first, ", 1)[-1], field="--range") from None
        raise
    if max_seeds is not None and max_seeds < len(plan.seeds):
        raise InputError(f"must be at least the trials' {len(plan.seeds)} seeds", field="--max-seeds",
                         value=max_seeds)
    for r in rs:  # a float range over an integer field would draw mostly invalid settings
        held = plan.points[0].values.get(r.path)
        if r.kind != "int" and isinstance(held, int) and not isinstance(held, bool):
            raise InputError("an integer parameter: give LOW:HIGH:int", field="--range", value=r.text())
    if refine_runs is not None and refine_runs < 0:
        raise InputError("must be >= 0", field="--refine-runs", value=refine_runs)
    sp = SearchPlan(plan, SearchSpec(rs, objs, cons, trials, b, seed, max_seeds, refine_runs))
    if probe:
        sp.metrics = _probe_metrics(sp)
        check_metrics(sp, sp.metrics)
    return sp


def _probe_metrics(sp: SearchPlan) -> Optional[set[str]]:
    """The metric names a run of this scenario reports: from a small run (the
    scenario's smoke sizes, first probe point) when the scenario is small or has
    smoke sizes, else None (checked on the first trial's runs instead)."""
    from ..simulate.runner import dump_json, run_one
    from ..scenario.model import parse_scenario, scenario_data
    from .results import flatten

    plan = sp.plan
    base = copy.deepcopy(plan.base)
    small = isinstance(base, dict) and isinstance(base.get("smoke"), dict) and base["smoke"]
    if not small and not (isinstance(base, dict) and base.get("smoke") == {}):
        return None
    data = scenario_data(base, plan.source, [], smoke=bool(small))
    point = plan.points[0]
    from ..scenario.model import set_path

    for p, v in point.values.items():
        set_path(data, p, v, plan.source)
    try:
        sc = parse_scenario(data, plan.source, plan.base_dir)
        res = run_one(sc, plan.seeds[0])
    except Exception:  # the probe is a convenience: the trials' runs check the names too
        return None
    return set(flatten(json.loads(dump_json(res.summary))))


def check_metrics(sp: SearchPlan, known: Optional[set[str]]) -> None:
    """Every objective and constraint names a metric a run reports (one line, with a guess)."""
    if known is None:
        return
    import difflib

    for field_, name in [(f"--{o.direction}", o.metric) for o in sp.spec.objectives] + \
                        [("--constraint", c.metric) for c in sp.spec.constraints]:
        if name in known:
            continue
        tails = sorted(k for k in known if k.endswith("." + name))
        guess = tails or difflib.get_close_matches(name, sorted(known), n=3)
        hint = f"; did you mean {' or '.join(guess[:3])}?" if guess else " (a results.csv column, e.g. " \
            "detection.false_isolation_rate)"
        raise InputError(f"unknown metric{hint}", field=field_, value=name)


# ------------------------------------------------------------------------------------ points


class _Points:
    """Trial parameters -> sweep points (validated as plan_sweep validates a grid point)."""

    def __init__(self, sp: SearchPlan):
        self.sp, self.plan = sp, sp.plan
        self.graphs: dict[str, Any] = {}
        self.memo: dict[str, Any] = {}
        self.cache: dict[str, Any] = {}

    def make(self, raw: dict[str, Any]):
        """``(Point, None)`` or ``(None, reason)`` for the raw Optuna parameters."""
        from ..simulate.runner import portable_data
        from ..scenario.model import build_graph, check_semantics, get_path, parse_scenario, set_path, topology_seed
        from .core import Point, _key

        plan = self.plan
        vals = {r.path: r.applied(raw[r.path]) for r in self.sp.spec.ranges}
        ck = json.dumps(vals, sort_keys=True)
        if ck in self.cache:
            return self.cache[ck]
        data = copy.deepcopy(plan.base)
        try:
            for p, v in vals.items():
                set_path(data, p, v, plan.source)
            sc = parse_scenario(data, plan.source, plan.base_dir)
            gkey = json.dumps([sc.network.model_dump(mode="json"), sc.agents.model_dump(mode="json"),
                               sc.tasks.model_dump(mode="json") if sc.tasks else None,
                               topology_seed(sc, plan.seeds[0])], sort_keys=True, default=str)
            if gkey not in self.graphs:
                self.graphs[gkey] = build_graph(sc, plan.seeds[0])
            check_semantics(sc, self.graphs[gkey], self.memo)
        except InputError as exc:
            self.cache[ck] = (None, vals, str(exc))
            return self.cache[ck]
        portable = portable_data(sc)
        values = {p: get_path(portable, p, v) for p, v in vals.items()}
        self.cache[ck] = (Point(_key(portable), values, portable), values, None)
        return self.cache[ck]


# ------------------------------------------------------------------------------------ the study


def _sampler(sp: SearchPlan, number: int):
    """NSGA-II with a seed of its own for trial ``number`` (a resumed study asks what an uninterrupted one would)."""
    import numpy as np
    import optuna

    s = int(np.random.SeedSequence([int(sp.spec.seed) & 0xFFFFFFFF, int(number)]).generate_state(1)[0])
    with warnings.catch_warnings():  # Optuna 5 deprecates constraints_func (removed in 7); 4.x has nothing else
        warnings.simplefilter("ignore", FutureWarning)
        return optuna.samplers.NSGAIISampler(population_size=sp.spec.batch, seed=s, constraints_func=_constraints)


def _suggest_all(sp: SearchPlan, trial) -> dict[str, Any]:
    """Every range's value of ``trial`` (those it already holds are returned as stored)."""
    out = {}
    for r in sp.spec.ranges:
        if r.kind == "int":
            out[r.path] = trial.suggest_int(r.path, int(r.low), int(r.high))
        else:
            out[r.path] = trial.suggest_float(r.path, float(r.low), float(r.high), log=r.kind == "log")
    return out


def _params(sp: SearchPlan, trials: Trials, t) -> dict[str, Any]:
    """A trial's raw parameters. One cut mid-ask by kill -9 (it holds the first
    few) gets the rest now, as the uninterrupted ask drew them: the sampler is
    reseeded for its number, its relative sample redone, and the independent
    draws of the parameters it holds are replayed before the missing ones."""
    if all(r.path in t.params for r in sp.spec.ranges):
        return dict(t.params)
    study = trials.study
    study.sampler = _sampler(sp, t.number)
    trial = trials.live(t)
    for r in sp.spec.ranges:  # ask() suggests in range order: the held ones are a prefix
        if r.path not in t.params:
            break
        dist = r.distribution()
        if not dist.single() and r.path not in trial.relative_params:
            study.sampler.sample_independent(study, t, r.path, dist)
    return _suggest_all(sp, trial)


def _constraints(trial) -> list[float]:
    return list(trial.user_attrs.get("constraints") or [])


def _open_study(sp: SearchPlan, out: Path) -> Trials:
    """Optuna's JournalStorage on ``out/study.journal`` (the caller holds the folder's lock): the study and
    its trials by number."""
    optuna = _require_optuna()
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

    f = out / JOURNAL
    if f.exists():  # a line cut by kill -9 would corrupt the next append: drop it; a lock left behind is stale
        check_journal(f)
        data = f.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(f, "r+b") as fh:
                fh.truncate(data.rfind(b"\n") + 1)
    lock = lock_path(f)
    if lock.exists() or lock.is_symlink():
        lock.unlink()
    storage = JournalStorage(JournalFileBackend(str(f), lock_obj=JournalFileOpenLock(str(f))))
    try:
        study = optuna.create_study(storage=storage, study_name=STUDY_NAME, load_if_exists=True,
                                    directions=[o.direction for o in sp.spec.objectives], sampler=_sampler(sp, 0))
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:  # records that do not replay
        raise _damaged(f, f"its records do not replay ({type(exc).__name__}: {str(exc)[:120]})") from None
    return Trials(study, storage)


def _damaged(f: Path, what: str) -> RunFolderError:
    return RunFolderError(f"damaged study journal: {what}; the finished runs stay in runs/: move {f.name} aside "
                          "and rerun the search to rebuild the study (its runs are reused)", file=str(f))


def check_journal(f: Path) -> None:
    """One line (exit 2) for a ``study.journal`` that is not Optuna's journal:
    a line that is not a JSON record with an ``op_code``. A last line cut
    short by ``kill -9`` (no newline) is not damage: it is dropped when the
    study opens. Issue 30."""
    if not f.is_file():
        if os.path.lexists(f):
            raise _damaged(f, "it is not a file")
        return
    try:
        data = f.read_bytes()
    except OSError as exc:
        raise RunFolderError(f"cannot read: {exc.strerror or exc}", file=str(f)) from None
    lines = data.split(b"\n")
    if lines and lines[-1]:  # cut short by kill -9: not a record yet
        lines.pop()
    creates: dict[bytes, int] = {}
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            raise _damaged(f, f"line {i} is not a JSON record") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("op_code"), int) or isinstance(rec["op_code"], bool):
            raise _damaged(f, f"line {i} is not an Optuna journal record (no op_code)")
        if rec["op_code"] in (CREATE_STUDY, CREATE_TRIAL):
            # a creation carries its own time stamp: the same line twice is a copy, and would add a trial
            if line in creates:
                raise _damaged(f, f"line {i} repeats line {creates[line]} (the same study or trial created twice)")
            creates[line] = i


def _read_trials(out: Path) -> Optional[list]:
    """The study's trials without writing anything (dry run), or None."""
    f = out / JOURNAL
    if not f.is_file():
        return None
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import BaseJournalBackend

    class _ReadOnly(BaseJournalBackend):
        def read_logs(self, log_number_from):
            for i, line in enumerate(f.read_bytes().split(b"\n")):
                if i >= log_number_from and line.strip():
                    try:
                        yield json.loads(line)
                    except ValueError:  # the last line, cut short (check_journal refused any other)
                        return

        def append_logs(self, logs):  # pragma: no cover - never called by a read
            raise RuntimeError("read only")

    check_journal(f)
    try:
        study = optuna.load_study(study_name=STUDY_NAME, storage=JournalStorage(_ReadOnly()))
    except KeyError:
        return None
    except (IndexError, TypeError, ValueError, AttributeError) as exc:  # records that do not replay
        raise _damaged(f, f"its records do not replay ({type(exc).__name__}: {str(exc)[:120]})") from None
    return study.get_trials(deepcopy=False)


# ------------------------------------------------------------------------------------ running


class _Runner:
    """Runs (point, seed) pairs into the sweep folder on one executor, extending the manifest first."""

    def __init__(self, sp: SearchPlan, out: Path, ex, manifest: dict, progress_args: dict):
        self.sp, self.out, self.ex, self.manifest = sp, out, ex, manifest
        self.progress_args = progress_args
        self.points: dict[str, Any] = {}
        self.metrics: dict[tuple[str, int], Optional[dict]] = {}
        self.executed = self.failed = 0
        self.failures: list[dict] = []
        self._parsed: dict[str, Any] = {}
        self._resolved: dict[tuple[str, int], str] = {}
        self._inputs: dict[str, Optional[bytes]] = {}  # input files' content by path, read once (Dask)

    def _expected(self, point, seed: int) -> str:
        """The run's scenario.resolved.yaml (what a finished run must hold)."""
        from ..simulate.runner import resolved_yaml
        from ..scenario.model import parse_scenario

        if (point.key, seed) not in self._resolved:
            if point.key not in self._parsed:
                self._parsed[point.key] = parse_scenario(copy.deepcopy(point.data), self.sp.plan.source,
                                                         self.sp.plan.base_dir)
            self._resolved[(point.key, seed)] = resolved_yaml(self._parsed[point.key], seed)
        return self._resolved[(point.key, seed)]

    def finished(self, key: str, seed: int) -> bool:
        from .core import _run_dir

        d = _run_dir(self.out, key, seed)
        r = d / "scenario.resolved.yaml"
        return (d / "summary.json").is_file() and r.is_file() and \
            r.read_text() == self._expected(self.points[key], seed)

    def extend(self, pairs: list[tuple[Any, int]], skipped: list[dict] = ()) -> None:
        from .manifest import write_manifest

        m = self.manifest
        changed = False
        for point, seed in pairs:
            self.points[point.key] = point
            if point.key not in m["points"]:
                m["points"][point.key] = point.values
                changed = True
            if [point.key, seed] not in m["runs"]:
                m["runs"].append([point.key, seed])
                changed = True
        for s in skipped:
            if s not in m["skipped"]:
                m["skipped"].append(s)
                changed = True
        if changed:
            write_manifest(self.out, m)

    def run(self, pairs: list[tuple[Any, int]], label: str) -> None:
        """Run every unfinished pair (deduplicated), write it, and read its metrics."""
        from .core import _write_run
        from .progress import SweepProgress

        self.extend(pairs)
        seen, todo = set(), []
        for point, seed in pairs:
            if (point.key, seed) in seen:
                continue
            seen.add((point.key, seed))
            if not self.finished(point.key, seed):
                todo.append((point, seed))
        if todo:
            tasks = [{"point": p.key, "seed": s, "scenario": p.data, "source": self.sp.plan.source,
                      "base_dir": str(self.sp.plan.base_dir), "level": self.sp.plan.spec.output,
                      "resolved": self._expected(p, s)} for p, s in todo]
            if self.ex.name == "dask":  # workers may be on other machines: the input files' content (core)
                from .core import point_inputs

                per_point: dict[str, dict[str, bytes]] = {}
                for t, (p, _s) in zip(tasks, todo):
                    if p.key not in per_point:
                        per_point[p.key] = point_inputs(p.data, self.sp.plan.source, self.sp.plan.base_dir,
                                                        self.ex.address != "local", self._inputs)
                    t["files"] = per_point[p.key]
            fmts = {p.key: (p.data.get("output") or {}).get("format", "jsonl.gz") for p, _s in todo}
            progress = SweepProgress(len(seen), len(seen) - len(todo), **self.progress_args)
            progress.start()
            for res in self.ex.run(tasks):
                _write_run(self.out, res, fmts[res["point"]])
                self.metrics.pop((res["point"], int(res["seed"])), None)
                self.executed += 1
                if res["status"] != "ok":
                    self.failed += 1
                    self.failures.append(res)
                progress.advance(res["status"] == "ok")
            progress.close()

    def values(self, key: str, seed: int) -> Optional[dict[str, Any]]:
        """The flattened summary of a finished run (None: failed or missing)."""
        from .core import _run_dir
        from .results import flatten

        if (key, seed) not in self.metrics:
            f = _run_dir(self.out, key, seed) / "summary.json"
            self.metrics[(key, seed)] = flatten(json.loads(f.read_text())) if f.is_file() else None
        return self.metrics[(key, seed)]

    def series(self, key: str, metric: str, seeds: list[int]) -> dict[int, float]:
        """{seed: value} of ``metric`` over the finished ``seeds`` of a point (booleans as 0/1, nulls left out)."""
        out = {}
        for s in seeds:
            v = self.values(key, s)
            x = None if v is None else v.get(metric)
            if isinstance(x, bool):
                x = float(x)
            if isinstance(x, (int, float)) and math.isfinite(float(x)):
                out[s] = float(x)
        return out


def _evaluate(sp: SearchPlan, runner: _Runner, point, seeds: list[int]) -> tuple[Optional[list[float]],
                                                                                    list[float], dict, str]:
    """(objective means or None, constraint violations, {metric: mean}, reason) of a point over ``seeds``."""
    flats = [runner.values(point.key, s) for s in seeds]
    bad = sum(1 for f in flats if f is None)
    if bad:
        return None, [], {}, f"{bad} of {len(seeds)} runs failed"
    known = set().union(*(set(f) for f in flats))
    for m in [o.metric for o in sp.spec.objectives] + [c.metric for c in sp.spec.constraints]:
        if m not in known:
            check_metrics(sp, known)  # raises: unknown metric, with a guess
    means: dict[str, float] = {}
    for m in dict.fromkeys([o.metric for o in sp.spec.objectives] + [c.metric for c in sp.spec.constraints]):
        xs = list(runner.series(point.key, m, seeds).values())
        means[m] = sum(xs) / len(xs) if xs else math.nan
    missing = [o.metric for o in sp.spec.objectives if not math.isfinite(means[o.metric])]
    if missing:
        return None, [], means, f"{missing[0]} has no value in any seed"
    viol = [c.seed_violation(runner.series(point.key, c.metric, seeds)) for c in sp.spec.constraints]
    return [means[o.metric] for o in sp.spec.objectives], viol, means, ""


def check_study_compatible(old: dict, new: dict, folder: Path) -> None:
    from .manifest import MANIFEST, check_compatible

    where = str(Path(folder) / MANIFEST)
    if "search" not in old:
        raise RunFolderError("the folder holds a grid sweep, not a search; use another --out", file=where)
    check_compatible(old, new, folder)
    a, b = old["search"], new["search"]
    for k in ("sampler", "seed", "batch", "ranges", "objectives", "constraints", "seeds"):
        if a.get(k) != b.get(k):
            raise RunFolderError(f"the folder holds a different search: {k} is {json.dumps(a.get(k))} there and "
                                 f"{json.dumps(b.get(k))} here (only --trials, --max-seeds and --refine-runs may "
                                 "change; use another --out)", file=where)


def run_search(sp: SearchPlan, out: str | Path, executor: str = "local", workers: Optional[int] = None,
               scheduler: Optional[str] = None, quiet: bool = False, live: Optional[bool] = None,
               echo: Callable[[str], None] = lambda s: None, every: float = 10.0,
               announce: Optional[Callable[[], None]] = None) -> SearchOutcome:
    """Run (or resume) the study into ``out``, refine the front and write
    trials.csv, front.csv, recommended.json and the sweep tables."""
    from .core import _Lock, check_folder, remove_stale_tmp, repair_runs
    from .executors import make_executor
    from .manifest import merge, read_manifest, write_manifest
    from .results import write_results

    optuna = _require_optuna()
    from optuna.trial import TrialState

    out = Path(out)
    new = sp.manifest()
    old = check_folder(sp.plan, out)  # (not among the inputs; a folder, empty or a sweep's)
    if old is not None:
        check_study_compatible(old, new, out)
    check_journal(out / JOURNAL)
    ex = make_executor(executor, workers, scheduler)  # connect before writing anything
    try:
        out.mkdir(parents=True, exist_ok=True)
        lock = _Lock(out)
    except BaseException:
        ex.close()
        raise
    aborted = True
    try:
        old = read_manifest(out)
        if old is not None:
            check_study_compatible(old, new, out)
            manifest = merge(old, new)
            manifest["search"] = new["search"]
        else:
            manifest = new
        remove_stale_tmp(out)
        repair_runs(out, manifest)  # a damaged summary.json: its run counts as not run
        write_manifest(out, manifest)
        tr = _open_study(sp, out)
        study = tr.study
        if announce is not None:
            announce()
        echo(f"search: {ex.describe()}")
        runner = _Runner(sp, out, ex, manifest, {"live": live, "quiet": quiet, "every": every})
        points = _Points(sp)
        dists = {r.path: r.distribution() for r in sp.spec.ranges}
        seeds = sp.seeds
        B, T = sp.spec.batch, sp.spec.trials
        resumed = sum(1 for t in study.get_trials(deepcopy=False) if t.state.is_finished()
                      and not str(t.user_attrs.get("reason", "")).startswith("invalid"))
        invalid_streak = 0

        def validity(t):
            return points.make(_params(sp, tr, t))

        def is_invalid(t) -> bool:
            return t.state == TrialState.FAIL and str(t.user_attrs.get("reason", "")).startswith("invalid") or \
                (t.state == TrialState.RUNNING and validity(t)[0] is None)

        def tell_invalid(t) -> None:
            _p, vals, reason = validity(t)
            tr.set_user_attr(t, "values", vals)
            tr.set_user_attr(t, "reason", f"invalid: {reason}")
            runner.extend([], [{"values": vals, "reason": reason}])
            study.tell(t.number, state=TrialState.FAIL)

        trials = study.get_trials(deepcopy=False)
        last = max([t.user_attrs.get("batch", 0) for t in trials] or [0])
        for t in trials:  # asked but killed before its batch was noted: it belongs to the last batch
            if "batch" not in t.user_attrs:
                tr.set_user_attr(t, "batch", last)
        k = 0
        while True:
            trials = study.get_trials(deepcopy=False)
            members = [t for t in trials if t.user_attrs.get("batch") == k]
            valid_before = sum(1 for t in trials if t.user_attrs.get("batch", 0) < k and not is_invalid(t))
            if not members and valid_before >= T:
                break
            for t in members:  # an invalid point killed before it was told
                if t.state == TrialState.RUNNING and is_invalid(t):
                    tell_invalid(t)
            valid = [t for t in members if not is_invalid(t)]
            # ask until the batch holds its valid trials: an invalid point (alpha >= beta) is told FAIL at once
            # and replaced, so every generation has its full population and the budget counts runs, not draws
            while len(valid) < min(B, T - valid_before):
                n = len(study.get_trials(deepcopy=False))
                study.sampler = _sampler(sp, n)
                t = study.ask(fixed_distributions=dists)
                tr.set_user_attr(t, "batch", k)
                ft = study.get_trials(deepcopy=False)[t.number]
                if validity(ft)[0] is None:
                    tell_invalid(ft)
                    invalid_streak += 1
                    if invalid_streak >= 50 * B:
                        raise InputError(f"{invalid_streak} draws in a row gave invalid settings (the last: "
                                         f"{validity(ft)[2]}); narrow the ranges", field="--range")
                    continue
                invalid_streak = 0
                valid.append(ft)
            k += 1
            batch = sorted((t for t in study.get_trials(deepcopy=False)
                            if t.user_attrs.get("batch") == k - 1 and t.state == TrialState.RUNNING),
                           key=lambda t: t.number)
            if not batch:
                continue
            made = {t.number: (t, validity(t)) for t in batch}
            pairs = [(pt, s) for _t, (pt, _v, _r) in made.values() for s in seeds]
            runner.extend(pairs)
            runner.run(pairs, f"batch {k - 1}")
            ok = bad = 0
            for num in sorted(made):
                t, (point, vals, _reason) = made[num]
                tr.set_user_attr(t, "values", vals)
                tr.set_user_attr(t, "point", point.key)
                objs, viol, means, why = _evaluate(sp, runner, point, seeds)
                tr.set_user_attr(t, "means", {m: _finite(v) for m, v in means.items()})
                if objs is None:
                    tr.set_user_attr(t, "reason", why)
                    study.tell(num, state=TrialState.FAIL)
                    bad += 1
                    continue
                tr.set_user_attr(t, "constraints", viol)
                study.tell(num, objs)
                ok += 1
            _write_trials(sp, out, study)
            all_t = study.get_trials(deepcopy=False)
            done = [t for t in all_t if t.state == TrialState.COMPLETE]
            n_inv = sum(1 for t in all_t if t.user_attrs.get("batch") == k - 1 and is_invalid(t))
            echo(f"search: batch {k - 1} (trials {min(made)}-{max(made)}) told: {ok} complete, {bad} failed"
                 + (f", {n_inv} invalid draws replaced" if n_inv else "")
                 + f"; {len(done)}/{T} trials complete, front {len(_front_keys(sp, runner, done, seeds))} points")
        # ------------------------------------------------------------------ refinement and outputs
        trials = study.get_trials(deepcopy=False)
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        for t in complete:
            point, _v, _r = points.make(dict(t.params))
            runner.points[point.key] = point
        before = runner.executed
        front, rec = _refine(sp, runner, complete, echo)
        refinement_runs = runner.executed - before
        _write_trials(sp, out, study)
        written = [out / TRIALS, _write_front(sp, runner, out, front, rec)]
        write_atomic(out / RECOMMENDED, json.dumps(rec, indent=1, default=str) + "\n")
        written.append(out / RECOMMENDED)
        written += write_results(out, manifest)
        aborted = False
    finally:
        ex.close(abort=aborted)
        lock.release()
    trials = study.get_trials(deepcopy=False)
    invalid = sum(1 for t in trials if str(t.user_attrs.get("reason", "")).startswith("invalid"))
    return SearchOutcome(out, len(trials), sum(1 for t in trials if t.state == TrialState.COMPLETE), invalid,
                         sum(1 for t in trials if t.state == TrialState.FAIL) - invalid, runner.executed, resumed,
                         runner.failed, refinement_runs, front, rec, written, runner.failures)


def _finite(v: float) -> Optional[float]:
    return v if isinstance(v, (int, float)) and math.isfinite(v) else None


# ------------------------------------------------------------------------------------ the front


def _stats(sp: SearchPlan, runner: _Runner, key: str, n: int) -> dict[str, dict[int, float]]:
    seeds = (sp.seeds + sp.extra_seeds)[:n]
    ms = dict.fromkeys([o.metric for o in sp.spec.objectives] + [c.metric for c in sp.spec.constraints])
    return {m: runner.series(key, m, seeds) for m in ms}


def _mean(xs: dict[int, float]) -> float:
    return sum(xs.values()) / len(xs) if xs else math.nan


def _feasible(sp: SearchPlan, st: dict[str, dict[int, float]]) -> bool:
    """Every constraint holds on the point's seeds so far (``==`` on each seed, ``<=`` / ``>=`` on the mean:
    :meth:`Constraint.holds_on`) and every objective has a value."""
    return all(c.holds_on(st[c.metric]) for c in sp.spec.constraints) and \
        all(math.isfinite(_mean(st[o.metric])) for o in sp.spec.objectives)


def _dominates(sp: SearchPlan, a: dict, b: dict) -> bool:
    va = [o.sign * _mean(a[o.metric]) for o in sp.spec.objectives]
    vb = [o.sign * _mean(b[o.metric]) for o in sp.spec.objectives]
    return all(x <= y for x, y in zip(va, vb)) and any(x < y for x, y in zip(va, vb))


def _nondominated(sp: SearchPlan, keys: list[str], st: dict[str, dict]) -> list[str]:
    return [k for k in keys if not any(_dominates(sp, st[q], st[k]) for q in keys if q != k)]


def _order(sp: SearchPlan, keys: list[str], st: dict[str, dict]) -> list[str]:
    """Front points along the first objective (best first), ties by the next ones, then by point id."""
    return sorted(keys, key=lambda k: tuple(o.sign * _mean(st[k][o.metric]) for o in sp.spec.objectives) + (k,))


def _separated(sp: SearchPlan, a: dict, b: dict) -> bool:
    return any(distinguishable(a[o.metric], b[o.metric]) for o in sp.spec.objectives)


def _better(o: Objective, a: dict, b: dict) -> bool:
    """``a`` is distinguishably better than ``b`` on ``o`` (paired on shared seeds)."""
    return o.sign * (_mean(a[o.metric]) - _mean(b[o.metric])) < 0 and distinguishable(a[o.metric], b[o.metric])


def interval_dominates(sp: SearchPlan, a: dict, b: dict) -> bool:
    """The interval rule: ``a`` is distinguishably better than ``b`` on some objective and distinguishably
    worse on none (a point so dominated is never recommended)."""
    objs = sp.spec.objectives
    return any(_better(o, a, b) for o in objs) and not any(_better(o, b, a) for o in objs)


def _iv(metric: str, xs: dict[int, float]) -> Interval:
    """The 95 % interval of a metric's seed values, clipped to the metric's range (a rate to [0, 1])."""
    return clip(interval(list(xs.values())), metric_bounds(metric))


def _choose(sp: SearchPlan, front: list[str], st: dict[str, dict]) -> Optional[str]:
    """The recommendation among the feasible front points ``front`` (docs/sweeps.md, "The recommendation"):

    1. drop every point another front point dominates by the interval rule (:func:`interval_dominates`);
    2. on the second objective, then the third, ..., keep the points not distinguishably worse than the
       best mean;
    3. on the first objective, take the best pessimistic 95 % bound, and with it every kept point it does
       not beat distinguishably; of those, the best means on the later objectives, in order (then the
       bound, then the order along the front).

    The result is never dominated by any front point by the interval rule, and a point is never preferred
    for a first-objective advantage the seeds cannot tell from noise."""
    if not front:
        return None
    objs = sp.spec.objectives
    pos = {k: i for i, k in enumerate(front)}
    cand = [k for k in front if not any(interval_dominates(sp, st[q], st[k]) for q in front if q != k)] or \
        list(front)  # a cycle of the paired rule (noise): every point
    for o in objs[1:]:
        best = min(cand, key=lambda k: (o.sign * _mean(st[k][o.metric]), pos[k]))
        cand = [k for k in cand if k == best or not _better(o, st[best], st[k])]
    o1 = objs[0]

    def bound(k: str) -> float:
        return _bound(o1, _iv(o1.metric, st[k][o1.metric]))

    top = min(cand, key=lambda k: (bound(k), pos[k]))
    tied = [k for k in cand if k == top or not _better(o1, st[top], st[k])]
    return min(tied, key=lambda k: tuple(o.sign * _mean(st[k][o.metric]) for o in objs[1:]) + (bound(k), pos[k]))


def _front_keys(sp: SearchPlan, runner: _Runner, complete: list, seeds: list[int]) -> list[str]:
    keys = sorted({t.user_attrs["point"] for t in complete if "point" in t.user_attrs})
    st = {k: _stats(sp, runner, k, len(seeds)) for k in keys}
    feas = [k for k in keys if _feasible(sp, st[k])]
    return _nondominated(sp, feas, st)


def _contenders(sp: SearchPlan, rec: str, front: list[str], rest: list[str], st: dict[str, dict]) -> list[str]:
    """The points that can still take the recommendation from ``rec``: front points and feasible points of
    the next layer that no objective yet tells apart from it (paired on shared seeds; its neighbours along
    the front among them while they are not told apart), nearest first along the first objective. Points
    already told apart from it, at the far ends of the front, get no seeds: they cannot change the choice."""
    out = [k for k in front if k != rec and not _separated(sp, st[k], st[rec])]
    out += [k for k in _nondominated(sp, rest, st) if not _separated(sp, st[k], st[rec])]
    o1 = sp.spec.objectives[0]
    x = _mean(st[rec][o1.metric])
    return sorted(out, key=lambda k: (abs(_mean(st[k][o1.metric]) - x), k))


def _refine(sp: SearchPlan, runner: _Runner, complete: list, echo) -> tuple[list[dict], Optional[dict]]:
    """More seeds where the recommendation is decided: the current recommendation and the points that
    cannot yet be told apart from it (:func:`_contenders`), until none is left, each has ``max_seeds``
    or the budget is spent; the recommendation is recomputed after every round."""
    keys = sorted({t.user_attrs["point"] for t in complete if "point" in t.user_attrs})
    n = {k: len(sp.seeds) for k in keys}
    step = sp.seed_step
    all_seeds = sp.seeds + sp.extra_seeds
    budget = sp.refine_runs
    spent = rnd = 0  # runs scheduled (finished or not: a resumed study decides as the uninterrupted one)
    while True:
        st = {k: _stats(sp, runner, k, n[k]) for k in keys}
        feas = [k for k in keys if _feasible(sp, st[k])]
        front = _order(sp, _nondominated(sp, feas, st), st)
        rec = _choose(sp, front, st)
        if rec is None:
            break
        others = _contenders(sp, rec, front, [k for k in feas if k not in front], st)
        grow = [k for k in [rec] + others if n[k] < sp.max_seeds] if others else []
        if not grow or spent >= budget:  # told apart from every contender, or no seeds left to give
            break
        rnd += 1
        pairs, grown = [], []
        for k in grow:  # the recommendation first (every comparison is paired), then its nearest contenders
            new_n = min(sp.max_seeds, n[k] + step, n[k] + budget - spent)
            if new_n <= n[k]:
                break
            pairs += [(runner.points[k], s) for s in all_seeds[n[k]:new_n]]
            spent += new_n - n[k]
            n[k] = new_n
            grown.append(k)
        echo(f"search: refinement round {rnd}: the recommended point and {len(grown) - 1} contender"
             f"{'s' if len(grown) != 2 else ''} get seeds up to {max(n[k] for k in grown)} ({len(pairs)} runs; "
             f"{spent}/{budget} of the refinement budget)")
        runner.run(pairs, f"refinement {rnd}")
        for k in grown:  # a failed run: refine that point no further (its statistics use the seeds that ran)
            if any(runner.values(k, s) is None for s in all_seeds[:n[k]]):
                n[k] = sp.max_seeds
    st = {k: _stats(sp, runner, k, n[k]) for k in keys}
    feas = [k for k in keys if _feasible(sp, st[k])]
    front = _order(sp, _nondominated(sp, feas, st), st)
    trial_of = {}
    for t in sorted(complete, key=lambda t: t.number):
        trial_of.setdefault(t.user_attrs.get("point"), t.number)
    rows = []
    for i, k in enumerate(front):
        ran = sum(1 for s in all_seeds[:n[k]] if runner.values(k, s) is not None)
        row: dict[str, Any] = {"rank": i + 1, "point": k, "trial": trial_of.get(k), "seeds": ran}
        row.update(runner.points[k].values)
        row["_stats"] = st[k]
        row["intervals"] = {o.metric: _iv(o.metric, st[k][o.metric]) for o in sp.spec.objectives}
        prev = front[i - 1] if i > 0 else None
        nxt = front[i + 1] if i + 1 < len(front) else None
        row["distinct_prev"] = None if prev is None else _separated(sp, st[k], st[prev])
        row["distinct_next"] = None if nxt is None else _separated(sp, st[k], st[nxt])
        rows.append(row)
    return rows, _recommend(sp, rows)


def _bound(o: Objective, iv: Interval) -> float:
    """The pessimistic end of the 95 % interval (the mean when there is none)."""
    if not math.isfinite(iv.lo):
        return o.sign * iv.mean
    return iv.hi if o.direction == "minimize" else -iv.lo


RULE = ("feasible front points (constraints: == on every seed, <= and >= on the mean over every seed the point "
        "ran) that no front point dominates by the interval rule (distinguishably better on one objective, "
        "worse on none); of those, not distinguishably worse than the best on {later}; then the best 95 % bound "
        "on {first}, and among the points it does not beat distinguishably, the best means on {later}")


def _recommend(sp: SearchPlan, rows: list[dict]) -> Optional[dict]:
    if not rows:
        return None
    objs = sp.spec.objectives
    by = {r["point"]: r for r in rows}
    key = _choose(sp, [r["point"] for r in rows], {k: r["_stats"] for k, r in by.items()})
    rec = by[key]
    paths = [r.path for r in sp.spec.ranges]
    later = ", then ".join(o.metric for o in objs[1:]) or "(no other objective)"
    bounded = [o.metric for o in objs if metric_bounds(o.metric) != (-math.inf, math.inf)]
    return {"rule": RULE.format(later=later, first=objs[0].metric),
            "rank": rec["rank"], "trial": rec["trial"], "point": rec["point"], "seeds": rec["seeds"],
            "values": {p: rec[p] for p in paths},
            "objectives": {o.metric: _iv_dict(rec["intervals"][o.metric]) for o in objs},
            "constraints": {c.text(): {"mean": _finite(_mean(rec["_stats"][c.metric])),
                                       "worst_seed": _finite(_worst(c, rec["_stats"][c.metric])),
                                       "seeds": len(rec["_stats"][c.metric])} for c in sp.spec.constraints},
            "clipped": {m: list(_json_bounds(metric_bounds(m))) for m in bounded},
            "set": " ".join(f"--set {p}={_setval(rec[p])}" for p in paths)}


def _worst(c: Constraint, xs: dict[int, float]) -> float:
    """The seed value furthest on the wrong side of the bound (the largest for <=, the smallest for >=)."""
    if not xs:
        return math.nan
    return max(xs.values(), key=lambda x: (c.violation(x), x))


def _json_bounds(b: tuple[float, float]) -> tuple[Optional[float], Optional[float]]:
    return tuple(x if math.isfinite(x) else None for x in b)  # type: ignore[return-value]


def _setval(v: Any) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def _iv_dict(iv: Interval) -> dict[str, Any]:
    return {"mean": _finite(iv.mean), "se": _finite(iv.se), "lo": _finite(iv.lo), "hi": _finite(iv.hi), "n": iv.n}


# ------------------------------------------------------------------------------------ tables


def _write_front(sp: SearchPlan, runner: _Runner, out: Path, rows: list[dict], rec: Optional[dict]) -> Path:
    from .results import csv_text

    paths = [r.path for r in sp.spec.ranges]
    cols = ["rank", "point", "trial"] + paths + ["seeds"]
    for o in sp.spec.objectives:
        cols += [f"{o.metric}.{s}" for s in ("mean", "se", "lo", "hi", "n")]
    extra = [c.metric for c in sp.spec.constraints if c.metric not in [o.metric for o in sp.spec.objectives]]
    cols += [f"{m}.mean" for m in dict.fromkeys(extra)]
    cols += ["distinct_prev", "distinct_next", "recommended"]
    table = []
    for r in rows:
        d = {c: r.get(c) for c in ["rank", "point", "trial", "seeds"] + paths}
        for o in sp.spec.objectives:
            iv = r["intervals"][o.metric]
            d.update({f"{o.metric}.mean": _finite(iv.mean), f"{o.metric}.se": _finite(iv.se),
                      f"{o.metric}.lo": _finite(iv.lo), f"{o.metric}.hi": _finite(iv.hi), f"{o.metric}.n": iv.n})
        for m in extra:
            d[f"{m}.mean"] = _finite(_mean(r["_stats"][m]))
        d.update(distinct_prev=r["distinct_prev"], distinct_next=r["distinct_next"],
                 recommended=rec is not None and rec["point"] == r["point"])
        table.append(d)
    write_atomic(out / FRONT, csv_text(cols, table))
    return out / FRONT


def _write_trials(sp: SearchPlan, out: Path, study) -> None:
    from .results import csv_text

    paths = [r.path for r in sp.spec.ranges]
    ms = list(dict.fromkeys([o.metric for o in sp.spec.objectives] + [c.metric for c in sp.spec.constraints]))
    cols = ["trial", "batch", "state", "generation", "point"] + paths + ms + ["feasible", "reason"]
    rows = []
    for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
        vals = t.user_attrs.get("values") or {r.path: r.applied(t.params[r.path]) for r in sp.spec.ranges
                                              if r.path in t.params}
        means = t.user_attrs.get("means") or {}
        viol = t.user_attrs.get("constraints")
        row = {"trial": t.number, "batch": t.user_attrs.get("batch"), "state": t.state.name,
               "generation": t.system_attrs.get("NSGAIISampler:generation"), "point": t.user_attrs.get("point"),
               "feasible": (all(v <= 1e-12 for v in viol) if viol is not None else None)
               if t.state.name == "COMPLETE" else None,
               "reason": t.user_attrs.get("reason")}
        row.update({p: vals.get(p) for p in paths})
        row.update({m: means.get(m) for m in ms})
        rows.append(row)
    write_atomic(out / TRIALS, csv_text(cols, rows))


# ------------------------------------------------------------------------------------ dry run


def describe_search(sp: SearchPlan, out: Path) -> list[str]:
    """What ``--dry-run`` prints (and refuses, as the run would): never writes."""
    from .core import check_folder, short_names

    s = sp.spec
    names = short_names([r.path for r in s.ranges])
    n = len(sp.seeds)
    lines = [f"{sp.plan.name}: search (Optuna NSGA-II, seed {s.seed}): {s.trials} trials in batches of {s.batch} "
             f"x {n} seed{'s' if n != 1 else ''} ({_seeds_text(sp.seeds)}) = up to {s.trials * n} runs; "
             f"the recommendation and its contenders refined up to {sp.max_seeds} seeds, at most "
             f"{sp.refine_runs} more runs -> {out}/",
             "  ranges: " + ", ".join(f"{names[r.path]} {_num(r.low)}..{_num(r.high)} ({r.kind})" for r in s.ranges),
             "  " + ", ".join(f"{o.direction} {o.metric}" for o in s.objectives)
             + ("; subject to " + ", ".join(c.text() for c in s.constraints) if s.constraints else "")]
    old = check_folder(sp.plan, out)  # refused as the run would refuse it
    if old is not None:
        check_study_compatible(old, sp.manifest(), out)
        trials = _read_trials(out) or []
        inv = sum(1 for t in trials if str(t.user_attrs.get("reason", "")).startswith("invalid"))
        running = sum(1 for t in trials if not t.state.is_finished())
        done = len(trials) - running - inv
        lines.append(f"  folder: {done} trials finished, {running} to resume, "
                     f"{max(0, s.trials - done - running)} to ask")
    else:
        lines.append("  folder: new")
    return lines


def _seeds_text(seeds: list[int]) -> str:
    if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return "seed" + ("s " if len(seeds) != 1 else " ") + ",".join(map(str, seeds))
