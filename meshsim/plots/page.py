"""The reports' HTML from template files (the standard library's :class:`string.Template`).

A package's ``templates/`` folder holds its pages and fragments (``$name`` slots, shipped as
package data). :meth:`Templates.render` escapes every value (:func:`html.escape`) except
:class:`Markup`: a fragment rendered here or built from escaped parts, so a scenario, agent or
folder name holding ``</script>`` stays text. A template file's last newline is not part of it.
"""
from __future__ import annotations

import html
from functools import lru_cache
from importlib.resources import files
from string import Template
from typing import Any, Iterable

__all__ = ["Markup", "escape", "join", "Templates", "TEMPLATES", "table"]


class Markup(str):
    """HTML that is safe as it is: rendered from a template, or built from escaped parts."""


def escape(value: Any) -> Markup:
    """``value`` as HTML text; :class:`Markup` stays as it is."""
    return value if isinstance(value, Markup) else Markup(html.escape(str(value)))


def join(parts: Iterable[Any], sep: str = "") -> Markup:
    """The parts, each escaped unless :class:`Markup`, joined by ``sep`` (markup)."""
    return Markup(sep.join(escape(p) for p in parts))


@lru_cache(maxsize=None)
def _load(package: str, name: str) -> Template:
    text = files(package).joinpath("templates", name).read_text(encoding="utf-8")
    return Template(text[:-1] if text.endswith("\n") else text)


class Templates:
    """The templates of one package (its ``templates/`` folder)."""

    def __init__(self, package: str) -> None:
        self.package = package

    def render(self, name: str, /, **values: Any) -> Markup:
        """Template ``name`` with every ``$slot`` filled, each value escaped unless :class:`Markup`
        (a missing slot is a KeyError: a bug, not input)."""
        return Markup(_load(self.package, name).substitute({k: escape(v) for k, v in values.items()}))

    def text(self, name: str) -> str:
        """A file of the folder as it is (a stylesheet)."""
        return files(self.package).joinpath("templates", name).read_text(encoding="utf-8")


TEMPLATES = Templates(__package__ or "meshsim.plots")


def table(head: Iterable[Any], rows: Iterable[Iterable[Any]], td: str = "<td>") -> Markup:
    """A ``<table>`` with a header row; every cell escaped unless :class:`Markup`; ``td`` opens each
    data cell (``'<td class="c">'``)."""
    return TEMPLATES.render("table.html", head=join(Markup(f"<th>{escape(c)}</th>") for c in head),
                            body=join(Markup("<tr>" + "".join(f"{td}{escape(c)}</td>" for c in r) + "</tr>")
                                      for r in rows))
