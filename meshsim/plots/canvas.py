"""matplotlib plumbing shared by every figure: colours, sizes, new figures, saving.

matplotlib is imported inside the functions, so importing the figure modules
stays cheap and works without it; figures are ``matplotlib.figure.Figure``
objects (no pyplot state).
"""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError


STATE_COLORS = {"normal": "#2b8a3e", "watched": "#f08c00", "isolated": "#d6336c"}


HEAT_COLORS = {"normal": "#e6f2e8", "watched": "#f59f00", "isolated": "#c92a2a"}


DEGRADED_COLOR = "#fcd5e3"


BAND_COLOR = "#a5d8ff"


CURVE_COLOR = "#212529"


DPI = 100


WIDTH = 10.0  # inches: every figure is 1000 px wide at DPI


MAX_PANELS = 8  # timeline panels before switching to the heatmap


HEAT_COLUMNS = 700  # heatmap columns at most (about the axes' width in pixels)


def _mpl():
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover
        raise InputError("plots need matplotlib: pip install 'meshsim[plot]'") from None
    return Figure


def _new_figure(height: float, width: float = WIDTH):
    Figure = _mpl()
    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def _axes(ax, height: float):
    if ax is None:
        fig = _new_figure(height)
        return fig.add_subplot(1, 1, 1)
    return ax


def save_figure(fig, path: Path | str) -> Path:
    """Write ``fig`` as a PNG of exactly its size (``figsize`` x DPI pixels)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(_png_bytes(fig))
    tmp.replace(path)
    return path


def _png_bytes(fig) -> bytes:
    """PNG bytes of ``fig``; reduced to a 192-colour palette when Pillow is
    there (a quarter of the size, no visible change for these flat figures)."""
    import io

    buf = io.BytesIO()
    getattr(fig, "figure", fig).savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover
        return buf.getvalue()
    buf.seek(0)
    with Image.open(buf) as im:
        pal = im.convert("RGB").quantize(colors=192, method=Image.Quantize.FASTOCTREE)
    out = io.BytesIO()
    pal.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _rect(xy, w, h, color, fill=True, **kw):
    from matplotlib.patches import Rectangle

    if fill:
        return Rectangle(xy, w, h, facecolor=color, edgecolor="none", **kw)
    return Rectangle(xy, w, h, facecolor="none", edgecolor=color, **kw)


ROLE_COLORS = {"strong": "#1c7ed6", "weak": "#f08c00", "faulty": "#f08c00", "adversarial": "#e03131",
               "equivocating": "#c2255c", "colluding": "#862e9c", "no ability": "#ced4da"}


_TOPO_COLORS = ["#1c7ed6", "#e8590c", "#2f9e44", "#ae3ec9", "#f08c00", "#0c8599", "#c2255c"]


def _short(text: str, k: int = 38) -> str:
    text = str(text).replace("_", " ")
    return text if len(text) <= k else text[:k - 1] + "…"
