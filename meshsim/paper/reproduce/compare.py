"""The MeshHeal paper's comparison of six methods (Sec. 6.1-6.2, Tab. 2a, 3, C1-C4; App. B.4).

Every method runs the same scenario file (``scenarios/compare/``): the same
tasks in the same order, entry agents, models and degradation schedule, on
the shared execution layer (:mod:`meshsim.protocols.execution`), which counts
every call and token the same way for all of them. Only ``protocol`` differs
between the runs of one seed.

* :func:`compare_experiments` — the cells of ``meshsim reproduce meshheal``:
  paper value beside simulated mean ± sd for every method (``n/r`` where our
  copy of the paper quotes no number). All of them are *predictions*: no
  parameter of any method or of the fake was chosen by looking at them. Each
  experiment is data, as in :mod:`.meshheal`: its run groups (:class:`Group`)
  and a table of :class:`MethodRow` s (one cell per method each), with one
  function per experiment that pairs them.
* :func:`comparison` — the wide table ``meshsim compare`` prints and saves:
  one row per method (and per dataset), the persistent-degradation columns of
  Tab. 2a / C1 / C2 or, for other phase schedules, accuracy per phase and the
  self-healing criteria of Tab. 3 (a method that never isolates an agent
  shows detection delay ∞ and closure not established).
"""
from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Union

from ...core.dotted import get_path
from ...core.files import load_yaml
from ...core.names import node_order
from ...scenario.fields import seed_list as seed_list_of
from .core import ROOT, Cell, Experiment, RunSpec, _pair, _vals, run_specs, seeds_of
from .meshheal import NO_TRACE, Group, Metric, Row, _after_first_degradation, _closed, _values, table_cells

__all__ = ["METHODS", "LABEL", "method_runs", "compare_experiments", "assumption_experiments",
           "compare_sensitivities", "comparison", "render_comparison", "run_comparison", "PAPER"]

METHODS = ("meshheal", "agentnet", "raps", "autogen", "symphony", "sac_teams")
LABEL = {"meshheal": "MeshHeal", "agentnet": "AgentNet", "raps": "RAPS", "autogen": "AutoGen",
         "symphony": "Symphony", "sac_teams": "SAC"}
CMP = "scenarios/compare"
DATASETS = (("bbh", "BBH"), ("math", "MATH"), ("mmlu-pro", "MMLU-Pro"))
NR = "n/r"

#: every number our copy of the paper quotes for the comparison: (value, sd or None)
PAPER: dict[str, dict[str, tuple[Any, Optional[float]]]] = {
    # Tab. 2a (mean of the three datasets within seed), Sec. 6.1, App. C.1
    "mean.healthy": {"meshheal": (0.831, 0.013)},
    "mean.degraded": {"meshheal": (0.839, 0.012), "symphony": (0.807, 0.014)},
    "mean.change": {"meshheal": (0.007, 0.012), "raps": (-0.147, 0.045), "agentnet": (-0.172, 0.047),
                    "autogen": (-0.363, 0.028)},
    # Tab. C2 (mean of datasets within seed)
    "tokens.healthy": {"meshheal": (51.0, 3.0), "symphony": (86.0, 5.0), "sac_teams": (116.0, 4.0)},
    "tokens.degraded": {"meshheal": (51.0, 5.0), "symphony": (115.0, 9.0), "sac_teams": (178.0, 13.0)},
    "calls.healthy": {"meshheal": (12.4, 0.2)},
    "calls.degraded": {"meshheal": (13.6, 0.3)},
    # Tab. C1, MATH
    "math.healthy": {"meshheal": (0.821, 0.019)},
    "math.degraded": {"meshheal": (0.802, 0.021)},
    "math.change": {"meshheal": (-0.019, None), "symphony": (-0.028, None), "sac_teams": (-0.155, None)},
    # Tab. 3 (staggered MATH), Sec. 6.2, App. C.2
    "stag.both_degraded": {"meshheal": (0.770, None)},
    "stag.a3_degraded": {"meshheal": (0.841, None)},
    "stag.restored": {"meshheal": (0.857, None), "raps": (0.524, None), "agentnet": (0.563, None)},
    "stag.post": {"meshheal": (0.812, None), "symphony": (0.806, None)},
    "stag.tokens": {"meshheal": (49.0, None), "symphony": (105.0, None)},
    "stag.A5.delay": {"meshheal": (8.0, 5.2)},
    "stag.A3.delay": {"meshheal": (12.4, 6.2)},
    "stag.A5.rein": {"meshheal": (46.0, 11.7)},
    "stag.A3.rein": {"meshheal": (45.0, 3.5)},
    # Tab. C3 / C4 (model pairs A and B; mean of datasets)
    "pair_a.degraded": {"meshheal": (0.905, 0.016), "symphony": (0.865, 0.021)},
    "pair_a.tokens": {"meshheal": (56.687, None), "symphony": (100.685, None)},
    "pair_b.degraded": {"meshheal": (0.782, 0.023), "symphony": (0.786, 0.021)},
    "pair_b.change": {"meshheal": (-0.008, 0.015), "symphony": (-0.020, 0.017)},
}
#: Sec. 6.2: "None of the baseline methods fully isolates degraded agents; ... their detection
#: delay is therefore infinite, closure is not established, and reintegration delay is undefined."
NEVER = "∞ (never isolated)"


def _protocol_of(scenario: str) -> str:
    path = ROOT / scenario if not Path(scenario).is_absolute() else Path(scenario)
    data = load_yaml(path, "scenario") or {}
    proto = data.get("protocol") or {}
    return proto if isinstance(proto, str) else str(proto.get("name", "routing"))


def method_sets(scenario: str, method: str, sets: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``--set`` overrides that run ``scenario`` with ``method``: the scenario's own
    protocol block when it is that method, else the method with its defaults."""
    extra = () if _protocol_of(scenario) == method else (f"protocol={{name: {method}}}",)
    return tuple(sets) + extra


def method_runs(scenario: str, seeds: "int | list[int]", methods: tuple[str, ...] = METHODS, sets: tuple[str, ...] = (),
                **kw: Any) -> dict[str, list[RunSpec]]:
    return {m: [RunSpec(scenario, method_sets(scenario, m, sets), seed=k, **kw) for k in seeds_of(seeds)]
            for m in methods}


def _mean_of(per_ds: list[list[Optional[float]]]) -> list[Optional[float]]:
    """Average the datasets within each seed (Tab. 2a / C1 'Mean' column)."""
    out = []
    for xs in zip(*per_ds):
        out.append(statistics.fmean(xs) if all(x is not None for x in xs) else None)
    return out


# ---------------------------------------------------------------------------------------- the tables as data

@dataclass(frozen=True)
class MethodRow:
    """One row of a comparison table: a cell per method. ``{m}`` in ``runs`` is the method's
    key and ``{label}`` in ``label`` its name; ``runs`` and ``metric`` read as in
    :class:`~meshsim.paper.reproduce.meshheal.Row`. The paper's value and sd are
    ``PAPER[paper][method]`` (n/r where it quotes none), unless ``meshheal`` / ``baseline``
    give MeshHeal's / every other method's value (Sec. 6.2 says it for all baselines at once).
    ``note``: a text, or a function of the cell's values."""
    source: str
    label: str
    runs: str
    metric: Metric
    paper: str = ""
    fmt: str = "{:.3f}"
    scale: float = 1.0
    note: Union[str, Callable[[list[Optional[float]]], str]] = ""
    empty: str = "—"
    meshheal: Any = None
    baseline: Any = None

    def cell(self, method: str, by: dict[str, list[dict]]) -> Cell:
        row = Row(self.source, self.label.format(label=LABEL[method]), self.runs.format(m=method), self.metric,
                  scale=self.scale)
        values = _values(by, row, row.runs, row.metric)
        paper, sd = _paper(self.paper, method)
        fixed = self.meshheal if method == "meshheal" else self.baseline
        note = self.note(values) if callable(self.note) else self.note
        return Cell(self.source, row.label, paper if fixed is None else fixed, paper_sd=sd, values=values,
                    fmt=self.fmt, note=note, empty=self.empty)


def method_cells(rows: tuple[MethodRow, ...], methods: tuple[str, ...], by: dict[str, list[dict]]) -> list[Cell]:
    """Every row's cell for each method in turn (method by method, as the paper's tables read)."""
    return [r.cell(m, by) for m in methods for r in rows]


def _paper(key: str, method: str) -> tuple[Any, Optional[float]]:
    return PAPER.get(key, {}).get(method, (NR, None))


H, D = "accuracy.by_phase.healthy", "accuracy.by_phase.degraded"
CHANGE = f"{D} - {H}"  # the paired phase change
ALL_DATASETS = " ".join(f"{{m}}/{ds}" for ds, _ in DATASETS)

#: Sec. 6.1, Tab. C1 / 2a / C2: persistent degradation, three datasets (runs "method/dataset")
PERSISTENT = tuple(
    MethodRow("Tab. C1", f"{{label}}, {name}: {what}", f"{{m}}/{ds}", metric, f"{ds.replace('-', '_')}.{key}", fmt)
    for ds, name in DATASETS
    for key, what, metric, fmt in (("healthy", "healthy-phase accuracy", H, "{:.3f}"),
                                   ("degraded", "degraded-phase accuracy", D, "{:.3f}"),
                                   ("change", "paired phase change", CHANGE, "{:+.3f}"))) + (
    MethodRow("Tab. 2a", "{label}, mean of datasets: healthy-phase accuracy", f"mean {ALL_DATASETS}", H,
              "mean.healthy"),
    MethodRow("Tab. 2a", "{label}, mean of datasets: degraded-phase accuracy", f"mean {ALL_DATASETS}", D,
              "mean.degraded"),
    MethodRow("Tab. 2a", "{label}, mean of datasets: paired phase change", f"mean {ALL_DATASETS}", CHANGE,
              "mean.change", "{:+.3f}"),
    MethodRow("Tab. C2", "{label}: tokens per task (k), healthy phase", f"mean {ALL_DATASETS}",
              "tokens_per_task_by_phase.healthy", "tokens.healthy", "{:.1f}", 1e-3),
    MethodRow("Tab. C2", "{label}: model calls per task, healthy phase", f"mean {ALL_DATASETS}",
              "calls_per_task_by_phase.healthy", "calls.healthy", "{:.1f}"),
    MethodRow("Tab. C2", "{label}: tokens per task (k), degraded phase", f"mean {ALL_DATASETS}",
              "tokens_per_task_by_phase.degraded", "tokens.degraded", "{:.1f}", 1e-3),
    MethodRow("Tab. C2", "{label}: model calls per task, degraded phase", f"mean {ALL_DATASETS}",
              "calls_per_task_by_phase.degraded", "calls.degraded", "{:.1f}"),
    MethodRow("Sec. 6.1", "{label}: unanswered tasks (of 3 x 504, summed)", f"sum {ALL_DATASETS}", "unanswered",
              fmt="{:.1f}"),
)


def _isolated_in(delays: list[Optional[float]]) -> str:
    return f"isolated in {sum(d is not None for d in delays)} of {len(delays)} seeds"


def _healing(agent: str) -> tuple[MethodRow, ...]:
    """Tab. 3b for one degraded agent: detection, closure, reintegration (never, for the baselines)."""
    return (
        MethodRow("Tab. 3b", f"{{label}}: {agent} detection delay (tasks)", "{m}",
                  f"agents.{agent}.detection_delay", f"stag.{agent}.delay", "{:.1f}", note=_isolated_in, empty=NEVER,
                  baseline=NEVER),
        MethodRow("Tab. 3b", f"{{label}}: {agent} closure (fraction of seeds)", "{m}", _closed(agent), fmt="{:.2f}",
                  meshheal=1.0, baseline="not established"),
        MethodRow("Tab. 3b", f"{{label}}: {agent} reintegration delay (tasks)", "{m}",
                  f"agents.{agent}.reintegration_delay", f"stag.{agent}.rein", "{:.1f}", empty="undefined",
                  baseline="undefined"),
    )


STAGGERED_PHASES = ("healthy", "a5_degraded", "both_degraded", "a3_degraded", "restored")

#: Sec. 6.2, Tab. 3: staggered degradation and recovery on MATH (runs: the method)
STAGGERED = tuple(MethodRow("Tab. 3a", f"{{label}}: accuracy, phase {ph}", "{m}", f"accuracy.by_phase.{ph}",
                            f"stag.{ph}") for ph in STAGGERED_PHASES) + (
    MethodRow("Tab. 3a", "{label}: accuracy over the 504 tasks after the first degradation", "{m}",
              _after_first_degradation, "stag.post"),
    MethodRow("Tab. 3a", "{label}: tokens per task (k)", "{m}", "tokens_per_task", "stag.tokens", "{:.1f}", 1e-3),
) + _healing("A5") + _healing("A3") + (
    MethodRow("Tab. 3b", "{label}: agents isolated while healthy (of 6)", "{m}", "detection.false_isolations",
              fmt="{:.1f}", meshheal=0.0),
)

PAIR_METHODS = ("meshheal", "symphony")  # the methods the paper quotes under model pairs A and B


def _pair_rows(pair: str) -> tuple[MethodRow, ...]:
    """Tab. C3 (pair A) / C4 (pair B), means of datasets (runs "pair/method/dataset")."""
    tab, name, runs = "Tab. C3" if pair == "a" else "Tab. C4", f"pair {pair.upper()}", \
        "mean " + " ".join(f"{pair}/{{m}}/{ds}" for ds, _ in DATASETS)
    return (
        MethodRow(tab, f"{name}, {{label}}: degraded-phase accuracy", runs, D, f"pair_{pair}.degraded"),
        MethodRow(tab, f"{name}, {{label}}: paired phase change", runs, CHANGE, f"pair_{pair}.change", "{:+.3f}"),
        MethodRow(tab, f"{name}, {{label}}: tokens per task (k)", runs, "tokens_per_task", f"pair_{pair}.tokens",
                  "{:.1f}", 1e-3),
    )


#: the baselines' assumed readings and parameters moved one at a time: variant -> (method, params, why)
ASSUMPTIONS: dict[str, tuple[str, str, str]] = {
    "symphony": ("symphony", "", ""),
    "symphony-random-ties": ("symphony", "tie_break: random",
                             "equal UCB broken at random (default: the first shortlisted, as the code's strict > in "
                             "registry order does)"),
    "symphony-top-6": ("symphony", "top_l: 6",
                       "every candidate shortlisted (the authors' BBH runner passes topL 32; default: the "
                       "orchestrator's 3)"),
    "symphony-name-registry": ("symphony", "registry: name",
                               "the registry in name order, so every tie goes to the first agents by name (the "
                               "reading before issue 34; default: an order drawn per run)"),
    "autogen": ("autogen", "", ""),
    "autogen-reflection": ("autogen", "summary: reflection",
                           "the manager summarises with its model (AutoGen's reflection_with_llm) instead of "
                           "returning the last message (AutoGen's default summary_method)"),
    "raps": ("raps", "", ""),
    "raps-0.3": ("raps", "isolate_below: 0.3", "RAPS blacklists below reputation 0.3 (default 0.5)"),
    "raps-0.7": ("raps", "isolate_below: 0.7", "RAPS blacklists below reputation 0.7 (default 0.5)"),
    "raps-reactive": ("raps", "reactive: true",
                      "RAPS Reactive Subscription as we read it: a producer withdraws from abilities its verdicts "
                      "condemn (default off: the paper's rule is not in our sources)"),
    "agentnet": ("agentnet", "", ""),
    "agentnet-judge-0.6": ("agentnet", "judge_threshold: 0.6",
                           "AgentNet's entry judge counts success only above 0.6 (default 0.40)"),
    "sac_teams": ("sac_teams", "", ""),
    "sac_teams-no-rounds": ("sac_teams", "rounds: 0",
                            "ablation: no filter-and-refine round, the three teams' answers go straight to the "
                            "majority (the paper's SAC runs two)"),
}


def _isolated_of_2(x: dict) -> Optional[float]:
    v = get_path(x, "missed", None)
    return None if v is None or isinstance(v, bool) else 2.0 - float(v)


def _assumption_rows(variant: str) -> tuple[Row, ...]:
    """A variant beside its method's defaults (the paper reports none of these)."""
    method, _params, why = ASSUMPTIONS[variant]
    return (
        Row("assumption", f"{variant}: degraded-phase accuracy (minus default)", f"{variant} - {method}", D, NR,
            fmt="{:+.3f}", note=why),
        Row("assumption", f"{variant}: healthy-phase accuracy (minus default)", f"{variant} - {method}", H, NR,
            fmt="{:+.3f}", note=why),
        Row("assumption", f"{variant}: degraded-phase accuracy", variant, D, NR),
        Row("assumption", f"{variant}: tokens per task (k)", variant, "tokens_per_task", NR, fmt="{:.1f}",
            scale=1e-3),
        Row("assumption", f"{variant}: degraded agents isolated (of 2)", variant, _isolated_of_2, NR, fmt="{:.1f}"),
    )


# ---------------------------------------------------------------------------------------- the run groups

def _method_group(scenario: str, method: str, profile: Optional[str] = None) -> Group:
    return Group(scenario, method_sets(scenario, method, NO_TRACE), profile)


def _specs(groups: dict[str, Group], seeds: "int | list[int]") -> dict[str, list[RunSpec]]:
    return {k: g.specs(seeds) for k, g in groups.items()}


def persistent_runs(methods: tuple[str, ...]) -> dict[str, Group]:
    return {f"{m}/{ds}": _method_group(f"{CMP}/persistent-{ds}.yaml", m) for ds, _ in DATASETS for m in methods}


def staggered_runs(methods: tuple[str, ...]) -> dict[str, Group]:
    return {m: _method_group(f"{CMP}/staggered-math.yaml", m) for m in methods}


def pair_runs(pairs: tuple[str, ...]) -> dict[str, Group]:
    return {f"{pair}/{m}/{ds}": _method_group(f"{CMP}/persistent-{ds}.yaml", m, f"fake-pair-{pair}")
            for pair in pairs for ds, _ in DATASETS for m in PAIR_METHODS}


def assumption_runs() -> dict[str, Group]:
    """BBH, persistent, the first three seeds."""
    return {k: Group(f"{CMP}/persistent-bbh.yaml",
                     NO_TRACE + (f"protocol={{name: {m}" + (f", params: {{{p}}}" if p else "") + "}",), max_seeds=3)
            for k, (m, p, _why) in ASSUMPTIONS.items()}


# ---------------------------------------------------------------------------------------- the experiments

def persistent_experiment(seeds: "int | list[int]", methods: tuple[str, ...]) -> Experiment:
    return Experiment("compare", "Six methods under persistent degradation (Sec. 6.1, Tab. 2a, C1, C2)",
                      _specs(persistent_runs(methods), seeds), lambda by: method_cells(PERSISTENT, methods, by))


def staggered_experiment(seeds: "int | list[int]", methods: tuple[str, ...]) -> Experiment:
    return Experiment("compare-staggered", "Six methods under staggered degradation and recovery "
                      "(Sec. 6.2, Tab. 3)", _specs(staggered_runs(methods), seeds),
                      lambda by: method_cells(STAGGERED, methods, by))


def pairs_experiment(seeds: "int | list[int]", pairs: tuple[str, ...]) -> Experiment:
    return Experiment("compare-pairs", "MeshHeal and Symphony under model pairs A and B (Tab. C3, C4)",
                      _specs(pair_runs(pairs), seeds),
                      lambda by: [c for p in pairs for c in method_cells(_pair_rows(p), PAIR_METHODS, by)],
                      quick_skip=True)


def assumption_experiments(seeds: "int | list[int]" = 5) -> list[Experiment]:
    """The baselines' assumed readings and parameters moved one at a time (BBH, persistent):
    how much of each prediction an assumption carries. Defaults are not chosen from these."""
    rows = tuple(r for k, (m, _p, _why) in ASSUMPTIONS.items() if k != m for r in _assumption_rows(k))
    return [Experiment("compare-assumptions", "Baselines: assumed readings moved one at a time (BBH, persistent)",
                       _specs(assumption_runs(), seeds), lambda by: table_cells(rows, by))]


def compare_experiments(seeds: "int | list[int]" = 5, quick: bool = False,
                        methods: tuple[str, ...] = METHODS) -> list[Experiment]:
    """The comparison's cells for ``meshsim reproduce meshheal`` (all predictions); ``quick``
    leaves out the model pairs and the assumptions."""
    exps = [persistent_experiment(seeds, methods), staggered_experiment(seeds, methods)]
    if quick:
        return exps
    pairs = tuple(p for p in ("a", "b") if _profile_exists(f"fake-pair-{p}"))
    if pairs:
        exps.append(pairs_experiment(seeds, pairs))
    return exps + assumption_experiments(seeds)


def compare_sensitivities() -> list[Any]:
    """Profile assumptions only the baselines use, as curves (``meshsim reproduce`` sensitivity)."""
    from .core import Sensitivity

    sc = f"{CMP}/persistent-bbh.yaml"
    return [
        Sensitivity("autogen-summary", "models.weak.summary_keep", (0.5, 0.8, 0.95, 1.0), sc,
                    ("output.trace=none", "protocol={name: autogen, params: {summary: reflection}}"),
                    (("accuracy.by_phase.degraded", "AutoGen degraded-phase accuracy"),),
                    "how often a degraded (1B) manager's summary keeps the committed answer "
                    "(summary: reflection; the default last_msg makes no summary call)"),
        Sensitivity("autogen-select", "models.weak.select", (0.3, 0.6, 0.8, 0.97), sc,
                    ("output.trace=none", "protocol={name: autogen}"),
                    (("accuracy.by_phase.degraded", "AutoGen degraded-phase accuracy"),),
                    "how often a degraded (1B) manager selects a speaker holding the needed ability"),
        Sensitivity("baselines-weak-infer-agentnet", "models.weak.infer", (0.3, 0.6, 0.8, 0.97), sc,
                    ("output.trace=none", "protocol={name: agentnet}"),
                    (("accuracy.by_phase.degraded", "AgentNet degraded-phase accuracy"),),
                    "how often a degraded entry agent infers the right ability pair (no baseline intercepts it)"),
        Sensitivity("baselines-weak-infer-symphony", "models.weak.infer", (0.3, 0.6, 0.8, 0.97), sc,
                    ("output.trace=none", "protocol={name: symphony}"),
                    (("accuracy.by_phase.degraded", "Symphony degraded-phase accuracy"),),
                    "how often a degraded coordinator writes a plan with the right ability pair"),
    ]


def _profile_exists(name: str) -> bool:
    from ...backends import find_profile
    from ...core.errors import InputError

    try:
        find_profile(name, ROOT)
        return True
    except InputError:
        return False


# ---------------------------------------------------------------------------------------------
# meshsim compare: the wide table


def _ms(xs: list[Optional[float]], fmt: str = "{:.3f}") -> str:
    vals = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not vals:
        return "—"
    m = statistics.fmean(vals)
    sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
    txt = f"{fmt.format(m)} ± {fmt.format(sd).lstrip('+')}"
    return txt + (f" ({len(vals)}/{len(xs)})" if len(vals) < len(xs) else "")


def _phase_names(scenario: str) -> list[str]:
    path = ROOT / scenario if not Path(scenario).is_absolute() else Path(scenario)
    data = load_yaml(path, "scenario") or {}
    return [str(p["name"]) for p in data.get("phases") or [] if isinstance(p, dict) and "name" in p]


def comparison(by: dict[str, dict[str, list[dict]]], scenarios: list[str]) -> dict[str, Any]:
    """The wide table of ``meshsim compare``: ``by[scenario][method]`` -> summaries over seeds."""
    methods = list(next(iter(by.values())).keys())
    phases = _phase_names(scenarios[0])
    persistent = phases == ["healthy", "degraded"]
    blocks = []
    for sc in scenarios:
        rows = []
        for m in methods:
            rows.append(_row(by[sc][m], m, phases, persistent))
        blocks.append({"scenario": Path(sc).stem if sc.endswith((".yaml", ".yml")) else sc, "path": sc, "rows": rows})
    if persistent and len(scenarios) > 1:
        rows = []
        for m in methods:
            per = [by[sc][m] for sc in scenarios]
            h = _mean_of([_vals(s, "accuracy.by_phase.healthy") for s in per])
            d = _mean_of([_vals(s, "accuracy.by_phase.degraded") for s in per])
            row = {"method": m, "healthy": h, "degraded": d, "change": _pair(d, h, lambda a, b: a - b)}
            for ph in ("healthy", "degraded"):
                row[f"tokens_{ph}"] = _mean_of([_vals(s, f"tokens_per_task_by_phase.{ph}", 1e-3) for s in per])
                row[f"calls_{ph}"] = _mean_of([_vals(s, f"calls_per_task_by_phase.{ph}") for s in per])
            row["unanswered"] = [sum(x) for x in zip(*[_vals(s, "unanswered") for s in per])]
            rows.append(row)
        blocks.append({"scenario": "mean of datasets (within seed)", "rows": rows})
    return {"phases": phases, "persistent": persistent, "blocks": blocks, "methods": methods}


def _row(sums: list[dict], m: str, phases: list[str], persistent: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"method": m}
    if persistent:
        h, d = _vals(sums, "accuracy.by_phase.healthy"), _vals(sums, "accuracy.by_phase.degraded")
        row.update(healthy=h, degraded=d, change=_pair(d, h, lambda a, b: a - b))
        for ph in ("healthy", "degraded"):
            row[f"tokens_{ph}"] = _vals(sums, f"tokens_per_task_by_phase.{ph}", 1e-3)
            row[f"calls_{ph}"] = _vals(sums, f"calls_per_task_by_phase.{ph}")
    else:
        for ph in phases:
            row[ph] = _vals(sums, f"accuracy.by_phase.{ph}")
        if len(phases) > 1:
            row["after_first"] = [statistics.fmean(xs) if all(v is not None for v in xs) else None
                                  for xs in zip(*[row[ph] for ph in phases[1:]])]
        row["tokens"] = _vals(sums, "tokens_per_task", 1e-3)
        row["calls"] = _vals(sums, "calls_per_task")
    row["unanswered"] = _vals(sums, "unanswered")
    agents = sorted({a for s in sums for a in (s.get("agents") or {})}, key=node_order)
    heal = {}
    for a in agents:
        heal[a] = {"detection_delay": _vals(sums, f"agents.{a}.detection_delay"),
                   "closure": [bool(get_path(s, f"agents.{a}.closure", None)) for s in sums],
                   "reintegration_delay": _vals(sums, f"agents.{a}.reintegration_delay")}
    row["healing"] = heal
    row["false_isolations"] = _vals(sums, "detection.false_isolations")
    return row


def render_comparison(table: dict[str, Any], title: str = "Comparison") -> str:
    lines = [f"# {title}", "", "Mean ± sample sd over seeds; every method ran the same scenario "
             "(tasks, order, entry agents, models, degradation schedule) on the shared execution layer, "
             "which counted every call and token. Detection delay ∞: the method never isolated the agent "
             "(closure not established, reintegration undefined).", ""]
    phases = table["phases"]
    for block in table["blocks"]:
        lines += [f"## {block['scenario']}", ""]
        if table["persistent"]:
            lines += ["| method | healthy acc. | degraded acc. | change | tokens (k) H | tokens (k) D | calls H | "
                      "calls D | unanswered |", "| --- |" + " --- |" * 8]
            for r in block["rows"]:
                lines.append(f"| {LABEL.get(r['method'], r['method'])} | {_ms(r['healthy'])} | {_ms(r['degraded'])} | "
                             f"{_ms(r['change'], '{:+.3f}')} | {_ms(r['tokens_healthy'], '{:.1f}')} | "
                             f"{_ms(r['tokens_degraded'], '{:.1f}')} | {_ms(r['calls_healthy'], '{:.1f}')} | "
                             f"{_ms(r['calls_degraded'], '{:.1f}')} | {_ms(r['unanswered'], '{:.1f}')} |")
        else:
            cols = list(phases) + (["after first degradation"] if len(phases) > 1 else [])
            lines += ["| method | " + " | ".join(cols) + " | tokens (k) | calls |",
                      "| --- |" + " --- |" * (len(cols) + 2)]
            for r in block["rows"]:
                vals = [_ms(r[ph]) for ph in phases] + ([_ms(r["after_first"])] if len(phases) > 1 else [])
                lines.append(f"| {LABEL.get(r['method'], r['method'])} | " + " | ".join(vals) +
                             f" | {_ms(r['tokens'], '{:.1f}')} | {_ms(r['calls'], '{:.1f}')} |")
        heal_rows = [r for r in block["rows"] if r.get("healing")]
        if heal_rows:
            agents = sorted({a for r in heal_rows for a in r["healing"]}, key=node_order)
            lines += ["", "| method | " + " | ".join(f"{a} detection | {a} closure | {a} reintegration"
                                                     for a in agents) + " | falsely isolated |",
                      "| --- |" + " --- |" * (3 * len(agents) + 1)]
            for r in heal_rows:
                cells = []
                for a in agents:
                    h = r["healing"].get(a)
                    if h is None:
                        cells += ["—"] * 3
                        continue
                    n = len(h["closure"])
                    det = [x for x in h["detection_delay"] if x is not None]
                    cells.append(NEVER if not det else _ms(h["detection_delay"], "{:.1f}"))
                    cells.append("not established" if not any(h["closure"]) else f"{sum(h['closure'])}/{n}")
                    rein = [x for x in h["reintegration_delay"] if x is not None]
                    cells.append("undefined" if not rein else _ms(h["reintegration_delay"], "{:.1f}"))
                lines.append(f"| {LABEL.get(r['method'], r['method'])} | " + " | ".join(cells) +
                             f" | {_ms(r['false_isolations'], '{:.1f}')} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def run_comparison(scenarios: list[str], out: Path, methods: tuple[str, ...] = METHODS,
                   seeds: Optional["int | list[int]"] = None,
                   sets: tuple[str, ...] = (), workers: int = 1,
                   progress: Optional[Callable[[int, int, float], None]] = None) -> dict[str, Any]:
    """Run every method on every scenario (cached under ``out/runs``) and write
    ``out/comparison.md`` and ``out/comparison.json``."""
    from ...scenario.model import load_scenario

    t0 = time.perf_counter()
    sets = ("output.trace=none",) + tuple(sets)  # only summaries are kept: no trace to write
    specs: dict[str, dict[str, list[RunSpec]]] = {}
    for sc in scenarios:
        full = load_scenario(ROOT / sc, list(sets))
        seed_list = full.seed_list() if seeds is None else seed_list_of(seeds, full.seed)
        specs[sc] = {m: [RunSpec(sc, method_sets(sc, m, sets), seed=k) for k in seed_list] for m in methods}
    got = run_specs([s for by in specs.values() for runs in by.values() for s in runs], out, workers, progress)
    by = {sc: {m: [got[s] for s in runs] for m, runs in d.items()} for sc, d in specs.items()}
    table = comparison(by, scenarios)
    table["wall"] = time.perf_counter() - t0
    table["scenarios"] = scenarios
    title = "Comparison: " + ", ".join(Path(s).stem for s in scenarios)
    (out / "comparison.md").write_text(render_comparison(table, title))
    (out / "comparison.json").write_text(json.dumps(table, indent=1, sort_keys=True, default=str))
    return table
