"""Budgets see every timer (issue 30, item 6): a periodic interval that would
send more messages than ``limits.events`` is refused before the clock starts,
with the estimate in the one line (exit 2); a run without a duration whose
timers outrun the budget anyway is ended within a hundredth of it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from meshsim.cli import main
from meshsim.core.errors import ScenarioError
from meshsim.protocols.base import Timer
from meshsim.simulate.world import check_timers as _check_timers
from meshsim.scenario.model import load_scenario

ROOT = Path(__file__).resolve().parents[2]
BBH = str(ROOT / "scenarios" / "meshheal" / "persistent-bbh.yaml")
ROUTING = str(ROOT / "scenarios" / "routing" / "sparse-failures.yaml")
#: the smoke stream without its degradation: 84 sequential tasks
PLAIN = ["--smoke", "--set", "phases=[]", "--set", "events=[]"]


def _invoke(args: list[str]):
    return CliRunner().invoke(main, args)


def test_a_microsecond_refresh_is_refused_before_the_clock_with_the_estimate(tmp_path):
    out = tmp_path / "run"
    for cmd in (["validate", BBH], ["run", BBH, "--out", str(out)]):
        res = _invoke([*cmd, *PLAIN, "--set", "protocol.params.refresh=1us"])
        assert res.exit_code == 2, res.output
        line = res.stderr.strip()
        assert len(line.splitlines()) == 1, line
        assert "protocol.params.refresh: about 6.41e+08 messages from distance-vector refreshes (30 every 1e-06s " \
               "over 84 sequential tasks" in line and "above limits.events (500,000,000)" in line, line
    assert not out.exists()  # refused before anything was written


def test_the_refusal_is_the_budget_not_the_interval():
    res = _invoke(["validate", BBH, *PLAIN, "--set", "protocol.params.refresh=1us", "--set", "limits.events=1000000000000"])
    assert res.exit_code == 0, res.output + res.stderr
    res = _invoke(["validate", BBH, *PLAIN, "--set", "protocol.params.refresh=5s"])
    assert res.exit_code == 0, res.output + res.stderr


def test_poisson_arrivals_bound_the_run_by_their_span():
    # 84 tasks at 0.01/s arrive over ~8400 s: 30 messages every 0.1 ms over that is 2.5e9
    res = _invoke(["validate", BBH, *PLAIN, "--set", "tasks.arrival=poisson(0.01)", "--set",
                   "protocol.params.refresh=0.1ms"])
    assert res.exit_code == 2 and "84 tasks arriving at 0.01/s" in res.stderr, res.output + res.stderr


def test_a_timed_routing_run_is_refused_by_its_duration():
    res = _invoke(["validate", ROUTING, "--set", "protocol.params.refresh=1us"])
    assert res.exit_code == 2 and "protocol.params.refresh" in res.stderr and "above limits.events" in res.stderr


def test_an_untimed_run_past_its_budget_is_ended_within_a_hundredth_of_it(tmp_path):
    """The estimate before the clock is a floor (every task at least one fastest model call), so a run may
    pass it; the refreshes are then counted about every hundredth of the budget, not only at task starts
    (one task of ~40 simulated seconds sends 120,000 refresh messages here)."""
    budget = 200_000
    res = _invoke(["run", BBH, *PLAIN, "--set", "tasks.count=7", "--set", "tasks.block=7", "--set",
                   "protocol.params.refresh=10ms", "--set", f"limits.events={budget}", "--out", str(tmp_path / "r"),
                   "-q"])
    assert res.exit_code == 2, res.output + res.stderr
    m = re.search(r"the run sent ([\d,]+) messages by t=", res.stderr)
    assert m, res.stderr
    sent = int(m.group(1).replace(",", ""))
    assert budget < sent <= budget * 1.02, sent


@settings(max_examples=60, deadline=None)
@given(period=st.floats(1e-6, 1e3), messages=st.integers(1, 10_000), budget=st.integers(1, 10 ** 9))
def test_a_timer_is_refused_exactly_when_its_floor_estimate_passes_the_budget(period, messages, budget):
    sc = load_scenario(ROUTING, [f"limits.events={budget}"])  # duration 600 s: the horizon
    timer = Timer("protocol.params.refresh", period, messages, "routing refreshes")
    est = messages * 600.0 / period
    if est > budget:
        with pytest.raises(ScenarioError, match=r"about .* messages from routing refreshes"):
            _check_timers(sc, [timer], None)
    else:
        _check_timers(sc, [timer], None)
