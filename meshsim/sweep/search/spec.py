"""The search's spec: ranges, objectives, constraints, the plan and its checks (see :mod:`meshsim.sweep.search`)."""
from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ...core.errors import InputError


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
        kind = f":{self.kind}" if self.kind != "float" else ""
        return f"{self.path}={num_text(self.low)}:{num_text(self.high)}{kind}"

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
        return f"{self.metric}{self.op}{num_text(self.value)}"

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


def num_text(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(float(v))


def parse_range(text: str) -> Range:
    """``PATH=LOW:HIGH`` (float), ``PATH=LOW:HIGH:int`` or ``PATH=LOW:HIGH:log``."""
    from ..spec import check_path

    where = {"field": "--range", "value": text}
    if "=" not in text:
        raise InputError("expected PATH=LOW:HIGH[:int|:log], e.g. protocol.params.alpha=0.8:2.5", **where)
    path, spec = text.split("=", 1)
    path = check_path(path, where)
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

    @property
    def population(self) -> int:
        """NSGA-II's population: ``batch``, default :func:`default_batch` of the trials."""
        return self.batch if self.batch is not None else default_batch(self.trials)

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


def require_optuna():
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
    from ..core import plan_sweep

    require_optuna()
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
    from ...simulate.runner import dump_json, run_one
    from ...scenario.model import parse_scenario, scenario_data
    from ..results import flatten

    plan = sp.plan
    base = copy.deepcopy(plan.base)
    small = isinstance(base, dict) and isinstance(base.get("smoke"), dict) and base["smoke"]
    if not small and not (isinstance(base, dict) and base.get("smoke") == {}):
        return None
    data = scenario_data(base, plan.source, [], smoke=bool(small))
    point = plan.points[0]
    from ...scenario.model import set_path

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
