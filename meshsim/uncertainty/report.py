"""The tornado figure and the report of an uncertainty folder (``tornado.png``,
``report.html``; ``meshsim report DIR`` rewrites them). Everything is read
from the folder's tables (uncertainty.json, ranking.csv, bands.csv,
samples.csv), so a report can be rebuilt without rerunning anything. The
report's HTML comes from templates/ (meshsim.plots.page: every value escaped).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

__all__ = ["tornado", "tornado_figure", "build_report", "write_report", "load", "span"]

LOW_COLOR, HIGH_COLOR = "#1c7ed6", "#f08c00"
BAND_COLOR, BAND_EDGE, NOISE_COLOR, PAPER_COLOR = "#a5d8ff", "#1864ab", "#ced4da", "#c92a2a"


def load(folder: Path | str) -> dict[str, Any]:
    from .tables import BANDS, RANKING, SAMPLES, read_csv, read_state

    folder = Path(folder)
    return {"folder": folder, "state": read_state(folder), "ranking": read_csv(folder / RANKING),
            "bands": read_csv(folder / BANDS), "samples": read_csv(folder / SAMPLES)}


def _ends(d: dict[str, Any], metric: str) -> dict[str, tuple[Optional[float], Optional[float]]]:
    """Per top factor: the metric's seed mean at u = 0 and at u = 1 (the others at the base)."""
    names = [f["name"] for f in d["state"]["factors"]]
    out: dict[str, list[Optional[float]]] = {}
    for r in d["samples"]:
        if r["stage"] != "end":
            continue
        for n in names:
            if r.get(n) is not None:
                out.setdefault(n, [None, None])[0 if r[n] == 0 else 1] = r.get(metric)
    return {k: (v[0], v[1]) for k, v in out.items()}


def _fmt(v: Optional[float]) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{v:.3g}"


def tornado(d: dict[str, Any], metric: str, ax=None):
    """One metric: each band factor's effect from its low end (blue) to its high end (orange) around the
    base mean, the factor that moves the metric most on top (labelled with that span and its screening mu*); shaded: the 5-95 % band; grey: base mean ± 2 seed se; red: the paper."""
    from ..plots.canvas import _axes

    band = next(b for b in d["bands"] if b["metric"] == metric)
    ranks = [r for r in d["ranking"] if r["metric"] == metric and r["in_band"]]
    ends = _ends(d, metric)
    base = band["base_mean"]
    # Rows by how far the factor alone moves this metric (the span of its bars), not by mu*: mu* comes
    # from the screening's few Morris steps of 2/3 elsewhere in the space, and a factor may be in the
    # band for another metric's mu* (issue 29: "mu* 0" beside a bar from 4 to 2.5)
    ranks.sort(key=lambda r: (-(span(ends.get(r["factor"], (None, None)), base) or -1.0), r["rank"]))
    ax = _axes(ax, _height(len(ranks)))
    labels = []
    n = len(ranks)
    xs = [x for x in (base, band["band_p5"], band["band_p95"], band.get("paper")) if x is not None]
    for j, r in enumerate(ranks):
        y = n - 1 - j
        lo, hi = ends.get(r["factor"], (None, None))
        xs += [v for v in (lo, hi) if v is not None]
        # the end farther from the base first, so that two ends on the same side both show
        bars = sorted(((v, c) for v, c in ((lo, LOW_COLOR), (hi, HIGH_COLOR)) if v is not None and base is not None),
                      key=lambda t: -abs(t[0] - base))
        for k, (v, color) in enumerate(bars):
            ax.barh(y, v - base, left=base, height=0.6 if k == 0 else 0.36, color=color, zorder=2 + k)
        for end, color, sign in ((lo, LOW_COLOR, -1), (hi, HIGH_COLOR, 1)):
            if end is None:
                continue
            right = base is None or end > base or (end == base and sign > 0)
            ax.annotate(_fmt(end), (end, y + (0.17 if sign > 0 else -0.17) * (lo == hi or _same_side(lo, hi, base))),
                        xytext=(3 if right else -3, 0), textcoords="offset points", va="center",
                        ha="left" if right else "right", fontsize=8, color=color, zorder=5)
        labels.append(f"{r['factor']}  [{_fmt(r['low'])}{'×' if r['scale'] else ''}, "
                      f"{_fmt(r['high'])}{'×' if r['scale'] else ''}]\nmoves {_fmt(span((lo, hi), base))}"
                      f" · screening μ* {_fmt(r['mu_star'])}")
    # below the factors: the band over the assumptions and the seed noise of a seed mean, side by side
    y_band, y_noise = -1.3, -2.1
    if band["band_p5"] is not None:
        ax.barh(y_band, band["band_p95"] - band["band_p5"], left=band["band_p5"], height=0.55, color=BAND_COLOR,
                edgecolor=BAND_EDGE, zorder=2)
        ax.plot([band["band_p50"]] * 2, [y_band - 0.27, y_band + 0.27], color=BAND_EDGE, lw=1.5, zorder=3)
        ax.annotate(f"{_fmt(band['band_p5'])} – {_fmt(band['band_p95'])}", (band["band_p95"], y_band),
                    xytext=(3, 0), textcoords="offset points", va="center", fontsize=8, color=BAND_EDGE)
    if base is not None and band["seed_se"] is not None:
        lo_n, hi_n = base - 2 * band["seed_se"], base + 2 * band["seed_se"]
        ax.barh(y_noise, hi_n - lo_n, left=lo_n, height=0.55, color=NOISE_COLOR, zorder=2)
        ax.annotate(f"seed sd {_fmt(band['seed_sd'])}", (hi_n, y_noise), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=8, color="#495057")
        xs += [lo_n, hi_n]
    ax.axhline(-0.7, color="#adb5bd", lw=0.8)
    ax.set_yticks(list(range(n - 1, -1, -1)) + [y_band, y_noise],
                  labels + [f"assumption band 5–95 %\n({band['n_samples']} samples)",
                            f"seed noise: base ± 2 se\n({band['n_seeds']} seeds)" if band["seed_se"] is not None
                            else f"seed noise: not measured\n({band['n_seeds']} seeds; 3 needed)"], fontsize=8)
    ax.set_ylim(y_noise - 0.6, n - 0.3)
    if xs:
        lo_x, hi_x = min(xs), max(xs)
        pad = 0.12 * (hi_x - lo_x) if hi_x > lo_x else max(abs(hi_x) * 0.1, 0.5)
        ax.set_xlim(lo_x - pad, hi_x + pad)
    from matplotlib.patches import Patch

    handles: list[Any] = []  # (lines and patches)
    if base is not None:
        ax.axvline(base, color="#212529", lw=1, zorder=6)
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color="#212529", lw=1, label=f"base {_fmt(base)}"))
    if band.get("paper") is not None:
        from matplotlib.lines import Line2D

        ax.axvline(band["paper"], color=PAPER_COLOR, lw=1.5, ls="--", zorder=6)
        handles.append(Line2D([], [], color=PAPER_COLOR, lw=1.5, ls="--", label=f"paper {_fmt(band['paper'])}"))
    handles += [Patch(color=LOW_COLOR, label="factor at its low end"), Patch(color=HIGH_COLOR,
                                                                             label="factor at its high end")]
    ax.set_title(metric + (f"  ({band['class']})" if band.get("class") else ""), loc="left", fontsize=10)
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(axis="x", color="#f1f3f5", zorder=0)
    return ax


def span(ends: tuple[Optional[float], Optional[float]], base: Optional[float]) -> Optional[float]:
    """How far a factor alone moves the metric: the width of the tornado's bars, max − min of the
    base and the two ends (None without an end or a base)."""
    xs = [v for v in ends if v is not None]
    if base is None or not xs:
        return None
    xs.append(base)
    return max(xs) - min(xs)


def _same_side(lo: Optional[float], hi: Optional[float], base: Optional[float]) -> bool:
    if lo is None or hi is None or base is None:
        return False
    return (lo - base) * (hi - base) > 0


def _height(n: int) -> float:
    return 1.9 + 0.45 * max(1, n)


def tornado_figure(d: dict[str, Any]):
    from ..plots.canvas import _new_figure

    metrics = d["state"]["metrics"]
    rows = [sum(1 for r in d["ranking"] if r["metric"] == m and r["in_band"]) for m in metrics]
    fig = _new_figure(sum(_height(n) for n in rows) + 0.3)
    axes = fig.subplots(len(metrics), 1, squeeze=False, height_ratios=[_height(n) for n in rows])
    for m, ax in zip(metrics, axes[:, 0]):
        tornado(d, m, ax=ax)
    return fig


def band_text(b: dict[str, Any]) -> str:
    return f"{_fmt(b['band_p5'])} – {_fmt(b['band_p95'])}"


def _templates():
    from ..plots.page import Templates

    return Templates(__package__ or "meshsim.uncertainty")


def section(d: dict[str, Any], image: Optional[str] = None) -> str:
    """The report section (HTML): design, bands with their classes, the tornado, the ranking.
    ``image``: the tornado's ``<img>`` tag, built by :func:`write_report`."""
    from ..plots.page import join, Markup, table

    T = _templates()
    st = d["state"]
    bud = st["budget"]
    rows = []
    for b in d["bands"]:
        rows.append([b["metric"], _fmt(b["base_mean"]), _fmt(b["seed_sd"]), _fmt(b["band_p50"]), band_text(b),
                     f"{_fmt(b['band_min'])} – {_fmt(b['band_max'])}", str(b["n_samples"]), _fmt(b["paper"]),
                     b["class"] or ""])
    bands = table(["metric", "base mean", "seed sd", "band median", "band 5–95 %", "band min – max", "samples",
                   "paper", "class"], rows)
    tornado_html = join([T.render("tornado.html", image=Markup(image)), "\n"]) if image else ""
    rankings = []
    for m in st["metrics"]:
        rk = sorted((r for r in d["ranking"] if r["metric"] == m), key=lambda r: r["rank"])
        rankings += [T.render("ranking.html", metric=m, table=table(
            ["rank", "factor", "μ*", "± (95 %)", "σ", "μ", "range", "in band"],
            [[str(r["rank"]), r["factor"], _fmt(r["mu_star"]), _fmt(r["mu_star_conf"]), _fmt(r["sigma"]),
              _fmt(r["mu"]), f"{_fmt(r['low'])} – {_fmt(r['high'])}" + (" ×" if r["scale"] else ""),
              "●" if r["in_band"] else ""] for r in rk])), "\n"]
    return T.render("section.html", profile=st["profile"], factors=len(st["factors"]),
                    seeds=", ".join(map(str, st["seeds"])), runs=bud["runs"], used=bud["used"],
                    trajectories=bud["morris_trajectories"], morris=bud["morris_samples"], ends=bud["ends"],
                    lhs=bud["lhs"], top=bud["top"], top_names=", ".join(st["top"] or []),
                    design_seed=st["design_seed"], bands=bands, tornado=tornado_html, rankings=join(rankings))


def build_report(folder: Path | str, image: Optional[str] = None) -> str:
    """report.html's text (templates/report.html); ``image`` as in :func:`section`."""
    from ..plots.report import _CSS

    d = load(folder)
    st = d["state"]
    return _templates().render("report.html", name=st["scenario"]["name"], css=_CSS, folder=str(folder),
                               source=str(st["scenario"]["source"]), section=section(d, image)) + "\n"


def write_report(folder: Path | str) -> list[Path]:
    """Write tornado.png (when matplotlib is there) and report.html; returns the paths written."""
    import base64

    from ..io.records import write_atomic
    from .tables import TORNADO

    folder = Path(folder)
    written = []
    image = None
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        pass
    else:
        from ..plots.canvas import _png_bytes

        png = _png_bytes(tornado_figure(load(folder)))
        write_atomic(folder / TORNADO, png)
        written.append(folder / TORNADO)
        image = f'<img alt="tornado" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
    write_atomic(folder / "report.html", build_report(folder, image))
    written.append(folder / "report.html")
    return written
