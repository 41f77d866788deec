"""The frameworks a Python rung is written with: what the worker needs to know of each to give a rung its inputs
in the framework's own memory, time a call on the framework's clocks, and take the outputs back to the host for
kstudy's gate. A framework is registered beside its code (@framework); a rung names it.

Timing, as kstudy times a C++ variant: `wall` is the host clock around the call and the wait for its work
(kstudy's host_wall for a host framework, resident_wall for a device one), `device` the framework's CUDA events
around the call on its own stream (device_events; None for a host framework).
"""

import importlib
import importlib.util
import os
import time
from typing import Callable, Dict, Optional, Tuple


class Unavailable(Exception):
    """This machine cannot run the rung (its framework is not installed, no GPU): skipped, not failed."""


class Framework:
    """A framework's defaults: a host framework whose arrays are NumPy's. Subclasses override what differs."""

    name = ""
    module = ""  # what `import` takes
    distribution = ""  # the installed package's name, for its version without importing it
    on_device = False

    def unavailable(self, python: str) -> str:
        """Why this interpreter cannot run the framework's rungs, or "" (cheap: no import)."""
        if importlib.util.find_spec(self.module) is None:
            return f"{self.module} is not installed for {python}"
        return ""

    def version(self) -> str:
        """The installed distribution's version, read from its metadata folder beside the module: `kstudy list`
        starts one Python process for every listing and every study, and importlib.metadata alone costs that process
        some 60 ms to import on a 2-core machine."""
        name = (self.distribution or self.module).replace("-", "_").lower()
        spec = importlib.util.find_spec(self.module)
        where = os.path.dirname(os.path.dirname(spec.origin)) if spec is not None and spec.origin else ""
        try:
            entries = os.listdir(where) if where else []
        except OSError:
            entries = []
        for entry in entries:
            stem, dot, suffix = entry.rpartition(".")
            if suffix in ("dist-info", "egg-info") and stem.lower().startswith(name + "-"):
                return stem[len(name) + 1:].split("-")[0].split(".egg")[0].rstrip(".")
        from importlib import metadata  # where the folder is elsewhere (an egg, a zip): the library's own search

        try:
            return metadata.version(self.distribution or self.module)
        except metadata.PackageNotFoundError:
            return "unknown"

    def load(self):
        """Imports the framework; raises Unavailable where it cannot run here."""
        try:
            return importlib.import_module(self.module)
        except ImportError as exc:
            raise Unavailable(f"import {self.module}: {exc}") from exc

    def own(self, host):
        """A copy of the host (NumPy) array in the framework's memory: the rung's resident input."""
        return host.copy()

    def copy_in(self, own, host) -> None:
        """Refreshes a resident input from host memory in place (the one-shot upload)."""
        own[...] = host

    def to_host(self, value):
        """An output as a NumPy array (the one-shot download, and the gate's copy)."""
        import numpy

        return numpy.asarray(value)

    def timed(self, call: Callable) -> Tuple[object, float, Optional[float]]:
        """Runs call() once, waiting for its work: (its result, wall seconds, device seconds or None)."""
        start = time.perf_counter()
        result = call()
        return result, time.perf_counter() - start, None


_FRAMEWORKS: Dict[str, Framework] = {}


def framework(cls):
    """Registers a Framework subclass under its name."""
    instance = cls()
    _FRAMEWORKS[instance.name] = instance
    return cls


def find(name: str) -> Framework:
    try:
        return _FRAMEWORKS[name]
    except KeyError:
        raise ValueError(f"unknown framework '{name}': known are {', '.join(sorted(_FRAMEWORKS))}") from None


@framework
class NumPy(Framework):
    """The seed's host baseline. NumPy's own BLAS decides the threads of a matrix product (OMP_NUM_THREADS /
    OPENBLAS_NUM_THREADS, which kstudy's protocol sets for its host variants too)."""

    name = "numpy"
    module = "numpy"
