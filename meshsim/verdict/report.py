"""The console table and ``verdict.md`` of a verdict, both from
``verdict.json``'s content (docs/verdict.md)."""
from __future__ import annotations

from typing import Any, Optional

from .measures import EVENTS, MEASURES

__all__ = ["console_lines", "markdown", "constraint_table"]


def _g(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e6):
        return str(int(v))
    return f"{v:.3g}"


def _values(values: dict[str, Any]) -> str:
    """The candidate's values as given (never rounded: they are what to --set)."""
    return " ".join(f"{p.split('.')[-1]}={v}" for p, v in values.items())


def _iv(st: dict[str, Any]) -> str:
    if st.get("lo") is None or st.get("hi") is None:
        return "no interval" if st.get("interval") == "student-t" else "-"
    return f"[{_g(st['lo'])}, {_g(st['hi'])}]"


def _est(st: dict[str, Any]) -> str:
    e = _g(st.get("estimate"))
    if "count" in st:
        e += f" ({st['count']}/{st['of']})"
    elif st.get("n") is not None:
        e += f" (n={st['n']})"
    return e


def _band(st: dict[str, Any]) -> str:
    b = st.get("band")
    return "-" if not b else f"{_g(b['p5'])}-{_g(b['p95'])}"


def _rows(cell: dict[str, Any]) -> list[list[str]]:
    """One row per measure and event: name, estimate, 95 % interval, worst seed, band."""
    rows = []
    for name, m in MEASURES.items():
        st = cell["measures"][name]
        w = f"{st['worst_seed']} ({_g(st['worst'])})" if st.get("worst_seed") is not None and st.get("worst") else "-"
        rows.append([m.label + (f" [{m.unit}]" if m.unit else ""), _est(st), _iv(st), w, _band(st)])
    for name, (_path, label) in EVENTS.items():
        st = cell["events"][name]
        seeds = st.get("seeds") or []
        w = ",".join(map(str, seeds[:4])) + ("..." if len(seeds) > 4 else "") if seeds else "-"
        rows.append([f"P({name}): {label}", _est(st), _iv(st) + f" upper {_g(st.get('hi'))}", w, _band(st)])
    return rows


def _head(cell: dict[str, Any], verdict: dict[str, Any]) -> str:
    cand = next(c for c in verdict["candidates"] if c["name"] == cell["candidate"])
    vals = _values(cand["values"])
    return (f"{cell['candidate']}{f' ({vals})' if vals else ''} at {cell['scenario']}, {cell['agents']} agents: "
            f"{cell['runs']} held-out runs" + (f", {len(cell['failed_seeds'])} failed" if cell["failed_seeds"] else ""))


def _worst_text(w: Optional[dict[str, Any]]) -> str:
    if not w:
        return "no finished run"
    parts = ["collapse" if w["collapse"] else "no collapse",
             f"{_g(w['false_isolations'])} false isolation{'s' if w['false_isolations'] != 1 else ''}"
             + (f" ({', '.join(w['falsely_isolated'])})" if w["falsely_isolated"] else ""),
             f"{_g(w['missed'])} missed", f"delay {_g(w['delay_outputs'])} own outputs"]
    return f"worst seed {w['seed']}: " + ", ".join(parts)


def _table(header: list[str], rows: list[list[str]], md: bool) -> list[str]:
    if md:
        out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
        return out + ["| " + " | ".join(r) + " |" for r in rows]
    w = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    return ["  " + "  ".join(str(x).ljust(n) for x, n in zip(r, w)).rstrip() for r in [header] + rows]


def _short(j: dict[str, Any]) -> str:
    """A table cell: the result and what decided it."""
    on = j["judged_on"]
    if j.get("every_run"):
        held = j["why"].split(" runs hold")[0]  # "9 of 10"
        return f"{j['result']} ({held.replace(' of ', '/')} runs)"
    what = "bound" if "bound" in on else "est" if "estimate" in on else on.split()[1]
    return f"{j['result']} ({what} {_g(j.get('value'))})"


def constraint_table(verdict: dict[str, Any], md: bool = False) -> list[str]:
    """candidate x size x constraint: PASS / FAIL with the number judged."""
    header = ["candidate", "size"] + [c["constraint"] for c in verdict["constraints"]] + ["verdict"]
    rows = [[c["candidate"], f"{c['scenario']} ({c['agents']})"] + [_short(j) for j in c["constraints"]]
            + [c["result"]] for c in verdict["cells"]]
    return _table(header, rows, md)


def _plan_line(verdict: dict[str, Any]) -> str:
    from .common import seeds_text

    s = verdict["seeds"]
    a = verdict["assumptions"]
    text = f"held-out seeds {seeds_text(s['held_out'])}"
    if s.get("search"):
        text += f" (disjoint from the search's {seeds_text(s['search'])})"
    if s.get("tuned_on"):
        text += f" (disjoint from --tuned-on {seeds_text(s['tuned_on'])})"
    if a.get("samples"):
        text += (f"; band: {a['samples']} assumption samples ({a['source']}: {len(a['factors'])} factor"
                 f"{'s' if len(a['factors']) != 1 else ''}) x seeds {seeds_text(s['band'])}")
    else:
        text += "; no assumption band (--samples 0)"
    return text


def console_lines(verdict: dict[str, Any]) -> list[str]:
    lines = [_plan_line(verdict)]
    header = ["measure", "estimate", "95 % interval", "worst seed", "band 5-95 %"]
    for cell in verdict["cells"]:
        lines += ["", _head(cell, verdict)]
        lines += _table(header, _rows(cell), False)
        lines.append("  " + _worst_text(cell["worst_seed"]))
    lines += ["", "constraints (" + ("default; " if verdict["rules"]["constraints_default"] else "")
              + "judged on the held-out runs at the profile's values):"]
    lines += constraint_table(verdict)
    for cell in verdict["cells"]:
        for j in cell["constraints"]:
            if j["result"] == "FAIL":
                seeds = j.get("seeds") or []
                lines.append(f"  {cell['candidate']} / {cell['scenario']}: {j['constraint']} FAIL (judged on {j['judged_on']}): "
                             f"{j['why']}" + (f"; seeds {', '.join(map(str, seeds[:8]))}"
                                               + ("..." if len(seeds) > 8 else "") if seeds else ""))
    lines.append(f"verdict: {verdict['result']}")
    return lines


def markdown(verdict: dict[str, Any]) -> str:
    """``verdict.md``: the report section (paste-able into docs)."""
    out = ["# Verdict", "", _plan_line(verdict) + ".", ""]
    out += ["## Constraints", ""] + constraint_table(verdict, md=True) + [""]
    for c in verdict["constraints"]:
        out.append(f"- `{c['constraint']}`: judged on {c['judged_on']}")
    out.append("")
    for cell in verdict["cells"]:
        out += [f"## {_head(cell, verdict)}", ""]
        out += _table(["measure", "estimate", "95 % interval", "worst seed", "band 5-95 %"], _rows(cell), True)
        out += ["", _worst_text(cell["worst_seed"]) + ".", ""]
        for j in cell["constraints"]:
            seeds = j.get("seeds") or []
            band = j.get("band_holds")
            out.append(f"- `{j['constraint']}`: **{j['result']}** (judged on {j['judged_on']}: {_g(j.get('value'))}; {j['why']}"
                       + (f"; seeds {', '.join(map(str, seeds[:8]))}" if seeds else "")
                       + (f"; holds at {band['holds']} of {band['samples']} assumption samples" if band else "")
                       + ")")
        out.append("")
    r = verdict["rules"]
    out += ["## Rules", "", f"- Collapse: {r['collapse']}.", f"- Intervals: {r['intervals']}.",
            f"- Band: {r['band']}.", "", f"Verdict: **{verdict['result']}**", ""]
    return "\n".join(out)
