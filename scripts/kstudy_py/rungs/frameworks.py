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

    def own(self, host, dtype: str):
        """A copy of the host (NumPy) array in the framework's memory: the rung's resident input. `dtype` is the
        operation's name for its element type: "bfloat16" arrives as its 16-bit patterns (uint16), which a framework
        with the type views as bfloat16 (NumPy has none, and keeps the patterns)."""
        return host.copy()

    def copy_in(self, own, host):
        """Refreshes a resident input from host memory (the one-shot upload), returning it: in place where the
        framework's arrays are mutable, a new array where they are not (JAX), which then replaces the old."""
        own[...] = host
        return own

    def to_host(self, value):
        """An output as a NumPy array (the one-shot download, and the gate's copy)."""
        import numpy

        return numpy.asarray(value)

    def release(self):
        """Hands the memory the framework keeps cached for reuse back to the device, once the worker has dropped a
        point's arrays: a worker otherwise holds every size it has seen, and beside the other rungs' workers and
        kstudy the card runs out (session 26: Triton and JAX skipped at 65,536 x 16,384 softmax, 373 MB free)."""

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


class CudaFramework(Framework):
    """A framework whose arrays live on the GPU and whose work is queued on a CUDA stream: a call is timed by the
    framework's own CUDA events on its current stream (what each framework's benchmarking guide does: CuPy's
    cupyx.profiler.benchmark, torch.cuda.Event, triton.testing.do_bench), with the host clock around the call and
    the wait for its end event beside them. Subclasses say how to reach the device, make events and move arrays."""

    on_device = True

    def load(self):
        module = super().load()
        reason = self.no_device(module)
        if reason:
            raise Unavailable(reason)
        return module

    def no_device(self, module) -> str:
        """Why the framework sees no usable GPU here, or ""."""
        raise NotImplementedError

    def events(self):
        """Two timing events on the framework's current stream: (start, end), each with record() and
        synchronize()."""
        raise NotImplementedError

    def elapsed_seconds(self, start, end) -> float:
        raise NotImplementedError

    def release(self):
        self._pair = None  # the next point's calls may run on another current stream

    def timing_events(self):
        """The pair of events every call of a point is timed with: made, recorded and waited for once, before the
        first call (PyTorch makes a CUDA event at its first record(), which would otherwise fall inside the timed
        region of every call), as the frameworks' own benchmarking helpers reuse theirs."""
        if getattr(self, "_pair", None) is None:
            pair = self.events()
            for event in pair:
                event.record()
            pair[1].synchronize()
            self._pair = pair
        return self._pair

    def timed(self, call: Callable) -> Tuple[object, float, Optional[float]]:
        begin, end = self.timing_events()
        start = time.perf_counter()
        begin.record()
        result = call()
        end.record()
        end.synchronize()
        wall = time.perf_counter() - start
        return result, wall, self.elapsed_seconds(begin, end)


@framework
class CuPy(CudaFramework):
    """CuPy: its arrays and kernels (composed array expressions, ElementwiseKernel, ReductionKernel, RawKernel) on
    its current stream, the null stream unless a rung says otherwise."""

    name = "cupy"
    module = "cupy"
    distribution = "cupy-cuda12x"

    def version(self) -> str:
        # CuPy ships as one of several wheels (cupy-cuda11x, cupy-cuda12x, cupy-cuda13x, cupy from source).
        for dist in ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy"):
            self.distribution = dist
            found = super().version()
            if found != "unknown":
                return found
        return "unknown"

    def no_device(self, cupy) -> str:
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # noqa: BLE001 -- CUDARuntimeError without a driver, ImportError of libcuda
            return f"cupy sees no CUDA device: {exc}"
        return "" if count > 0 else "cupy sees no CUDA device"

    def own(self, host, dtype: str):
        import cupy
        import numpy

        return cupy.asarray(numpy.ascontiguousarray(host))

    def copy_in(self, own, host):
        import numpy

        own.set(numpy.ascontiguousarray(host))  # synchronous from pageable memory, as cupy.asarray is
        return own

    def release(self):
        import cupy

        super().release()
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()

    def to_host(self, value):
        import cupy
        import numpy

        return cupy.asnumpy(value) if isinstance(value, cupy.ndarray) else numpy.asarray(value)

    def events(self):
        import cupy

        stream = cupy.cuda.get_current_stream()
        begin, end = cupy.cuda.Event(), cupy.cuda.Event()

        class _On:  # record() on the current stream, as the other frameworks' events do
            def __init__(self, event):
                self.event = event

            def record(self):
                self.event.record(stream)

            def synchronize(self):
                self.event.synchronize()

        return _On(begin), _On(end)

    def elapsed_seconds(self, start, end) -> float:
        import cupy

        return cupy.cuda.get_elapsed_time(start.event, end.event) / 1e3


@framework
class Torch(CudaFramework):
    """PyTorch on its current CUDA stream (the default stream unless a rung says otherwise): eager calls, its
    library calls (torch.softmax, torch.matmul through cuBLAS) and torch.compile'd functions (Inductor's Triton
    kernels), compiled at the builder's first call, which is the gate's run (untimed)."""

    name = "torch"
    module = "torch"

    def no_device(self, torch) -> str:
        return "" if torch.cuda.is_available() else "torch sees no CUDA device (torch.cuda.is_available() is False)"

    def own(self, host, dtype: str):
        import numpy
        import torch

        if dtype == "bfloat16":  # the patterns, moved as int16 (NumPy's uint16 has no torch twin in older torch)
            return torch.from_numpy(numpy.array(host).view(numpy.int16)).to("cuda").view(torch.bfloat16)
        return torch.from_numpy(numpy.array(host)).to("cuda")

    def copy_in(self, own, host):
        import numpy
        import torch

        # A pageable source: copy_ returns once the copy is done.
        if own.dtype == torch.bfloat16:
            own.view(torch.int16).copy_(torch.from_numpy(numpy.asarray(host).view(numpy.int16)))
        else:
            own.copy_(torch.from_numpy(numpy.asarray(host)))
        return own

    def release(self):
        import torch

        super().release()
        torch.cuda.empty_cache()

    def to_host(self, value):
        import numpy
        import torch

        if not isinstance(value, torch.Tensor):
            return numpy.asarray(value)
        if value.dtype == torch.bfloat16:  # back as its patterns, which the operation's gate reads
            return value.detach().contiguous().view(torch.int16).cpu().numpy().view(numpy.uint16)
        return value.detach().cpu().numpy()

    def events(self):
        import torch

        return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def elapsed_seconds(self, start, end) -> float:
        return start.elapsed_time(end) / 1e3


@framework
class Triton(Torch):
    """A kernel written in Triton, launched on PyTorch tensors (Triton's own convention: its tutorials and
    torch.compile's Inductor hand it torch tensors), timed on PyTorch's current stream, which Triton launches on.
    The builder receives the triton module; it imports triton.language and torch itself."""

    name = "triton"
    module = "triton"

    def no_device(self, triton) -> str:
        import torch  # noqa: F401 -- the arrays are torch's; their absence is an ImportError here

        return super().no_device(torch)

    def load(self):
        try:
            import torch  # noqa: F401
        except ImportError as exc:
            raise Unavailable(f"import torch (Triton rungs run on torch tensors): {exc}") from exc
        return super().load()


@framework
class Jax(CudaFramework):
    """JAX on its GPU backend, jit-compiled at the first call (the gate's run). JAX arrays are immutable (a one-shot
    upload makes a new one) and JAX has no user-visible CUDA events: a call is timed by the host clock around it
    and jax.block_until_ready on its outputs (resident_wall), with no device-events sample. JAX is told not to
    take 75% of the GPU's memory at start (XLA_PYTHON_CLIENT_PREALLOCATE=false): kstudy and the other rungs share
    the card."""

    name = "jax"
    module = "jax"

    def load(self):
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        return super().load()

    def no_device(self, jax) -> str:
        try:
            devices = jax.devices("gpu")
        except RuntimeError as exc:
            return f"jax has no GPU backend here: {exc}"
        return "" if devices else "jax sees no GPU"

    def own(self, host, dtype: str):
        import jax
        import numpy

        return jax.block_until_ready(jax.device_put(numpy.array(host), jax.devices("gpu")[0]))

    def copy_in(self, own, host):
        return self.own(host, "")  # immutable: a fresh array replaces the old

    def timed(self, call: Callable) -> Tuple[object, float, Optional[float]]:
        import jax

        start = time.perf_counter()
        result = jax.block_until_ready(call())
        return result, time.perf_counter() - start, None
