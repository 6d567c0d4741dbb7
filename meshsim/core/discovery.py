"""Registries that find their package's modules: adding a backend, a topology
kind or a detector is one new module with its ``register_*`` call, nothing else
edited (issue 31, item 2).

A :class:`Registry` is a ``name -> entry`` dict bound to a package. The first
time it is read (a name looked up, the names listed), it imports each module of
the package, in sorted name order, that calls its registration function and is
not yet imported; ``_``-prefixed modules are skipped. It scans again only when
the package's ``__path__`` changes (a test appending a folder to it).

Why only modules that name the registration function: a package also holds
modules that register nothing, some of them heavy (``meshsim.graphs.reach``
imports scipy's MILP, imported only where it is used); importing them on every
lookup would cost every run their import time and change nothing. Their source
text is read once (a few small files) instead.

Imports go by name (:mod:`importlib`), at lookup time, never at module level, so a
registry adds no import edge and no circle: its package's ``__init__`` has run
before anyone can read it.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys
from typing import Any, Iterator, Optional, TypeVar, Union, overload

__all__ = ["Registry"]

V = TypeVar("V")
T = TypeVar("T")


class Registry(dict[str, V]):
    """``name -> entry``, registered into by ``register_fn`` calls in the modules of
    ``package``; every read first imports those modules (see the module docstring)."""

    def __init__(self, package: str, register_fn: str) -> None:
        super().__init__()
        self.package = package
        self.register_fn = register_fn
        self._scanned: Optional[tuple[str, ...]] = None
        self._busy = False  # a module imported by the scan may read the registry itself

    def discover(self) -> None:
        """Import the package's modules that register here and are not imported yet."""
        pkg = sys.modules.get(self.package)
        if pkg is None or self._busy:
            return  # the package is not imported yet (its __init__ will run first), or a scan is under way
        path = tuple(getattr(pkg, "__path__", ()))
        if path == self._scanned:
            return
        self._busy = True
        try:
            # sorted names: the import order (so the registration order) does not hang on the file system
            for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
                full = f"{self.package}.{info.name}"
                if info.name.startswith("_") or full in sys.modules or not self._registers(info):
                    continue
                importlib.import_module(full)
            self._scanned = path
        finally:
            self._busy = False

    def _registers(self, info: pkgutil.ModuleInfo) -> bool:
        """Does the module (a subpackage: its ``__init__``) call the registration function?
        (no source to read: import it to see)"""
        finder: Any = info.module_finder
        spec = finder.find_spec(f"{self.package}.{info.name}") if hasattr(finder, "find_spec") else None
        origin = getattr(spec, "origin", None)
        if not origin or not origin.endswith(".py"):
            return True
        try:
            with open(origin, encoding="utf-8") as fh:
                return self.register_fn in fh.read()
        except OSError:
            return True

    # every read finds the registered modules first
    def __getitem__(self, key: str) -> V:
        self.discover()
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.discover()
        return super().__contains__(key)

    def __iter__(self) -> Iterator[str]:
        self.discover()
        return super().__iter__()

    def __len__(self) -> int:
        self.discover()
        return super().__len__()

    @overload
    def get(self, key: str, default: None = None, /) -> Optional[V]: ...

    @overload
    def get(self, key: str, default: Union[V, T], /) -> Union[V, T]: ...

    def get(self, key: str, default: Any = None, /) -> Any:
        self.discover()
        return super().get(key, default)

    def keys(self) -> Any:
        self.discover()
        return super().keys()

    def values(self) -> Any:
        self.discover()
        return super().values()

    def items(self) -> Any:
        self.discover()
        return super().items()
