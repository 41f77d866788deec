"""The Python side of kstudy's external rungs (src/core/python_rungs.cpp is the other):

  python -m kstudy_py.rungs describe FOLDER...   the registered rungs as JSON on stdout (no framework imported)
  python -m kstudy_py.rungs serve ID FOLDER...   one rung's worker: requests on stdin, replies on stdout

A worker serves one rung for one kstudy process, one JSON object a line each way. Arrays cross in a shared-memory
file kstudy creates: prepare names it, with each input's and output's name, dtype, extents and byte offset there.

  prepare {file, inputs: [{name, dtype, extents, offset}], streamed, outputs: [...], scalars: {name: value}}
          the inputs copied into the framework's memory, the rung built       -> {ok, framework, version, config}
  run     the rung called once on them, its outputs kept                      -> {ok, wall, device, config}
  upload  the streamed inputs refreshed from the file                         -> {ok, wall}
  download  the kept outputs written to the file                              -> {ok, wall}
  poison  the kept outputs dropped: a download before the next run fails      -> {ok}
  quit

A failed request answers {ok: false, error, unavailable} (unavailable: this machine cannot run the rung, which
kstudy records as skipped) and the worker serves on. Anything the rung or its framework prints goes to stderr:
the protocol owns stdout.
"""

import json
import os
import sys
import traceback

from . import load
from .frameworks import Unavailable


def describe(folders):
    errors = []
    rungs = load(folders, errors)
    python = sys.executable
    out = []
    for r in rungs:
        adapter = r.adapter
        unavailable = adapter.unavailable(python)
        out.append({"id": r.id, "name": r.name, "operation": r.operation, "family": r.family,
                    "framework": r.framework, "version": "" if unavailable else adapter.version(),
                    "backend": r.backend, "on_device": adapter.on_device, "layout": r.layout, "fusion": r.fusion,
                    "implementation": r.implementation, "kernels": r.kernels, "description": r.description,
                    "source": r.source, "unavailable": unavailable})
    json.dump({"python": python, "python_version": sys.version.split()[0], "rungs": out, "errors": errors},
              sys.stdout)
    sys.stdout.write("\n")
    return 0


class Worker:
    def __init__(self, rung):
        self.rung = rung
        self.adapter = rung.adapter
        self.call = None
        self.outputs = None

    def handle(self, request):
        command = request.get("command")
        handler = getattr(self, "do_" + str(command), None)
        if handler is None:
            raise ValueError(f"unknown request '{command}'")
        return handler(request)

    def do_prepare(self, request):
        import numpy

        module = self.adapter.load()
        # The last point's arrays go before this point's are made, and with them the framework's cache of them.
        self.inputs, self.outputs, self.call, self.file = {}, None, None, None
        self.adapter.release()
        self.file = numpy.memmap(request["file"], mode="r+", dtype=numpy.uint8)

        def view(array):
            # bfloat16, which NumPy lacks, crosses as its 16-bit patterns; the adapter views them as the framework's.
            dtype = numpy.dtype("uint16" if array["dtype"] == "bfloat16" else array["dtype"])
            count = 1
            for extent in array["extents"]:
                count *= extent
            offset = array["offset"]
            flat = self.file[offset:offset + count * dtype.itemsize].view(dtype)
            return flat.reshape(array["extents"])

        self.host_inputs = [(a["name"], view(a)) for a in request["inputs"]]
        self.streamed = request["streamed"]
        self.output_arrays = [(a["name"], view(a)) for a in request["outputs"]]
        dtypes = {a["name"]: a["dtype"] for a in request["inputs"]}
        self.inputs = {name: self.adapter.own(host, dtypes[name]) for name, host in self.host_inputs}
        self.scalars = dict(request["scalars"])
        self.call = self.rung.builder(module)
        self.outputs = None
        config = dict(getattr(self.call, "kstudy_config", {}))
        return {"framework": self.adapter.name, "version": self.adapter.version(), "config": config}

    def do_run(self, request):
        self.outputs = None
        result, wall, device = self.adapter.timed(lambda: self.call(**self.inputs, **self.scalars))
        if not isinstance(result, tuple):
            result = (result,)
        self.outputs = result
        # What the rung chose at this call (a tile picked by the inputs' shape), where it says.
        return {"wall": wall, "device": device, "config": dict(getattr(self.call, "kstudy_config", {}))}

    def do_upload(self, request):
        import time

        start = time.perf_counter()
        for name, host in self.host_inputs[:self.streamed]:
            self.inputs[name] = self.adapter.copy_in(self.inputs[name], host)
        return {"wall": time.perf_counter() - start}

    def do_download(self, request):
        import time

        import numpy

        if self.outputs is None:
            raise ValueError("no outputs to download: the last run failed or they were poisoned since")
        if len(self.outputs) != len(self.output_arrays):
            raise ValueError(f"the rung returned {len(self.outputs)} outputs; the operation has "
                             f"{len(self.output_arrays)} ({', '.join(n for n, _ in self.output_arrays)})")
        start = time.perf_counter()
        host = [self.adapter.to_host(value) for value in self.outputs]
        wall = time.perf_counter() - start
        for (name, target), value in zip(self.output_arrays, host):
            value = numpy.asarray(value)
            if value.shape != target.shape and not (target.ndim == 0 and value.size == 1):
                raise ValueError(f"output {name}: shape {value.shape}, expected {target.shape}")
            if not numpy.can_cast(value.dtype, target.dtype, "same_kind"):
                raise ValueError(f"output {name}: dtype {value.dtype}, expected {target.dtype}")
            target[...] = value.reshape(target.shape)
        self.file.flush()
        return {"wall": wall}

    def do_poison(self, request):
        self.outputs = None
        return {}


def serve(rung_id, folders):
    # The protocol owns the original stdout; fd 1 becomes stderr, so that a print from the rung, its framework or
    # a C library cannot corrupt a reply.
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    errors = []
    rungs = {r.id: r for r in load(folders, errors)}
    worker = Worker(rungs[rung_id]) if rung_id in rungs else None
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("command") == "quit":
            break
        try:
            if worker is None:
                raise ValueError(f"no rung {rung_id} under {', '.join(folders)}" +
                                 (f" ({'; '.join(errors)})" if errors else ""))
            reply = worker.handle(request)
            reply["ok"] = True
        except Unavailable as exc:
            reply = {"ok": False, "unavailable": True, "error": str(exc)}
        except Exception as exc:  # noqa: BLE001 -- the rung's failure is reported, and the worker serves on
            traceback.print_exc(file=sys.stderr)
            reply = {"ok": False, "unavailable": False, "error": f"{type(exc).__name__}: {exc}"}
        protocol.write(json.dumps(reply) + "\n")
    return 0


def main(argv):
    if len(argv) >= 1 and argv[0] == "describe":
        return describe(argv[1:])
    if len(argv) >= 2 and argv[0] == "serve":
        return serve(argv[1], argv[2:])
    sys.stderr.write("usage: python -m kstudy_py.rungs describe FOLDER... | serve ID FOLDER...\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
