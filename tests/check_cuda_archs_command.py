#!/usr/bin/env python3
"""scripts/check_cuda_archs.py's rewrite of a build's nvcc command: the build's own flags (defines, include paths,
standard, optimisation) kept; its target (-gencode / --generate-code / -arch, also a source's extra sm_90a target),
its host-compiler flags, its dependency-file flags and its -c / -o replaced by one -arch=sm_ARCH, -cubin and the
scratch output. CI's arch stage trusts it on every .cu file; a flag left behind would compile for the build's target
instead of the one named, and pass without proving anything."""
import importlib.util
from pathlib import Path

from check_support import Cases

script = Path(__file__).resolve().parent.parent / "scripts" / "check_cuda_archs.py"
spec = importlib.util.spec_from_file_location("check_cuda_archs", script)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)

command = ("/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DKSTUDY_HAVE_CUDA_VARIANTS=1 "
           "-I/src/variants -isystem=/usr/local/cuda/include -O3 -DNDEBUG "
           "--generate-code=arch=compute_90,code=[compute_90,sm_90] -Xcompiler=-Wall,-Wextra -std=c++17 "
           "-gencode=arch=compute_90a,code=sm_90a -MD -MT x.o -MF x.o.d -x cu -c /src/variants/gemm/g.cu -o x.o")
out = module.device_only_command(command, "75", "/tmp/g.cubin")
cases = Cases()
expected = ["/usr/local/cuda/bin/nvcc", "-DKSTUDY_HAVE_CUDA_VARIANTS=1", "-I/src/variants",
            "-isystem=/usr/local/cuda/include", "-O3", "-DNDEBUG", "-std=c++17", "-x", "cu",
            "/src/variants/gemm/g.cu", "-arch=sm_75", "-cubin", "-o", "/tmp/g.cubin"]
cases.check(out == expected, f"rewritten command\n  {out}\nexpected\n  {expected}")
targets = [a for a in out if "compute_" in a or "sm_" in a]
cases.check(targets == ["-arch=sm_75"], f"targets left besides -arch=sm_75: {targets}")
cases.finish("the build's command becomes a device-only compile for sm_75, nothing of sm_90 left")
