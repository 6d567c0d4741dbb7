"""``SWEEP_DIR/report.html``: every figure, the per-point table with intervals and paired
differences, the search's recommendation."""
from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from ..canvas import _png_bytes
from .data import DELAY, FALSE_ISO, HEADLINES, SweepData, _check_rows, _ci, _fmt, _g, _hashable, _in_range, _num, _objectives, cells, open_sweep, search_info, seed_counts
from .stamps import _plain, stamp_figure
from .tradeoff import _search_tradeoff, tradeoff, tradeoff_points
from .views import heatmap, parallel, sensitivity


# ------------------------------------------------------------------------------------- report


def _img(fig) -> str:
    import base64

    return f'<img alt="figure" src="data:image/png;base64,{base64.b64encode(_png_bytes(fig)).decode()}">'


def _table(head: list[str], rows: list[list[str]], raw: bool = False) -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    b = "".join("<tr>" + "".join(f"<td>{c if raw else html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>"


def _ms(st: Optional[dict[str, Any]]) -> str:
    if not st or st["mean"] is None:
        return "–"
    if st["n"] <= 1:
        return f"{st['mean']:.3g}"
    return f"{st['mean']:.3g} ± {st['sd']:.2g}"


def _effect(sd: SweepData, metric: str, axis: str) -> float:
    cs = [c.mean for c in cells(sd, metric, (axis,)).values() if c.mean is not None]
    return (max(cs) - min(cs)) if len(cs) > 1 else 0.0


def build_sweep_report(path: Path | str, where: Any = None, facet: Optional[str] = None,
                       reference: Any = None) -> str:
    """The report's HTML: trade-off, parallel coordinates, every parameter's
    effect, heat maps of the two parameters that move each headline metric
    most, and the per-point table (95 % intervals, paired differences to the
    reference point, Pareto front). ``where`` fixes parameters for all of it;
    ``facet`` splits the trade-off, heat maps and sensitivity curves."""
    from ...core.errors import MeshsimError
    from ...sweep.results import resolve_reference, sort_key
    from ...sweep.slices import point_values, reference_points
    from ...sweep.stats import paired
    from ..report import _CSS

    full = open_sweep(path)
    sd = full.where(where)
    _check_rows(sd)
    names = sd.names()
    axes = sd.axes
    vary = sd.varying()
    fac = sd.column(facet, "--facet", axes) if facet else None
    m = sd.manifest
    ok = len(sd.ok_rows)
    failed = [r for r in sd.rows if r["status"] == "failed"]
    missing = [r for r in sd.rows if r["status"] == "missing"]
    ref = resolve_reference(m, full.rows, reference)
    title = f"{sd.name}: sweep" + (f" at {', '.join(f'{names[k]}={_fmt(v)}' for k, v in sd.fixed.items())}"
                                   if sd.fixed else "")
    parts = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)} — meshsim"
             f"</title><style>{_CSS}td.c{{white-space:nowrap}}td b{{color:#c92a2a}}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    desc = (m.get("base") or {}).get("description")
    if desc:
        parts.append(f"<p>{html.escape(str(desc))}</p>")
    axes_txt = "; ".join(f"<code>{html.escape(a)}</code> ∈ "
                         f"{{{html.escape(', '.join(_fmt(v) for v in sd.values(a)))}}}" for a in axes)
    seeds = sd.seeds()
    parts.append(f'<p class="meta">sweep folder <code>{html.escape(str(sd.path))}</code> · scenario '
                 f'<code>{html.escape(str(m["scenario"].get("source")))}</code> · {axes_txt} · seeds '
                 f'{html.escape(_seed_text(seeds))} · {len({r["point"] for r in sd.rows})} points, {len(sd.rows)} '
                 f'runs: {ok} finished, {len(failed)} failed' + (f", {len(missing)} not run yet" if missing else "")
                 + f' · {len(m.get("skipped", []))} points skipped · output level {html.escape(m["output"])}</p>')
    if sd.fixed:
        fixed = ", ".join(f"{a}={_fmt(v)}" for a, v in sd.fixed.items())
        parts.append(f'<p class="note">Only the points at {html.escape(fixed)} (--where).</p>')
    figs: list[tuple[str, str, Any]] = []
    info = search_info(sd)
    if info is not None:
        parts.append(_search_section(sd, info, names))
    if _search_tradeoff(sd):
        fx, fy, fc = _objectives(sd, None)
        figs.append((f"Trade-off of the search: {fy} against {fx}",
                     "One marker per point (mean over its own seeds, bars: 95 % interval over them); the axes "
                     "are the search's objectives" + (f", colour its third ({fc})" if fc else "") + "; ringed and "
                     "numbered: Pareto-optimal among the points that meet the constraints (listed in the box with "
                     "n, each point's seeds); hollow red squares: points that broke a constraint (== on any "
                     "seed, <= / >= on the mean), never on the front; gold star: the recommendation "
                     "(recommended.json). ≈ marks a front point the seeds do not tell apart from the one above "
                     "it (paired differences on shared seeds).", lambda: tradeoff(sd, facet=fac)))
    elif DELAY in sd.columns and FALSE_ISO in sd.columns:
        figs.append(("Trade-off: detection delay against false isolations",
                     "One marker per point (mean over seeds, bars: 95 % interval over seeds); colour: "
                     "missed-detection rate; ringed and numbered: Pareto-optimal points (no other point is at least "
                     "as good on delay, false-isolation rate and missed rate, and better on one), listed in the box "
                     "with their parameters and intervals; ≈ marks a front point the seeds do not tell apart from "
                     "the one above it (paired differences on shared seeds). Read it from the lower left: fast "
                     "detection without isolating healthy agents.", lambda: tradeoff(sd, facet=fac)))
    if len(vary) >= 1:
        figs.append(("Parallel coordinates: every parameter and the headline metrics",
                     "One line per point through its parameter values (left) and its metrics' means over seeds "
                     "(shaded, each axis from its minimum to its maximum over the points); colour: the first "
                     "metric. Follow the dark (low) lines to see which parameter values they share.",
                     lambda: parallel(sd)))
    shown = [h for h in (DELAY, FALSE_ISO) if h in sd.columns] or \
        [h for h in HEADLINES if h in sd.columns][:2] or sd.metrics[:2]
    for h in shown:
        if len([a for a in vary if a != fac]) > 1 and fac is None:
            figs.append((f"Every parameter's effect on {h}",
                         "One panel per swept parameter: bold, the mean over seeds and over every other parameter "
                         "(band: 95 % interval over seeds); thin, one line per combination of the other parameters, "
                         "so an effect that the average hides (one setting of another parameter) stays visible.",
                         lambda h=h: sensitivity(sd, None, h)))
        else:
            for a in [a for a in vary if a != fac] or axes[:1]:
                figs.append((f"Sensitivity of {h} to {names[a]}", "Mean over seeds with its 95 % interval band.",
                             lambda a=a, h=h: sensitivity(sd, a, h, facet=fac)))
    hv = [a for a in vary if a != fac]
    if len(hv) >= 2:
        for h in shown:
            ranked = sorted(hv, key=lambda a: -_effect(sd, h, a))
            x, y = ranked[0], ranked[1]
            rest = [a for a in ranked[2:]]
            f = fac or next((a for a in rest if len(sd.values(a)) <= 6), None)
            avg = [names[a] for a in rest if a != f]
            cap = (f"Mean over seeds of {h} on the two parameters that move it most ({names[x]} × {names[y]})"
                   + (f", one panel per {names[f]}" if f else "")
                   + (f"; averaged over {', '.join(avg)} (each cell: mean, below it the range of the averaged "
                      "points' means)" if avg else "; each cell: mean ± half-width of its 95 % interval")
                   + "; hatched: skipped (invalid) points.")
            figs.append((f"Heat map: {h}", cap, lambda h=h, x=x, y=y, f=f: heatmap(sd, x, y, h, facet=f)))
    if figs:
        parts.append("<h2>Figures</h2>")
    for ftitle, caption, build in figs:
        try:
            fig = build()
        except MeshsimError as exc:
            parts.append(f"<h3>{html.escape(ftitle)}</h3><p class=\"note\">not drawn: {html.escape(str(exc))}</p>")
            continue
        parts.append(f"<figure><h3>{html.escape(ftitle)}</h3>{_img(fig)}"
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    # per point: the headline metrics with intervals and the paired difference to the reference
    cols = [h for h in HEADLINES if h in sd.columns][:5] or sd.metrics[:5]
    stats = {h: cells(sd, h, axes) for h in cols}
    front: dict[tuple, dict] = {}
    if (DELAY in sd.columns and FALSE_ISO in sd.columns) or _search_tradeoff(sd):
        front = {tuple(_hashable(p["values"][a]) for a in axes): p for p in tradeoff_points(sd)
                 if p["pareto"] or p.get("recommended") or p.get("violates")}
    pv = point_values(full.rows, axes)
    refs = reference_points(pv, axes, ref)
    by_point: dict[str, dict[str, dict[int, float]]] = {}
    for r in full.ok_rows:
        for h in cols:
            x = _num(r.get(h))
            if x is not None:
                by_point.setdefault(r["point"], {}).setdefault(h, {})[r["seed"]] = x
    keys = sorted({tuple(_hashable(r[a]) for a in axes) for r in sd.rows}, key=lambda k: tuple(map(sort_key, k)))
    point_of = {tuple(_hashable(r[a]) for a in axes): r["point"] for r in sd.rows}
    rows = []
    for k in keys:
        pid = point_of[k]
        n = sum(1 for r in sd.ok_rows if r["point"] == pid)
        row = [html.escape(_fmt(v)) for v in k] + [str(n)]
        rp = refs.get(pid)
        for h in cols:
            c = stats[h].get(k)
            cell = html.escape(_ci(_in_range(c, h)) + (f" (n={c.n})" if c is not None and c.mean is not None
                                                        and c.n < n else ""))
            if rp is not None and rp != pid:
                d = paired(by_point.get(pid, {}).get(h, {}), by_point.get(rp, {}).get(h, {}))
                if d.n:
                    sig = d.n >= 2 and math.isfinite(d.lo) and (d.lo > 0 or d.hi < 0)
                    txt = f"Δ {_g(d.mean)}" + (f" [{_g(d.lo)}, {_g(d.hi)}]" if math.isfinite(d.lo) else "")
                    cell += "<br>" + (f"<b>{html.escape(txt)}</b>" if sig else f"<small>{html.escape(txt)}</small>")
            elif rp == pid:
                cell += "<br><small>reference</small>"
            row.append(cell)
        if front:
            p = front.get(k)
            mark = "" if p is None else (f"{p['rank']}" + ("" if p["distinct"] else " ≈") if p["pareto"] else "")
            if p is not None and p.get("recommended"):
                mark += " ★ recommended"
            if p is not None and p.get("violates"):
                mark += "violates " + ", ".join(p["violates"])
            row.append(html.escape(mark.strip()))
        rows.append([f'<span>{c}</span>' for c in row])
    head = [names[a] for a in axes] + ["seeds"] + cols + (["front"] if front else [])
    ref_txt = _reference_text(ref, axes, names, reference is None)
    parts.append('<h2>Points</h2><div style="overflow-x:auto">' + _table(head, rows, raw=True).replace(
                 "<td>", '<td class="c">') + "</div>"
                 + f'<p class="note">mean [95 % interval] over the finished seeds (Student t, clipped to the '
                 "metric's range: counts and delays to ≥ 0; rates and accuracies: Wilson, in [0, 1]; one seed: "
                 "no interval; n=k: only k seeds have a value, e.g. a delay where something was detected); Δ: "
                 "paired difference to the point's reference on the seeds both ran, with its 95 % "
                 f"interval, <b>red</b> when the interval excludes 0. {html.escape(ref_txt)} front: rank on the "
                 "trade-off's Pareto front (along its x axis: the false-isolation rate, or a search's second "
                 "objective), ★ the search's recommendation, or the constraints a point broke; ≈: not "
                 "distinguishable from the front point ranked just before it; seeds: the point's own finished "
                 "seeds. Every scalar metric per run is in results.csv, per point (with se, lo, hi, "
                 "diff…) in summary.csv.</p>")
    if m.get("skipped"):
        parts.append("<h2>Skipped points</h2>" + _table(
            ["point", "reason"], [[" ".join(f"{names.get(a, a)}={_fmt(v)}" for a, v in s["values"].items()),
                                   s["reason"]] for s in m["skipped"]]))
    if failed:
        parts.append("<h2>Failed runs</h2>" + _table(
            ["point", "seed", "error"], [[" ".join(f"{names[a]}={_fmt(r[a])}" for a in axes), str(r["seed"]),
                                          str(r["error"])] for r in failed]))
    parts.append('<p class="meta">written by meshsim from the sweep folder\'s run summaries.</p></body></html>\n')
    return "\n".join(parts)


def _search_section(sd: SweepData, info: dict[str, Any], names: Mapping[str, str]) -> str:
    """The search's question and its answer: objectives, constraints, the recommendation with its intervals,
    seeds and ``--set`` line (recommended.json), or why there is none."""
    objs = ", ".join(f"{d} <code>{html.escape(m)}</code>" for d, m in info["objectives"])
    cons = ", ".join(f"<code>{html.escape(c.text())}</code>" for c in info["constraints"]) or "none"
    out = [f"<h2>Search</h2><p>Objectives: {objs}; constraints: {cons} (<code>==</code> on every seed of a point, "
           f"<code>&lt;=</code> / <code>&gt;=</code> on its mean). {html.escape(seed_counts(sd))}.</p>"]
    rec = info["recommended"]
    if rec is None:
        return out[0] + '<p class="note">No recommendation: recommended.json is absent (the search has not '\
            "finished) or holds none (no point met the constraints).</p>"
    try:
        return out[0] + _recommendation_html(rec, names)
    except (TypeError, ValueError, AttributeError, KeyError):  # a hand-edited or damaged file: say so
        return out[0] + '<p class="note">recommended.json could not be read as meshsim writes it.</p>'


def _recommendation_html(rec: dict[str, Any], names: Mapping[str, str]) -> str:
    out: list[str] = []
    vals = " ".join(f"{names.get(p, p)}={_fmt(v)}" for p, v in (rec.get("values") or {}).items())
    rows = []
    for m, iv in (rec.get("objectives") or {}).items():
        ci = f" [{_g(iv.get('lo'))}, {_g(iv.get('hi'))}]" if iv.get("lo") is not None else ""
        rows.append([str(m), f"{_g(iv.get('mean'))}{ci}", str(iv.get("n"))])
    for c, v in (rec.get("constraints") or {}).items():
        rows.append([f"constraint {c}", f"mean {_g(v.get('mean'))}, worst seed {_g(v.get('worst_seed'))}",
                     str(v.get("seeds"))])
    clipped = rec.get("clipped") or {}
    note = ("Intervals of " + ", ".join(f"{m} to [{_g(b[0])}, {_g(b[1]) if b[1] is not None else '∞'}]"
                                        for m, b in clipped.items()) + " are clipped to the metric's range. "
            if clipped else "")
    e = {k: html.escape(str(rec.get(k))) for k in ("rank", "trial", "seeds")}
    out.append(f"<p><b>Recommended</b> (front point {e['rank']}, trial {e['trial']}, "
               f"{e['seeds']} seeds): {html.escape(vals)}</p><pre>{html.escape(str(rec.get('set', '')))}</pre>"
               + _table(["", "mean [95 % interval]", "seeds"], rows)
               + f'<p class="note">{html.escape(note)}Rule: {html.escape(str(rec.get("rule", "")))}.</p>')
    return "".join(out)


def _reference_text(ref: Mapping[str, Any], axes: Sequence[str], names: Mapping[str, str], default: bool) -> str:
    if not ref:
        return ("No reference point: the base scenario's value of no swept parameter is on the grid "
                "(name one with --reference PATH=VALUE).") if default else "No reference point."
    own = [names[a] for a in axes if a not in ref]
    txt = "Reference: " + ", ".join(f"{names[a]}={_fmt(v)}" for a, v in ref.items())
    txt += " (the scenario's own values)" if default else " (--reference)"
    if own:
        txt += f"; {', '.join(own)}: each point's own value"
    return txt + "."


def _seed_text(seeds: list[int]) -> str:
    if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(map(str, seeds))


def write_sweep_report(path: Path | str, out: Optional[Path | str] = None, where: Any = None,
                       facet: Optional[str] = None, reference: Any = None) -> Path:
    """Write ``SWEEP_DIR/report.html`` (figures embedded); returns its path."""
    from ...io.records import write_atomic

    text = build_sweep_report(path, where=where, facet=facet, reference=reference)
    p = Path(out) if out is not None else Path(path) / "report.html"
    write_atomic(p, text)
    stamp_figure(path, p, {"where": _plain(where), "facet": facet, "reference": _plain(reference)}, what="report")
    return p
