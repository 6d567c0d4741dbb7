"""How many detector updates a producer gets per stream, and what a run folder measured.

A task of the App. B.2 profiles needs two abilities held by disjoint agent
sets, so it gives one output (one detector update) to a holder of each.
Spread evenly over the holders, an agent holding abilities K gets
``sum_{s in K} tasks(s) / holders(s)`` updates per stream, over
``|{(T, s): s in K, T needs s}|`` (T, s) keys. Routing is not uniform and
isolated agents' work moves to the others, so this is the stream's
*nominal* load (the run folder gives the realised one).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..core.errors import InputError

__all__ = ["Stream", "from_dataset", "from_scenario", "simulated"]


@dataclass
class Stream:
    """A stream's nominal per-agent load."""

    name: str
    dataset: str
    tasks: int
    outputs: float  # detector updates per always-healthy agent per stream
    healthy_before: float  # updates of a degrading agent before its degradation
    degraded_outputs: float  # ... and after it
    keys: float  # (T, s) keys per agent
    agents: int
    healthy_agents: int
    degrade_at: Optional[int]
    probe_every: int = 10
    params: Any = None  # the scenario's MeshHealParams, when there is one
    profile: Optional[str] = None  # backend profile (scenario)
    base_dir: Optional[Path] = None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "dataset": self.dataset, "tasks": self.tasks, "agents": self.agents,
                "healthy_agents": self.healthy_agents, "degrade_at": self.degrade_at,
                "outputs_per_healthy_agent": round(self.outputs, 1), "keys_per_agent": round(self.keys, 1),
                "healthy_before": round(self.healthy_before, 1), "degraded_outputs": round(self.degraded_outputs, 1),
                "probe_every": self.probe_every}


def from_dataset(dataset: str = "bbh", tasks: int = 504, degrade_at: Optional[int] = 253, replicas: int = 1,
                 targets: Optional[list[str]] = None, name: str = "") -> Stream:
    """The nominal load of a ``tasks``-task stream on the dataset profile's six agents (x ``replicas``):
    App. B.3's persistent setting by default (504 tasks, the profile's targets degrade at task 253)."""
    from ..workload.tasks import load_profile

    prof = load_profile(dataset)
    need = {s: sum(1 for pair in prof.types.values() if s in pair) for s in prof.abilities}
    holders = {s: sum(1 for ks in prof.agents.values() if s in ks) for s in prof.abilities}
    per_type = tasks / len(prof.types)

    tg = set(prof.targets if targets is None else targets)
    healthy = [a for a in prof.agents if a not in tg]
    loads = {a: sum(need[s] * per_type / (holders[s] * replicas) for s in prof.agents[a]) for a in prof.agents}
    keys = statistics.fmean(sum(need[s] for s in ks) for ks in prof.agents.values())
    deg = [loads[a] for a in prof.agents if a in tg] or [statistics.fmean(loads.values())]
    frac = (degrade_at - 1) / tasks if degrade_at else 0.5
    return Stream(name=name or f"{dataset}, {tasks} tasks", dataset=prof.name, tasks=tasks,
                  outputs=statistics.fmean(loads[a] for a in healthy) if healthy else statistics.fmean(loads.values()),
                  healthy_before=statistics.fmean(deg) * frac, degraded_outputs=statistics.fmean(deg) * (1 - frac),
                  keys=keys, agents=len(prof.agents) * replicas, healthy_agents=len(healthy) * replicas,
                  degrade_at=degrade_at)


def from_scenario(path: str | Path, sets: tuple[str, ...] = ()) -> Stream:
    """A MeshHeal scenario's stream, detector parameters, probe period and backend profile."""
    from ..scenario.model import load_scenario

    sc = load_scenario(Path(path), list(sets))
    if sc.protocol.name != "meshheal":
        raise InputError("the detector's closed form is for MeshHeal scenarios", file=str(path),
                         field="protocol.name", value=sc.protocol.name)
    if sc.backend is None or sc.backend.kind != "fake":
        raise InputError("needs a fake backend (its behaviour model gives the score distributions); "
                         "for recorded runs pass the run folder", file=str(path), field="backend.kind",
                         value=getattr(sc.backend, "kind", None))
    if sc.tasks.file:
        raise InputError("a task file has no dataset profile to count outputs from; pass --outputs",
                         file=str(path), field="tasks.file", value=str(sc.tasks.file))
    at, targets = None, None
    for ev in sc.events:
        if getattr(ev, "type", None) == "degrade" and getattr(ev, "at_task", None):
            at = ev.at_task
            targets = None if ev.agents == "targets" else list(ev.agents)
            break
    profile = sc.agents.profile or sc.tasks.dataset
    st = from_dataset(profile, sc.tasks.count, at, sc.agents.replicas, targets, name=sc.name)
    st.params = sc.protocol.params
    st.probe_every = sc.protocol.params.probe_every
    st.profile = sc.backend.profile
    st.base_dir = sc.base_dir
    return st


# ---------------------------------------------------------------------------------------------
# what a run folder measured

@dataclass
class Simulated:
    seeds: int = 0
    healthy_agents: int = 0
    falsely_isolated: int = 0  # healthy agents isolated at least once
    episodes: int = 0
    outputs: list = field(default_factory=list)  # detector updates per always-healthy agent and seed
    delays_tasks: list = field(default_factory=list)
    delays_outputs: list = field(default_factory=list)
    missed: int = 0
    # isolations of agents while healthy, from states.jsonl, decomposed (issue 29)
    events: int = 0
    before_degradation: int = 0  # before the run's first degradation: no degraded agent exists
    degraded_reviewer: int = 0  # after it, with a review in the isolating window by a degraded, not isolated agent
    after_degraded_isolated: int = 0  # after a degraded agent's isolation (a thinner pool)
    reisolations: int = 0  # of an agent isolated while healthy before

    def breakdown(self) -> dict[str, int]:
        return {"events": self.events, "before_first_degradation": self.before_degradation,
                "with_degraded_reviewer_in_window": self.degraded_reviewer,
                "after_a_degraded_agent_isolated": self.after_degraded_isolated,
                "re_isolations": self.reisolations}

    def describe(self) -> dict[str, Any]:
        def mean(xs: list) -> Optional[float]:
            return statistics.fmean(xs) if xs else None
        return {"seeds": self.seeds, "healthy_agents": self.healthy_agents,
                "false_isolation_probability": self.falsely_isolated / self.healthy_agents if self.healthy_agents
                else None,
                "false_isolations_per_agent": self.episodes / self.healthy_agents if self.healthy_agents else None,
                "outputs_per_healthy_agent": mean(self.outputs),
                "delay_outputs": self.delays_outputs, "delay_outputs_mean": mean(self.delays_outputs),
                "delay_tasks": self.delays_tasks, "delay_tasks_mean": mean(self.delays_tasks), "missed": self.missed,
                "false_isolation_breakdown": self.breakdown()}


def _decompose(out: Simulated, folder: Path, ups: dict[str, list[tuple[int, tuple]]], deg_at: dict[str, int],
               window: int) -> None:
    """Each isolation of an agent while healthy (states.jsonl): before or after the first degradation,
    with a review in its last ``window`` matched outputs by an agent that was degraded and not isolated
    then, after a degraded agent's first isolation, a re-isolation."""
    from ..io.records import find_records, iter_records

    path = find_records(folder, "states.jsonl")
    if path is None:
        return
    rows = list(iter_records(path))
    iso_deg: dict[str, list[tuple[int, str]]] = {}
    for r in rows:
        if r.get("agent") in deg_at:
            iso_deg.setdefault(r["agent"], []).append((int(r["task"]), r.get("new", "")))

    def isolated_at(a: str, task: int) -> bool:
        st = "normal"
        for t, new in iso_deg.get(a, ()):
            if t >= task:
                break
            st = new
        return st == "isolated"

    first_deg = min(deg_at.values()) if deg_at else None
    first_iso = min((t for a, ts in iso_deg.items() for t, new in ts if new == "isolated" and t >= deg_at[a]),
                    default=None)
    seen: set[str] = set()
    for r in rows:
        a, t = r.get("agent"), int(r.get("task", 0))
        if r.get("new") != "isolated" or (a in deg_at and t >= deg_at[a]):
            continue
        out.events += 1
        if a in seen:
            out.reisolations += 1
        seen.add(a)
        if first_deg is None or t < first_deg:
            out.before_degradation += 1
            continue
        if first_iso is not None and t > first_iso:
            out.after_degraded_isolated += 1
        win = [x for x in ups.get(a, ()) if x[0] <= t][-window:]
        if any(b in deg_at and task >= deg_at[b] and not isolated_at(b, task) for task, rv in win for b in rv):
            out.degraded_reviewer += 1


def simulated(run_dir: str | Path, window: int = 8) -> Simulated:
    """False isolations of the always-healthy agents and the detection delays of the degraded ones, in
    stream tasks and in the agent's own detector updates (from task b to the isolating update at task c,
    inclusive), over a run folder's seeds; the isolations while healthy decomposed (:func:`_decompose`)."""
    from ..io.records import find_records, iter_records
    from ..io.runfolder import read_json
    from .scores import run_folders

    out = Simulated()
    for folder in run_folders(run_dir):
        summ = read_json(folder / "summary.json")
        if not summ or "detection" not in summ:
            continue
        out.seeds += 1
        det = summ["detection"]
        out.healthy_agents += int(det.get("healthy_agents") or 0)
        out.falsely_isolated += int(det.get("false_isolations") or 0)
        # the summary calls them events (false_isolation_episodes in older run folders)
        out.episodes += int(det.get("false_isolation_events", det.get("false_isolation_episodes")) or 0)
        agents = summ.get("agents") or {}
        ups: dict[str, list[int]] = {}
        revs: dict[str, list[tuple[int, tuple]]] = {}
        for r in iter_records(find_records(folder, "reviews.jsonl")):
            n = sum(1 for d in (r.get("detector") or ()) if d.get("matched"))
            if n:
                ups.setdefault(r["agent"], []).extend([int(r["task"])] * n)
                revs.setdefault(r["agent"], []).extend([(int(r["task"]), tuple(r.get("reviewers") or ()))] * n)
        for a, tasks in ups.items():
            if a not in agents:
                out.outputs.append(len(tasks))
        deg_at = {a: int(ep["degraded_at"]) for a, ep in agents.items() if ep.get("degraded_at") is not None}
        _decompose(out, folder, revs, deg_at, window)
        for a, ep in agents.items():
            b, c = ep.get("degraded_at"), ep.get("isolated_at")
            if b is None:
                continue
            if c is None:
                out.missed += 1
                continue
            out.delays_tasks.append(c - b)
            out.delays_outputs.append(sum(1 for t in ups.get(a, ()) if b <= t <= c))
    if not out.seeds:
        raise InputError("no MeshHeal summary.json with detection results in the run folder", file=str(run_dir))
    return out
