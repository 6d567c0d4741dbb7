"""``agents.abilities`` as input (issue 30, item 7): a partial map is filled
from the dataset profile for the agents it does not name, a misspelled
ability is one error line listing the dataset's names, and docs/scenarios.md
lists those names per dataset."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import networkx as nx
import pytest
from click.testing import CliRunner

from meshsim.cli import main
from meshsim.core.errors import ScenarioError
from meshsim.scenario.model import agent_abilities, build_graph, check_semantics, load_scenario
from meshsim.workload.tasks import builtin_profiles, load_profile, replicate

ROOT = Path(__file__).resolve().parents[2]
BBH = str(ROOT / "scenarios" / "meshheal" / "persistent-bbh.yaml")
ROUTING = str(ROOT / "scenarios" / "routing" / "sparse-failures.yaml")
#: abilities without agents.profile: the stream's dataset (bbh) is the only profile
NO_PROFILE = ["agents.profile=null"]


def _abilities(sets: list[str]) -> dict[str, list[str]]:
    sc = load_scenario(BBH, ["seeds=1", *sets], smoke=True)
    G = build_graph(sc)
    check_semantics(sc, G)
    return agent_abilities(sc, G)[0]


def test_a_partial_map_fills_the_agents_it_does_not_name_from_the_dataset():
    prof, _targets = replicate(load_profile("bbh"), 1)
    got = _abilities([*NO_PROFILE, "agents.abilities={A1: [arithmetic], A4: []}"])
    assert got["A1"] == ["arithmetic"] and got["A4"] == []
    for a in ("A2", "A3", "A5", "A6"):
        assert got[a] == prof[a], a  # on main these were [] (the profile was dropped)


def test_a_complete_map_is_taken_as_given():
    full = {f"A{i}": ["arithmetic"] for i in range(1, 7)}
    got = _abilities([*NO_PROFILE, f"agents.abilities={json.dumps(full)}"])
    assert got == full


def test_without_a_dataset_the_agents_not_named_hold_nothing():
    sc = load_scenario(ROUTING)
    G = build_graph(sc)
    got = agent_abilities(sc, G)[0]
    assert got["A8"] == [] and got["A1"] == ["algebra"]  # free names: no dataset to check them against


def _rows(folder: Path, table: str) -> list[dict]:
    with gzip.open(folder / f"{table}.jsonl.gz", "rt") as fh:
        return [json.loads(line) for line in fh]


def test_restating_one_agent_of_the_profile_runs_the_profile_run(tmp_path):
    """A partial map that gives A1 its profile abilities is the profile's run, task for task: the agents it
    does not name keep theirs (on main they held nothing and every task went elsewhere)."""
    a1 = load_profile("bbh").agents["A1"]
    common = ["run", BBH, "--smoke", "--seed", "1", "-q"]
    r1 = CliRunner().invoke(main, [*common, "--out", str(tmp_path / "p")])
    r2 = CliRunner().invoke(main, [*common, "--set", "agents.profile=null", "--set",
                                   f"agents.abilities={{A1: {json.dumps(a1)}}}", "--out", str(tmp_path / "m")])
    assert r1.exit_code == 0 and r2.exit_code == 0, r1.output + r2.output
    t1, t2 = _rows(tmp_path / "p", "tasks"), _rows(tmp_path / "m", "tasks")
    assert t1 == t2 and len(t1) > 0


@pytest.mark.parametrize("sets,field", [
    (["agents.abilities={A1: [enumaration]}"], "agents.abilities.A1[0]"),
    ([*NO_PROFILE, "agents.abilities={A2: [arithmetic, telepathy]}"], "agents.abilities.A2[1]"),
    (["events=[{at_task: 2, type: add_agent, agent: A7, links: [A1], abilities: [flying]}]"],
     "events[0].abilities[0]"),
])
def test_an_unknown_ability_is_one_line_listing_the_dataset_names(sets, field):
    args = ["validate", BBH, "--smoke"]
    for s in sets:
        args += ["--set", s]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    line = res.stderr.strip()
    assert len(line.splitlines()) == 1 and f"{field}: unknown ability; dataset 'bbh' has: " in line, line
    for name in load_profile("bbh").abilities:
        assert name in line


def test_a_partial_map_the_dataset_cannot_fill_is_one_line():
    # 8 agents, a six-agent profile: the two agents it does not cover would hold nothing
    res = CliRunner().invoke(main, ["validate", BBH, "--smoke", "--set", "agents.profile=null", "--set",
                                    "network.topology={kind: complete, n: 8}", "--set",
                                    "agents.abilities={A1: [arithmetic]}"])
    assert res.exit_code == 2 and "agents.abilities: names 1 of the 8 agents" in res.stderr, res.output
    assert len(res.stderr.strip().splitlines()) == 1


def test_docs_list_every_dataset_ability_name():
    doc = (ROOT / "docs" / "scenarios.md").read_text()
    for ds in builtin_profiles():
        row = next((ln for ln in doc.splitlines() if ln.startswith(f"| `{ds}` |")), None)
        assert row is not None, ds
        listed = {x.strip(" `") for x in row.split("|")[2].split(",")}
        assert listed == set(load_profile(ds).abilities), ds
