"""``SWEEP_DIR/report.html``: every figure, the per-point table with intervals and paired
differences, the search's recommendation. The HTML is template files (meshsim/plots/templates/:
sweep-*.html, point-*.html, heading.html, png.html) rendered through :mod:`meshsim.plots.page`,
every value escaped; :func:`build_sweep_report` is its steps in page order."""
from __future__ import annotations

import math
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from ..canvas import _png_bytes
from ..page import escape, join, Markup, table, TEMPLATES
from .data import (DELAY, FALSE_ISO, HEADLINES, SweepData, _check_rows, _ci, _fmt, _g, _hashable, _in_range, _num,
                   _objectives, cells, open_sweep, search_info, seed_counts)
from .stamps import _plain, stamp_figure
from .tradeoff import _search_tradeoff, tradeoff, tradeoff_points
from .views import heatmap, parallel, sensitivity


# ------------------------------------------------------------------------------------- report


def _img(fig) -> Markup:
    import base64

    return TEMPLATES.render("png.html", png=base64.b64encode(_png_bytes(fig)).decode())


def _ms(st: Optional[dict[str, Any]]) -> str:
    if not st or st["mean"] is None:
        return "–"
    if st["n"] <= 1:
        return f"{st['mean']:.3g}"
    return f"{st['mean']:.3g} ± {st['sd']:.2g}"


def _effect(sd: SweepData, metric: str, axis: str) -> float:
    cs = [c.mean for c in cells(sd, metric, (axis,)).values() if c.mean is not None]
    return (max(cs) - min(cs)) if len(cs) > 1 else 0.0


Figure = tuple[str, str, Callable[[], Any]]  # title, caption, builder


def build_sweep_report(path: Path | str, where: Any = None, facet: Optional[str] = None,
                       reference: Any = None) -> str:
    """The report's HTML: trade-off, parallel coordinates, every parameter's
    effect, heat maps of the two parameters that move each headline metric
    most, and the per-point table (95 % intervals, paired differences to the
    reference point, Pareto front). ``where`` fixes parameters for all of it;
    ``facet`` splits the trade-off, heat maps and sensitivity curves."""
    from ...sweep.results import resolve_reference
    from ..report import _CSS, figure_html

    full = open_sweep(path)
    sd = full.where(where)
    _check_rows(sd)
    names = sd.names()
    fac = sd.column(facet, "--facet", sd.axes) if facet else None
    ref = resolve_reference(sd.manifest, full.rows, reference)
    title = f"{sd.name}: sweep" + (f" at {', '.join(f'{names[k]}={_fmt(v)}' for k, v in sd.fixed.items())}"
                                   if sd.fixed else "")
    parts = _head(sd)  # the page's body, one line each
    info = search_info(sd)
    if info is not None:
        parts.append(_search_section(sd, info, names))
    figs = _figures(sd, fac)
    if figs:
        parts.append(TEMPLATES.render("heading.html", title="Figures"))
    parts += [figure_html(ftitle, caption, build, img=_img) for ftitle, caption, build in figs]
    parts.append(_points_section(full, sd, ref, reference is None))
    parts += _skipped_and_failed(sd)
    return TEMPLATES.render("sweep-report.html", title=title, css=_CSS, body=join(parts, "\n")) + "\n"


def _failed(sd: SweepData) -> list[dict[str, Any]]:
    return [r for r in sd.rows if r["status"] == "failed"]


def _head(sd: SweepData) -> list[Markup]:
    """The sweep's description, what it ran (sweep-meta.html) and the --where slice."""
    m = sd.manifest
    parts: list[Markup] = []
    desc = (m.get("base") or {}).get("description")
    if desc:
        parts.append(TEMPLATES.render("paragraph.html", text=str(desc)))
    axes_txt = join((TEMPLATES.render("sweep-axis.html", axis=a, values=", ".join(_fmt(v) for v in sd.values(a)))
                     for a in sd.axes), "; ")
    missing = [r for r in sd.rows if r["status"] == "missing"]
    parts.append(TEMPLATES.render("sweep-meta.html", folder=str(sd.path), scenario=str(m["scenario"].get("source")),
                                  axes=axes_txt, seeds=_seed_text(sd.seeds()),
                                  points=len({r["point"] for r in sd.rows}), runs=len(sd.rows),
                                  ok=len(sd.ok_rows), failed=len(_failed(sd)),
                                  missing=f", {len(missing)} not run yet" if missing else "",
                                  skipped=len(m.get("skipped", [])), output=m["output"]))
    if sd.fixed:
        fixed = ", ".join(f"{a}={_fmt(v)}" for a, v in sd.fixed.items())
        parts.append(TEMPLATES.render("note.html", note=f"Only the points at {fixed} (--where)."))
    return parts


def _shown(sd: SweepData) -> list[str]:
    """The metrics the sensitivity curves and heat maps show: the detector's two, else two headlines."""
    return [h for h in (DELAY, FALSE_ISO) if h in sd.columns] or \
        [h for h in HEADLINES if h in sd.columns][:2] or sd.metrics[:2]


def _figures(sd: SweepData, fac: Optional[str]) -> list[Figure]:
    """Every figure that applies, in the report's order."""
    return _tradeoff_figures(sd, fac) + _parallel_figures(sd) + _sensitivity_figures(sd, fac) \
        + _heatmap_figures(sd, fac)


def _tradeoff_figures(sd: SweepData, fac: Optional[str]) -> list[Figure]:
    if _search_tradeoff(sd):
        fx, fy, fc = _objectives(sd, None)
        return [(f"Trade-off of the search: {fy} against {fx}",
                 "One marker per point (mean over its own seeds, bars: 95 % interval over them); the axes "
                 "are the search's objectives" + (f", colour its third ({fc})" if fc else "") + "; ringed and "
                 "numbered: Pareto-optimal among the points that meet the constraints (listed in the box with "
                 "n, each point's seeds); hollow red squares: points that broke a constraint (== on any "
                 "seed, <= / >= on the mean), never on the front; gold star: the recommendation "
                 "(recommended.json). ≈ marks a front point the seeds do not tell apart from the one above "
                 "it (paired differences on shared seeds).", lambda: tradeoff(sd, facet=fac))]
    if DELAY in sd.columns and FALSE_ISO in sd.columns:
        return [("Trade-off: detection delay against false isolations",
                 "One marker per point (mean over seeds, bars: 95 % interval over seeds); colour: "
                 "missed-detection rate; ringed and numbered: Pareto-optimal points (no other point is at least "
                 "as good on delay, false-isolation rate and missed rate, and better on one), listed in the box "
                 "with their parameters and intervals; ≈ marks a front point the seeds do not tell apart from "
                 "the one above it (paired differences on shared seeds). Read it from the lower left: fast "
                 "detection without isolating healthy agents.", lambda: tradeoff(sd, facet=fac))]
    return []


def _parallel_figures(sd: SweepData) -> list[Figure]:
    if not sd.varying():
        return []
    return [("Parallel coordinates: every parameter and the headline metrics",
             "One line per point through its parameter values (left) and its metrics' means over seeds "
             "(shaded, each axis from its minimum to its maximum over the points); colour: the first "
             "metric. Follow the dark (low) lines to see which parameter values they share.",
             lambda: parallel(sd))]


def _sensitivity_figures(sd: SweepData, fac: Optional[str]) -> list[Figure]:
    names, vary = sd.names(), sd.varying()
    figs: list[Figure] = []
    for h in _shown(sd):
        if len([a for a in vary if a != fac]) > 1 and fac is None:
            figs.append((f"Every parameter's effect on {h}",
                         "One panel per swept parameter: bold, the mean over seeds and over every other parameter "
                         "(band: 95 % interval over seeds); thin, one line per combination of the other parameters, "
                         "so an effect that the average hides (one setting of another parameter) stays visible.",
                         partial(sensitivity, sd, None, h)))
        else:
            for a in [a for a in vary if a != fac] or sd.axes[:1]:
                figs.append((f"Sensitivity of {h} to {names[a]}", "Mean over seeds with its 95 % interval band.",
                             partial(sensitivity, sd, a, h, facet=fac)))
    return figs


def _heatmap_figures(sd: SweepData, fac: Optional[str]) -> list[Figure]:
    """Per shown metric, the two parameters that move it most (the others faceted or averaged)."""
    names = sd.names()
    hv = [a for a in sd.varying() if a != fac]
    if len(hv) < 2:
        return []
    figs: list[Figure] = []
    for h in _shown(sd):
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
        figs.append((f"Heat map: {h}", cap, partial(heatmap, sd, x, y, h, facet=f)))
    return figs


def _points_section(full: SweepData, sd: SweepData, ref: Mapping[str, Any], default_ref: bool) -> Markup:
    """Per point: the headline metrics with intervals, the paired difference to the reference point
    on shared seeds, and the point's place on the front (sweep-points.html)."""
    from ...sweep.results import sort_key
    from ...sweep.slices import point_values, reference_points

    axes, names = sd.axes, sd.names()
    cols = [h for h in HEADLINES if h in sd.columns][:5] or sd.metrics[:5]
    stats = {h: cells(sd, h, axes) for h in cols}
    front: dict[tuple, dict] = {}
    if (DELAY in sd.columns and FALSE_ISO in sd.columns) or _search_tradeoff(sd):
        front = {tuple(_hashable(p["values"][a]) for a in axes): p for p in tradeoff_points(sd)
                 if p["pareto"] or p.get("recommended") or p.get("violates")}
    refs = reference_points(point_values(full.rows, axes), axes, ref)
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
        row = [escape(_fmt(v)) for v in k] + [escape(n)]
        rp = refs.get(pid)
        for h in cols:
            row.append(_point_cell(stats[h].get(k), h, n, pid, rp, by_point))
        if front:
            row.append(escape(_front_mark(front.get(k))))
        rows.append([TEMPLATES.render("point-cell.html", cell=c) for c in row])
    head = [names[a] for a in axes] + ["seeds"] + cols + (["front"] if front else [])
    return TEMPLATES.render("sweep-points.html", table=table(head, rows, td='<td class="c">'),
                            reference=_reference_text(ref, axes, names, default_ref))


def _point_cell(c: Any, h: str, n: int, pid: str, rp: Optional[str],
                by_point: Mapping[str, Mapping[str, Mapping[int, float]]]) -> Markup:
    """One metric at one point: its interval (n= when fewer seeds have it than the point ran), below it the
    paired difference to the reference point (bold when its interval excludes 0) or "reference"."""
    from ...sweep.stats import paired

    cell = escape(_ci(_in_range(c, h)) + (f" (n={c.n})" if c is not None and c.mean is not None and c.n < n else ""))
    if rp == pid:
        return TEMPLATES.render("point-note.html", cell=cell, note="reference")
    if rp is None:
        return cell
    d = paired(by_point.get(pid, {}).get(h, {}), by_point.get(rp, {}).get(h, {}))
    if not d.n:
        return cell
    sig = d.n >= 2 and math.isfinite(d.lo) and (d.lo > 0 or d.hi < 0)
    txt = f"Δ {_g(d.mean)}" + (f" [{_g(d.lo)}, {_g(d.hi)}]" if math.isfinite(d.lo) else "")
    return TEMPLATES.render("point-diff.html" if sig else "point-note.html", cell=cell,
                            **({"diff": txt} if sig else {"note": txt}))


def _front_mark(p: Optional[dict[str, Any]]) -> str:
    """A point's place on the front: its rank (≈: not told apart from the one above), ★, broken constraints."""
    if p is None:
        return ""
    mark = (f"{p['rank']}" + ("" if p["distinct"] else " ≈")) if p["pareto"] else ""
    if p.get("recommended"):
        mark += " ★ recommended"
    if p.get("violates"):
        mark += "violates " + ", ".join(p["violates"])
    return mark.strip()


def _skipped_and_failed(sd: SweepData) -> list[Markup]:
    """The grid's skipped (invalid) points and the failed runs, each a table when there are any."""
    names, axes, m = sd.names(), sd.axes, sd.manifest
    parts = []
    if m.get("skipped"):
        parts.append(TEMPLATES.render("section-table.html", title="Skipped points", table=table(
            ["point", "reason"], [[" ".join(f"{names.get(a, a)}={_fmt(v)}" for a, v in s["values"].items()),
                                   s["reason"]] for s in m["skipped"]])))
    failed = _failed(sd)
    if failed:
        parts.append(TEMPLATES.render("section-table.html", title="Failed runs", table=table(
            ["point", "seed", "error"], [[" ".join(f"{names[a]}={_fmt(r[a])}" for a in axes), str(r["seed"]),
                                          str(r["error"])] for r in failed])))
    return parts


def _search_section(sd: SweepData, info: dict[str, Any], names: Mapping[str, str]) -> Markup:
    """The search's question and its answer: objectives, constraints, the recommendation with its intervals,
    seeds and ``--set`` line (recommended.json), or why there is none."""
    objs = join((TEMPLATES.render("search-objective.html", direction=d, metric=m) for d, m in info["objectives"]),
                ", ")
    cons = join((TEMPLATES.render("code.html", text=c.text()) for c in info["constraints"]), ", ") or "none"
    rec = info["recommended"]
    if rec is None:
        answer = TEMPLATES.render("note.html", note="No recommendation: recommended.json is absent (the search has "
                                  "not finished) or holds none (no point met the constraints).")
    else:
        try:
            answer = _recommendation_html(rec, names)
        except (TypeError, ValueError, AttributeError, KeyError):  # a hand-edited or damaged file: say so
            answer = TEMPLATES.render("note.html", note="recommended.json could not be read as meshsim writes it.")
    return TEMPLATES.render("search.html", objectives=objs, constraints=cons, seeds=seed_counts(sd), answer=answer)


def _recommendation_html(rec: dict[str, Any], names: Mapping[str, str]) -> Markup:
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
    return TEMPLATES.render("recommendation.html", rank=rec.get("rank"), trial=rec.get("trial"), seeds=rec.get("seeds"),
                            values=vals, set=str(rec.get("set", "")),
                            table=table(["", "mean [95 % interval]", "seeds"], rows), clipped=note,
                            rule=str(rec.get("rule", "")))


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
