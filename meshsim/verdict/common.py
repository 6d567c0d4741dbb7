"""Names shared by the verdict's modules: its files and how seeds are written."""
from __future__ import annotations

__all__ = ["FORMAT", "VERDICT", "REPORT", "PLAN", "seeds_text"]

FORMAT = "meshsim-verdict/1"
VERDICT, REPORT, PLAN = "verdict.json", "verdict.md", "verdict.plan.json"


def seeds_text(seeds: list[int]) -> str:
    """``70001-70010`` for consecutive seeds, else a comma list (long lists cut)."""
    if not seeds:
        return "none"
    runs, start, prev = [], seeds[0], seeds[0]
    for s in list(seeds[1:]) + [None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        runs.append(f"{start}-{prev}" if prev > start else str(start))
        if s is not None:
            start = prev = s
    text = ",".join(runs)
    return text if len(text) <= 120 else text[:117] + "..."
