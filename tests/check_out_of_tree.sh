#!/usr/bin/env bash
# kstudy as a library: installs this build into a scratch prefix (cmake --install) and runs
# examples/out_of_tree/check.sh against the INSTALLED package (find_package(kstudy) + kstudy_add_study, then
# list -> run -> gate -> report -> submit -> merge -> bench). Nothing of the build tree is used but the install.
#   tests/check_out_of_tree.sh BUILD_DIR SOURCE_DIR   (exit 77 = skipped: a cuda build without a GPU)
set -euo pipefail
build=$1; src=$2
prefix=$(mktemp -d); trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" > "$prefix.install.log" 2>&1 || { cat "$prefix.install.log"; exit 1; }
rm -f "$prefix.install.log"
exec bash "$src/examples/out_of_tree/check.sh" "$prefix"
