"""``SWEEP_DIR/report.html``: every figure, the per-point table with intervals and paired
differences, the search's recommendation (meshsim/plots/templates/sweep-*.html)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from ..canvas import _png_bytes
from ..page import escape, join, Markup, table, TEMPLATES
from .data import (DELAY, FALSE_ISO, HEADLINES, SweepData, _check_rows, _ci, _fmt, _g, _hashable, _in_range, _num,
                   _objectives, cells, open_sweep, search_info, seed_counts)
from .stamps import _plain, stamp_figure
from .tradeoff import _search_tradeoff, tradeoff, tradeoff_points
from .views import heatmap, parallel, sensitivity


# ------------------------------------------------------------------------------------- report


def _img(fig) -> str:
    import base64

    return f'<img alt="figure" src="data:image/png;base64,{base64.b64encode(_png_bytes(fig)).decode()}">'


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
    from ...sweep.results import resolve_reference, sort_key
    from ...sweep.slices import point_values, reference_points
    from ...sweep.stats import paired
    from ..report import _CSS, figure_html

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
    parts: list[Markup] = []  # the page's body, one line each
    desc = (m.get("base") or {}).get("description")
    if desc:
        parts.append(TEMPLATES.render("paragraph.html", text=str(desc)))
    axes_txt = join((TEMPLATES.render("sweep-axis.html", axis=a, values=", ".join(_fmt(v) for v in sd.values(a)))
                     for a in axes), "; ")
    parts.append(TEMPLATES.render("sweep-meta.html", folder=str(sd.path), scenario=str(m["scenario"].get("source")),
                                  axes=axes_txt, seeds=_seed_text(sd.seeds()),
                                  points=len({r["point"] for r in sd.rows}), runs=len(sd.rows), ok=ok,
                                  failed=len(failed),
                                  missing=f", {len(missing)} not run yet" if missing else "",
                                  skipped=len(m.get("skipped", [])), output=m["output"]))
    if sd.fixed:
        fixed = ", ".join(f"{a}={_fmt(v)}" for a, v in sd.fixed.items())
        parts.append(TEMPLATES.render("note.html", note=f"Only the points at {fixed} (--where)."))
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
        parts.append(Markup("<h2>Figures</h2>"))
    parts += [figure_html(ftitle, caption, build, img=_img) for ftitle, caption, build in figs]
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
        row = [escape(_fmt(v)) for v in k] + [escape(n)]
        rp = refs.get(pid)
        for h in cols:
            c = stats[h].get(k)
            cell = escape(_ci(_in_range(c, h)) + (f" (n={c.n})" if c is not None and c.mean is not None
                                                   and c.n < n else ""))
            if rp is not None and rp != pid:
                d = paired(by_point.get(pid, {}).get(h, {}), by_point.get(rp, {}).get(h, {}))
                if d.n:
                    sig = d.n >= 2 and math.isfinite(d.lo) and (d.lo > 0 or d.hi < 0)
                    txt = f"Δ {_g(d.mean)}" + (f" [{_g(d.lo)}, {_g(d.hi)}]" if math.isfinite(d.lo) else "")
                    cell = Markup(cell + (f"<br><b>{escape(txt)}</b>" if sig else f"<br><small>{escape(txt)}</small>"))
            elif rp == pid:
                cell = Markup(cell + "<br><small>reference</small>")
            row.append(cell)
        if front:
            p = front.get(k)
            mark = "" if p is None else (f"{p['rank']}" + ("" if p["distinct"] else " ≈") if p["pareto"] else "")
            if p is not None and p.get("recommended"):
                mark += " ★ recommended"
            if p is not None and p.get("violates"):
                mark += "violates " + ", ".join(p["violates"])
            row.append(escape(mark.strip()))
        rows.append([Markup(f"<span>{c}</span>") for c in row])  # every c escaped above
    head = [names[a] for a in axes] + ["seeds"] + cols + (["front"] if front else [])
    ref_txt = _reference_text(ref, axes, names, reference is None)
    parts.append(TEMPLATES.render("sweep-points.html", table=table(head, rows, td='<td class="c">'),
                                  reference=ref_txt))
    if m.get("skipped"):
        parts.append(TEMPLATES.render("section-table.html", title="Skipped points", table=table(
            ["point", "reason"], [[" ".join(f"{names.get(a, a)}={_fmt(v)}" for a, v in s["values"].items()),
                                   s["reason"]] for s in m["skipped"]])))
    if failed:
        parts.append(TEMPLATES.render("section-table.html", title="Failed runs", table=table(
            ["point", "seed", "error"], [[" ".join(f"{names[a]}={_fmt(r[a])}" for a in axes), str(r["seed"]),
                                          str(r["error"])] for r in failed])))
    return TEMPLATES.render("sweep-report.html", title=title, css=_CSS, body=join(parts, "\n")) + "\n"


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
