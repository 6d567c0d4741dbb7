"""``meshsim detector``: the detector's closed-form operating characteristics (docs/detector.md)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ..core.errors import InputError
from .app import _need_plotting, main


class _OcKinds(click.Choice):
    """The registered detectors with closed-form OC, read when first needed (not at CLI start)."""

    def __init__(self) -> None:
        super().__init__(())

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        from ..analysis.detector import oc_kinds

        return tuple(oc_kinds())

    @choices.setter
    def choices(self, value: Any) -> None:
        pass


@main.command()
@click.argument("source", metavar="PROFILE|RUN_DIR|SCENARIO")
@click.option("--detector", "kind", type=_OcKinds(), default=None,
              help="Rule (default: the scenario's, else relative).")
@click.option("--alpha", type=float, default=None, help="Watch threshold on z (Tab. B11: 1.2).")
@click.option("--beta", type=float, default=None, help="Isolation threshold on z (2.0).")
@click.option("--window", type=click.IntRange(1, 32), default=None, help="Shortfalls in x̄ (8).")
@click.option("--floor", type=click.FloatRange(min=0.0, min_open=True), default=None, help="Floor of m - p25 (0.10).")
@click.option("--min-obs", type=click.IntRange(1, 1000), default=None, help="Matched observations first (3).")
@click.option("--consecutive", type=click.IntRange(1, 20), default=None, help="Crossings of beta to isolate (2).")
@click.option("--scope", type=click.Choice(["agent", "key"]), default=None,
              help="x̄ and the crossing count per agent or per (T, s) detector (default: the scenario's, agent).")
@click.option("--abs-watch", type=float, default=None, help="Absolute rule: watch below this mean score.")
@click.option("--abs-isolate", type=float, default=None, help="Absolute rule: isolate below this mean score.")
@click.option("--cusum-k", type=float, default=None, help="CUSUM allowance.")
@click.option("--cusum-h", type=float, default=None, help="CUSUM watch threshold (isolation at 2h).")
@click.option("--cusum-target", type=float, default=None, help="CUSUM expected healthy score.")
@click.option("--outputs", type=click.IntRange(1, 10 ** 6), default=None,
              help="Detector updates per healthy agent per stream (default: from the stream).")
@click.option("--dataset", default=None, help="Task types of the Monte Carlo (PROFILE: bbh; SCENARIO: its own).")
@click.option("--samples", type=click.IntRange(200, 10 ** 6), default=20000, show_default=True,
              help="Reviewed outputs per producer in the score Monte Carlo (cached).")
@click.option("--no-cache", is_flag=True, help="Recompute the score distributions (no cache read or write).")
@click.option("--vary", default=None, metavar="PARAM=LOW:HIGH[:N]",
              help="A curve over one parameter (alpha, beta, window, floor, min_obs, consecutive, abs_*, cusum_*).")
@click.option("--simulate", "sim_reps", type=click.IntRange(100, 10 ** 6), default=None, metavar="REPS",
              help="Also run the real detector on REPS i.i.d. producers (controlled simulation, 99 % intervals).")
@click.option("--pool", type=click.IntRange(1, 10 ** 4), default=None,
              help="A finite neighbourhood: POOL peers' x̄ in the normal range and 2 peers' per-key mean as the "
                   "reference, in the closed form's finite-pool estimate (default 5) and in --simulate (default: "
                   "the large-pool limit).")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", help="Override a scenario field first.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--plot", "plot_kind", type=click.Choice(["oc", "runlength"]), default=None,
              help="Figure: oc (false isolation vs delay along --vary, default beta) or runlength.")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None, help="Figure file (default: detector-<kind>.png).")
def detector(source: str, kind: str | None, alpha, beta, window, floor, min_obs, consecutive, scope, abs_watch,
             abs_isolate, cusum_k, cusum_h, cusum_target, outputs, dataset, samples, no_cache, vary, sim_reps, pool,
             sets, as_json, plot_kind, out) -> None:
    """Closed-form operating characteristics of MeshHeal's detector (docs/detector.md): false isolation
    per healthy agent per stream, in-control run length, detection-delay distribution, watched rate and
    reintegration probes, from a fake PROFILE's behaviour model, a RUN_DIR's scores or a SCENARIO."""
    import time

    from ..analysis import detector as oc_math
    from ..analysis import report

    t0 = time.perf_counter()
    if plot_kind:
        _need_plotting()
        if out is not None:
            from ..plots import check_figure_path

            check_figure_path(out)
    name_vals = report.parse_vary(vary) if vary else None
    src = report.resolve(source, dataset, samples, not no_cache, tuple(sets))
    p = report.detector_params(src.params, alpha=alpha, beta=beta, window=window, floor=floor, min_obs=min_obs,
                               consecutive=consecutive, abs_watch=abs_watch, abs_isolate=abs_isolate,
                               cusum_k=cusum_k, cusum_h=cusum_h, cusum_target=cusum_target, scope=scope)
    kind = kind or getattr(src.params, "detector", oc_math.RELATIVE)
    if kind not in oc_math.oc_kinds():
        kind = oc_math.RELATIVE
    if plot_kind == "oc" and name_vals is None:
        if kind != "relative":
            raise InputError("--plot oc needs --vary for the absolute and CUSUM rules", field="--vary")
        name_vals = ("beta", [round(1.2 + 0.2 * i, 2) for i in range(10)])
    st = src.stream
    kw = dict(detector=kind, outputs=outputs or int(round(st.outputs)), keys=max(1, int(round(st.keys))),
              healthy_before=int(round(st.healthy_before)), degraded_outputs=int(round(st.degraded_outputs)),
              probe_every=st.probe_every)
    oc = oc_math.operating_characteristics(src.model, p, pool=pool or 5, **kw)
    curve = None
    if name_vals is not None:
        curve = oc_math.curve(src.model, p, name_vals[0], name_vals[1], **kw)
    secs = time.perf_counter() - t0
    sim = None
    if sim_reps:
        from ..analysis.simulate import simulate

        sim = simulate(src.model, p, kind, outputs=kw["outputs"] // kw["keys"] if p.count_scope == "key" else
                       kw["outputs"], healthy_before=3 * p.window, reps=sim_reps, delay_reps=max(100, sim_reps // 3),
                       pool_size=pool)
    if as_json:
        doc = {"source": src.kind, "scores": src.model.describe(), "stream": st.describe(), "oc": oc.summary(),
               "range": report.range_summary(src, oc), "seconds": round(secs, 3)}
        if curve is not None:
            doc["curve"] = {"param": name_vals[0], "values": name_vals[1], "points": [c.summary() for c in curve]}
        if src.simulated is not None:
            doc["simulated"] = src.simulated.describe()
        if sim is not None:
            doc["controlled_simulation"] = report.sim_summary(sim, pool)
        click.echo(json.dumps(doc, indent=2, default=float))
    else:
        for line in report.lines(src, oc, secs):
            click.echo(line)
        if sim is not None:
            click.echo(report.sim_line(sim, pool))
        if curve is not None:
            click.echo("")
            for line in report.curve_lines(name_vals[0], name_vals[1], curve):
                click.echo(line)
    if plot_kind:
        from ..plots import save_figure
        from ..plots.oc import oc_figure, runlength_figure

        target = Path(out or f"detector-{plot_kind}.png")
        if plot_kind == "oc":
            sim = None
            if src.simulated is not None:
                s = src.simulated.describe()
                sim = {"p": s["false_isolation_probability"], "delay": s["delay_outputs_mean"],
                       "label": f"simulated ({s['seeds']} seeds)"}
            default = getattr(p, oc_math.PARAMS[name_vals[0]])
            fig = oc_figure(curve, name_vals[0], name_vals[1], default=default, simulated=sim)
        else:
            fig = runlength_figure(oc)
        click.echo(f"wrote {save_figure(fig, target)}", err=as_json)
