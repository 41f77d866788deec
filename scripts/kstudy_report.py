#!/usr/bin/python3
"""kstudy report / compare (reached through `kstudy report ...` and `kstudy compare ...`).

    kstudy_report.py report ARCHIVE... --out DIR [--shape 1048576x16] [--cpu-baseline BENCH.json] [--note TEXT]
    kstudy_report.py compare A.h5 B.h5 [...] [--by backend|machine|kokkos] [--force] [--out CSV]

Needs Debian's python3-h5py, python3-pandas, python3-numpy, python3-matplotlib (report) and python3-scipy
(compare); run it with /usr/bin/python3 (the python3 first on PATH may not see Debian's packages).
Exit codes: 0 done; 1 nothing to compare; 2 refused (bad archive, schema or experiment mismatch, usage);
3 a Python module is missing.
"""
import argparse
import importlib
import os
import signal
import sys

sys.dont_write_bytecode = True  # the scripts folder may be a read-only bundle or source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

DEBIAN_PACKAGES = {"numpy": "python3-numpy", "pandas": "python3-pandas", "h5py": "python3-h5py",
                   "matplotlib": "python3-matplotlib", "scipy": "python3-scipy"}


def require(*modules):
    missing = []
    for m in modules:
        try:
            importlib.import_module(m)
        except ImportError as error:
            missing.append((m, error))
    if missing:
        for m, error in missing:
            print(f"kstudy: error: {sys.executable} cannot import {m} ({error})", file=sys.stderr)
        packages = " ".join(DEBIAN_PACKAGES[m] for m, _ in missing)
        print(f"kstudy: install Debian's package(s): apt-get install {packages}  (and run with /usr/bin/python3, "
              "or set KSTUDY_PYTHON to a python that has them)", file=sys.stderr)
        sys.exit(3)


def parser():
    p = argparse.ArgumentParser(prog="kstudy", description="Reports and comparisons from kstudy HDF5 archives.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("report", help="evidence tables (CSV), figures (PNG) and report.md from archives")
    r.add_argument("archives", nargs="+", metavar="ARCHIVE")
    r.add_argument("-o", "--out", required=True, metavar="DIR", help="output folder (created)")
    r.add_argument("--shape", default="1048576x16", metavar="ROWSxFEATURES",
                   help="reference point for the speedup table, waterfall and roofline (default 1048576x16)")
    r.add_argument("--cpu-baseline", metavar="BENCH_JSON",
                   help="also compare against the cpu_reference repetitions of a kstudy_bench Google Benchmark JSON")
    r.add_argument("--note", action="append", metavar="TEXT", help="a caveat to print at the top of report.md")
    r.add_argument("--sections", action="append", metavar="FILE.py",
                   help="a Python module of your own report sections (@section from kstudy_py.report), loaded "
                        "beside the built-in ones; see docs/extending.md")
    c = sub.add_parser("compare", help="medians, ratio B/A and Mann-Whitney U per aligned point; --by: portability")
    c.add_argument("archives", nargs="+", metavar="ARCHIVE")
    c.add_argument("--by", choices=["backend", "machine", "kokkos"],
                   help="backend|machine: per variant family, efficiency per platform and the Pennycook "
                        "performance-portability metric; kokkos: the same study under several Kokkos versions")
    c.add_argument("--force", action="store_true", help="compare even if schema versions or experiment definitions differ")
    c.add_argument("-o", "--out", metavar="CSV", help="also write the table as CSV")
    return p


def main(argv):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `kstudy compare ... | head` ends quietly
    args = parser().parse_args(argv)
    if args.command == "report":
        require("numpy", "pandas", "h5py", "matplotlib")
    else:
        require("numpy", "pandas", "h5py", "scipy")
    from kstudy_py import archive
    try:
        if args.command == "report":
            from kstudy_py import report
            return report.main(args)
        if args.by == "machine" and len(args.archives) < 2:
            print("kstudy compare: --by machine needs archives from at least two machines", file=sys.stderr)
            return 2
        from kstudy_py import compare
        return compare.main(args)
    except archive.ArchiveError as error:
        print(f"kstudy {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
