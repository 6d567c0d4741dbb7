"""Small builders shared by tests (not a test module)."""
from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import networkx as nx
import yaml
from click.testing import CliRunner, Result

from meshsim.net.network import Network
from meshsim.net.routing import DistanceVector
from meshsim.core.sim import Environment
from meshsim.graphs import relabel
from meshsim.core.types import LatencySpec


def build_net(G: nx.Graph, seed: int = 0, loss: float = 0.0,
              latency: LatencySpec | None = None) -> tuple[Environment, Network]:
    G = relabel(G) if any(isinstance(v, int) for v in G) else G
    env = Environment(seed)
    net = Network(env, latency or LatencySpec("uniform", low=0.005, high=0.05), loss=loss)
    for v in G.nodes:
        net.add_node(v)
    for u, v in G.edges:
        net.add_link(u, v)
    return env, net


def attach_routing(net: Network, holders: dict[str, set[str]], **kw) -> dict[str, DistanceVector]:
    return {v: DistanceVector(node, [s for s, h in holders.items() if v in h], **kw)
            for v, node in net.nodes.items()}


def truth(net: Network, holders: dict[str, set[str]], ability: str, infinity: int = 16) -> dict[str, int]:
    """networkx shortest-path hop distance to the nearest holder over up links, capped."""
    H = nx.Graph()
    H.add_nodes_from(net.nodes)
    H.add_edges_from(k for k, link in net.links.items() if link.up)
    src = [v for v in holders.get(ability, ()) if v in H]
    d = nx.multi_source_dijkstra_path_length(H, src) if src else {}
    return {v: min(d.get(v, infinity), infinity) for v in H}


def cli_runner() -> CliRunner:
    """A CliRunner whose results keep stderr apart (``res.stderr``) on every click the project
    allows: click 8.1 needs ``mix_stderr=False``; 8.2 dropped the argument and always keeps it."""
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        return CliRunner()


def invoke(*args: Any, **kw: Any) -> Result:
    """``meshsim ARGS`` in this process (:func:`cli_runner`), every argument as text; an exception
    escaping the command fails the test with its traceback unless ``catch_exceptions=True``."""
    from meshsim.cli import main  # here, not at the top: most tests that use helpers need no CLI

    kw.setdefault("catch_exceptions", False)
    return cli_runner().invoke(main, [str(a) for a in args], **kw)


@contextmanager
def serve(handler: type[BaseHTTPRequestHandler], **attrs: Any) -> Iterator[ThreadingHTTPServer]:
    """A test HTTP server on 127.0.0.1 at a free port (``srv.server_address[1]``), serving ``handler``
    in a daemon thread, shut down and closed on leaving. ``attrs`` are set on the server before it
    serves: the handler's shared state (``self.server.lock`` ...) or ``daemon_threads=True``."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    for k, v in attrs.items():
        setattr(srv, k, v)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def send_json(handler: BaseHTTPRequestHandler, code: int, obj: dict) -> None:
    """Reply ``obj`` as JSON from a test HTTP server's handler."""
    data = json.dumps(obj).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def endpoint_scenario(tmp_path: Path, port: int, mode: str, name: str, key_env: str, **profile) -> Path:
    """A 6-agent, 7-task MeshHeal scenario whose calls go through a cassette
    (``mode`` record or replay) to an OpenAI-compatible server on ``port``."""
    prof = {"kind": "openai", "name": name, "base_url": f"http://127.0.0.1:{port}/v1", "api_key_env": key_env,
            "models": {"strong": {"id": "s"}, "weak": {"id": "w"}}, "retries": {"max": 0}, "concurrency": 4}
    prof.update(profile)
    (tmp_path / "ep.yaml").write_text(yaml.safe_dump(prof))
    sc = {"name": name, "seed": 1, "network": {"topology": {"kind": "complete", "n": 6}},
          "agents": {"profile": "bbh"}, "protocol": {"name": "meshheal"},
          "backend": {"kind": "replay", "mode": mode, "cassette": "cas.jsonl",
                      "backend": {"kind": "openai", "profile": "ep.yaml"}},
          "tasks": {"dataset": "bbh", "count": 7, "block": 7}}
    path = tmp_path / f"{mode}.yaml"
    path.write_text(yaml.safe_dump(sc))
    return path
