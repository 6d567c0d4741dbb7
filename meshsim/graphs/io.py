"""Graphs from files: GraphML or an edge list with optional per-edge attributes.

Per-edge ``latency`` (seconds), ``loss`` (probability) and ``bandwidth``
(bytes/s), when present, override the scenario's link defaults.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx

from ..errors import TopologyError
from .registry import relabel

__all__ = ["from_file"]


def from_file(path: Path | str, fmt: str | None = None) -> nx.Graph:
    """Read GraphML (``.graphml``) or an edge list (``u v [latency=..] [loss=..]``).

    Edge-list lines: ``u v`` optionally followed by ``key=value`` pairs or a
    networkx-style ``{'latency': 0.02}`` dict; ``#`` starts a comment.
    """
    path = Path(path)
    if not path.exists():
        raise TopologyError("topology file not found", file=str(path))
    fmt = fmt or ("graphml" if path.suffix.lower() in (".graphml", ".xml") else "edgelist")
    try:
        if fmt == "graphml":
            G = nx.read_graphml(path)
            if G.is_directed():
                G = G.to_undirected()
            if G.is_multigraph():
                G = nx.Graph(G)
        elif fmt == "edgelist":
            G = _read_edgelist(path)
        else:
            raise TopologyError("unknown topology file format (graphml | edgelist)",
                                field="network.topology.format", value=fmt)
    except TopologyError:
        raise
    except Exception as exc:  # networkx / xml parser errors -> one line
        raise TopologyError(f"cannot read topology: {exc}", file=str(path)) from None
    for u, v, d in G.edges(data=True):
        for key in ("latency", "loss", "bandwidth"):
            if key in d:
                try:
                    d[key] = float(d[key])
                except (TypeError, ValueError):
                    raise TopologyError(f"edge {u}-{v}: '{key}' must be a number", file=str(path),
                                        value=d[key]) from None
        if "loss" in d and not 0 <= d["loss"] <= 1:
            raise TopologyError(f"edge {u}-{v}: loss must be in [0, 1]", file=str(path), value=d["loss"])
        if "latency" in d and d["latency"] < 0:
            raise TopologyError(f"edge {u}-{v}: latency must be >= 0", file=str(path), value=d["latency"])
    if G.number_of_nodes() == 0:
        raise TopologyError("topology file has no nodes", file=str(path))
    return relabel(G)


def _read_edgelist(path: Path) -> nx.Graph:
    G = nx.Graph()
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        tokens = line.split()
        if len(tokens) == 1:
            G.add_node(tokens[0])
            continue
        u, v, rest = tokens[0], tokens[1], tokens[2:]
        attrs: dict[str, Any] = {}
        if rest and rest[0].startswith("{"):
            import ast

            try:
                attrs = dict(ast.literal_eval(" ".join(rest)))
            except (ValueError, SyntaxError):
                raise TopologyError(f"line {lineno}: bad attribute dict", file=str(path),
                                    value=" ".join(rest)) from None
        else:
            for tok in rest:
                if "=" not in tok:
                    raise TopologyError(f"line {lineno}: expected key=value", file=str(path), value=tok)
                k, val = tok.split("=", 1)
                attrs[k] = val
        if u == v:
            raise TopologyError(f"line {lineno}: self-loop", file=str(path), value=u)
        G.add_edge(u, v, **attrs)
    return G
