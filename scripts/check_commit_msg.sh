#!/usr/bin/env bash
# The commit-msg hook (.pre-commit-config.yaml): a subject of at most 72 characters, then a blank line and a body
# that says why. `git log --oneline` stays readable and the reason for a change stays with it. Merge and revert
# commits git writes itself, and fixup!/squash! commits, pass as they are.
#   scripts/check_commit_msg.sh MESSAGE_FILE        exit 0 when the message follows the rule, 1 (with why) if not
set -euo pipefail
file=${1:?usage: check_commit_msg.sh MESSAGE_FILE}
# The message as git will store it: comment lines and everything below a scissors line dropped.
message=$(sed -e '/^# -\{8,\} >8 -\{8,\}$/,$d' -e '/^#/d' "$file")
subject=$(printf '%s\n' "$message" | sed -n '1p')
case $subject in
  "Merge "* | "Revert \""* | "fixup! "* | "squash! "* | "amend! "*) exit 0 ;;
esac
problems=()
[[ -n ${subject// /} ]] || problems+=("the subject line is empty")
((${#subject} <= 72)) || problems+=("the subject has ${#subject} characters; at most 72 (say the rest in the body)")
second=$(printf '%s\n' "$message" | sed -n '2p')
[[ -z $second ]] || problems+=("the second line must be blank (it separates the subject from the body)")
body=$(printf '%s\n' "$message" | sed -n '3,$p' | grep -v '^[[:space:]]*$' || true)
[[ -n $body ]] || problems+=("no body: say why the change is made, below a blank line")
if ((${#problems[@]})); then
  printf 'commit message: %s\n' "${problems[@]}" >&2
  exit 1
fi
