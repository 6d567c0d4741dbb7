"""SAC paper Tab. 5 (AIME 2025) and Tab. 6 (HMMT-25) as scenarios and ``meshsim reproduce sac`` rows (issue 34).

The scenarios carry the tables' roles and counts; the profile's numbers for the two datasets are sourced
(paper) or declared assumptions with ranges; ``reproduce sac --quick --only tab6`` prints each row with the
paper's value, the simulated mean ± sd and, with a stored study, its band and class. The reproduce test runs
the real experiment definitions shrunk to 4 queries and 2 rounds (the mechanics, not the predictions).
"""
from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

import meshsim
from meshsim.cli import main
from meshsim.protocols.consensus import DATASETS, byzantine_set, f_local_violations
from meshsim.scenario.model import build_graph, check_semantics

ROOT = Path(__file__).resolve().parents[2]
SAC_DIR = ROOT / "scenarios" / "sac"
PROFILE = ROOT / "backends" / "sac-default.yaml"
TOPO_SETS = {"merg": [], "complete": ["network.topology={kind: complete, n: 7}"],
             "er": ["network.topology={kind: er_robust, n: 7, r: 4}"]}
#: (scenario stem, dataset, role counts as the tables state them, the table's topologies)
TABLES = {"aime": ("aime", {"strong": 4, "weak": 2, "adversarial": 1}, ("merg", "complete", "er")),
          "hmmt": ("hmmt", {"strong": 4, "adversarial": 3}, ("merg", "complete"))}


def _roles(sc) -> Counter:
    names = [f"A{i}" for i in range(1, 8)]
    return Counter(sc.agents.roles.get(a, "strong") for a in names)


@pytest.mark.parametrize("stem", sorted(TABLES))
@pytest.mark.parametrize("method", ["sac", "cpwbft"])
def test_tab5_tab6_scenarios_have_the_tables_roles_counts_and_settings(stem, method):
    """Tab. 5: n = 7, 4 strong, 2 weak, 1 adversarial; Tab. 6: 4 strong, 3 adversarial, no weak; both F = 3,
    T = 6, the benchmark's 30 problems, on every topology of the table, with a 3-local Byzantine set."""
    dataset, counts, topologies = TABLES[stem]
    for topo in topologies:
        sc = meshsim.load_scenario(SAC_DIR / f"{stem}-{method}-7.yaml", TOPO_SETS[topo])
        assert sc.protocol.name == method
        p = sc.protocol.params
        assert (p.F, p.rounds, p.dataset) == (3, 6, dataset)
        assert sc.tasks.count == 30
        assert dict(_roles(sc)) == counts  # no weak key at all for Tab. 6
        G = build_graph(sc)
        check_semantics(sc, G)
        assert G.number_of_nodes() == 7
        byz = byzantine_set({a: sc.agents.roles.get(a, "strong") for a in G.nodes})
        assert f_local_violations({v: set(G.adj[v]) for v in G.nodes}, byz, p.F) == {}


def test_the_new_scenarios_validate_on_the_command_line():
    for f in sorted(SAC_DIR.glob("aime-*-7.yaml")) + sorted(SAC_DIR.glob("hmmt-*-7.yaml")):
        res = CliRunner().invoke(main, ["validate", str(f)])
        assert res.exit_code == 0, (f.name, res.output)


def test_hmmt_dataset_is_defined_beside_aime():
    assert DATASETS["aime"].numeric and (DATASETS["aime"].low, DATASETS["aime"].high) == (0, 999)
    assert DATASETS["hmmt"].numeric and "Tab. 6" in DATASETS["hmmt"].description


def test_tab5_tab6_numbers_are_sourced_or_ranged_assumptions():
    """accuracy.aime.* and hmmt strong / adversary come from the tables; the HMMT weak accuracy (no weak agent in
    Tab. 6) and GPT-5.6-sol's behaviour are assumptions with ranges (``meshsim backends explain``)."""
    from meshsim.backends.fake_consensus import load_consensus_profile
    from meshsim.backends.provenance import assumption_factors, explain_rows, load_profile_data

    data = load_profile_data(PROFILE)
    rows = {r["path"]: r for r in explain_rows(data)}
    for path in ("accuracy.aime.strong", "accuracy.aime.weak", "accuracy.aime.adversary", "accuracy.hmmt.strong",
                 "accuracy.hmmt.adversary"):
        assert rows[path]["kind"] == "paper", path
    names = {f.name for f in assumption_factors(data, "sac-default")}
    assert rows["accuracy.hmmt.weak"]["kind"] == "assumption" and "accuracy.hmmt.weak" in names
    for f in ("score.gpt-5_6-sol.solves", "refine.gpt-5_6-sol.resolve", "refine.gpt-5_6-sol.susceptibility",
              "confidence.gpt-5_6-sol.correct.0", "confidence.gpt-5_6-sol.wrong.0"):
        assert f in names and rows[f]["kind"] == "assumption"
    prof = load_consensus_profile(PROFILE)
    assert prof.model_for("strong", "hmmt") == "gpt-5_6-sol"
    # the paper's arithmetic: Tab. 6 IAA 57.1 = (4 x 100 + 3 x adversary) / 7; Tab. 5 IAA 60.5-63.3
    acc = prof.accuracy
    assert round(100 * (4 * acc["hmmt"].strong + 3 * acc["hmmt"].adversary) / 7, 1) == 57.1
    aime = 100 * (4 * acc["aime"].strong + 2 * acc["aime"].weak + acc["aime"].adversary) / 7
    assert 60.5 <= aime <= 63.3


def test_another_datasets_accuracy_is_not_screened():
    from meshsim.backends.fake_consensus import factors_in_use
    from meshsim.backends.provenance import assumption_factors, load_profile_data

    data = load_profile_data(PROFILE)
    factors = assumption_factors(data, "sac-default")
    on_math = {f.name for f in factors_in_use(factors, data, ["math_l4_30"])}
    on_hmmt = {f.name for f in factors_in_use(factors, data, ["hmmt"])}
    assert "accuracy.hmmt.weak" not in on_math and "score.gpt-5_6-sol.solves" not in on_math
    assert {"accuracy.hmmt.weak", "score.gpt-5_6-sol.solves", "latent.difficulty"} <= on_hmmt
    assert "score.gpt-4o-mini.solves" not in on_hmmt


def test_reproduce_declares_tab5_and_tab6_beside_the_papers_values():
    from meshsim.paper.reproduce.sac import sac_experiments
    from meshsim.paper.validation.sac import SETTINGS

    by_id = {s.id: s for s in SETTINGS}
    t5 = [s for s in SETTINGS if s.table == "Tab. 5 AIME 2025"]
    t6 = [s for s in SETTINGS if s.table == "Tab. 6 HMMT-25"]
    assert {(s.method, s.topology) for s in t5} == {(m, t) for m in ("sac", "cpwbft") for t in ("merg", "complete",
                                                                                                 "er")}
    assert {(s.method, s.topology) for s in t6} == {(m, t) for m in ("sac", "cpwbft") for t in ("merg", "complete")}
    assert by_id["tab5-aime-sac-merg"].paper == {"iaa": 62.4, "faa": 61.4, "bfti": -1.0, "ra": 80.0,
                                                 "h_majority": 83.3, "weak.iaa": 63, "weak.faa": 78,
                                                 "strong.iaa": 78, "strong.faa": 68}
    assert by_id["tab5-aime-cpwbft-complete"].paper["faa"] == 0.0
    assert round(by_id["tab6-hmmt-cpwbft-merg"].paper["iaa"], 1) == 57.1  # 4 x 100 / 7, kept exact
    assert {**by_id["tab6-hmmt-cpwbft-merg"].paper, "iaa": 57.1} == {"iaa": 57.1, "faa": 5.7, "bfti": -51.4, "ra": 10.0,
                                                    "h_majority": 10.0, "strong.iaa": 100, "strong.faa": 10}
    assert "weak.iaa" not in by_id["tab6-hmmt-sac-complete"].paper  # no weak agents
    for s in t5 + t6:
        (name, sets), = s.runs
        assert (SAC_DIR / f"{name}.yaml").is_file() and list(sets) == TOPO_SETS[s.topology]
    keys = {e.key for e in sac_experiments(1, quick=True)}
    assert {"tab5", "tab6"} <= keys  # --quick keeps them (30 queries each)


def _study(folder: Path) -> Path:
    """A stored study in the format ``meshsim uncertainty`` writes (state + Latin-hypercube samples) over two
    GPT-5.6-sol factors: the band machinery only reads its factor names, profile and positions."""
    folder.mkdir()
    top = ["score.gpt-5_6-sol.solves", "confidence.gpt-5_6-sol.correct.0"]
    (folder / "uncertainty.json").write_text(json.dumps({
        "format": "meshsim-uncertainty/1", "profile": str(PROFILE), "top": top,
        "factors": [{"name": n} for n in top]}))
    (folder / "samples.csv").write_text("stage,sample," + ",".join(top) + "\nlhs,0,0.1,0.2\nlhs,1,0.9,0.8\n")
    return folder


def _shrink(monkeypatch, keep=lambda s: True) -> None:
    """The real Tab. 6 settings (those ``keep`` picks) at 4 queries and 2 rounds."""
    import meshsim.paper.validation.sac as vs

    small = [dataclasses.replace(s, runs=tuple((n, tuple(sets) + ("tasks.count=4", "protocol.params.rounds=2"))
                                               for n, sets in s.runs))
             for s in vs.SETTINGS if s.table.startswith("Tab. 6") and keep(s)]
    monkeypatch.setattr(vs, "SETTINGS", small)


@pytest.fixture
def tiny(monkeypatch):
    _shrink(monkeypatch)


@pytest.fixture
def tiny2(monkeypatch):  # one row per method: each band sample reruns every setting
    _shrink(monkeypatch, lambda s: (s.method, s.topology) in {("sac", "merg"), ("cpwbft", "complete")})


_ROW = re.compile(r"^\| Tab\. 6 \| (SAC|CP-WBFT), (MERG|Complete): H-Majority \(%\) \| ([0-9.]+) \| "
                  r"([0-9.]+) ± ([0-9.]+) \| prediction \| ([0-9.+-]+) – ([0-9.+-]+) \| "
                  r"(robust agreement|robust disagreement|assumption-bound) \|$", re.M)


def test_reproduce_sac_quick_only_tab6_prints_paper_simulated_band_and_class(tiny2, tmp_path):
    study = _study(tmp_path / "study")
    res = CliRunner().invoke(main, ["reproduce", "sac", "--quick", "--only", "tab6", "--seeds", "1",
                                    "--no-sensitivity", "--workers", "1", "--bands", str(study),
                                    "--band-samples", "2", "-o", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    rows = _ROW.findall(res.output)
    assert {(m, t) for m, t, *_ in rows} == {("SAC", "MERG"), ("CP-WBFT", "Complete")}
    paper = {(m, t): float(p) for m, t, p, *_ in rows}
    assert paper[("SAC", "MERG")] == 93.3 and paper[("CP-WBFT", "Complete")] == 10.0
    assert "| Tab. 6 | SAC, MERG: S IAA (%) | 100.0 |" in res.output  # Strong Agent ACC, the calibrated number
    assert "W IAA" not in res.output.split("## SAC paper Tab. 6")[1]  # no weak agents, no weak row
    assert "factors moved: score.gpt-5_6-sol.solves, confidence.gpt-5_6-sol.correct.0" in res.output
    classes = (tmp_path / "rep" / "classes.md").read_text()
    assert "SAC, MERG: H-Majority (%)" in classes


def test_reproduce_sac_quick_without_a_study_says_there_is_no_band(tiny, tmp_path, monkeypatch):
    from meshsim.paper.reproduce import bands

    monkeypatch.chdir(tmp_path)  # no runs/uncertainty-* here
    monkeypatch.setattr(bands, "shipped_studies", lambda: None)  # and none shipped with the package
    res = CliRunner().invoke(main, ["reproduce", "sac", "--quick", "--only", "tab6", "--seeds", "1",
                                    "--no-sensitivity", "--workers", "1", "-o", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    assert "Assumption bands: no stored uncertainty study" in res.output
    for m, t, paper in (("SAC", "MERG", "93.3"), ("SAC", "Complete", "93.3"), ("CP-WBFT", "MERG", "10.0"),
                        ("CP-WBFT", "Complete", "10.0")):
        assert re.search(rf"^\| Tab\. 6 \| {m}, {t}: H-Majority \(%\) \| {re.escape(paper)} \| [0-9.]+ ± [0-9.]+ "
                         r"\| prediction \|$", res.output, re.M), (m, t)


def test_a_paper_value_equal_to_the_band_but_for_float_rounding_is_inside_it():
    """Tab. 6 IAA is 4 x 100 / 7 in the paper and in every run; computed two ways it differs in the last bit."""
    from meshsim.paper.reproduce.bands import classify_row

    sim = sum([1.0] * 4 + [0.0] * 3) / 7 * 100
    assert sim != 400 / 7  # the float noise this guards against
    assert classify_row(400 / 7, sim, sim, 0.0) == "robust agreement"
    assert classify_row(57.1, sim, sim, 0.0) == "robust disagreement"  # a real gap still counts
