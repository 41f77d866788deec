#!/usr/bin/python3
"""Prints the Kokkos-version comparison of two builds of one commit from their bundles' bench.json.

    scripts/kokkos_versions_tables.py DIR_A DIR_B   (older Kokkos first; two builds of one Kokkos are named by folder)

Each DIR holds what scripts/device_kokkos_compare.sh wrote for one build (bench.json, info.txt naming the Kokkos
version). The tables are the `kokkos_versions` generator of scripts/results.py (what docs/results.md shows).
Runs with Debian's /usr/bin/python3.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kstudy_py import results  # noqa: E402

if len(sys.argv) != 3:
    print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
    sys.exit(2)
results.load_generators()
try:
    block = results.Block(f"kokkos_versions archives={sys.argv[1]}/bench.json,{sys.argv[2]}/bench.json", Path.cwd(),
                          "the command line")
    print("\n".join(results.generate(block)))
except results.ResultsError as error:
    print(f"kokkos_versions_tables.py: {error}", file=sys.stderr)
    sys.exit(2)
