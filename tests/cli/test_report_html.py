"""The reports' HTML comes from template files (issue 31: meshsim/plots/page.py, string.Template) and
escapes every value: a scenario, agent or profile name holding markup stays text in the run report,
the sweep report and the uncertainty report."""
from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshsim.cli import main
from meshsim.plots.page import Markup, TEMPLATES, join, table

ROOT = Path(__file__).resolve().parents[2]
STAGGERED = str(ROOT / "scenarios" / "meshheal" / "staggered-math.yaml")
EVIL = "</script><script>alert(1)</script>"
SAFE = html.escape(EVIL)
IMG = '<img alt="figure" src="data:image/png;base64,AA==">'


def _no_png(monkeypatch):
    """Figures built but not rasterised: the HTML around them is what these tests read."""
    from meshsim.plots import report
    from meshsim.plots.sweeps import report as sweep_report

    monkeypatch.setattr(report, "_img", lambda fig: IMG)
    monkeypatch.setattr(sweep_report, "_img", lambda fig: IMG)


def _escaped(text: str, times: int = 1) -> None:
    assert "<script" not in text and EVIL not in text
    assert text.count(SAFE) >= times, text[:2000]


def test_values_are_escaped_and_markup_is_kept():
    out = TEMPLATES.render("figure.html", title=EVIL, image=Markup(IMG), caption="a & b")
    assert out == f"<figure data-figure=\"drawn\"><h3>{SAFE}</h3>{IMG}<figcaption>a &amp; b</figcaption></figure>"
    assert isinstance(out, Markup) and isinstance(join([out, EVIL]), Markup)
    assert table([EVIL], [[EVIL, Markup("<b>x</b>")]]) == (
        f"<table><thead><tr><th>{SAFE}</th></tr></thead><tbody><tr><td>{SAFE}</td><td><b>x</b></td></tr>"
        "</tbody></table>")
    with pytest.raises(KeyError):  # a slot left empty is a bug, not an empty string
        TEMPLATES.render("figure.html", title="t")


@pytest.fixture(scope="module")
def evil_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("evil") / "run"
    res = CliRunner().invoke(main, ["run", STAGGERED, "--smoke", "--seed", "1", "--out", str(out), "-q",
                                    "--set", f"name={EVIL}", "--set", f"description={EVIL}"])
    assert res.exit_code == 0, res.output
    # agent names as a hostile topology file could bring them: 14 of them fold (issue 32)
    summary = json.loads((out / "summary.json").read_text())
    summary["isolated_at_end"] = [f"{EVIL}{i}" for i in range(14)]
    (out / "summary.json").write_text(json.dumps(summary))
    return out


def test_the_run_report_escapes_scenario_and_agent_names(evil_run, monkeypatch):
    from meshsim.plots.report import build_report

    _no_png(monkeypatch)
    text = build_report(evil_run)
    _escaped(text, times=4)  # title, heading, description, scenario YAML, the folded list
    assert f"<title>{SAFE} — meshsim report</title>" in text and f"<h1>{SAFE}</h1>" in text
    assert f"<p>{SAFE}</p>" in text
    assert f"<details><summary>{SAFE}0, " in text and "… and 6 more (14 in all)</summary>" in text


def test_the_sweep_report_escapes_the_scenario_name(tmp_path, monkeypatch):
    from meshsim.plots.sweeps import build_sweep_report

    out = tmp_path / "sw"
    res = CliRunner().invoke(main, ["sweep", STAGGERED, "--smoke", "--grid", "protocol.params.beta=2.5", "--seeds",
                                    "1", "--set", f"name={EVIL}", "--set", f"description={EVIL}", "--out", str(out),
                                    "--workers", "1", "--yes", "-q"])
    assert res.exit_code == 0, res.output
    _no_png(monkeypatch)
    text = build_sweep_report(out)
    _escaped(text, times=3)
    assert f"<h1>{SAFE}: sweep</h1>" in text and f"<p>{SAFE}</p>" in text


def test_the_uncertainty_report_escapes_names(tmp_path, monkeypatch):
    from meshsim.uncertainty import report

    state = {"scenario": {"name": EVIL, "source": EVIL}, "profile": EVIL, "factors": [{"name": EVIL}],
             "seeds": [1, 2], "budget": {"runs": 50, "used": 50, "morris_trajectories": 5, "morris_samples": 10,
                                         "ends": 4, "lhs": 10, "top": 1},
             "top": [EVIL], "design_seed": 1, "metrics": [EVIL]}
    band = {"metric": EVIL, "base_mean": 1.0, "seed_sd": 0.1, "band_p50": 1.0, "band_p5": 0.9, "band_p95": 1.1,
            "band_min": 0.8, "band_max": 1.2, "n_samples": 10, "paper": None, "class": EVIL}
    rank = {"metric": EVIL, "rank": 1, "factor": EVIL, "mu_star": 0.1, "mu_star_conf": 0.01, "sigma": 0.1, "mu": 0.1,
            "low": 0.5, "high": 2.0, "scale": True, "in_band": True}
    monkeypatch.setattr(report, "load", lambda folder: {"folder": Path(folder), "state": state, "ranking": [rank],
                                                        "bands": [band], "samples": []})
    text = report.build_report(tmp_path / EVIL, image='<img alt="tornado" src="data:image/png;base64,AA==">')
    _escaped(text, times=9)  # title, heading, folder, source, profile, top, metric x3, class, factor
    assert f"<h3>Morris ranking: {SAFE}</h3>" in text and '<img alt="tornado"' in text
