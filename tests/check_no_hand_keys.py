#!/usr/bin/python3
"""No Python reader spells the archive's point key by hand (issue 42): every list, tuple or set literal under
scripts/kstudy_py that holds two or more of the point key's column names (`kstudy schema`'s point_key, read from
scripts/kstudy_py/archive_schema.json) is reported, so that a join, grouping or de-duplication reads its columns from
archive.point_key() / archive.EXTENTS and cannot forget one (GEMM points differing only in `depth` were joined
together, and `kstudy compare` pooled cold- and warm-cache samples, through such lists).

Not reported:
- scripts/kstudy_py/archive.py: it defines POINT_KEY and the named subsets of it (EXTENTS, LEGACY_AXES, COPY_KEY)
  that the other modules use, each checked against the schema when it loads.
- a literal given as point_key(..., without=...): the columns it names are left out, so a column the schema adds
  later is in the key by default.
- a literal with a `# point-key names: REASON` comment on one of its lines or on the line above it: names that are
  not a key (a published CSV's column order, a table's reading order, section names that happen to equal column
  names); REASON says which.

    tests/check_no_hand_keys.py REPOSITORY
Exit 77 (ctest: skipped) when the schema file is missing (a tree without the Python reader).
"""
import ast
import io
import json
import re
import sys
import tokenize
from pathlib import Path

REPO = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
PACKAGE = REPO / "scripts" / "kstudy_py"
SCHEMA = PACKAGE / "archive_schema.json"
ALLOWED_FILES = {PACKAGE / "archive.py"}  # where POINT_KEY and its named subsets are defined
EXEMPT = re.compile(r"#\s*point-key names:\s*\S")

if not SCHEMA.is_file():
    print(f"skipped: no {SCHEMA}")
    sys.exit(77)
POINT_KEY = set(json.loads(SCHEMA.read_text())["point_key"])


def exempt_lines(source):
    """Line numbers carrying a `# point-key names: REASON` comment."""
    return {t.start[0] for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type == tokenize.COMMENT and EXEMPT.match(t.string)}


def without_literals(tree):
    """ids of the literals passed as a call's `without=` keyword (point_key's exclusions)."""
    return {id(k.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
            for k in node.keywords if k.arg == "without"}


def findings(source, name):
    """'NAME:LINE: ...' for every literal of `source` that spells two or more point-key columns, unexempted."""
    tree = ast.parse(source, name)
    exempt, excluded = exempt_lines(source), without_literals(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.List, ast.Tuple, ast.Set)) or id(node) in excluded:
            continue
        names = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in POINT_KEY]
        if len(names) < 2 or exempt & set(range(node.lineno - 1, node.end_lineno + 1)):
            continue
        out.append(f"{name}:{node.lineno}: point-key columns by hand {names}")
    return out


# The check itself first: a hand-written key is found, in any of the three literal kinds, and the exemptions are not.
PROBE = ("keys = ['variant', 'rows', 'features']\n"
         "group = ('direction', 'memory_kind')\n"
         "ok = point_key('samples', without=('layout', 'cache'))\n"
         "columns = ['rows',\n"
         "           'features']  # point-key names: a CSV's column order\n"
         "# point-key names: a table's reading order\n"
         "order = {'features', 'rows'}\n"
         "one = ['variant', 'rows']\n"
         "again = ['rows', 'depth']\n")
found = sorted(int(line.split(":")[1]) for line in findings(PROBE, "probe"))
problems = [] if found == [1, 2, 9] else [f"the check itself: the probe's findings are on lines {found}, not 1, 2, 9"]
files = sorted(PACKAGE.rglob("*.py"))
for path in files:
    if path not in ALLOWED_FILES:
        problems += findings(path.read_text(), str(path.relative_to(REPO)))
for p in problems:
    print(p)
print(f"{len(files)} file(s) under {PACKAGE.relative_to(REPO)}, {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
