#!/usr/bin/env bash
# scripts/check_commit_msg.sh on messages that pass and fail the rule.   tests/check_commit_msg.sh SOURCE_DIR
set -uo pipefail
hook=$1/scripts/check_commit_msg.sh
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
failures=0
expect() {  # 0|1 DESCRIPTION MESSAGE
  printf '%b' "$3" > "$work/msg"
  bash "$hook" "$work/msg" 2> "$work/err"
  local rc=$?
  if [[ $rc -eq $1 ]]; then echo "ok: $2"; else echo "FAIL: $2: exit $rc: $(cat "$work/err")"; failures=$((failures + 1)); fi
}
long=$(printf 'x%.0s' $(seq 73))
expect 0 "a short subject, a blank line, a body" "Fix the reader\n\nHDF5 kept state across files.\n"
expect 0 "a 72-character subject" "$(printf 'y%.0s' $(seq 72))\n\nwhy\n"
expect 0 "comments and a scissors section are not the message" "Fix it\n\nwhy\n# Please enter\n# ------------------------ >8 ------------------------\ndiff\n"
expect 0 "a merge git wrote" "Merge branch 'helper'\n"
expect 1 "a 73-character subject" "$long\n\nwhy\n"
expect 1 "no body" "Fix the reader\n"
expect 1 "a body without the blank line" "Fix the reader\nbecause\n"
expect 1 "an empty message" "# only a comment\n"
echo "$((8 - failures)) passed, $failures failed"
[[ $failures -eq 0 ]]
