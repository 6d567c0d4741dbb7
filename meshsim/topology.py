"""Agent graphs: generators (all seeded), file readers and ``describe()``.

Generated graphs name their nodes ``A1``..``An`` as the papers do. Per-edge
attributes ``latency`` (seconds) and ``loss`` (probability), when present,
override the scenario's link defaults.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import networkx as nx

from .errors import TopologyError

__all__ = ["agent_name", "relabel", "build", "from_file", "describe", "GENERATORS"]


def agent_name(i: int) -> str:
    """The paper's agent naming: index 0 -> ``A1``."""
    return f"A{i + 1}"


def relabel(G: nx.Graph) -> nx.Graph:
    """Rename integer nodes 0..n-1 to A1..An (keeps edge attributes)."""
    mapping = {v: agent_name(v) if isinstance(v, int) else str(v) for v in G.nodes}
    H = nx.relabel_nodes(G, mapping, copy=True)
    out = nx.Graph()
    out.add_nodes_from(sorted(H.nodes, key=_node_order))
    out.add_edges_from(sorted(((*sorted((u, v), key=_node_order), d) for u, v, d in H.edges(data=True)),
                              key=lambda e: (_node_order(e[0]), _node_order(e[1]))))
    return out


def _node_order(name: str) -> tuple:
    # A2 before A10: natural order so outputs read the way people expect.
    if isinstance(name, str) and name[:1].isalpha() and name[1:].isdigit():
        return (0, name[0], int(name[1:]))
    return (1, str(name), 0)


def node_order(name: str) -> tuple:
    return _node_order(name)


def _need(params: dict, key: str, kind: str, typ=int, low=None, high=None) -> Any:
    if key not in params:
        raise TopologyError(f"topology '{kind}' needs '{key}'", field=f"network.topology.{key}")
    val = params[key]
    if typ is int and (isinstance(val, bool) or not isinstance(val, int)):
        raise TopologyError("must be an integer", field=f"network.topology.{key}", value=val)
    if typ is float and (isinstance(val, bool) or not isinstance(val, (int, float))):
        raise TopologyError("must be a number", field=f"network.topology.{key}", value=val)
    if low is not None and val < low:
        raise TopologyError(f"must be >= {low}", field=f"network.topology.{key}", value=val)
    if high is not None and val > high:
        raise TopologyError(f"must be <= {high}", field=f"network.topology.{key}", value=val)
    return val


def _complete(p, seed):
    return nx.complete_graph(_need(p, "n", "complete", low=1))


def _gnp(p, seed):
    n = _need(p, "n", "gnp", low=1)
    return nx.gnp_random_graph(n, _need(p, "p", "gnp", float, 0, 1), seed=seed)


def _gnm(p, seed):
    n = _need(p, "n", "gnm", low=1)
    m = _need(p, "m", "gnm", low=0, high=n * (n - 1) // 2)
    return nx.gnm_random_graph(n, m, seed=seed)


def _regular(p, seed):
    n = _need(p, "n", "regular", low=1)
    d = _need(p, "d", "regular", low=0, high=n - 1)
    if (n * d) % 2:
        raise TopologyError("n * d must be even for a random regular graph",
                            field="network.topology.d", value=d)
    return nx.random_regular_graph(d, n, seed=seed)


def _ring(p, seed):
    return nx.cycle_graph(_need(p, "n", "ring", low=3))


def _path(p, seed):
    return nx.path_graph(_need(p, "n", "path", low=1))


def _star(p, seed):
    return nx.star_graph(_need(p, "n", "star", low=2) - 1)


GENERATORS = {
    "complete": _complete,
    "gnp": _gnp,
    "erdos_renyi": _gnp,
    "gnm": _gnm,
    "regular": _regular,
    "ring": _ring,
    "path": _path,
    "star": _star,
}


def register_generator(name: str, fn) -> None:
    """Add a topology kind: ``fn(params: dict, seed: int) -> nx.Graph``."""
    GENERATORS[name] = fn


def build(kind: str, params: dict, seed: int, base_dir: Path | None = None) -> nx.Graph:
    """Build the graph named by ``kind`` with ``params``; nodes named A1..An."""
    if kind == "file":
        path = params.get("path")
        if not path:
            raise TopologyError("topology 'file' needs 'path'", field="network.topology.path")
        p = Path(path)
        if base_dir is not None and not p.is_absolute():
            p = base_dir / p
        return from_file(p, fmt=params.get("format"))
    fn = GENERATORS.get(kind)
    if fn is None:
        raise TopologyError(f"unknown topology kind; choose one of {sorted(GENERATORS) + ['file']}",
                            field="network.topology.kind", value=kind)
    return relabel(fn(params, seed))


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


def describe(G: nx.Graph) -> dict[str, Any]:
    """Nodes, edges, edge fraction, degree stats, connectivity and diameter."""
    n = G.number_of_nodes()
    m = G.number_of_edges()
    degs = sorted(d for _, d in G.degree())
    connected = n > 0 and nx.is_connected(G)
    info: dict[str, Any] = {
        "nodes": n,
        "edges": m,
        "edge_fraction": (m / (n * (n - 1) / 2)) if n > 1 else 0.0,
        "degree_min": degs[0] if degs else 0,
        "degree_max": degs[-1] if degs else 0,
        "degree_mean": (sum(degs) / n) if n else 0.0,
        "degree_median": (degs[n // 2] if n % 2 else (degs[n // 2 - 1] + degs[n // 2]) / 2) if n else 0,
        "connected": connected,
        "components": nx.number_connected_components(G) if n else 0,
        "diameter": nx.diameter(G) if connected else None,
    }
    if connected and n > 1:
        info["node_connectivity"] = nx.node_connectivity(G) if n <= 200 else None
    return info


def er_threshold_p(n: int, r: int) -> float:
    """p = (ln n + (r-1) ln ln n) / n (SAC App. A), clipped to [0, 1]."""
    return min(1.0, max(0.0, (math.log(n) + (r - 1) * math.log(math.log(n))) / n))


from . import ability_topology as _ability_topology  # noqa: E402,F401  (registers 'ability_sparse')
from . import robust_topology as _robust_topology  # noqa: E402,F401  (merg, pa_robust, er_robust, k_circulant)
