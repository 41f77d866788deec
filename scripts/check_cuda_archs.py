#!/usr/bin/env python3
"""Compiles every CUDA source of a cuda-flavour build for other GPU targets: device code and ptxas, no host code.

    scripts/check_cuda_archs.py BUILD_DIR ARCH [ARCH ...]      e.g. build/cuda 75 120

A build is for one target (KSTUDY_CUDA_ARCH); this proves that kstudy's handwritten CUDA also compiles for the
targets it is not built for here: sm_75 (Turing, the kernel lab's T4), sm_80 (Ampere), sm_100 (datacenter
Blackwell), sm_120 (Blackwell workstation cards). Each .cu file in the build's compile_commands.json is compiled
again with its own flags, its target replaced by -arch=sm_ARCH, and -cubin in place of -c: nvcc's device pass and
ptxas only, which is where the targets differ (inline PTX, wmma formats, cp.async, shared memory and register
limits); the host pass is the one the build already compiled. Kokkos sources are Kokkos' own portability problem and
are not recompiled.

Exit 0 when every file compiles for every target; 1 with each failure's first errors otherwise.
"""
import concurrent.futures
import json
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile
import time


def device_only_command(command, arch, output):
    """The build's nvcc command for one file, for sm_ARCH, writing a cubin."""
    args = shlex.split(command)
    out = []
    skip_next = False
    for arg in args:
        if skip_next:
            skip_next = False
            continue
        if arg in ("-o", "-c", "-MF", "-MT"):
            skip_next = arg != "-c"
            continue
        if arg.startswith(("--generate-code", "-gencode", "-arch", "--gpu-architecture", "-Xcompiler", "-MD")):
            continue
        if arg == "-forward-unknown-to-host-compiler":
            continue
        out.append(arg)
    return out + [f"-arch=sm_{arch}", "-cubin", "-o", output]


def main(argv):
    if len(argv) < 3 or not all(a.isdigit() for a in argv[2:]):
        sys.exit(f"usage: {argv[0]} BUILD_DIR ARCH [ARCH ...]   (e.g. build/cuda 75 120)")
    build = pathlib.Path(argv[1])
    archs = argv[2:]
    database = build / "compile_commands.json"
    if not database.is_file():
        sys.exit(f"check_cuda_archs: {database} not found: configure a cuda-flavour build first (cmake --preset cuda)")
    entries = [e for e in json.loads(database.read_text()) if e["file"].endswith(".cu")]
    if not entries:
        sys.exit(f"check_cuda_archs: {database} has no .cu file: {build} is not a cuda-flavour build")
    # The longest first, so that two workers finish together.
    entries.sort(key=lambda e: -os.path.getsize(e["file"]))
    jobs = int(os.environ.get("KSTUDY_JOBS", os.cpu_count() or 2))
    failures = []
    with tempfile.TemporaryDirectory(prefix="kstudy-archs-") as scratch:
        for arch in archs:
            start = time.monotonic()

            def compile_one(entry, arch=arch):
                name = pathlib.Path(entry["file"]).name
                cmd = device_only_command(entry["command"], arch, os.path.join(scratch, f"{name}.sm_{arch}.cubin"))
                run = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
                return entry["file"], run.returncode, run.stdout + run.stderr

            with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
                results = list(pool.map(compile_one, entries))
            bad = [(f, text) for f, rc, text in results if rc != 0]
            for f, text in bad:
                errors = [line for line in text.splitlines() if "error" in line]
                failures.append(f"sm_{arch}: {os.path.relpath(f)}: {len(errors)} error line(s)\n  " +
                                "\n  ".join(errors[:8]))
            print(f"sm_{arch}: {len(results) - len(bad)} of {len(results)} CUDA sources compiled (device code, "
                  f"ptxas) in {time.monotonic() - start:.0f} s")
    if failures:
        print("\n".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
