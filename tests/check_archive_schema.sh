#!/usr/bin/env bash
# The archive schema is declared once, in the C++ record tables: `kstudy schema` prints it, and the Python reader
# loads scripts/kstudy_py/archive_schema.json. This fails when that file is not the binary's output (a column added,
# renamed or retyped without regenerating it), and shows the difference.
#   tests/check_archive_schema.sh KSTUDY SOURCE_DIR
set -euo pipefail
kstudy=$1 committed=$2/scripts/kstudy_py/archive_schema.json
if ! diff -u "$committed" <("$kstudy" schema); then
  echo "check_archive_schema: $committed is not \`kstudy schema\`'s output; regenerate it:" >&2
  echo "  $kstudy schema > $committed" >&2
  exit 1
fi
echo "check_archive_schema: $committed matches kstudy schema"
