#!/usr/bin/env bash
# The archive schema is declared once, in the C++ record tables: `kstudy schema` prints it, and the Python reader
# loads scripts/kstudy_py/archive_schema.json. This fails when that file is not the binary's output (a column added,
# renamed or retyped without regenerating it), and shows the difference; and when docs/archive_schema.md's table of
# columns, or its table of point phases, differs from the schema.
#   tests/check_archive_schema.sh KSTUDY SOURCE_DIR
set -euo pipefail
kstudy=$1 committed=$2/scripts/kstudy_py/archive_schema.json
if ! diff -u "$committed" <("$kstudy" schema); then
  echo "check_archive_schema: $committed is not \`kstudy schema\`'s output; regenerate it:" >&2
  echo "  $kstudy schema > $committed" >&2
  exit 1
fi
echo "check_archive_schema: $committed matches kstudy schema"

# The documentation's rows `| \`table\` | column, column, ... |` and `| phase | \`column\` | ... |`, against the schema.
/usr/bin/python3 - "$committed" "$2/docs/archive_schema.md" <<'PY'
import json
import re
import sys

schema = json.load(open(sys.argv[1]))
doc = open(sys.argv[2]).read()
failures = []
for table in schema["tables"]:
    row = re.search(r"^\| `%s` +\| ([^|]*)\|" % re.escape(table["table"]), doc, re.M)
    columns = [f["name"] for f in table["fields"]]
    listed = [c.strip() for c in row.group(1).split(",")] if row else None
    if listed != columns:
        failures.append(f"table {table['table']}: the doc lists {listed}, the schema has {columns}")
for phase in schema["point_phases"]:
    if not re.search(r"^\| %s \| `%s` \|" % (phase["name"], phase["column"]), doc, re.M):
        failures.append(f"point phase {phase['name']} ({phase['column']}) has no row in the doc's phase table")
for failure in failures:
    print(f"check_archive_schema: FAIL: {sys.argv[2]}: {failure}", file=sys.stderr)
if failures:
    sys.exit(1)
print(f"check_archive_schema: {sys.argv[2]} lists every table's columns and every point phase")
PY
