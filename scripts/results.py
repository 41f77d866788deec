#!/usr/bin/python3
"""Regenerates the result blocks of markdown files from the archives their markers name.

    scripts/results.py [FILE ...] [--root DIR]            print each file's regenerated text
    scripts/results.py [FILE ...] --write                 rewrite each file's blocks in place
    scripts/results.py [FILE ...] --check                 exit 1 and print a unified diff where a file differs
                                                          from its regeneration; 0 when every file matches
    scripts/results.py --list                             the generators a marker can name

FILE defaults to README.md and docs/results.md of the repository. A block is

    <!-- kstudy:results GENERATOR archives=data/DATASET/a.h5[,data/DATASET/b.json] [key=value ...] -->
    <!-- kstudy:end -->

(paths relative to --root, default the repository); the generators are in scripts/kstudy_py/results/.
Exit codes: 0 done / up to date, 1 a file differs (--check), 2 a bad marker, file or archive, 77 h5py missing.
Runs with Debian's /usr/bin/python3 (python3-h5py, python3-pandas, python3-scipy).
"""
import argparse
import difflib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

try:
    import h5py  # noqa: F401  (the archives' reader needs it; report a missing one as a skip)
except ImportError:  # pragma: no cover - depends on the machine
    print("results.py: h5py is missing (Debian: apt-get install python3-h5py)", file=sys.stderr)
    sys.exit(77)

from kstudy_py import results  # noqa: E402


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="markdown files (default: README.md docs/results.md)")
    parser.add_argument("--root", type=Path, default=REPO, help="the folder archive paths are relative to")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the blocks in place")
    mode.add_argument("--check", action="store_true", help="exit 1 with a diff where a file is out of date")
    mode.add_argument("--list", action="store_true", help="list the generators")
    args = parser.parse_args(argv)
    generators = results.load_generators()
    if args.list:
        for name, (_, description) in sorted(generators.items()):
            print(f"{name}: {description}")
        return 0
    files = args.files or [REPO / f for f in results.PAGES]
    stale = 0
    for path in files:
        try:
            old = path.read_text()
        except OSError as error:
            print(f"results.py: cannot read {path} ({error.strerror})", file=sys.stderr)
            return 2
        try:
            new, count = results.regenerate(old, args.root.resolve(), str(path))
        except results.ResultsError as error:
            print(f"results.py: {error}", file=sys.stderr)
            return 2
        if args.check:
            if new != old:
                stale += 1
                sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                           f"{path} (committed)", f"{path} (from the archives)"))
            print(f"results.py: {path}: {count} block(s), {'OUT OF DATE' if new != old else 'up to date'}",
                  file=sys.stderr)
        elif args.write:
            if new != old:
                path.write_text(new)
            print(f"results.py: {path}: {count} block(s){', rewritten' if new != old else ', unchanged'}",
                  file=sys.stderr)
        else:
            sys.stdout.write(new)
    if stale:
        print(f"results.py: {stale} file(s) differ from their archives; `scripts/results.py --write` regenerates "
              "them (edit the prose outside the blocks, or the generators, never a block)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
