"""matplotlib plumbing shared by every figure: colours, sizes, new figures, saving.

matplotlib is imported inside the functions, so importing the figure modules
stays cheap and works without it; figures are ``matplotlib.figure.Figure``
objects (no pyplot state).
"""
from __future__ import annotations

from pathlib import Path

from ..core.errors import InputError


STATE_COLORS = {"normal": "#2b8a3e", "watched": "#f08c00", "isolated": "#d6336c"}


HEAT_COLORS = {"normal": "#e6f2e8", "watched": "#f59f00", "isolated": "#c92a2a"}


DEGRADED_COLOR = "#fcd5e3"


BAND_COLOR = "#a5d8ff"


CURVE_COLOR = "#212529"


DPI = 100


WIDTH = 10.0  # inches: every figure is 1000 px wide at DPI


MAX_PANELS = 8  # timeline panels before switching to the heatmap


HEAT_COLUMNS = 700  # heatmap columns at most (about the axes' width in pixels)


def require_matplotlib() -> None:
    """Raise a one-line :class:`InputError` (exit 2) when matplotlib is missing:
    the CLI calls it before any work, so a run with ``--plot`` fails at once."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError("figures need matplotlib, a core dependency of meshsim missing from this environment: "
                         "pip install 'matplotlib>=3.8'") from None


def _mpl():
    require_matplotlib()
    from matplotlib.figure import Figure

    return Figure


def _new_figure(height: float, width: float = WIDTH):
    Figure = _mpl()
    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def _axes(ax, height: float):
    if ax is None:
        fig = _new_figure(height)
        return fig.add_subplot(1, 1, 1)
    return ax


#: figure file formats :func:`save_figure` writes, by file suffix
FIGURE_FORMATS = ("png", "pdf", "svg")


def check_figure_path(path: Path | str) -> str:
    """The format named by ``path``'s suffix; a one-line error for any other suffix."""
    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in FIGURE_FORMATS:
        raise InputError(f"figure file must end in {', '.join('.' + f for f in FIGURE_FORMATS)}",
                         field="--out", value=str(path))
    return fmt


def save_figure(fig, path: Path | str) -> Path:
    """Write ``fig`` as PNG, PDF or SVG by the file's suffix (PNG: exactly
    ``figsize`` x DPI pixels). No dates or random ids are embedded, so the same
    figure gives the same bytes."""
    path = Path(path)
    fmt = check_figure_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(_png_bytes(fig) if fmt == "png" else _vector_bytes(fig, fmt))
    tmp.replace(path)
    return path


def _vector_bytes(fig, fmt: str) -> bytes:
    import io

    import matplotlib

    buf = io.BytesIO()
    meta = {"CreationDate": None, "Producer": None} if fmt == "pdf" else {"Date": None}
    # SVG element ids are random unless salted
    with matplotlib.rc_context({"svg.hashsalt": "meshsim", "svg.fonttype": "path"}):
        getattr(fig, "figure", fig).savefig(buf, format=fmt, dpi=DPI, metadata=meta)
    return buf.getvalue()


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
               "ood": "#fa5252", "persuasive": "#a61e4d",
               "equivocating": "#c2255c", "colluding": "#862e9c", "no ability": "#ced4da"}


_TOPO_COLORS = ["#1c7ed6", "#e8590c", "#2f9e44", "#ae3ec9", "#f08c00", "#0c8599", "#c2255c"]


def _short(text: str, k: int = 38) -> str:
    text = str(text).replace("_", " ")
    return text if len(text) <= k else text[:k - 1] + "…"
