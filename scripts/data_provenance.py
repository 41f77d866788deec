#!/usr/bin/python3
"""The commit lines of data/*/README.md, read from the archives themselves, so that they cannot drift.

Every archive under a dataset folder data/<dataset>/ (any depth; archives packed in tar files are not read):
  - *.h5            a kstudy archive: root attributes git_commit, git_dirty and, for a dirty tree (archives written
                    since the attribute exists), git_diff_sha256 (docs/archive_schema.md);
  - bench*.json     kstudy_bench's Google Benchmark JSON: the same keys in its "context" (bench JSONs written before
                    they were added record no commit).

README convention: data/<dataset>/README.md carries one generated block, between the marker lines

    <!-- provenance:begin -->
    <!-- provenance:end -->

with one line per archive, path relative to the dataset folder, sorted:

    - `lab.h5`: `555f872` (clean tree)
    - `stream.h5`: dirty tree at `463f7af`
    - `run.h5`: dirty tree at `463f7af`, diff sha256 `0123456789abcdef`
    - `bench.json`: commit not recorded

The prose around the block is the README's own and is never rewritten. --check also holds data/ to the size
budget that data/README.md declares in its budget table (rows `| data/ in all | N |` and `| one dataset folder |
N |`, in MiB): the clone carries every committed byte of data/ for ever, so its growth is refused here, not noticed
later. Without the table there is no budget to check. Besides the block, --check holds the
README's tables to the archives: a table row whose first cell is exactly an archive's path in backticks and which
names commits (7 to 40 hex digits in backticks) must name the archive's commit, and must say "dirty" when the
archive records a dirty tree.

    scripts/data_provenance.py [--data DIR]            print the block each README should carry
    scripts/data_provenance.py [--data DIR] --write    write it into each README (replacing the old block, or
                                                       appended at the end where there is none)
    scripts/data_provenance.py [--data DIR] --check    exit 1 naming every archive whose README does not say
                                                       what the archive records; 0 when all do

Exit codes: 0 done / consistent, 1 a mismatch (--check), 2 bad usage, 77 h5py missing (ctest: skipped).
Runs with Debian's /usr/bin/python3 and python3-h5py.
"""
import argparse
import json
import re
import sys
from pathlib import Path

try:
    import h5py
except ImportError:  # pragma: no cover - depends on the machine
    print("data_provenance.py: h5py is missing (Debian: apt-get install python3-h5py)", file=sys.stderr)
    sys.exit(77)

BEGIN = "<!-- provenance:begin -->"
END = "<!-- provenance:end -->"
INTRO = ["The commit each archive records, written by `scripts/data_provenance.py --write` from the archive itself",
         "(HDF5 root attributes `git_commit`, `git_dirty`, `git_diff_sha256`; a bench JSON's `context`). Not edited",
         "by hand: `scripts/data_provenance.py --check` (ctest `data_provenance`) fails when it or a table row above",
         "disagrees with the archives."]
SHORT = 7          # commit digits shown, as elsewhere in the READMEs
DIFF_SHORT = 16    # diff hash digits shown
HEX = re.compile(r"`([0-9a-f]{7,40})`")


def text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


class Provenance:
    """What one archive records about the tree it was built from."""

    def __init__(self, commit=None, dirty=None, diff=None):
        self.commit = commit or None   # full hash, "unknown", or None (not recorded)
        self.dirty = dirty or None     # "true", "false", "unknown" or None
        self.diff = diff or None       # sha256 hex of the diff, or None

    def describe(self):
        if self.commit is None:
            return "commit not recorded"
        if self.commit == "unknown":
            return "commit unknown (built outside a git tree)"
        short = f"`{self.commit[:SHORT]}`"
        if self.dirty == "true":
            line = f"dirty tree at {short}"
            if self.diff:
                line += f", diff sha256 `{self.diff[:DIFF_SHORT]}`"
            return line
        if self.dirty == "false":
            return f"{short} (clean tree)"
        return f"{short} (dirty flag not recorded)"


def read_provenance(path):
    if path.suffix == ".h5":
        with h5py.File(path, "r") as f:
            attrs = {k: text(v) for k, v in f.attrs.items()}
    else:
        with open(path) as f:
            attrs = {k: str(v) for k, v in json.load(f).get("context", {}).items()}
    return Provenance(attrs.get("git_commit"), attrs.get("git_dirty"), attrs.get("git_diff_sha256"))


def archives_of(dataset):
    """Archive paths of one dataset folder, relative to it, sorted."""
    found = [p for p in dataset.rglob("*") if p.is_file() and (p.suffix == ".h5" or
                                                               (p.name.startswith("bench") and p.suffix == ".json"))]
    return sorted(p.relative_to(dataset).as_posix() for p in found)


def expected_lines(dataset):
    return {rel: f"- `{rel}`: {read_provenance(dataset / rel).describe()}" for rel in archives_of(dataset)}


def block_text(lines):
    return "\n".join([BEGIN] + INTRO + [""] + [lines[k] for k in sorted(lines)] + [END])


def split_block(readme_text):
    """(before, block lines or None, after) of a README's text."""
    start, stop = readme_text.find(BEGIN), readme_text.find(END)
    if start < 0 or stop < start:
        return readme_text, None, ""
    inner = readme_text[start + len(BEGIN):stop].splitlines()
    return readme_text[:start], inner, readme_text[stop + len(END):]


def datasets_of(data):
    return sorted(d for d in data.iterdir() if d.is_dir() and archives_of(d))


def shown(path, data):
    """A path as the messages show it: from the folder holding data/ (data/<dataset>/...)."""
    try:
        return path.relative_to(data.parent).as_posix()
    except ValueError:
        return path.as_posix()


def table_row_problems(dataset, readme_prose, provenance, data):
    """Table rows (outside the block) that name an archive and a commit it does not record."""
    problems = []
    for line in readme_prose.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else []
        if not cells:
            continue
        match = re.fullmatch(r"`([^`]+)`", cells[0])
        if not match or match.group(1) not in provenance:
            continue
        rel = match.group(1)
        p = provenance[rel]
        rest = " | ".join(cells[1:])  # the row after the file's own name
        named = HEX.findall(rest)
        if not named or p.commit in (None, "unknown"):
            continue
        where = f"{shown(dataset / rel, data)}: README table row"
        if not any(p.commit.startswith(h) for h in named):
            problems.append(f"{where} names {', '.join(named)}, but the archive records {p.describe()}")
        elif p.dirty == "true" and "dirty" not in rest:
            problems.append(f"{where} does not say the archive was built from a dirty tree ({p.describe()})")
    return problems


BUDGET_ROWS = {"data/ in all": "total", "one dataset folder": "dataset"}
MIB = 1 << 20


def budget_of(data):
    """{"total": MiB, "dataset": MiB} from data/README.md's budget table; {} without one."""
    readme = data / "README.md"
    budget = {}
    if readme.exists():
        for line in readme.read_text().splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 2 and cells[0] in BUDGET_ROWS and re.fullmatch(r"\d+(\.\d+)?", cells[1]):
                budget[BUDGET_ROWS[cells[0]]] = float(cells[1])
    return budget


def folder_bytes(folder):
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def budget_problems(data):
    """Where data/ or a dataset folder is over the budget data/README.md declares."""
    budget = budget_of(data)
    problems = []
    total = folder_bytes(data)
    if "total" in budget and total > budget["total"] * MIB:
        problems.append(f"data/ holds {total / MIB:.1f} MiB, over its budget of {budget['total']:g} MiB "
                        "(data/README.md: thin or retire a dataset, or keep bulky raw data outside the clone)")
    for dataset in datasets_of(data):
        size = folder_bytes(dataset)
        if "dataset" in budget and size > budget["dataset"] * MIB:
            problems.append(f"{shown(dataset, data)} holds {size / MIB:.1f} MiB, over the budget of "
                            f"{budget['dataset']:g} MiB per dataset folder (data/README.md)")
    return problems


def check(data):
    problems = budget_problems(data)
    for dataset in datasets_of(data):
        lines = expected_lines(dataset)
        readme = dataset / "README.md"
        if not readme.exists():
            problems += [f"{shown(dataset / rel, data)}: no {shown(readme, data)} (it should say: {line[2:]})"
                         for rel, line in lines.items()]
            continue
        content = readme.read_text()
        before, block, after = split_block(content)
        if block is None:
            problems += [f"{shown(dataset / rel, data)}: {shown(readme, data)} has no provenance block "
                         f"(run scripts/data_provenance.py --write; it should say: {line[2:]})"
                         for rel, line in lines.items()]
        else:
            listed = {}
            for line in block:
                m = re.match(r"- `([^`]+)`:", line)
                if m:
                    listed[m.group(1)] = line.rstrip()
            for rel, line in lines.items():
                if rel not in listed:
                    problems.append(f"{shown(dataset / rel, data)}: not in {shown(readme, data)}'s provenance block "
                                    f"(it should say: {line[2:]})")
                elif listed[rel] != line:
                    problems.append(f"{shown(dataset / rel, data)}: {shown(readme, data)} says '{listed[rel][2:]}', "
                                    f"the archive records: {line[len(rel) + 6:]}")
            for rel in sorted(set(listed) - set(lines)):
                problems.append(f"{shown(dataset / rel, data)}: listed in {shown(readme, data)}'s provenance block, "
                                "but there is no such archive")
        provenance = {rel: read_provenance(dataset / rel) for rel in lines}
        problems += table_row_problems(dataset, before + after, provenance, data)
    return problems


def write(data):
    changed = []
    for dataset in datasets_of(data):
        readme = dataset / "README.md"
        block = block_text(expected_lines(dataset))
        content = readme.read_text() if readme.exists() else f"# {dataset.name}\n"
        before, old, after = split_block(content)
        updated = (before + block + after) if old is not None else content.rstrip("\n") + "\n\n" + block + "\n"
        if updated != content:
            readme.write_text(updated)
            changed.append(shown(readme, data))
    return changed


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parent.parent / "data",
                        help="the folder of dataset folders (default: the repository's data/)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 naming each archive its README misstates")
    mode.add_argument("--write", action="store_true", help="write the generated block into each README")
    args = parser.parse_args(argv)
    args.data = args.data.resolve()
    if not args.data.is_dir():
        print(f"data_provenance.py: {args.data} is not a folder", file=sys.stderr)
        return 2
    if args.check:
        problems = check(args.data)
        for p in problems:
            print("MISMATCH", p)
        count = sum(len(archives_of(d)) for d in datasets_of(args.data))
        budget = budget_of(args.data)
        if budget:
            print(f"data_provenance.py: data/ holds {folder_bytes(args.data) / MIB:.1f} MiB of its budget of "
                  f"{budget.get('total', float('inf')):g} MiB")
        print(f"data_provenance.py: {count} archives, {len(problems)} mismatches"
              + ("" if not problems else " (scripts/data_provenance.py --write regenerates the blocks; table rows are "
                                         "fixed by hand)"))
        return 1 if problems else 0
    if args.write:
        for readme in write(args.data):
            print("updated", readme)
        return 0
    for dataset in datasets_of(args.data):
        print(f"{shown(dataset / 'README.md', args.data)}:")
        print(block_text(expected_lines(dataset)))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
