#!/usr/bin/python3
"""Prints the 2026-11-30 study's tables from a dataset folder (bench.json, sweeps.h5, study.h5).

    scripts/h200_tables.py [DATA_DIR=data/h200-2026-11-30-s3]

The tables are the `h200_study` generator of scripts/results.py (what docs/results.md shows for this dataset),
printed for any folder of the same layout. Runs with Debian's /usr/bin/python3.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kstudy_py import results  # noqa: E402

data = sys.argv[1] if len(sys.argv) > 1 else "data/h200-2026-11-30-s3"
results.load_generators()
try:
    block = results.Block(f"h200_study archives={data}/bench.json,{data}/sweeps.h5,{data}/study.h5", Path.cwd(),
                          "the command line")
    print("\n".join(results.generate(block)))
except results.ResultsError as error:
    print(f"h200_tables.py: {error}", file=sys.stderr)
    sys.exit(2)
