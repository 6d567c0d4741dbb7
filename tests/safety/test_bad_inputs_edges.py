"""Issue 19's corpus, part one: endpoint profiles and keys that used to crash
with exit 1. Each case: ``validate`` exits 2 with one line naming the file and
field, and no input file changes (hashed before and after)."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from meshsim.cli import main

BASE_PROFILE = {"kind": "openai", "name": "ep", "base_url": "http://127.0.0.1:8080/v1", "api_key_env": "MESHSIM_EDGE_KEY",
                "models": {"strong": {"id": "s"}, "weak": {"id": "w"}}}
SCENARIO = {"name": "edges", "seed": 1, "network": {"topology": {"kind": "complete", "n": 6}},
            "agents": {"profile": "bbh"}, "protocol": {"name": "meshheal"},
            "backend": {"kind": "openai", "profile": "ep.yaml"}, "tasks": {"dataset": "bbh", "count": 7, "block": 7}}

CASES = {
    "port-out-of-range": ({"base_url": "http://127.0.0.1:99999/v1"}, "k", "ep.yaml: base_url: not a usable URL"),
    "port-zero": ({"base_url": "http://127.0.0.1:0/v1"}, "k", "ep.yaml: base_url: port must be"),
    "url-control-character": ({"base_url": "http://127.0.0.1:8080/v1\tx"}, "k", "base_url: URL holds a control"),
    "url-space": ({"base_url": "http://127.0.0.1:8080/v 1"}, "k", "base_url: URL holds a control"),
    "url-no-host": ({"base_url": "http:///v1"}, "k", "base_url: URL names no host"),
    "url-bad-ipv6": ({"base_url": "http://[::1/v1"}, "k", "base_url: not a usable URL"),
    "header-non-ascii": ({"headers": {"X-Team": "caf\u00e9"}}, "k", "headers.X-Team: header names and values"),
    "key-non-ascii": ({}, "k\u00e9y", "api_key_env: environment variable MESHSIM_EDGE_KEY holds characters"),
    "key-control-character": ({}, "key\nInjected: 1", "api_key_env: environment variable MESHSIM_EDGE_KEY holds"),
}


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_endpoint_inputs_at_the_edges_are_exit_2_with_one_line(case, tmp_path, monkeypatch):
    change, key, expect = CASES[case]
    (tmp_path / "ep.yaml").write_text(yaml.safe_dump({**BASE_PROFILE, **change}, allow_unicode=True), encoding="utf-8")
    (tmp_path / "sc.yaml").write_text(yaml.safe_dump(SCENARIO))
    monkeypatch.setenv("MESHSIM_EDGE_KEY", key)
    before = _digest(tmp_path)
    for cmd in (["validate", str(tmp_path / "sc.yaml")],
                ["run", str(tmp_path / "sc.yaml"), "--out", str(tmp_path / "out")]):
        res = CliRunner().invoke(main, cmd, catch_exceptions=False)
        assert res.exit_code == 2, (cmd[0], res.exit_code, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and expect in lines[0], lines
        assert key not in res.stderr or len(key) < 2
    assert _digest(tmp_path) == before and not (tmp_path / "out").exists()


@pytest.mark.parametrize("setting, expect", [
    ("network.links.loss=true", "'loss' must be a number, not a boolean"),
    ("network.links.bandwidth=yes", "'bandwidth' must be a number, not a boolean"),
    ("backend.overrides.guess.bbh=true", "'guess.bbh' must be a number, not a boolean"),
    ("backend.overrides.models.strong.infer=false", "'infer' must be a number, not a boolean"),
])
def test_a_boolean_is_never_a_number(setting, expect):
    sc = Path(__file__).resolve().parents[2] / "scenarios" / "meshheal" / "persistent-bbh.yaml"
    res = CliRunner().invoke(main, ["validate", str(sc), "--smoke", "--set", setting], catch_exceptions=False)
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1 and expect in res.stderr, res.stderr


@pytest.mark.parametrize("fmt", ["edgelist", "graphml"])
def test_a_topology_file_above_the_link_limit_is_refused_while_read(fmt, tmp_path):
    import networkx as nx

    G = nx.path_graph(2_001)
    if fmt == "edgelist":
        (tmp_path / "g.edgelist").write_text("".join(f"{u} {v}\n" for u, v in G.edges))
    else:
        nx.write_graphml(G, tmp_path / "g.graphml")
    (tmp_path / "sc.yaml").write_text(yaml.safe_dump({"name": "big", "duration": 10,
                                                      "network": {"topology": {"kind": "file", "path": f"g.{fmt}"}},
                                                      "limits": {"links": 500}}))
    res = CliRunner().invoke(main, ["validate", str(tmp_path / "sc.yaml")], catch_exceptions=False)
    assert res.exit_code == 2 and "more than 500 links, above limits.links" in res.stderr, res.stderr
    res = CliRunner().invoke(main, ["validate", str(tmp_path / "sc.yaml"), "--set", "limits.links=3000",
                                    "--set", "limits.agents=3000"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.stderr


def test_a_scenario_with_hundreds_of_thousands_of_events_is_refused_within_seconds(tmp_path):
    """A 10 MB scenario of 200,000 events took 3.5 minutes and 1.4 GB to reach
    any check; it is now refused before the YAML parser builds it."""
    import time

    lines = ["name: many", "duration: 1000s", "network:", "  topology: {kind: ring, n: 10}", "events:"]
    lines += [f"  - {{at: {i * 0.001:.3f}, type: link_{'down' if i % 2 == 0 else 'up'}, link: [A1, A2]}}"
              for i in range(200_000)]
    (tmp_path / "ev.yaml").write_text("\n".join(lines) + "\n")
    t0 = time.monotonic()
    res = CliRunner().invoke(main, ["validate", str(tmp_path / "ev.yaml")], catch_exceptions=False)
    assert res.exit_code == 2 and "more than 250,000 YAML values" in res.stderr, res.stderr
    assert time.monotonic() - t0 < 10
