"""Closed-form operating characteristics of the detectors (meshsim.analysis) against the real
detector objects fed the same i.i.d. score distributions (docs/detector.md).

Each check: the closed form's false-isolation probability and mean detection delay lie in the 99 %
interval of a controlled simulation (meshsim.analysis.simulate: RelativeDetector / AbsoluteDetector /
CusumDetector, healthy peers in the large-pool limit), and a deliberately wrong closed form (window 7
where the detector uses 8) lies outside it - so the check can fail.
"""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsim.analysis import detector as D
from meshsim.analysis.scores import Dist, ScoreModel, from_profile
from meshsim.analysis.simulate import simulate
from meshsim.cli import main
from meshsim.protocols.meshheal.detector import DetectorParams

AGENT = DetectorParams(count_scope="agent", shortfall_scope="agent")  # the scenarios' scope (Tab. B11 values)


def three_point() -> ScoreModel:
    """Shortfalls on three values: the ordered-window chain is exact here."""
    v = np.array([-0.05, 0.35, 0.8])
    sh = {"healthy": Dist(v, np.array([0.86, 0.10, 0.04])),
          "healthy_watched": Dist(v, np.array([0.84, 0.11, 0.05])),
          "degraded": Dist(v, np.array([0.10, 0.20, 0.70])),
          "degraded_watched": Dist(v, np.array([0.10, 0.15, 0.75]))}
    sc = {k: Dist(np.round(1.0 - d.values[::-1], 6), d.probs[::-1]) for k, d in sh.items()}
    return ScoreModel(sc, sh, "test", "three-point shortfalls")


def _check(model, params, detector, outputs, reps, delay_reps, seed=1, wrong=None):
    kw = dict(outputs=outputs, healthy_before=3 * params.window, degraded_outputs=200)
    oc = D.operating_characteristics(model, params, detector, **kw)
    sim = simulate(model, params, detector, outputs=outputs, healthy_before=3 * params.window, reps=reps,
                   delay_reps=delay_reps, seed=seed)
    lo, hi = sim.p_interval()
    assert lo <= oc.p_false <= hi, (oc.p_false, (lo, hi))
    dlo, dhi = sim.delay_interval()
    assert dlo <= oc.delay_mean <= dhi, (oc.delay_mean, (dlo, dhi))
    if wrong is not None:
        bad = D.operating_characteristics(model, dataclasses.replace(params, **wrong), detector, **kw)
        assert not lo <= bad.p_false <= hi, ("the wrong closed form agrees too", bad.p_false, (lo, hi))
    return oc, sim


def test_relative_exact_chain_agrees_with_the_detector_and_a_wrong_window_does_not():
    oc, sim = _check(three_point(), AGENT, "relative", outputs=60, reps=2500, delay_reps=800,
                     wrong={"window": 7})
    assert oc.info["method"] == "ordered-window chain (exact)"
    assert 0.2 < oc.p_false < 0.5 and sim.rejected > 0  # a non-trivial operating point


@pytest.fixture(scope="module")
def fake_default() -> ScoreModel:
    # the real review pipeline through the fake's call interface (a small fixed-seed Monte Carlo)
    return from_profile("fake-default", "bbh", n=500, seed=3)


def test_relative_on_the_fake_default_scores_agrees_with_the_detector(fake_default):
    oc, _sim = _check(fake_default, AGENT, "relative", outputs=168, reps=1100, delay_reps=500,
                      wrong={"window": 7})
    assert "window-sum" in oc.info["method"]
    assert oc.recovery is not None and oc.recovery.mean() > 1


def test_absolute_and_cusum_agree_with_their_detectors():
    m = three_point()
    absolute = dataclasses.replace(AGENT, window=4, abs_watch=0.8, abs_isolate=0.7)
    _check(m, absolute, "absolute", outputs=60, reps=1500, delay_reps=400, wrong={"window": 3})
    cusum = dataclasses.replace(AGENT, cusum_target=0.95, cusum_k=0.05, cusum_h=0.8)
    oc, _ = _check(m, cusum, "cusum", outputs=60, reps=1500, delay_reps=400)
    assert oc.info["method"].startswith("Brook")


@settings(max_examples=8, deadline=None)
@given(b1=st.floats(1.3, 3.0), b2=st.floats(1.3, 3.0))
def test_false_isolation_falls_with_beta(b1, b2):
    """Pathwise: every crossing of the higher beta crosses the lower one (alpha, hence the watched
    pmf, fixed), so a higher beta never isolates a healthy agent sooner."""
    lo, hi = sorted((b1, b2))
    m = three_point()
    a = D.operating_characteristics(m, dataclasses.replace(AGENT, alpha=1.0, beta=lo), outputs=60)
    b = D.operating_characteristics(m, dataclasses.replace(AGENT, alpha=1.0, beta=hi), outputs=60)
    assert b.p_false <= a.p_false + 1e-12
    assert b.arl0 >= a.arl0 * (1 - 1e-9)
    assert abs(a.delay.absorbed.sum() - 1.0) < 1e-6  # every degraded agent is caught eventually


# 2-6 s end to end: with the slow checks (README's 2-minute budget), which .ci/run runs
@pytest.mark.slow
def test_cli_prints_the_paper_setting_and_json(tmp_path, monkeypatch):
    monkeypatch.setenv("MESHSIM_CACHE", str(tmp_path / "cache"))
    r = CliRunner().invoke(main, ["detector", "fake-default", "--samples", "300"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "alpha 1.2, beta 2, window 8, floor 0.1, min_obs 3, 2 consecutive" in r.output
    assert "P(a healthy agent is isolated within one stream of 168 outputs)" in r.output and "P(delay = n)" in r.output
    assert list((tmp_path / "cache" / "scores").glob("*.json"))  # the Monte Carlo is cached
    r = CliRunner().invoke(main, ["detector", "fake-default", "--samples", "300", "--json", "--vary",
                                  "window=6,8"], catch_exceptions=False)
    doc = json.loads(r.output)
    assert [p["params"]["window"] for p in doc["curve"]["points"]] == [6, 8]
    assert 0 < doc["oc"]["false_isolation_probability"] < 1
    fp = doc["oc"]["info"]["finite_pool"]  # the finite-pool estimate (default 5 peers) and the per-run counts
    assert fp["pool"] == 5 and 0 < fp["p"] < 1 and doc["range"]["per_run_finite_pool"] > 0
    assert "degraded reviewers" in doc["range"]["left_out"]


@pytest.mark.parametrize("args", [["--vary", "gamma=1:2"], ["--vary", "beta=2"], ["--alpha", "3"],
                                  ["--plot", "oc", "-o", "x.txt"]])
def test_cli_bad_input_is_one_line(args, tmp_path, monkeypatch):
    monkeypatch.setenv("MESHSIM_CACHE", str(tmp_path / "cache"))
    r = CliRunner().invoke(main, ["detector", "fake-default", "--samples", "300"] + args)
    assert r.exit_code == 2


def test_figures_draw_the_curve_and_the_run_lengths(tmp_path):
    from meshsim.plots import save_figure
    from meshsim.plots.oc import oc_curve, oc_figure, runlength_figure

    m = three_point()
    betas = [1.6, 2.0, 2.4]
    ocs = D.curve(m, AGENT, "beta", betas, outputs=60)
    ax = oc_curve(ocs, "beta", betas, default=2.0, simulated={"p": 0.3, "delay": 4.0})
    labels = [t.get_text() for t in ax.texts]
    assert labels == ["beta 1.6", "beta 2", "beta 2.4"]  # every point carries its threshold
    assert list(ax.collections[0].get_offsets()[:, 1]) == [o.p_false for o in ocs]
    for fig, name in ((oc_figure(ocs, "beta", betas), "oc.png"), (runlength_figure(ocs[1]), "rl.png")):
        p = save_figure(fig, tmp_path / name)
        assert p.stat().st_size > 5000


# ---------------------------------------------------------------------------------------------
# issue 29: the exact chain decided on the healthy shapes alone, checked against an independent DP

def brute_force_p_false(sh: dict, c_iso: float, c_watch: float, window: int, min_obs: int, consecutive: int,
                        n: int) -> float:
    """P(isolated within n updates), by a dictionary DP over (last window-1 values, counter, watched):
    written from the rule (Sec. 4.2.2, App. B.5), not from meshsim.analysis."""
    states = {((), 0, False): 1.0}
    absorbed = 0.0
    for t in range(1, n + 1):
        nxt: dict = {}
        for (win, c, wat), pr in states.items():
            d = sh["healthy_watched" if wat else "healthy"]
            for v, pv in zip(d.values, d.probs):
                full = win + (float(v),)
                c2, w2 = c, wat
                if t >= min_obs:
                    xbar = sum(full) / len(full)
                    c2 = c + 1 if xbar >= c_iso - 1e-9 else 0
                    w2 = xbar >= c_watch - 1e-9
                if c2 >= consecutive:
                    absorbed += pr * pv
                    continue
                key = (full[-(window - 1):] if window > 1 else (), c2, w2)
                nxt[key] = nxt.get(key, 0.0) + pr * pv
        states = nxt
    return absorbed


def _shape(healthy_vals, degraded_vals) -> ScoreModel:
    hv, dv = np.array(healthy_vals), np.array(degraded_vals)
    ph = np.array([0.86, 0.10, 0.04])[:len(hv)] if len(hv) == 3 else np.array([0.9, 0.1])
    ph = ph / ph.sum()
    pw = np.roll(ph, 0) * 0.98 + 0.02 / len(hv)
    pd = np.full(len(dv), 1.0 / len(dv))
    sh = {"healthy": Dist(hv, ph), "healthy_watched": Dist(hv, pw), "degraded": Dist(dv, pd),
          "degraded_watched": Dist(dv, pd)}
    sc = {k: Dist(np.round(1.0 - d.values[::-1], 6), d.probs[::-1]) for k, d in sh.items()}
    return ScoreModel(sc, sh, "test", "shape")


@pytest.mark.parametrize("healthy,degraded", [
    ([-0.05, 0.6], [0.3, 0.65, 0.85]),  # two-valued healthy shape; the degraded values lie elsewhere
    ([-0.05, 0.35, 0.8], [0.2, 0.5, 0.65, 0.9]),  # three-valued: 7 support points over all four cases
])
def test_in_control_chain_is_exact_on_two_and_three_valued_healthy_shapes_at_window_8(healthy, degraded):
    """The in-control quantities see healthy values only, so a healthy shape on <= 4 points gets the exact
    ordered-window chain even when the degraded values make the mixture finer (issue 29: the window-sum
    extrapolation was used there, 4-5 % high)."""
    m = _shape(healthy, degraded)
    p = dataclasses.replace(AGENT, window=8, min_obs=3, alpha=1.0, beta=2.0)
    oc = D.operating_characteristics(m, p, outputs=40, healthy_before=24, degraded_outputs=60)
    assert oc.info["healthy_levels_exact"] and not oc.info["window_levels_exact"]
    assert "exact in control" in oc.info["method"]
    ref = brute_force_p_false(m.shortfalls, oc.info["xbar_isolate"], oc.info["xbar_watch"], 8, 3, 2, 40)
    assert 0.01 < ref < 0.99  # a non-trivial operating point
    assert abs(oc.p_false - ref) <= 1e-9 * max(1.0, ref), (oc.p_false, ref)
    ref24 = brute_force_p_false(m.shortfalls, oc.info["xbar_isolate"], oc.info["xbar_watch"], 8, 3, 2, 24)
    assert abs(oc.info["p_false_before_degradation"] - ref24) <= 1e-9


# ---------------------------------------------------------------------------------------------
# issue 29: no positive probability printed as 0.000; the note where the large-pool limit stops

@settings(max_examples=200, deadline=None)
@given(p=st.one_of(st.floats(0.0, 1.0), st.floats(1e-300, 1e-3)), nd=st.integers(1, 4))
def test_fmt_p_never_reads_zero_or_one_for_what_is_not(p, nd):
    from meshsim.analysis.report import fmt_p

    text = fmt_p(p, nd)
    head = text.split(" ")[0]
    if p > 0:
        assert float(head) > 0 or text.startswith("1 - "), text
    else:
        assert text == "0"
    if p < 1:
        assert text.startswith("1 - ") or float(head) < 1, text
    if text.startswith("1 - "):
        assert abs(1 - float(text[4:]) - p) < 1e-2


def _source(model: ScoreModel):
    from meshsim.analysis.report import Source
    from meshsim.analysis.stream import from_dataset
    from meshsim.protocols.meshheal import MeshHealParams

    return Source("profile", model, from_dataset("bbh"), MeshHealParams())


ZERO = __import__("re").compile(r"(?<![\d.e-])0\.0+(?![\d]*[1-9])(?!\d*e)")


@settings(max_examples=6, deadline=None)
@given(beta=st.floats(2.0, 9.0))
def test_no_positive_probability_prints_as_zero_over_thresholds(beta):
    """At any threshold the console lines carry no 0.000 (a positive P in scientific notation), and the
    per-stream P names the outputs behind it."""
    from meshsim.analysis import report

    m = three_point()
    p = dataclasses.replace(AGENT, alpha=1.0, beta=beta)
    oc = D.operating_characteristics(m, p, outputs=168)
    text = "\n".join(report.lines(_source(m), oc)) + "\n" + "\n".join(report.curve_lines("beta", [beta], [oc]))
    values = ("peers ", "x̄ >=", "mean final score")  # shortfall values and thresholds, not probabilities
    bad = [ln for ln in text.splitlines() if ZERO.search(ln) and not any(v in ln for v in values)]
    assert not bad, bad
    assert "within one stream of 168 outputs" in text
    if 0 < oc.p_false < 1e-3:
        assert report.fmt_p(oc.p_false) in text and "e-" in report.fmt_p(oc.p_false)


def test_note_names_what_is_left_out_when_the_large_pool_limit_is_outside_its_range(fake_default):
    """High beta (the shipped search recommendation): a finite pool moves P by far more than 2x; the output
    says the limit is outside its range, gives the finite-pool estimate and names the mechanisms left out
    with their measured sizes. At beta 1.5 the limit holds and says nothing of the kind."""
    from meshsim.analysis import report

    m = fake_default
    rec = dataclasses.replace(AGENT, alpha=0.9468, beta=4.239, min_obs=5)
    hi = D.operating_characteristics(m, rec, outputs=168, pool=5)
    fp = hi.info["finite_pool"]
    assert fp["ratio"] > 2 and fp["p"] > hi.p_false > 0
    text = "\n".join(report.lines(_source(m), hi))
    assert "OUTSIDE the limit's range" in text and report.fmt_p(fp["p"]) in text
    assert "left out: degraded reviewers' scores" in text and "re-isolation after reintegration" in text
    assert "60x the finite-pool value" in text  # the size of what is left out, next to the number
    rs = report.range_summary(_source(m), hi)
    assert rs["outside_large_pool_range"] and rs["per_run_finite_pool"] > rs["per_run_large_pool_limit"]
    lo = D.operating_characteristics(m, dataclasses.replace(AGENT, beta=1.5), outputs=168, pool=5)
    assert lo.info["finite_pool"]["ratio"] <= 2
    assert "OUTSIDE" not in "\n".join(report.lines(_source(m), lo))


def test_run_folder_false_isolations_are_decomposed_by_phase_reviewer_and_re_isolation(tmp_path):
    """stream.simulated: each isolation of an agent while healthy is placed before / after the first
    degradation, with a degraded and still trusted reviewer in its isolating window or not, after a degraded
    agent's isolation or not, and as a re-isolation or not."""
    from meshsim.analysis.stream import simulated

    f = tmp_path / "seed-1"
    f.mkdir()
    det = {"healthy_agents": 2, "false_isolations": 2, "false_isolation_events": 3}
    (f / "summary.json").write_text(json.dumps({"detection": det, "agents": {
        "A3": {"degraded_at": 10, "isolated_at": 20}}}))
    reviews = [(3, "A1", ["A2"]), (11, "A2", ["A3"]), (12, "A2", ["A1"]), (21, "A1", ["A2"]), (22, "A1", ["A3"]),
               (15, "A3", ["A1"])]
    (f / "reviews.jsonl").write_text("".join(json.dumps({"task": t, "agent": a, "reviewers": rv, "detector": [
        {"matched": True}]}) + "\n" for t, a, rv in reviews))
    states = [("A1", 5, "isolated"), ("A1", 7, "watched"), ("A2", 14, "isolated"), ("A3", 20, "isolated"),
              ("A1", 25, "isolated")]
    (f / "states.jsonl").write_text("".join(json.dumps({"agent": a, "task": t, "new": n}) + "\n"
                                            for a, t, n in states))
    s = simulated(tmp_path, window=2)
    assert s.breakdown() == {"events": 3, "before_first_degradation": 1, "with_degraded_reviewer_in_window": 1,
                             "after_a_degraded_agent_isolated": 1, "re_isolations": 1}
    assert s.describe()["false_isolations_per_agent"] == 1.5  # the summary's events, per healthy agent


def test_controlled_simulation_line_counts_and_never_prints_a_float_residue_for_zero():
    from meshsim.analysis.report import sim_line
    from meshsim.analysis.simulate import SimResult

    s = SimResult(reps=2000, false_isolated=0, delays=[5, 6, 7])
    assert s.p_interval()[0] == 0.0 and SimResult(reps=50, false_isolated=50).p_interval()[1] == 1.0
    line = sim_line(s, 5)
    assert "P(false isolation) 0 (0 of 2000) [99 %: 0-0.003]" in line, line
