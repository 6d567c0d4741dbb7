"""Simulated network: links, messages, node runtime, reliable delivery, routing."""
from .links import Link
from .messages import Message
from .network import Network, edge_key
from .node import Node
from .reliable import Reliable
from .routing import DistanceVector

__all__ = ["Link", "Message", "Network", "Node", "Reliable", "DistanceVector", "edge_key"]
