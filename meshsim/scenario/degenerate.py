"""Valid but degenerate scenarios: runs in which nothing (or nearly nothing) can happen.

Every number of such a scenario is within its range, so the run is allowed,
but its outcome is foregone -- a link latency of a day in a ten-second run
delivers no message; a task timeout below one link's latency answers no task.
Issue 19: such a run must say so rather than finish silently. ``meshsim
validate`` and ``meshsim run`` print each note as one ``note:`` line on stderr,
and the run's ``summary.json`` lists them under ``notes`` (absent for a normal
run); the notes never change what is simulated.
"""
from __future__ import annotations

from typing import Any, Optional

__all__ = ["degenerate_notes"]


def _fastest(lat: Any) -> float:
    """The smallest delay a latency distribution can draw (0 for a lognormal)."""
    if lat.dist == "constant":
        return float(lat.value or 0.0)
    if lat.dist == "uniform":
        return float(lat.low or 0.0)
    return 0.0


def _s(x: float) -> str:
    return f"{x:g} s"


def degenerate_notes(sc: Any, links: Optional[int] = None) -> list[str]:
    """One sentence per foregone outcome of scenario ``sc`` (empty for a normal one);
    ``links``: the links of its graph, when built."""
    notes: list[str] = []
    if links == 0:
        notes.append("the graph has no links: no agent can send a message to another")
    spec = sc.network.links
    lats = [spec.latency] + [o.latency for o in sc.network.overrides if o.latency is not None]
    fastest = min(_fastest(lat) for lat in lats)
    losses = [spec.loss] + [o.loss for o in sc.network.overrides if o.loss is not None]
    duration: Optional[float] = sc.duration
    if duration is not None and fastest >= duration:
        notes.append(f"every link's latency is at least {_s(fastest)}, not below the run's duration "
                     f"({_s(duration)}): no message is delivered before the run ends")
    if min(losses) >= 1.0:
        notes.append("every link loses every message (network.links.loss = 1): nothing is delivered")
    tasks = sc.tasks
    if tasks is not None and duration is not None:
        rate = tasks.poisson_rate()
        if rate is not None and rate * duration < 1.0:
            notes.append(f"tasks.arrival {tasks.arrival} expects {rate * duration:.3g} tasks before the run ends "
                         f"(duration {_s(duration)}): most likely none arrives")
    params = sc.protocol.params
    if fastest > 0:
        for name in ("task_timeout", "query_timeout"):
            t = getattr(params, name, None)
            if isinstance(t, float) and t < fastest:
                notes.append(f"protocol.params.{name} ({_s(t)}) is below the fastest link's latency "
                             f"({_s(fastest)}): no task can be answered in time")
        ack = getattr(params, "ack_timeout", None)
        if isinstance(ack, float) and ack < 2 * fastest:
            notes.append(f"protocol.params.ack_timeout ({_s(ack)}) is below a round trip over the fastest link "
                         f"({_s(2 * fastest)}): every message is resent until its retries run out")
    return notes
