"""The files of an uncertainty folder and how to read them back (typed), shared by
:mod:`.core` (which writes them) and :mod:`.report` (which draws from them)."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from ..core.errors import RunFolderError

__all__ = ["FORMAT", "STATE", "RANKING", "BANDS", "SAMPLES", "TORNADO", "read_state", "read_csv"]

FORMAT = "meshsim-uncertainty/1"
STATE, RANKING, BANDS, SAMPLES, TORNADO = "uncertainty.json", "ranking.csv", "bands.csv", "samples.csv", "tornado.png"


def read_state(folder: Path | str) -> dict[str, Any]:
    f = Path(folder) / STATE
    if not f.is_file():
        raise RunFolderError("not an uncertainty folder (no uncertainty.json); make one with meshsim uncertainty",
                             file=str(folder))
    try:
        st = json.loads(f.read_text())
    except ValueError:
        raise RunFolderError("not valid JSON", file=str(f)) from None
    if not isinstance(st, dict) or st.get("format") != FORMAT:
        raise RunFolderError(f"not a {FORMAT} file", file=str(f))
    return st


def read_csv(path: Path) -> list[dict[str, Any]]:
    """A table written here, numbers typed back."""
    if not path.is_file():
        raise RunFolderError("missing: the study has not finished (rerun meshsim uncertainty to finish it)",
                             file=str(path))
    rows = []
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            rows.append({k: _parse(v) for k, v in r.items()})
    return rows


def _parse(v: str) -> Any:
    if v == "":
        return None
    if v in ("True", "False"):
        return v == "True"
    try:
        return int(v)
    except ValueError:
        pass
    try:
        return float(v)
    except ValueError:
        return v
