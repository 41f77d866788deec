#!/usr/bin/env python3
"""One profiled call of each named PyTorch-based Python rung (torch, torch_compile, triton), for Nsight Compute.

Runs on a GPU machine under `ncu --profile-from-start off` (scripts/device_run.sh BUNDLE rung_ncu): each rung is
built as a study builds it (kstudy_py.rungs.load over the bundle's variants folder), called three times unprofiled
(compilation, autotuning, the caching allocator's first blocks), then once between cudaProfilerStart and
cudaProfilerStop, so ncu sees exactly the kernels of one steady-state call. `kstudy profile` cannot reach these
kernels (they run in the rung's worker); this is the other half of a side-by-side with kstudy's own rungs.

    ncu --profile-from-start off --csv --page details ... python3 device_rung_ncu.py \\
        softmax_triton@python_cuda:65536x8192 gemm_bf16_torch@python_cuda:4096x4096x4096

A point is rows x cols (softmax, layernorm) or m x n x k (the GEMMs). The probes' order, printed to stderr, is
the order of the kernels in ncu's report.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from kstudy_py import rungs  # noqa: E402

# The GEMM operations' input type (kstudy's operations: C is float32 in all four).
GEMM_INPUTS = {"gemm": "float32", "gemm_tf32": "float32", "gemm_bf16": "bfloat16", "gemm_fp16": "float16"}


def inputs(torch, operation, extents):
    gen = torch.Generator(device="cuda").manual_seed(20261207)
    if operation in GEMM_INPUTS:
        if len(extents) != 3:
            raise SystemExit(f"{operation} needs a point m x n x k, got {extents}")
        m, n, k = extents
        dtype = getattr(torch, GEMM_INPUTS[operation])
        a = torch.randn((m, k), generator=gen, device="cuda").to(dtype)
        b = torch.randn((k, n), generator=gen, device="cuda").to(dtype)
        return (a, b)
    if len(extents) != 2:
        raise SystemExit(f"{operation} needs a point rows x cols, got {extents}")
    return (torch.randn(tuple(extents), generator=gen, device="cuda"),)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("probes", nargs="+", help="RUNG_ID:POINT, e.g. softmax_triton@python_cuda:65536x8192")
    parser.add_argument("--variants", default=os.path.join(os.path.dirname(HERE), "variants"),
                        help="the folder of the rungs' modules (default: the bundle's or checkout's variants/)")
    args = parser.parse_args()
    errors = []
    found = {r.id: r for r in rungs.load([args.variants], errors)}
    for e in errors:
        print(f"device_rung_ncu: {e}", file=sys.stderr)
    chosen = []
    for probe in args.probes:
        name, _, point = probe.partition(":")
        if name not in found:
            raise SystemExit(f"device_rung_ncu: no rung {name!r} (known: {', '.join(sorted(found))})")
        rung = found[name]
        if rung.framework not in ("torch", "torch_compile", "triton"):
            raise SystemExit(f"device_rung_ncu: {name} is a {rung.framework} rung; only PyTorch-based ones here")
        try:
            extents = [int(e) for e in point.split("x")]
        except ValueError:
            raise SystemExit(f"device_rung_ncu: {probe}: the point must be extents joined by x, e.g. 65536x8192")
        chosen.append((rung, point, extents))
    import torch
    cudart = torch.cuda.cudart()
    for rung, point, extents in chosen:
        framework = rung.adapter
        call = rung.builder(framework.load())
        args_in = inputs(torch, rung.operation, extents)
        for _ in range(3):
            call(*args_in)
        torch.cuda.synchronize()
        print(f"probe {rung.id} {point}", file=sys.stderr, flush=True)
        cudart.cudaProfilerStart()
        call(*args_in)
        torch.cuda.synchronize()
        cudart.cudaProfilerStop()
        del args_in, call
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
