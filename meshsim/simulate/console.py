"""What ``meshsim run`` prints: each seed's results in words, progress lines, the next command.

A first run should explain itself (issue 32): every number the console shows
says what it counts and, where the paper has one, what the paper reports; no
raw ``None`` (a missing value is said in words); an agent isolated before it
degraded is labelled so rather than shown as a detection after 0 tasks; a
collapse names the abilities that collapsed; the end of a run names its
folder and the commands that show it. Definitions of the numbers:
docs/outputs.md. Pure formatting of summaries (and, for the isolation before
a degradation, the run folder's ``states`` table): no simulation here.
"""
from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, cast

from ..core.names import node_order
from ..io.records import read_records

__all__ = ["PROGRESS_EVERY", "ProgressLines", "seed_lines", "next_steps", "false_isolation_reference"]

#: seconds of wall time between two progress lines when stderr is not a terminal
PROGRESS_EVERY = 10.0

#: where the console sends a reader who wonders why healthy agents were isolated
#: docs named on the console: a wheel holds no docs/ and the project names no URL yet, so say where
#: they are (issue 32 verification)
SOURCE_DOCS = " in meshsim's source"
FALSE_ISOLATION_DOC = "docs/validation.md" + SOURCE_DOCS
NAMES_SHOWN = 6  # agent or ability names listed before "+N more"


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _names(names: Iterable[str], quote: bool = False) -> str:
    xs = [f"'{n}'" if quote else str(n) for n in names]
    if len(xs) > NAMES_SHOWN:
        return ", ".join(xs[:NAMES_SHOWN]) + f" (+{len(xs) - NAMES_SHOWN} more)"
    return ", ".join(xs)


def _plural(n: int, one: str, many: Optional[str] = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _duration(seconds: float) -> str:
    s = max(0.0, float(seconds))
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def false_isolation_reference(scenario: Any) -> Optional[str]:
    """What the paper says about healthy agents isolated, for a MeshHeal run under gray failures only
    (a Byzantine scenario isolates healthy agents by design; other protocols isolate nobody)."""
    from ..observe.attribution import BYZANTINE_EVENTS

    protocol = getattr(getattr(scenario, "protocol", None), "name", None)
    if protocol != "meshheal" or any(getattr(e, "type", None) in BYZANTINE_EVENTS for e in scenario.events):
        return None
    return f"paper: none; see {FALSE_ISOLATION_DOC}"


# ----------------------------------------------------------------------------- one seed


def seed_lines(s: Mapping[str, Any], folder: Optional[Path] = None, reference: Optional[str] = None) -> list[str]:
    """A seed's summary in words: a headline, then one line per degraded agent (up to four), the
    agents isolated while healthy, Byzantine agents, a collapse. ``folder``: the seed's run folder
    (its ``states`` table tells when an agent isolated before its degradation was isolated);
    ``reference``: what the paper reports on false isolations (:func:`false_isolation_reference`)."""
    lines = [_headline(s)]
    agents = cast(dict[str, Any], s.get("agents") if isinstance(s.get("agents"), dict) else {})
    det = cast(dict[str, Any], s.get("detection") if isinstance(s.get("detection"), dict) else {})
    episodes = {a: e for a, e in agents.items() if isinstance(e, dict) and "detection_delay" in e}
    if 0 < len(episodes) <= 4:
        states = None
        if folder is not None and any(e.get("detection_delay") == 0 for e in episodes.values()):
            try:
                states = read_records(Path(folder), "states.jsonl")
            except (OSError, ValueError):
                states = None
        order = sorted(episodes, key=lambda a: (episodes[a].get("degraded_at") or 0, node_order(a)))
        lines += [_agent_line(a, episodes[a], s.get("tasks"), states) for a in order]
    elif episodes:
        lines.append(_many_agents_line(episodes, det))
    if isinstance(det.get("false_isolations"), int):
        lines.append(_false_isolation_line(det, reference))
    adv = _adversarial_line(s.get("adversarial"))
    if adv:
        lines.append(adv)
    col = collapse_line(s)
    if col:
        lines.append(col)
    return lines


def _headline(s: Mapping[str, Any]) -> str:
    parts = []
    acc = s.get("accuracy")
    if isinstance(acc, dict) and _num(acc.get("overall")):
        tasks = s.get("tasks")
        over = f" over {tasks} tasks" if isinstance(tasks, int) else ""
        un = s.get("unanswered")
        parts.append(f"accuracy {acc['overall']:.3f}{over}" + (f" ({un} unanswered)" if isinstance(un, int) and un
                                                                 else ""))
    for label, key in (("IAA", "iaa"), ("FAA", "faa")):
        if not _num(s.get(key)):
            break
    else:
        parts.append(f"agents' accuracy {s['iaa']:.3f} at round 0 (IAA) -> {s['faa']:.3f} after the last round "
                     f"(FAA)" + (f", BFTI {s['bfti']:+.3f} (FAA - IAA)" if _num(s.get("bfti")) else ""))
    if _num(s.get("h_majority")):
        parts.append(f"honest agents' majority right on {s['h_majority']:.3f} of queries (H-Majority)")
    r = s.get("routing")
    if isinstance(r, dict) and "tables_correct_at_end" in r:
        ok = r.get("tables_correct_at_end")
        text = "routing tables correct at the end" if ok else "routing tables NOT correct at the end"
        if _num(r.get("max_convergence_time")):
            text += f" (slowest settle {r['max_convergence_time']:.1f} s)"
        parts.append(text)
    sent = (s.get("messages") or {}).get("total", {}).get("sent") if isinstance(s.get("messages"), dict) else None
    if isinstance(sent, int):
        parts.append(f"{sent} messages")
    if _num(s.get("sim_time")):
        parts.append(f"{_duration(s['sim_time'])} simulated")
    return ", ".join(parts) if parts else "no results to show (see summary.json)"


def _agent_line(name: str, e: Mapping[str, Any], tasks: Any, states: Optional[list]) -> str:
    b, c, r = e.get("degraded_at"), e.get("isolated_at"), e.get("recovered_at")
    head = f"{name} degraded at task {b}" if b is not None else f"{name} degraded"
    delay, own = e.get("detection_delay"), e.get("detection_delay_outputs")
    if c is None:
        text = [f"{head}: never isolated (missed)"]
        if r is not None:
            text.append(f"recovered at task {r}")
        return ", ".join(text)
    if delay == 0:
        since = _isolated_since(states, name, b)
        when = f" (at task {since}, while healthy)" if since is not None else ""
        text = [f"{head}: isolated before it degraded{when}, so no detection delay"]
    elif not isinstance(delay, int):
        text = [f"{head}: isolated at task {c}"]
    else:
        text = [f"{head}: isolated {_plural(delay, 'task')} later"
                + (f" ({_plural(own, 'own output')})" if isinstance(own, int) else "")]
    if r is None:
        text.append("stayed isolated (it never recovered)" if e.get("closure") else
                    "let back in while still degraded (no closure; it never recovered)")
        return ", ".join(text)
    text.append(f"stayed isolated until it recovered at {r}" if e.get("closure") else
                f"let back in before it recovered at {r} (no closure)")
    back = e.get("reintegration_delay")
    if isinstance(back, int):
        text.append(f"back in normal routing {_plural(back, 'task')} later")
    else:
        end = f" (task {tasks})" if isinstance(tasks, int) else ""
        text.append(f"not back in normal routing by the end of the stream{end}")
    return ", ".join(text)


def _isolated_since(states: Optional[list], agent: str, b: Any) -> Optional[int]:
    """The task of the isolation in force when ``agent`` degraded at ``b`` (None when unknown or
    when the isolation came at ``b`` itself)."""
    if not states or not isinstance(b, int):
        return None
    since = None
    for row in states:
        if row.get("agent") != agent or not isinstance(row.get("task"), int) or row["task"] >= b:
            continue
        since = row["task"] if row.get("new") == "isolated" else None
    return since


def _many_agents_line(episodes: Mapping[str, Mapping[str, Any]], det: Mapping[str, Any]) -> str:
    iso = sum(1 for e in episodes.values() if e.get("isolated_at") is not None)
    text = f"{iso} of {_plural(len(episodes), 'degraded agent')} isolated"
    if isinstance(det.get("missed"), int) and det["missed"]:
        text += f" ({_plural(det['missed'], 'degradation')} never detected)"
    if _num(det.get("delay_mean")):
        text += f", mean detection delay {det['delay_mean']:.1f} tasks"
        if _num(det.get("delay_outputs_mean")):
            text += f" ({det['delay_outputs_mean']:.1f} of their own outputs)"
    return text


def _false_isolation_line(det: Mapping[str, Any], reference: Optional[str]) -> str:
    n = det["false_isolations"]
    names = det.get("falsely_isolated") or []
    of = det.get("ever_healthy_agents")
    text = (f"{n} of {of}" if isinstance(of, int) else f"{n}") + \
        f" {'agent' if (of if isinstance(of, int) else n) == 1 else 'agents'} isolated while healthy at some point"
    notes = [f"false isolations: {_names(names)}" if n and names else "false isolations"]
    before = det.get("isolated_before_degradation")
    if isinstance(before, int) and before:
        notes.append(f"{before} of them before {'its' if before == 1 else 'their'} own degradation")
    if n and reference:
        notes.append(reference)
    return text + f" ({'; '.join(notes)})"


def _adversarial_line(adv: Any) -> Optional[str]:
    """MeshHeal's Byzantine agents (docs/adversarial.md): who lied and whether they were caught."""
    if not isinstance(adv, dict) or not isinstance(adv.get("liars"), list) or not adv["liars"]:
        return None
    liars = adv["liars"]
    text = f"Byzantine agents {_names(liars)}: {adv.get('liars_isolated', 0)} of {len(liars)} isolated"
    fr = adv.get("framing")
    if isinstance(fr, dict) and isinstance(fr.get("targets"), int) and fr["targets"]:
        text += f"; {fr.get('framed_isolated', 0)} of {_plural(fr['targets'], 'framed agent')} isolated"
    col = adv.get("collateral_isolated")
    if isinstance(col, int) and col:
        text += f"; {_plural(col, 'other healthy agent')} isolated as collateral"
    return text


def collapse_line(s: Mapping[str, Any]) -> Optional[str]:
    """The collapse (docs/meshheal.md#collapse) in words: which abilities lost every healthy holder."""
    c = s.get("collapse")
    if not isinstance(c, dict) or not c.get("occurred"):
        return None
    spans = [d for d in c.get("spans") or [] if isinstance(d, dict)]
    abilities = sorted({str(d["ability"]) for d in spans if d.get("ability") is not None})
    what = f"ability {_names(abilities, quote=True)}" if len(abilities) == 1 else \
        f"abilities {_names(abilities, quote=True)}" if abilities else "an ability"
    text = f"COLLAPSE: every healthy holder of {what} isolated at once"
    if isinstance(c.get("first_at"), int):
        text += f", from task {c['first_at']}"
    if isinstance(c.get("tasks"), int):
        text += f" for {_plural(c['tasks'], 'task')}"
    return text + (" (degraded peers had become the healthy agents' reference; see docs/meshheal.md#collapse"
                   f"{SOURCE_DOCS})")


# ----------------------------------------------------------------------------- end of a run


def next_steps(out_dir: Path, report_written: bool = False, explain: bool = False, prog: str = "meshsim") -> list[str]:
    """The run folder and the commands that show it (paths quoted for a shell; ``prog``: how meshsim
    was called, e.g. ``.venv/bin/meshsim`` outside the venv)."""
    d, m = shlex.quote(str(out_dir)), shlex.quote(prog)
    commands = [] if report_written else [f"{m} report {d}   (report.html: tables and every figure)"]
    commands.append(f"{m} plot {d}   (one figure; --kind picks which)")
    if explain:
        commands.append(f"{m} explain {d}   (which reviews isolated each agent)")
    return [f"results in {out_dir}/ (docs/outputs.md{SOURCE_DOCS} says what each file holds)"] + \
        [("next: " if k == 0 else "      ") + c for k, c in enumerate(commands)]


# ----------------------------------------------------------------------------- progress


class ProgressLines:
    """Progress as plain lines (stderr is not a terminal: a log, a CI job): at most one line per
    :data:`PROGRESS_EVERY` seconds of wall time, with the share done and the time left at the
    rate so far. ``progress(kind, done, total)`` is the runner's callback; ``first`` is printed at
    the first call, i.e. when the clock starts."""

    def __init__(self, name: str, write: Callable[[str], None], seeds: int = 1, first: Optional[str] = None,
                 clock: Callable[[], float] = time.monotonic, every: Optional[float] = None):
        self.name, self.write, self.seeds, self.first, self.clock = name, write, seeds, first, clock
        self.every = PROGRESS_EVERY if every is None else every
        self.start: Optional[float] = None
        self.last = 0.0

    def __call__(self, kind: str, done: float, total: float) -> None:
        now = self.clock()
        if self.start is None:
            self.start = self.last = now
            if self.first:
                self.write(self.first)
            return
        if now - self.last < self.every or not total:
            return
        self.last = now
        self.write(self.line(done / total, now - self.start))

    def line(self, frac: float, elapsed: float) -> str:
        frac = min(max(frac, 0.0), 1.0)
        where = ""
        if self.seeds > 1:
            where = f" (seed {min(int(frac * self.seeds) + 1, self.seeds)} of {self.seeds})"
        left = f", about {_duration(elapsed * (1 - frac) / frac)} left" if frac > 0 else ""
        return f"{self.name}: {frac:.0%} done{where}, {_duration(elapsed)} elapsed{left}"
