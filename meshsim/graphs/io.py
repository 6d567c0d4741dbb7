"""Graphs from files: GraphML or an edge list with optional per-edge attributes.

Per-edge ``latency`` (seconds), ``loss`` (probability) and ``bandwidth``
(bytes/s), when present, override the scenario's link defaults.
"""
from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import networkx as nx

from ..core.errors import InputError, TopologyError
from ..core.files import read_bytes
from .registry import relabel

#: the longest link latency in a file, in seconds (as scenario latencies: meshsim.scenario.fields.MAX_LATENCY)
MAX_LATENCY = 1e9

__all__ = ["from_file"]


def _too_many(what: str, n: int, limit: int, path: Path) -> TopologyError:
    return TopologyError(f"topology file has more than {limit} {what}, above limits.{what}; raise it (limits: "
                         f"{{{what}: N}} in the scenario, or --set limits.{what}=N) if you mean it",
                         file=str(path), field="network.topology.path")


def from_file(path: Path | str, fmt: str | None = None, max_agents: int | None = None,
              max_links: int | None = None) -> nx.Graph:
    """Read GraphML (``.graphml``) or an edge list (``u v [latency=..] [loss=..]``).

    Edge-list lines: ``u v`` optionally followed by ``key=value`` pairs or a
    networkx-style ``{'latency': 0.02}`` dict; ``#`` starts a comment.

    The file must be a regular file within the topology size cap
    (:mod:`meshsim.core.files`). A self-loop, and two edges between the same agents
    that disagree on an attribute (GraphML parallel edges, or both directions
    of a directed GraphML), are errors naming the file: collapsing them would
    silently keep one of the two.

    ``max_agents`` / ``max_links`` (the scenario's limits) are checked while the
    file is read, before a graph of that size is built (issue 19).
    """
    path = Path(path)
    fmt = fmt or ("graphml" if path.suffix.lower() in (".graphml", ".xml") else "edgelist")
    if fmt not in ("graphml", "edgelist"):
        raise TopologyError("unknown topology file format (graphml | edgelist)",
                            field="network.topology.format", value=fmt)
    try:
        data = read_bytes(path, "topology")
    except InputError as exc:
        raise TopologyError(exc.message, file=exc.file) from None
    try:
        if fmt == "graphml":
            # an upper bound from the markup itself, before the parser builds anything
            if max_links is not None and data.count(b"<edge") > max_links:
                raise _too_many("links", data.count(b"<edge"), max_links, path)
            if max_agents is not None and data.count(b"<node") > max_agents:
                raise _too_many("agents", data.count(b"<node"), max_agents, path)
            G = _graphml(io.BytesIO(data), str(path))
        else:
            G = _read_edgelist(data, path, max_agents, max_links)
    except TopologyError:
        raise
    except Exception as exc:  # networkx / xml parser errors -> one line
        raise TopologyError(f"cannot read topology: {exc or type(exc).__name__}", file=str(path)) from None
    for u, v, d in G.edges(data=True):
        if u == v:
            raise TopologyError("self-loop: an agent linked to itself", file=str(path), value=u)
        for key in ("latency", "loss", "bandwidth"):
            if key in d:
                try:
                    d[key] = float(d[key])
                except (TypeError, ValueError, OverflowError):
                    raise TopologyError(f"edge {u}-{v}: '{key}' must be a number", file=str(path),
                                        value=d[key]) from None
                if not math.isfinite(d[key]):
                    raise TopologyError(f"edge {u}-{v}: '{key}' must be a finite number", file=str(path),
                                        value=d[key])
        if "loss" in d and not 0 <= d["loss"] <= 1:
            raise TopologyError(f"edge {u}-{v}: loss must be in [0, 1]", file=str(path), value=d["loss"])
        if "latency" in d and d["latency"] < 0:
            raise TopologyError(f"edge {u}-{v}: latency must be >= 0", file=str(path), value=d["latency"])
        if "latency" in d and d["latency"] > MAX_LATENCY:
            raise TopologyError(f"edge {u}-{v}: latency must be <= {MAX_LATENCY:g} seconds", file=str(path),
                                value=d["latency"])
        if "bandwidth" in d and not 1.0 <= d["bandwidth"] <= 1e15:  # as network.links.bandwidth (issue 19)
            raise TopologyError(f"edge {u}-{v}: bandwidth must be within 1 .. 1e15 bytes/s", file=str(path),
                                value=d["bandwidth"])
    if G.number_of_nodes() == 0:
        raise TopologyError("topology file has no nodes", file=str(path))
    return relabel(G)


def _graphml(fh: Any, where: str) -> nx.Graph:
    G = nx.read_graphml(fh)
    seen: dict[frozenset, tuple[Any, Any, dict]] = {}
    for u, v, d in G.edges(data=True):
        key = frozenset((u, v))
        if u == v:
            raise TopologyError("self-loop: an agent linked to itself", file=where, value=u)
        first = seen.get(key)
        if first is None:
            seen[key] = (u, v, d)
        elif first[2] != d:
            what = "both directions of a directed edge" if G.is_directed() and (u, v) != first[:2] else \
                "parallel edges"
            raise TopologyError(f"{what} between {u} and {v} with different attributes ({first[2]} vs {d}); "
                                "keep one edge per pair of agents", file=where)
    H = nx.Graph()
    H.add_nodes_from(G.nodes(data=True))
    H.add_edges_from(seen.values())
    return H


def _read_edgelist(data: bytes, path: Path, max_agents: int | None = None,
                   max_links: int | None = None) -> nx.Graph:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TopologyError(f"not a UTF-8 text file (byte {exc.start})", file=str(path)) from None
    G = nx.Graph()
    for lineno, raw in enumerate(text.splitlines(), 1):
        if lineno % 4096 == 0:
            if max_links is not None and G.number_of_edges() > max_links:
                raise _too_many("links", G.number_of_edges(), max_links, path)
            if max_agents is not None and G.number_of_nodes() > max_agents:
                raise _too_many("agents", G.number_of_nodes(), max_agents, path)
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
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
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
        if G.has_edge(u, v):
            if G.edges[u, v] != attrs:
                raise TopologyError(f"line {lineno}: a second edge {u}-{v} with different attributes "
                                    f"({G.edges[u, v]} vs {attrs}); keep one line per pair of agents",
                                    file=str(path))
            continue
        G.add_edge(u, v, **attrs)
    if max_links is not None and G.number_of_edges() > max_links:
        raise _too_many("links", G.number_of_edges(), max_links, path)
    if max_agents is not None and G.number_of_nodes() > max_agents:
        raise _too_many("agents", G.number_of_nodes(), max_agents, path)
    return G
