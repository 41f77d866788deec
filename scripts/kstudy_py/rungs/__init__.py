"""Python rungs: variants written in Python (NumPy, and the frameworks of kstudy_py.rungs.frameworks), run by
kstudy's protocol, timed on its boundaries, certified by its gates, archived beside the C++ rungs.

A rung is a builder registered beside its code, in a module `python_<framework>.py` under a variants folder
(variants/<operation>/ in the source tree): it receives the framework's module and returns the callable that
computes the operation from the operation's named inputs and scalars (kstudy's `operation::external_inputs`),
returning its outputs in the operation's order::

    from kstudy_py.rungs import rung

    @rung(operation="scoring", framework="numpy", fusion="none",
          description="the seed's NumPy baseline: one array expression per step")
    def scoring_numpy(np):
        def run(x, mean, inv_std, weight, clip, threshold):
            ...
            return score, flag, flagged
        return run

A builder whose body every framework's arrays take (x.sum() on NumPy, CuPy and PyTorch arrays) is registered once
for them all with `rungs(operation=..., frameworks={framework: description})`.

The builder runs once per point, untimed (a compiler's first call, torch.compile's or Triton's, is the gate's
run, also untimed); the callable is what every timed run calls. Nothing here imports a framework: `kstudy list`
reads the registrations (python -m kstudy_py.rungs describe) without paying for an import.
"""

import importlib.util
import os
import sys
from typing import Callable, Dict, List

from . import frameworks

FUSION_LEVELS = ("none", "partial", "full")
LAYOUTS = ("row_major", "feature_major")


class Rung:
    """One registered rung (a plain class: dataclasses' import alone cost describe ~30 ms on a 2-core machine)."""

    implementation = "framework"

    def __init__(self, *, name: str, operation: str, framework: str, builder: Callable, family: str, layout: str,
                 fusion: str, kernels: int, description: str, source: str):
        self.name, self.operation, self.framework, self.builder = name, operation, framework, builder
        self.family, self.layout, self.fusion, self.kernels = family, layout, fusion, kernels
        self.description, self.source = description, source

    @property
    def adapter(self) -> "frameworks.Framework":
        return frameworks.find(self.framework)

    @property
    def backend(self) -> str:
        return "python_cuda" if self.adapter.on_device else "python"

    @property
    def id(self) -> str:
        return f"{self.name}@{self.backend}"


_REGISTERED: List[Rung] = []


def rung(*, operation: str, framework: str, description: str, fusion: str = "full", layout: str = "row_major",
         family: str = "", kernels: int = 1, name: str = ""):
    """Registers the decorated builder as a rung of `operation` written with `framework` (a name of
    kstudy_py.rungs.frameworks). `family` defaults to the framework's name, `name` to the builder's."""
    if fusion not in FUSION_LEVELS:
        raise ValueError(f"rung fusion '{fusion}': expected one of {', '.join(FUSION_LEVELS)}")
    if layout not in LAYOUTS:
        raise ValueError(f"rung layout '{layout}': expected one of {', '.join(LAYOUTS)}")
    frameworks.find(framework)  # a misspelt framework fails at registration, naming the known ones

    def register(builder: Callable) -> Callable:
        r = Rung(name=name or builder.__name__, operation=operation, framework=framework, builder=builder,
                 family=family or framework, layout=layout, fusion=fusion, kernels=kernels,
                 description=description, source=os.path.abspath(sys.modules[builder.__module__].__file__))
        if any(other.id == r.id for other in _REGISTERED):
            raise ValueError(f"rung {r.id} is registered twice ({r.source})")
        _REGISTERED.append(r)
        return builder

    return register


def rungs(*, operation: str, frameworks: Dict[str, str], **fields):
    """Registers the decorated builder once per framework of `frameworks` ({framework: description}), each rung
    named <operation>_<framework>, the other fields (fusion, kernels, ...) as `rung` takes them: one array body
    that NumPy's, CuPy's and PyTorch's arrays all take is written once, so its rungs cannot drift apart."""

    def register(builder: Callable) -> Callable:
        for framework, description in frameworks.items():
            rung(operation=operation, framework=framework, description=description, name=f"{operation}_{framework}",
                 **fields)(builder)
        return builder

    return register


def load(folders: List[str], errors: List[str] = None) -> List[Rung]:
    """Imports every python_*.py under each folder (one level of operation folders, as variants/ is laid out)
    and returns the rungs they registered, sorted by id. A module that fails to import is left out, with a line
    naming it and its error appended to `errors` (raised where `errors` is None)."""
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        for operation_dir in sorted(os.listdir(folder)):
            path = os.path.join(folder, operation_dir)
            if not os.path.isdir(path):
                continue
            for file in sorted(os.listdir(path)):
                if file.startswith("python_") and file.endswith(".py"):
                    try:
                        _import(os.path.join(path, file), f"kstudy_rungs_{operation_dir}_{file[:-3]}")
                    except RuntimeError as exc:
                        if errors is None:
                            raise
                        errors.append(str(exc))
    return sorted(_REGISTERED, key=lambda r: r.id)


def _import(path: str, module_name: str) -> None:
    if module_name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 -- any error in a rung module is reported with its path
        del sys.modules[module_name]
        raise RuntimeError(f"{path}: {type(exc).__name__}: {exc}") from exc
