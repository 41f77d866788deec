"""scripts/data_provenance.py on a temporary data folder: --write generates the block from the archives and keeps
the prose, --check passes on what --write wrote and fails, naming the file, on every kind of drift (a README citing
another commit, a dirty archive called clean, a diff hash missing, a README with no block, a stale line, a table row
citing another commit, a dataset without README), and holds data/ to the budget data/README.md declares.

    check_data_provenance.py SCRIPT        (exit 0 passed, 1 failed, 77 h5py missing)
"""
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from check_support import Cases, require

h5py = require("h5py")
SCRIPT = Path(sys.argv[1])
CLEAN = "aca4d11edd4c5b495d25fece417c38cee5b3848c"
DIRTY = "463f7af59dde24dadbc905993a0a2418d0f7c199"
DIFF = "868852fccbe3ceb874a89956cb5db60535c3aae89965c40de2cbf1a63b7ad4be"
cases = Cases()
check = cases.check


def archive(path, **attrs):
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as f:
        f.attrs["schema_version"] = "7"
        for k, v in attrs.items():
            f.attrs[k] = v


def bench(path, context):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"context": context, "benchmarks": []}))


def run(data, *flags):
    r = subprocess.run([sys.executable, str(SCRIPT), "--data", str(data), *flags], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


PROSE = f"""# A dataset

| file | commit | what |
| --- | --- | --- |
| `clean.h5` | `{CLEAN[:7]}` | a clean archive |
| `sub/dirty.h5` | dirty tree at `{DIRTY[:7]}` | one with its diff hash |

Prose the script must keep.
"""

with tempfile.TemporaryDirectory() as tmp:
    data = Path(tmp) / "data"
    ds = data / "ds"
    archive(ds / "clean.h5", git_commit=CLEAN, git_dirty="false")
    archive(ds / "sub" / "dirty.h5", git_commit=DIRTY, git_dirty="true", git_diff_sha256=DIFF)
    archive(ds / "old_dirty.h5", git_commit=DIRTY, git_dirty="true")  # before git_diff_sha256 existed
    bench(ds / "bench.json", {"date": "2026-12-01"})                   # before bench recorded commits
    bench(ds / "bench_new.json", {"git_commit": CLEAN, "git_dirty": "false"})
    (ds / "README.md").write_text(PROSE)

    code, out = run(data, "--check")
    check(code == 1 and "has no provenance block" in out and "ds/clean.h5" in out, f"no block must fail: {out}")

    code, out = run(data, "--write")
    check(code == 0, f"--write: {out}")
    readme = (ds / "README.md").read_text()
    check(readme.startswith(PROSE), "--write kept the prose")
    for line in [f"- `clean.h5`: `{CLEAN[:7]}` (clean tree)",
                 f"- `sub/dirty.h5`: dirty tree at `{DIRTY[:7]}`, diff sha256 `{DIFF[:16]}`",
                 f"- `old_dirty.h5`: dirty tree at `{DIRTY[:7]}`",
                 "- `bench.json`: commit not recorded",
                 f"- `bench_new.json`: `{CLEAN[:7]}` (clean tree)"]:
        check(line in readme, f"block line {line!r} in:\n{readme}")
    code, out = run(data, "--check")
    check(code == 0 and "5 archives, 0 mismatches" in out, f"--check after --write: {out}")
    code, again = run(data, "--write")
    check(code == 0 and "updated" not in again, f"a second --write changes nothing: {again}")

    def drifted(old, new, expect, name):
        (ds / "README.md").write_text(readme.replace(old, new))
        code, out = run(data, "--check")
        check(code == 1 and expect in out, f"{name}: exit {code}, output:\n{out}")

    drifted(f"- `clean.h5`: `{CLEAN[:7]}` (clean tree)", "- `clean.h5`: `41710b9` (clean tree)",
            "data/ds/clean.h5:", "a block line citing another commit")
    drifted(f"- `old_dirty.h5`: dirty tree at `{DIRTY[:7]}`", f"- `old_dirty.h5`: `{DIRTY[:7]}` (clean tree)",
            "data/ds/old_dirty.h5:", "a dirty archive called clean")
    drifted(f", diff sha256 `{DIFF[:16]}`", "", "data/ds/sub/dirty.h5:", "the diff hash left out")
    drifted("- `bench.json`: commit not recorded\n", "", "data/ds/bench.json: not in", "a line missing")
    drifted("- `bench.json`: commit not recorded\n", "- `bench.json`: commit not recorded\n- `gone.h5`: `abcdef0` "
            "(clean tree)\n", "data/ds/gone.h5: listed", "a line for an archive that is not there")
    drifted(f"| `clean.h5` | `{CLEAN[:7]}` |", "| `clean.h5` | `5eee49c` |", "data/ds/clean.h5: README table row",
            "a table row citing another commit")
    drifted(f"| `sub/dirty.h5` | dirty tree at `{DIRTY[:7]}` |", f"| `sub/dirty.h5` | `{DIRTY[:7]}` |",
            "does not say the archive was built from a dirty tree", "a table row hiding a dirty tree")
    (ds / "README.md").write_text(readme)

    archive(data / "other" / "x.h5", git_commit=CLEAN, git_dirty="false")
    code, out = run(data, "--check")
    check(code == 1 and "data/other/x.h5: no data/other/README.md" in out, f"a dataset without README: {out}")

    # The budget data/README.md declares: within it --check passes; a folder or data/ over it fails, named.
    shutil.rmtree(data / "other")
    (data / "README.md").write_text("# data\n\n| budget | MiB |\n| --- | --- |\n| data/ in all | 1 |\n"
                                    "| one dataset folder | 0.5 |\n")
    code, out = run(data, "--check")
    check(code == 0 and "of its budget of 1 MiB" in out, f"within the budget: exit {code}, {out}")
    (ds / "raw.bin").write_bytes(bytes(600 * 1024))
    code, out = run(data, "--check")
    check(code == 1 and "data/ds holds 0.6 MiB, over the budget of 0.5 MiB per dataset folder" in out,
          f"a dataset folder over its budget: exit {code}, {out}")
    (data / "big.bin").write_bytes(bytes(1100 * 1024))
    code, out = run(data, "--check")
    check(code == 1 and "over its budget of 1 MiB" in out, f"data/ over its budget: exit {code}, {out}")

cases.finish("data_provenance.py: every drift caught")
