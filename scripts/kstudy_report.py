#!/usr/bin/python3
"""kstudy report / compare / history (reached through `kstudy report ...`, `kstudy compare ...`, `kstudy history ...`).

    kstudy_report.py report ARCHIVE... --out DIR [--shape ROWSxFEATURES] [--cpu-baseline BENCH.json] [--note TEXT]
    kstudy_report.py compare A.h5 B.h5 [...] [--by backend|machine|kokkos] [--force] [--out CSV]
    kstudy_report.py compare ARCHIVE... --by device [--out CSV]
    kstudy_report.py compare BASE.h5 NEW.h5 --gate 5% [--alpha 0.01] [--min-samples 5] [--gate-json FILE]
    kstudy_report.py history add ARCHIVE... | show --variant V [...] [--plot FILE.png] | list   [--store PATH]
    kstudy_report.py advise ARCHIVE... --shape RxF [--operation OP] [--layout row-major|feature-major]
                     [--memory pageable|pinned] [--reuse N] [--machine NAME | --any-machine] [--format text|json]

Needs Debian's python3-h5py, python3-pandas, python3-numpy, python3-matplotlib (report) and python3-scipy
(compare); run it with /usr/bin/python3 (the python3 first on PATH may not see Debian's packages).
Exit codes: 0 done; 1 nothing to compare; 2 refused (bad archive, schema or experiment mismatch, usage);
3 a Python module is missing; 4 (compare --gate) a point is SLOWER beyond the gate; 5 (advise) no variant could be
predicted at the shape (outside what the archives measured: the experiment that would measure it is printed).
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
    r.add_argument("--shape", metavar="ROWSxFEATURES",
                   help="reference point for the speedup table, waterfall and roofline (default: the shape measured "
                        "with the most variants beside a CPU reference, the largest of those)")
    r.add_argument("--cpu-baseline", metavar="BENCH_JSON",
                   help="also compare against the cpu_reference repetitions of a kstudy_bench Google Benchmark JSON")
    r.add_argument("--note", action="append", metavar="TEXT", help="a caveat to print at the top of report.md")
    r.add_argument("--sections", action="append", metavar="FILE.py",
                   help="a Python module of your own report sections (@section from kstudy_py.report), loaded "
                        "beside the built-in ones; see docs/extending.md")
    c = sub.add_parser("compare", help="medians, ratio B/A and Mann-Whitney U per aligned point; --by: portability")
    c.add_argument("archives", nargs="+", metavar="ARCHIVE")
    c.add_argument("--by", choices=["backend", "machine", "kokkos", "device"],
                   help="backend|machine: per variant family, efficiency per platform and the Pennycook "
                        "performance-portability metric; kokkos: the same study under several Kokkos versions; "
                        "device: median and IQR per GPU and the device-to-device spread (kstudy run --devices)")
    c.add_argument("--force", action="store_true",
                   help="compare even if schema versions or experiment definitions differ")
    c.add_argument("-o", "--out", metavar="CSV", help="also write the table as CSV")
    c.add_argument("--gate", metavar="PERCENT",
                   help="regression gate, e.g. 5%%: per point FASTER, SLOWER, SAME or UNCERTAIN (Mann-Whitney U "
                        "and the median ratio beyond the gate); exit 4 on any SLOWER (kstudy_py/gate.py)")
    c.add_argument("--alpha", type=float, default=0.01, help="with --gate: significance level (default 0.01)")
    c.add_argument("--min-samples", type=int, default=5,
                   help="with --gate: fewer samples a side is UNCERTAIN (default 5)")
    c.add_argument("--gate-json", metavar="FILE", help="with --gate: also write the verdicts as JSON")
    h = sub.add_parser("history", help="a results history across commits: add archives, show a variant's medians "
                       "per commit with step changes, list what is stored")
    hs = h.add_subparsers(dest="history_command", required=True)
    store_help = ("the SQLite store (default $KSTUDY_HISTORY, else "
                  "${XDG_DATA_HOME:-~/.local/share}/kstudy/history.sqlite)")
    ha = hs.add_parser("add", help="record archives (the same file twice is recorded once)")
    ha.add_argument("archives", nargs="+", metavar="ARCHIVE")
    ha.add_argument("--repo", metavar="DIR", help="the git repository of the archives' commits, for commit order "
                                                  "(default: the current folder's, when it holds the commit)")
    hl = hs.add_parser("list", help="list the recorded archives and whether their files are still there unchanged")
    hl.add_argument("--quick", action="store_true", help="check file sizes only, not their SHA-256")
    hw = hs.add_parser("show", help="a variant's median and IQR per commit, steps marked")
    hw.add_argument("--variant", required=True, help="a variant id (name@backend) or a name (every backend)")
    hw.add_argument("--point", help="a point as shown, e.g. 1048576x16 (default: every point)")
    hw.add_argument("--timer", help="e.g. host_wall, resident_wall, device_events (default: every timer)")
    hw.add_argument("--machine", help="only machines whose name contains this (GPU name or host)")
    hw.add_argument("--experiment", help="only this experiment")
    hw.add_argument("--threshold", default="5%", metavar="PERCENT",
                    help="smallest median change called a step (default 5%%)")
    hw.add_argument("--alpha", type=float, default=0.01, help="Mann-Whitney U level for a step (default 0.01)")
    hw.add_argument("--min-samples", type=int, default=5, help="fewer samples a side: no step is called (default 5)")
    hw.add_argument("--repo", metavar="DIR", help="git repository for the commit order (default: the one recorded)")
    hw.add_argument("--plot", metavar="FILE.png", help="also draw the history")
    for q in (ha, hl, hw):
        q.add_argument("--store", metavar="PATH", help=store_help)
    a = sub.add_parser("advise", help="which variant for your shape, layout, memory and reuse, predicted from "
                                      "archives (kstudy_py/advise.py)")
    a.add_argument("archives", nargs="+", metavar="ARCHIVE")
    a.add_argument("--shape", required=True, metavar="RxF[xD]",
                   help="your problem in the operation's axes, e.g. 3000000x48 (rows x features)")
    a.add_argument("--operation", help="the operation (default: the only one in the archives)")
    a.add_argument("--layout", choices=["row-major", "feature-major"],
                   help="how your data are laid out: a variant wanting the other layout pays the measured conversion")
    a.add_argument("--memory", choices=["pageable", "pinned"], default="pageable",
                   help="the host memory your data live in (default pageable)")
    a.add_argument("--reuse", type=int, default=1, metavar="N", help="calls per upload (default 1)")
    a.add_argument("--machine", metavar="NAME",
                   help="the machine to advise for (default: this one: its GPU, else its CPU); archives of another "
                        "machine are refused")
    a.add_argument("--any-machine", action="store_true", help="use archives of any machine(s)")
    a.add_argument("--format", choices=["text", "json"], default="text")
    return p


def main(argv):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `kstudy compare ... | head` ends quietly
    args = parser().parse_args(argv)
    if args.command == "report" or (args.command == "history" and getattr(args, "plot", None)):
        require("numpy", "pandas", "h5py", "matplotlib", *(("scipy",) if args.command == "history" else ()))
    else:
        require("numpy", "pandas", "h5py", "scipy")
    from kstudy_py import archive
    try:
        if args.command == "report":
            from kstudy_py import report
            return report.main(args)
        if args.command == "history":
            from kstudy_py import history
            return history.main(args)
        if args.command == "advise":
            from kstudy_py import advise
            return advise.main(args)
        if args.gate is None and (args.gate_json or args.alpha != 0.01 or args.min_samples != 5):
            print("kstudy compare: --gate-json, --alpha and --min-samples go with --gate", file=sys.stderr)
            return 2
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
