"""Issue 19's corpus, part two: budgets before work, numbers at the edges, task
files, lone surrogates, unknown keys, special files and degenerate runs.

Every case is a folder of input files written into ``tmp_path`` (big inputs are
generated, never stored) and a command line. ``validate`` and ``run`` (for a
sweep: ``validate`` and ``sweep --dry-run``) must each either

* exit 2 with exactly one ``error:`` line holding the expected text, within
  10 s and 300 MB (``invoke`` of tests/safety/test_bad_scenarios.py measures both),
  and write nothing; or, for a valid but degenerate input,
* finish (exit 0, or 3 when no task could be answered) with a ``note:`` line
  that says what was degenerate.

Every input file is hashed before and after both commands: no check and no
run changes an input.

Part one (endpoint URLs, headers and keys; booleans; topology files over the
link limit; 200,000 events) is tests/safety/test_bad_inputs_edges.py; cassettes that
are not cassettes, FIFOs as cassettes, secrets by field, reply caps and loud
failure are in tests/backends/test_replay.py and tests/safety/test_backend_safety.py;
unknown topology parameters and runaway routing refreshes are files in
tests/data/bad_scenarios/. :data:`ISSUE19_ELSEWHERE` lists them, and
``test_corpus_covers_every_class`` counts the whole corpus.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from meshsim.scenario.model import set_path
from tests.safety.test_bad_scenarios import invoke

MH = {"name": "mh", "seed": 1, "network": {"topology": {"kind": "complete", "n": 6}, "links": {"latency": "20ms"}},
      "agents": {"profile": "bbh"}, "protocol": {"name": "meshheal"},
      "backend": {"kind": "fake", "profile": "fake-default"}, "tasks": {"dataset": "bbh", "count": 42, "block": 42}}
RT = {"name": "rt", "seed": 1, "duration": "30s", "network": {"topology": {"kind": "ring", "n": 6}},
      "agents": {"abilities": {"A1": ["algebra"], "A4": ["geometry"]}},
      "protocol": {"name": "routing", "params": {"refresh": "5s"}}}
SAC = {"name": "sac", "seed": 1, "network": {"topology": {"kind": "complete", "n": 7}, "links": {"latency": "20ms"}},
       "agents": {"roles": {"A5": "weak", "A6": "weak", "A7": "adversarial"}},
       "protocol": {"name": "sac", "params": {"F": 3, "rounds": 6}},
       "backend": {"kind": "fake_consensus", "profile": "sac-default"}, "tasks": {"count": 5}, "output": {"trace": "none"}}
BASE = {"mh": MH, "rt": RT, "sac": SAC}
BACKENDS = Path(__file__).resolve().parents[2] / "backends"
SCEN_DATA = Path(__file__).resolve().parents[2] / "scenarios" / "data"


class Case:
    """One corpus input: ``base`` scenario with ``sets`` (path -> value) applied in
    the file, ``files`` written beside it, ``argv`` after the scenario path;
    ``expect``: a substring of the error line, or of the ``note:`` line when
    ``degenerate``."""

    def __init__(self, cls: str, base: str, sets: dict[str, Any] | None = None, expect: str = "",
                 files: dict[str, Callable[[Path], Any]] | None = None, argv: list[str] | None = None,
                 sweep: bool = False, degenerate: bool = False, raw: Callable[[dict], str] | None = None):
        self.cls, self.base, self.sets, self.expect = cls, base, sets or {}, expect
        self.files, self.argv, self.sweep, self.degenerate, self.raw = files or {}, argv or [], sweep, degenerate, raw

    def write(self, folder: Path) -> Path:
        data = copy.deepcopy(BASE[self.base])
        for path, value in self.sets.items():  # "{in}": the folder of the inputs
            set_path(data, path, value.replace("{in}", str(folder)) if isinstance(value, str) else value)
        for name, make in self.files.items():
            make(folder / name)
        sc = folder / "sc.yaml"
        sc.write_text(self.raw(data) if self.raw else yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return sc


def _text(body: str) -> Callable[[Path], None]:
    return lambda p: p.write_text(body, encoding="utf-8")


def _jsonl(items: list[str]) -> Callable[[Path], None]:
    """Task-file lines (raw JSON text, so non-finite and escaped values survive)."""
    return _text("\n".join(items) + "\n")


def _good_items() -> list[str]:
    """Real BBH-like task-file lines (scenarios/data)."""
    return [ln for ln in (SCEN_DATA / "bbh-sample.jsonl").read_text().splitlines() if ln.strip()]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _profile(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        data = yaml.safe_load((BACKENDS / "fake-default.yaml").read_text())
        change(data)
        path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return make


def _bigbench(examples: str) -> Callable[[Path], None]:
    return _text('{"name": "logical_deduction", "examples": [' + examples + ']}')


def _endpoint(path: Path, **change: Any) -> None:
    prof = {"kind": "openai", "name": "ep", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "MESHSIM_CORPUS_KEY",
            "models": {"strong": {"id": "s"}, "weak": {"id": "w"}}, **change}
    path.write_text(yaml.safe_dump(prof))


TASKS = {"tasks.file": "tasks.jsonl", "tasks.count": 7, "tasks.block": 7}
BIG_AXIS = "0:0.999:0.001"  # 1000 values

CASES: dict[str, Case] = {
    # ---- budgets before work: grids, seeds, loop counts, allocations
    "grid-product-astronomical": Case("budget", "mh", {"sweep": {"grid": {
        "protocol.params.window": "1:1000:1", "protocol.params.min_obs": "1:1000:1",
        "protocol.params.consecutive": "1:1000:1"}}}, "the grid holds 1000 x 1000 x 1000 points", sweep=True),
    "grid-product-zip-and-grid": Case("budget", "mh", {"sweep": {
        "grid": {"protocol.params.alpha": BIG_AXIS, "protocol.params.tau_to": BIG_AXIS}}},
        "more than 10,000", sweep=True),
    "grid-product-command-line": Case("budget", "mh", {}, "--grid: the grid holds 1000 x 1000 points", sweep=True,
                                      argv=["--grid", "protocol.params.window=1:1000:1",
                                            "--grid", "protocol.params.min_obs=1:1000:1"]),
    "sweep-seeds-times-points": Case("budget", "mh", {"sweep": {"seeds": "0-999", "grid": {
        "protocol.params.alpha": "0:0.99:0.01", "protocol.params.beta": "1:1.99:0.01"}}},
        "sweep.seeds: 10,000 points x 1,000 seeds", sweep=True),
    "sweep-seeds-option": Case("budget", "mh", {"sweep": {"grid": {
        "protocol.params.alpha": "0:0.99:0.01", "protocol.params.beta": "1:1.99:0.01"}}},
        "--seeds: 10,000 points x 100,000 seeds", sweep=True, argv=["--seeds", "0-99999"]),
    "meshheal-retries-billions": Case("budget", "mh", {"protocol.params.retries": 10 ** 9},
                                      "protocol.params.retries: Input should be less than or equal to 100"),
    "agentnet-retries-billions": Case("budget", "mh", {"protocol.name": "agentnet",
                                                       "protocol.params": {"retries": 3 * 10 ** 9}},
                                      "protocol.params.retries"),
    "meshheal-window-trillion": Case("budget", "mh", {"protocol.params.window": 10 ** 12}, "protocol.params.window"),
    "meshheal-probe-every-1e18": Case("budget", "mh", {"protocol.params.probe_every": 10 ** 18},
                                      "protocol.params.probe_every"),
    "meshheal-route-limit-1e18": Case("budget", "mh", {"protocol.params.route_limit": 10 ** 18},
                                      "protocol.params.route_limit"),
    "autogen-max-turns-trillion": Case("budget", "mh", {"protocol.name": "autogen",
                                                        "protocol.params": {"max_turns": 10 ** 12}},
                                       "protocol.params.max_turns"),
    "sac-rounds-billions": Case("budget", "sac", {"protocol.params.rounds": 10 ** 9}, "protocol.params.rounds"),
    "sac-messages-above-events-limit": Case("budget", "sac", {"protocol.params.rounds": 1000, "tasks.count": 500,
                                                              "limits": {"events": 1_000_000}},
                                            "protocol.params.rounds: about 2.1e+07 messages"),
    "sac-equivocation-answers-trillion": Case("budget", "sac", {"agents.roles.A7": "equivocating",
                                                                "protocol.params.equivocation_answers": 10 ** 12},
                                              "protocol.params.equivocation_answers"),
    "byzantine-distractors-million": Case("budget", "sac", {"backend.overrides": {"wrong.distractors": 10 ** 6}},
                                          "backend.overrides.wrong.distractors"),
    # ---- numbers at the edges
    "ack-timeout-1e308": Case("numbers", "mh", {"protocol.params.ack_timeout": 1e308},
                              "protocol.params.ack_timeout: Input should be less than or equal to 1000000000"),
    "task-timeout-1e-320": Case("numbers", "mh", {"protocol.params.task_timeout": 1e-320},
                                "protocol.params.task_timeout"),
    "sac-round-deadline-1e300": Case("numbers", "sac", {"protocol.params.round_deadline": 1e300},
                                     "protocol.params.round_deadline"),
    "routing-refresh-1e-320": Case("numbers", "rt", {"protocol.params.refresh": 1e-320}, "protocol.params.refresh"),
    "bandwidth-1e-320": Case("numbers", "mh", {"network.links.bandwidth": 1e-320}, "network.links.bandwidth"),
    "bandwidth-1e308": Case("numbers", "mh", {"network.links.bandwidth": 1e308}, "network.links.bandwidth"),
    "topology-file-bandwidth-1e-320": Case("numbers", "rt", {"network.topology": {"kind": "file",
                                                                                 "path": "g.edgelist"}},
                                           "edge 1-2: bandwidth must be within 1 .. 1e15 bytes/s",
                                           files={"g.edgelist": _text("1 2 {'bandwidth': 1e-320}\n2 3\n3 4\n4 5\n"
                                                                      "5 6\n6 1\n")}),
    "poisson-rate-1e-320": Case("numbers", "mh", {"tasks.arrival": "poisson(1e-320)"},
                                "tasks.arrival: poisson RATE must be within"),
    "poisson-rate-1e300": Case("numbers", "mh", {"tasks.arrival": "poisson(1e300)"},
                               "tasks.arrival: poisson RATE must be within"),
    "alpha-beta-1e308-spread": Case("numbers", "mh", {"protocol.params.alpha": -1e308, "protocol.params.beta": 1e308},
                                    "protocol.params.alpha"),
    "sigma-com-1e308": Case("numbers", "mh", {"protocol.params.sigma_com": 1e308}, "protocol.params.sigma_com"),
    "cusum-h-1e200": Case("numbers", "mh", {"protocol.params.detector": "cusum", "protocol.params.cusum_h": 1e200},
                          "protocol.params.cusum_h"),
    "degrade-factor-1e308": Case("numbers", "mh", {"events": [{"at_task": 10, "type": "degrade", "agents": ["A3"],
                                                               "mode": "latency", "factor": 1e308}]},
                                 "events[0].factor"),
    "symphony-alpha-1e308": Case("numbers", "mh", {"protocol.name": "symphony", "protocol.params": {"alpha": 1e308}},
                                 "protocol.params.alpha"),
    "raps-prior-1e308": Case("numbers", "mh", {"protocol.name": "raps", "protocol.params": {"prior": [1e308, 1.0]}},
                             "protocol.params.prior"),
    "fake-ttft-1e308": Case("numbers", "mh", {"backend.overrides": {"models.strong.ttft": 1e308}},
                            "backend.overrides.models.strong.ttft"),
    "fake-rate-1e-320": Case("numbers", "mh", {"backend.overrides": {"models.weak.rate": 1e-320}},
                             "backend.overrides.models.weak.rate"),
    "fake-noise-1e200-in-file": Case("numbers", "mh", {"backend.profile": "fake.yaml"}, "fake.yaml: review.noise",
                                     files={"fake.yaml": _profile(lambda d: d["review"].update(noise=1e200))}),
    "event-at-1e308-without-duration": Case("numbers", "mh", {"events": [{"at": 1e308, "type": "degrade",
                                                                          "agents": ["A3"]}]},
                                            "events[0].at: 1e+308s event time is above limits.duration"),
    "endpoint-backoff-cap-1e308": Case("numbers", "mh", {"backend": {"kind": "openai", "profile": "ep.yaml"}},
                                       "ep.yaml: retries.cap: Input should be less than or equal to 1000000",
                                       files={"ep.yaml": lambda p: _endpoint(p, retries={"cap": 1e308})}),
    "endpoint-rate-1e-320": Case("numbers", "mh", {"backend": {"kind": "openai", "profile": "ep.yaml"}},
                                 "ep.yaml: models.strong.rate: Input should be greater than or equal to 0.001",
                                 files={"ep.yaml": lambda p: _endpoint(p, models={"strong": {"id": "s", "rate": 1e-320},
                                                                                  "weak": {"id": "w"}})}),
    "event-factor-boolean": Case("numbers", "mh", {"events": [{"at_task": 10, "type": "degrade", "agents": ["A3"],
                                                               "mode": "latency", "factor": True}]},
                                 "'factor' must be a number, not a boolean"),
    # ---- task files are checked like scenario files
    "task-answer-infinite": Case("tasks", "mh", TASKS, "tasks.jsonl: line 2.answer: must be a finite number",
                                 files={"tasks.jsonl": lambda p: _jsonl(_good_items()[:1] + [
                                     '{"id": "x", "question": "q", "answer": 1e999, "type": "t"}'])(p)}),
    "task-tolerance-infinite": Case("tasks", "mh", TASKS, "line 1.tolerance: must be a finite number",
                                    files={"tasks.jsonl": _jsonl([
                                        '{"id": "x", "question": "q", "answer": 3, "type": "t", "tolerance": -1e999}'
                                    ])}),
    "task-tolerance-out-of-range": Case("tasks", "mh", TASKS, "line 1.tolerance: a relative tolerance is a number",
                                        files={"tasks.jsonl": _jsonl([
                                            '{"id": "x", "question": "q", "answer": 3, "type": "t", "tolerance": 7}'])}),
    "task-answer-beyond-64-bits": Case("tasks", "mh", TASKS, "line 1.answer: integer out of range",
                                       files={"tasks.jsonl": _jsonl([
                                           '{"id": "x", "question": "q", "answer": %d, "type": "t"}' % 2 ** 70])}),
    "task-question-lone-surrogate": Case("tasks", "mh", TASKS, "line 1.question: text holds a lone surrogate",
                                         files={"tasks.jsonl": _jsonl([
                                             '{"id": "x", "question": "q\\ud800", "answer": "3", "type": "t"}'])}),
    "task-unknown-key": Case("tasks", "mh", TASKS, "line 1.questoin: unknown key (did you mean 'question'?)",
                             files={"tasks.jsonl": _jsonl([
                                 '{"id": "x", "question": "q", "questoin": "q", "answer": "3", "type": "t"}'])}),
    "task-bigbench-score-text": Case("tasks", "mh", {**TASKS, "tasks.file": "task.json"},
                                     "examples[0].target_scores.b: a target score must be a number",
                                     files={"task.json": _bigbench('{"input": "x", "target_scores": '
                                                                   '{"a": 1, "b": "high"}}')}),
    "task-bigbench-score-infinite": Case("tasks", "mh", {**TASKS, "tasks.file": "task.json"},
                                         "must be a finite number",
                                         files={"task.json": _bigbench('{"input": "x", "target_scores": '
                                                                       '{"a": 1e999, "b": 0}}')}),
    # ---- text that cannot be encoded
    "surrogate-in-name": Case("text", "mh", {}, "name: text holds a lone surrogate",
                              raw=lambda d: yaml.safe_dump({**d, "name": "x"}).replace("name: x", 'name: "a\\ud800"')),
    "surrogate-in-key": Case("text", "rt", {}, "text holds a lone surrogate",
                             raw=lambda d: yaml.safe_dump(d).replace("A4:", '"A4\\udc80":')),
    "surrogate-in-set": Case("text", "mh", {}, "--set: description: text holds a lone surrogate",
                             argv=["--set", 'description="\\udcff"']),
    "surrogate-in-set-text": Case("text", "mh", {}, "--set: text holds a lone surrogate",
                                  argv=["--set", "description=a: b: \udcff"]),
    "surrogate-in-out": Case("text", "rt", {}, "--out: text holds a lone surrogate", argv=["--out", "o\udcff"]),
    "surrogate-in-profile": Case("text", "mh", {"backend.profile": "fake.yaml"}, "fake.yaml: description: text holds",
                                 files={"fake.yaml": lambda p: _profile(lambda d: d.update(description="X"))(p)
                                        or p.write_text(p.read_text().replace("description: X",
                                                                              'description: "\\ud83d"'))}),
    # ---- unknown keys everywhere, with the closest valid key
    "unknown-param-suggests": Case("keys", "mh", {"protocol.params.windw": 3},
                                   "protocol.params.windw: unknown key (did you mean 'window'?)"),
    "unknown-links-key-suggests": Case("keys", "mh", {"network.links.latncy": "5ms"},
                                       "network.links.latncy: unknown key (did you mean 'latency'?)"),
    "unknown-event-key-suggests": Case("keys", "mh", {"events": [{"at_task": 3, "type": "degrade", "agent": ["A3"]}]},
                                       "events[0].agent: unknown key (did you mean 'agents'?)"),
    "unknown-limits-key-suggests": Case("keys", "mh", {"limits.agent": 5},
                                        "limits.agent: unknown key (did you mean 'agents'?)"),
    "unknown-output-key-suggests": Case("keys", "mh", {"output.trce": "none"},
                                        "output.trce: unknown key (did you mean 'trace'?)"),
    "unknown-tasks-key-suggests": Case("keys", "mh", {"tasks.cout": 3},
                                       "tasks.cout: unknown key (did you mean 'count'?)"),
    "unknown-override-key-suggests": Case("keys", "rt", {"network.overrides": [{"link": ["A1", "A2"], "los": 0.1}]},
                                          "network.overrides[0].los: unknown key (did you mean 'loss'?)"),
    "unknown-sac-param-suggests": Case("keys", "sac", {"protocol.params.round": 3},
                                       "protocol.params.round: unknown key (did you mean 'rounds'?)"),
    "unknown-profile-key-suggests": Case("keys", "mh", {"backend.profile": "fake.yaml"},
                                         "fake.yaml: models.strong.skil: unknown key (did you mean 'skill'?)",
                                         files={"fake.yaml": _profile(lambda d: d["models"]["strong"].update(
                                             skil={"bbh": 0.5}))}),
    "unknown-dataset-profile-key": Case("keys", "mh", {"agents.profile": "{in}/prof.yaml",
                                                         "tasks.dataset": "{in}/prof.yaml"},
                                        "prof.yaml: target: unknown key (did you mean 'targets'?)",
                                        files={"prof.yaml": lambda p: p.write_text(
                                            (Path(__file__).resolve().parents[2] / "meshsim" / "data" / "datasets" /
                                             "bbh.yaml").read_text().replace("targets:", "target:"))}),
    "unknown-backend-key-suggests": Case("keys", "mh", {"backend": {"kind": "fake", "profle": "fake-default"}},
                                         "backend.profle: unknown key (did you mean 'profile'?)"),
    "unknown-replay-key-suggests": Case("keys", "mh", {"backend": {"kind": "replay", "mode": "replay",
                                                                  "casette": "c.jsonl",
                                                                  "backend": {"kind": "fake", "profile": "fake-default"}}},
                                        "backend.casette: unknown key (did you mean 'cassette'?)"),
    "unknown-agents-key-suggests": Case("keys", "mh", {"agents.replica": 2},
                                        "agents.replica: unknown key (did you mean 'replicas'?)"),
    "unknown-phase-key-suggests": Case("keys", "mh", {"phases": [{"name": "a", "tasks": 42, "task": 1}]},
                                       "phases[0].task: unknown key (did you mean 'tasks'?)"),
    "unknown-sweep-key": Case("keys", "mh", {"sweep": {"grids": {"protocol.params.alpha": [1.0]}}},
                              "sweep.grids: unknown key (did you mean 'grid'? choose from grid, zip, seeds", sweep=True),
    # ---- files that are not files
    "task-file-fifo": Case("files", "mh", TASKS, "tasks.jsonl", files={"tasks.jsonl": _fifo}),
    "topology-file-fifo": Case("files", "rt", {"network.topology": {"kind": "file", "path": "g.edgelist"},
                                               "agents.abilities": {}}, "g.edgelist", files={"g.edgelist": _fifo}),
    "task-file-symlink-to-fifo": Case("files", "mh", TASKS, "tasks.jsonl",
                                      files={"real.fifo": _fifo,
                                             "tasks.jsonl": lambda p: p.symlink_to(p.parent / "real.fifo")}),
    "task-file-directory": Case("files", "mh", TASKS, "tasks.jsonl", files={"tasks.jsonl": lambda p: p.mkdir()}),
    "cassette-fifo-in-record-mode": Case("files", "mh", {"backend": {"kind": "replay", "mode": "record-missing",
                                                                     "cassette": "cas.jsonl", "backend": {
                                                                         "kind": "fake", "profile": "fake-default"}}},
                                         "cas.jsonl", files={"cas.jsonl": _fifo}),
    "profile-fifo": Case("files", "mh", {"backend.profile": "fake.yaml"}, "fake.yaml", files={"fake.yaml": _fifo}),
    # ---- valid but degenerate: the run completes and says what was degenerate
    "latency-beyond-duration": Case("degenerate", "rt", {"network.links.latency": 1e9},
                                    "no message is delivered before the run ends", degenerate=True),
    "loss-certain": Case("degenerate", "rt", {"network.links.loss": 1.0}, "every link loses every message",
                         degenerate=True),
    "poisson-arrivals-after-the-end": Case("degenerate", "mh", {"tasks.arrival": "poisson(1e-6)", "duration": 100},
                                           "most likely none arrives", degenerate=True),
    "task-timeout-below-latency": Case("degenerate", "mh", {"protocol.params.task_timeout": 0.001},
                                       "no task can be answered in time", degenerate=True),
    "graph-without-links": Case("degenerate", "rt", {"network.topology": {"kind": "gnp", "n": 6, "p": 1e-320},
                                                     "network.require_connected": False},
                                "the graph has no links", degenerate=True),
    "duration-1e-320": Case("degenerate", "rt", {"duration": 1e-320}, "no message is delivered before the run ends",
                            degenerate=True),
    "ack-timeout-below-round-trip": Case("degenerate", "mh", {"network.links.latency": 0.6,
                                                              "protocol.params.ack_timeout": 1.0},
                                         "every message is resent until its retries run out", degenerate=True),
    # a normal run says nothing degenerate: a loss of 1e-320 is a number like any other
    "loss-1e-320-is-a-normal-run": Case("degenerate", "rt", {"network.links.loss": 1e-320}, "", degenerate=True),
}

#: issue 19 cases held elsewhere: (file, test function or bad_scenarios file) -> class
ISSUE19_ELSEWHERE = {
    **{("test_bad_inputs_edges.py", f"endpoint[{c}]"): "keys" for c in (
        "port-out-of-range", "port-zero", "url-control-character", "url-space", "url-no-host", "url-bad-ipv6",
        "header-non-ascii", "key-non-ascii", "key-control-character")},
    **{("test_bad_inputs_edges.py", f"boolean[{c}]"): "numbers" for c in ("loss", "bandwidth", "guess.bbh", "infer")},
    ("test_bad_inputs_edges.py", "test_a_topology_file_above_the_link_limit_is_refused_while_read[edgelist]"): "budget",
    ("test_bad_inputs_edges.py", "test_a_topology_file_above_the_link_limit_is_refused_while_read[graphml]"): "budget",
    ("test_bad_inputs_edges.py", "test_a_scenario_with_hundreds_of_thousands_of_events_is_refused_within_seconds"):
        "budget",
    ("bad_scenarios", "topology-unknown-key-complete"): "keys",
    ("bad_scenarios", "topology-unknown-key-ring"): "keys",
    ("bad_scenarios", "routing-refresh-far-below-duration"): "budget",
    ("test_replay.py", "test_a_file_that_is_not_a_cassette_is_refused_and_never_shortened"): "check-never-writes",
    ("test_replay.py", "test_validate_and_run_on_a_one_line_json_file_as_cassette_change_nothing"):
        "check-never-writes",
    ("test_replay.py", "test_a_fifo_as_cassette_is_refused_at_once"): "files",
    ("test_backend_safety.py", "test_secrets_in_url_header_and_environment_reach_no_file"): "secrets",
    ("test_backend_safety.py", "test_a_one_character_key_corrupts_nothing"): "secrets",
    ("test_backend_safety.py", "test_a_reply_above_the_byte_cap_is_a_failed_call_never_recorded"): "budget",
    ("test_backend_safety.py", "test_an_endpoint_that_fails_every_call_is_a_nonzero_exit_with_the_failure_counts"):
        "loud-failure",
    ("test_backend_safety.py", "test_a_run_that_answered_nothing_says_so"): "loud-failure",
}


def _digest(folder: Path) -> dict[str, str]:
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_fifo():
            out[p.name] = "fifo"
        elif p.is_file():
            out[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_case(name, tmp_path, monkeypatch):
    case = CASES[name]
    monkeypatch.delenv("MESHSIM_DEBUG", raising=False)
    inputs = tmp_path / "in"
    inputs.mkdir()
    monkeypatch.chdir(tmp_path)
    sc = case.write(inputs)
    before = _digest(inputs)
    assert before, "the case wrote no input"
    out = tmp_path / "out"
    second = ["sweep", str(sc), "--dry-run", "--out", str(out)] if case.sweep else ["run", str(sc), "--out", str(out)]
    # validate takes no sweep options: a sweep given on the command line is checked by --dry-run alone
    commands = ([] if case.sweep and case.argv else [["validate", str(sc)] + ([] if case.sweep else case.argv)])
    for argv in commands + [second + case.argv]:
        res = invoke(argv)
        err = res.stderr
        assert "Traceback" not in err
        if case.degenerate:
            assert res.exit_code in (0, 3), (argv[0], res.exit_code, err)
            notes = [ln for ln in err.splitlines() if ln.startswith("note:")]
            if case.expect:
                assert len(notes) == 1 and case.expect in notes[0], (argv[0], err)
            else:
                assert not notes, err
        else:
            lines = err.splitlines()
            assert res.exit_code == 2, (argv[0], res.exit_code, err)
            assert len(lines) == 1 and lines[0].startswith("error:"), (argv[0], err)
            assert case.expect in lines[0], (argv[0], lines[0])
            assert not out.exists(), f"{argv[0]} wrote {out}"
        assert _digest(inputs) == before, f"{argv[0]} changed an input"
    if case.degenerate:  # the run completed: its summary carries the same notes
        summary = json.loads((out / "summary.json").read_text())
        if case.expect:
            assert any(case.expect in n for n in summary["notes"]), summary.get("notes")
        else:
            assert "notes" not in summary


def test_corpus_covers_every_class():
    """At least 60 cases in all, and every class of issue 19 has some."""
    here = {c.cls for c in CASES.values()}
    elsewhere = set(ISSUE19_ELSEWHERE.values())
    for cls in ("budget", "numbers", "tasks", "text", "keys", "files", "degenerate"):
        assert cls in here, cls
    for cls in ("secrets", "loud-failure", "check-never-writes"):
        assert cls in elsewhere, cls
    assert len(CASES) >= 60 and len(CASES) + len(ISSUE19_ELSEWHERE) >= 80
    here_dir = Path(__file__).parents[1]  # tests/: the files of ISSUE19_ELSEWHERE sit in its layers
    for (where, name) in ISSUE19_ELSEWHERE:  # every case listed still exists
        if where == "bad_scenarios":
            assert (here_dir / "data" / "bad_scenarios" / f"{name}.yaml").is_file(), name
        elif "[" in name and not name.startswith("test_"):
            continue  # a parametrized id of the endpoint / boolean tables (checked by the file's own test)
        else:
            assert f"def {name.split('[')[0]}(" in next(here_dir.rglob(where)).read_text(), (where, name)


def test_a_reply_with_a_lone_surrogate_fails_the_call_not_the_run(tmp_path, monkeypatch):
    """An endpoint whose every reply holds ``"\\ud800"`` (valid JSON, text that can never
    be written as UTF-8) used to crash the cassette write with exit 1: each call
    now fails as malformed_json, the run says so and exits 3, every file it wrote
    is UTF-8 and no input changed."""
    from http.server import BaseHTTPRequestHandler

    from tests.helpers import endpoint_scenario, send_json, serve

    class Surrogate(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):  # noqa: N802 - the preflight
            send_json(self, 200, {"data": [{"id": "m"}]})

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            body = b'{"choices": [{"message": {"role": "assistant", "content": "Answer: \\ud800"}}]}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    monkeypatch.setenv("MESHSIM_SURROGATE_KEY", "sk-surrogate-0123456789")
    inputs = tmp_path / "in"
    inputs.mkdir()
    with serve(Surrogate, daemon_threads=True) as srv:
        sc = endpoint_scenario(inputs, srv.server_address[1], "record", "surrogate", "MESHSIM_SURROGATE_KEY")
        before = _digest(inputs)
        res = invoke(["run", str(sc), "--out", str(tmp_path / "run")])
    assert res.exit_code == 3, (res.exit_code, res.stderr)
    line = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(line) == 1 and "malformed_json" in line[0], res.stderr
    for p in (tmp_path / "run").rglob("*"):
        if p.is_file() and not p.name.endswith(".gz"):
            p.read_bytes().decode("utf-8")
    cassette = inputs / "cas.jsonl"
    assert cassette.is_file()
    cassette.read_bytes().decode("utf-8")
    after = _digest(inputs)
    assert {k: v for k, v in after.items() if k != "cas.jsonl"} == before  # the cassette is what record writes


@pytest.mark.parametrize("timed", [False, True], ids=["task-ended", "timed"])
def test_a_run_past_its_event_budget_ends_with_one_line(timed, tmp_path):
    """The estimate before the clock starts may be wrong (MeshHeal has none):
    the run carries limits.events as a budget and ends with exit 2 and one line
    naming it, with no summary (the run is not complete); validate cannot know."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    data = {**copy.deepcopy(MH), "limits": {"events": 200}, **({"duration": 1000} if timed else {})}
    (inputs / "sc.yaml").write_text(yaml.safe_dump(data))
    before = _digest(inputs)
    assert invoke(["validate", str(inputs / "sc.yaml")]).exit_code == 0
    res = invoke(["run", str(inputs / "sc.yaml"), "--out", str(tmp_path / "out")])
    assert res.exit_code == 2, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "limits.events: the run sent" in lines[0] and "above limits.events (200)" in lines[0]
    assert not (tmp_path / "out" / "summary.json").exists()
    assert _digest(inputs) == before
    data["limits"]["events"] = 100_000  # the same run within its budget completes
    (inputs / "sc.yaml").write_text(yaml.safe_dump(data))
    assert invoke(["run", str(inputs / "sc.yaml"), "--out", str(tmp_path / "ok")]).exit_code == 0


def test_text_is_refused_exactly_when_it_cannot_be_written():
    """Property: check_numbers refuses a value or key iff it holds a lone surrogate
    (any text that encodes as UTF-8 passes, whatever its script), and names its path."""
    from hypothesis import given
    from hypothesis import strategies as st

    from meshsim.core.errors import InputError
    from meshsim.core.files import check_numbers

    surrogate = st.integers(0xD800, 0xDFFF).map(chr)

    @given(st.text(max_size=20), st.one_of(st.none(), surrogate), st.integers(0, 20), st.booleans())
    def check(text, bad, at, as_key):
        if bad is not None:
            text = text[:at] + bad + text[at:]
        data = {"agents": {"abilities": {text: ["x"]}}} if as_key else {"agents": {"description": [1, text]}}
        try:
            check_numbers(data, "s.yaml")
        except InputError as exc:
            assert bad is not None and "lone surrogate" in exc.message
            assert exc.field == ("agents.abilities" if as_key else "agents.description[1]")
        else:
            assert bad is None

    check()


BAD_DIR = Path(__file__).parents[1] / "data" / "bad_scenarios"
PERSISTENT = Path(__file__).resolve().parents[2] / "scenarios" / "meshheal" / "persistent-bbh.yaml"


@pytest.mark.parametrize("source, sets", [
    *[(BAD_DIR / f"{stem}.yaml", []) for stem, _ in
      [(k[1], v) for k, v in ISSUE19_ELSEWHERE.items() if k[0] == "bad_scenarios"]],
    *[(PERSISTENT, ["--smoke", "--set", s]) for s in (
        "network.links.loss=true", "network.links.bandwidth=yes", "backend.overrides.guess.bbh=true",
        "backend.overrides.models.strong.infer=false")],
], ids=lambda x: x.stem if isinstance(x, Path) else "-".join(x[2:]).replace("/", "_") or "file")
def test_the_cases_held_elsewhere_change_no_input_either(source, sets, tmp_path, monkeypatch):
    """The issue-19 cases of tests/data/bad_scenarios and the boolean table of
    tests/safety/test_bad_inputs_edges.py, run here on a copy whose bytes are hashed
    before and after validate and run (those files assert the error lines)."""
    monkeypatch.chdir(tmp_path)
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / source.name).write_bytes(source.read_bytes())
    before = _digest(inputs)
    for argv in (["validate", str(inputs / source.name), *sets],
                 ["run", str(inputs / source.name), *sets, "--out", str(tmp_path / "out")]):
        res = invoke(argv)
        assert res.exit_code == 2 and len(res.stderr.splitlines()) == 1, (argv[0], res.stderr)
        assert _digest(inputs) == before
    assert not (tmp_path / "out").exists()
