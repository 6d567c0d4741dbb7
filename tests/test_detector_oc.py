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
