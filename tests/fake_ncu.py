#!/usr/bin/env python3
"""A stand-in for Nsight Compute's ncu, for tests/check_profile_host.sh: just enough of its command line for
`kstudy profile` to run end to end on a machine without a GPU (KSTUDY_PROFILE_HOST_TEST=1, host variants).

    fake_ncu.py --version
    fake_ncu.py [--clock-control none] [--profile-from-start off] --metrics LIST --export BASE [--force-overwrite]
                APP ARGS...
    fake_ncu.py --import BASE.ncu-rep --csv --page raw --print-units base

Profiling runs APP, then writes BASE.ncu-rep holding a raw-page CSV in ncu's format (header, units row, one
quoted row per launch, thousands separators): a marker row per profiled variant (the child's report says
which), then one made-up kernel per Kokkos dispatch (a Kokkos-style name) and one library kernel per
profiling region. The numbers are invented; only the shapes of the files are ncu's.
Environment: FAKE_NCU_REFUSE=m1,m2 refuses those metrics as ncu does for unknown names;
FAKE_NCU_FAIL=TEXT fails every profile with ==ERROR== TEXT (e.g. ERR_NVGPUCTRPERM).
"""
import csv
import io
import json
import os
import subprocess
import sys

FIXED = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size", "Grid Size",
         "Device", "CC"]
UNITS = {"gpu__time_duration.sum": "nsecond", "dram__bytes_read.sum": "byte", "dram__bytes_write.sum": "byte",
         "dram__bytes_op_read.sum": "byte", "dram__bytes_op_write.sum": "byte",
         "launch__registers_per_thread": "register/thread"}


def value(metric, n):
    if metric.endswith("pct") or "pct_of_peak" in metric:
        return f"{50 + n % 40:.2f}", "%"
    if "bank_conflicts" in metric:
        return f"{256 * n:,}", ""
    if "sectors" in metric:
        return f"{4096 * (n + 1):,}", "sector"
    if "requests" in metric:
        return f"{1024 * (n + 1):,}", ""
    if metric == "launch__block_size":
        return "256", ""
    if metric == "launch__grid_size":
        return f"{132 * (n + 1):,}", ""
    if metric == "launch__registers_per_thread":
        return str(24 + n), "register/thread"
    if metric == "gpu__time_duration.sum":
        return f"{10000 + 1000 * n:,}", "nsecond"
    return f"{1048576 * (n + 1):,}", UNITS.get(metric, "byte")


def profile(argv):
    metrics, base, i = [], None, 0
    while i < len(argv) and argv[i].startswith("--"):
        option = argv[i]
        if option == "--metrics":
            metrics = argv[i + 1].split(",")
            i += 2
        elif option == "--export":
            base = argv[i + 1]
            i += 2
        elif option in ("--clock-control", "--profile-from-start"):
            i += 2
        else:  # --force-overwrite
            i += 1
    app = argv[i:]
    print(f"==PROF== Connected to process 4242 ({app[0]})")
    if os.environ.get("FAKE_NCU_FAIL"):
        print(f"==ERROR== {os.environ['FAKE_NCU_FAIL']}")
        return 1
    refused = [m for m in metrics if m in os.environ.get("FAKE_NCU_REFUSE", "").split(",")]
    if refused:
        m = refused[0]
        print("==ERROR== Failed to find metric regex:^" + m.replace(".", "\\.") + "$")
        return 1
    sys.stdout.flush()
    rc = subprocess.call(app)
    child = json.load(open(app[2]))  # kstudy __profile_point RESULT_JSON ...
    rows, n = [], 0

    def launch(name):
        nonlocal n
        cells = [str(n), "4242", "kstudy", "localhost", name, "1", "7", "(256, 1, 1)", f"({132 * (n + 1)}, 1, 1)", "0",
                 "9.0"]
        rows.append(cells + [value(m, n)[0] for m in metrics])
        n += 1

    if not child["variants"]:  # the probe: its marker alone
        for _ in range(child["markers"]):
            launch("kstudy_profile_marker")
    for v in sorted((v for v in child["variants"] if v["marker"] >= 0), key=lambda v: v["marker"]):
        launch("kstudy_profile_marker")
        for kind, label in v["events"]:
            if kind == "kernel":
                launch(f"void Kokkos::Impl::cuda_parallel_launch_local_memory<Kokkos::Impl::ParallelFor<{label}, "
                       f"Kokkos::RangePolicy<Kokkos::Cuda>, Kokkos::Cuda>>(Kokkos::Impl::ParallelFor<{label}>)")
            else:
                launch("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>(int)")
    if child["markers"] == 0:
        print("==WARNING== No kernels were profiled.")
        return rc
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(FIXED + metrics)
    w.writerow([""] * len(FIXED) + [value(m, 0)[1] for m in metrics])
    w.writerows(rows)
    with open(base + ".ncu-rep", "w") as f:
        f.write(out.getvalue())
    print(f"==PROF== Report: {base}.ncu-rep")
    print("==PROF== Disconnected from process 4242")
    return rc


def main(argv):
    if argv == ["--version"]:
        print("NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) stand-in\nVersion 0000.0.0 (stand-in)")
        return 0
    if argv and argv[0] == "--import":
        sys.stdout.write(open(argv[1]).read())
        return 0
    return profile(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
