#!/usr/bin/env bash
# Shards, merge and submit through the CLI, without a Slurm (tests/slurm/check_slurm.sh runs a real one):
#   run --shard K/N  -> the shards' units do not overlap and their union is the unsharded run's samples
#   merge            -> exactly the union of the shards' rows; refuses mixed sets (experiment, schema,
#                       duplicates) and, without --partial, missing shards (exit 3), writing nothing
#   submit           -> --dry-run script, clear errors (no sbatch, bad --array, unknown experiment), and a
#                       stub sbatch: the script it gets runs each shard; --resume resubmits only the
#                       missing/incomplete ones and refuses while an earlier job still runs
# Usage: check_shard.sh KSTUDY_EXE SOURCE_DIR FLAVOUR   (exit 77 = skipped: a cuda build without a GPU)
set -uo pipefail
kstudy=$1; src=$2; flavour=${3:-cpu}
if [[ $flavour == cuda ]] && ! nvidia-smi -L > /dev/null 2>&1; then
  echo "skipped: the cuda flavour cannot initialise Kokkos without a GPU"
  exit 77
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export KSTUDY_CEILING_BYTES=33554432 OMP_NUM_THREADS=2 OMP_PROC_BIND=false KSTUDY_QUIET=1
py=/usr/bin/python3
check=$src/tests/check_run_archive.py
tiny=$src/tests/shard_tiny.json  # 3 points x 2 replications = 6 units
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
expect_fail() {  # EXPECTED_RC|any MESSAGE-SUBSTRING DESCRIPTION -- COMMAND...
  local want=$1 text=$2 what=$3; shift 4
  "$@" > "$work/out" 2> "$work/err"; local rc=$?
  if [[ $rc -eq 0 ]]; then fail "$what: exit 0"; return; fi
  if [[ $want != any && $rc -ne $want ]]; then fail "$what: exit $rc, expected $want: $(cat "$work/err")"; return; fi
  grep -qF -- "$text" "$work/err" || { fail "$what: no '$text' in: $(cat "$work/err")"; return; }
  pass "$what (rc=$rc): $(grep -F -- "$text" "$work/err" | head -1 | cut -c1-150)"
}

# --- run --shard: determinism and coverage ----------------------------------------------------------
"$kstudy" run "$tiny" --out "$work/full.h5" -q > /dev/null 2>&1 || fail "unsharded run failed"
for k in 0 1 2; do
  "$kstudy" run "$tiny" --shard $k/3 --out "$work/s$k.h5" -q > /dev/null 2> "$work/err" || fail "shard $k/3: $(cat "$work/err")"
done
# The union of the shards covers the same (sample keys) as the unsharded run, once.
"$kstudy" merge "$work/m.h5" "$work/s0.h5" "$work/s1.h5" "$work/s2.h5" > "$work/out" 2>&1 || fail "merge: $(cat "$work/out")"
$py "$check" union "$work/m.h5" shard_tiny "$work/s0.h5" "$work/s1.h5" "$work/s2.h5" || fail "merged != union of shards"
$py "$check" same-points "$work/m.h5" "$work/full.h5" shard_tiny || fail "merged shards != unsharded run"
$py "$check" attr "$work/m.h5" merged_shards 0,1,2 || fail "merged shards not recorded"
$py "$check" attr "$work/m.h5" complete true || fail "merge not complete"
$py "$check" attr "$work/s1.h5" shard_index 1 || fail "shard index not recorded"
$py "$check" attr "$work/s1.h5" shard_count 3 || fail "shard count not recorded"
# A second sharding of the same run picks exactly the same units (deterministic).
"$kstudy" run "$tiny" --shard 1/3 --out "$work/s1again.h5" -q > /dev/null 2>&1 || fail "shard 1/3 again"
$py - "$work/s1.h5" "$work/s1again.h5" <<'PY' || fail "shard 1/3 picked different units twice"
import sys, h5py
units = [sorted({(int(p), int(r)) for p, r in zip(h5py.File(a, "r")["/experiments/shard_tiny/samples"]["point"],
                                                 h5py.File(a, "r")["/experiments/shard_tiny/samples"]["replication"])})
         for a in sys.argv[1:]]
assert units[0] == units[1], units
print(f"ok: shard 1/3 picks the same units twice: {units[0]}")
PY
expect_fail any "expected K/N" "--shard 3/3 refused" -- "$kstudy" run "$tiny" --shard 3/3 --out "$work/bad.h5" -q
[[ -e $work/bad.h5 ]] && fail "--shard 3/3 left an archive"
expect_fail any "is shard 0/3 but this run is shard 1/3" "resuming a shard as another refused" -- \
  "$kstudy" run "$tiny" --shard 1/3 --resume --out "$work/s0.h5" -q

# --- merge refusals ---------------------------------------------------------------------------------
expect_fail 3 "missing shards of 0..2: 1" "missing shard reported, exit 3" -- \
  "$kstudy" merge "$work/part.h5" "$work/s0.h5" "$work/s2.h5"
[[ -e $work/part.h5 ]] && fail "a merge with a missing shard wrote its output"
"$kstudy" merge --partial "$work/part.h5" "$work/s0.h5" "$work/s2.h5" > /dev/null 2>&1 || fail "--partial merge failed"
$py "$check" attr "$work/part.h5" missing_shards 1 || fail "--partial: missing shards not recorded"
$py "$check" attr "$work/part.h5" complete false || fail "--partial: marked complete"

sed 's/"seed": 11/"seed": 12/' "$tiny" > "$work/tiny_other_seed.json"
"$kstudy" run "$work/tiny_other_seed.json" --shard 1/3 --out "$work/s1other.h5" -q > /dev/null 2>&1 || fail "other-seed shard"
expect_fail 1 "is defined differently" "shards of different experiment definitions refused" -- \
  "$kstudy" merge "$work/mixed.h5" "$work/s0.h5" "$work/s1other.h5" "$work/s2.h5"
[[ -e $work/mixed.h5 ]] && fail "a refused merge wrote its output"

cp "$work/s2.h5" "$work/s2v1.h5"
$py -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); f.attrs['schema_version']='1'; f.visititems(lambda n, o: o.attrs.pop('kstudy_sha256', None) and None); f.attrs.pop('kstudy_sha256', None)" "$work/s2v1.h5"
expect_fail 1 "schema_version differs" "shards of different schema versions refused" -- \
  "$kstudy" merge "$work/mixed.h5" "$work/s0.h5" "$work/s1.h5" "$work/s2v1.h5"

cp "$work/s0.h5" "$work/s0copy.h5"
expect_fail 1 "duplicate samples" "a shard given twice (duplicate samples) refused" -- \
  "$kstudy" merge "$work/dup.h5" "$work/s0.h5" "$work/s0copy.h5" "$work/s1.h5" "$work/s2.h5"
[[ -e $work/dup.h5 ]] && fail "a merge with duplicates wrote its output"
"$kstudy" merge --force "$work/dup.h5" "$work/s0.h5" "$work/s0copy.h5" "$work/s1.h5" "$work/s2.h5" > "$work/out" 2>&1 ||
  fail "--force merge of duplicates failed: $(cat "$work/out")"
$py "$check" same-points "$work/dup.h5" "$work/full.h5" shard_tiny || fail "--force kept duplicates"
expect_fail 1 "already exists" "existing output refused" -- "$kstudy" merge "$work/m.h5" "$work/s0.h5"

# --- submit -----------------------------------------------------------------------------------------
cd "$work" || exit 1
expect_fail 1 "no built-in experiment named 'no_such_experiment'" "unknown experiment refused" -- \
  "$kstudy" submit no_such_experiment --array 2 --dry-run
expect_fail 1 "has only 6 (point x replication) units" "--array beyond the units refused" -- \
  "$kstudy" submit "$tiny" --array 7 --dry-run
expect_fail 1 "--array must be at least 1, not 0" "--array 0 refused" -- "$kstudy" submit "$tiny" --array 0 --dry-run
expect_fail 1 "--array N (the number of shards" "missing --array refused" -- "$kstudy" submit "$tiny" --dry-run
# A value with a control character would write a line of its own into the job script.
expect_fail 1 "contains a control character (0x0a at position 11)" "newline in --sbatch-option refused" -- \
  "$kstudy" submit "$tiny" --array 2 --dry-run "--sbatch-option=--account=x"$'\n'"echo INJECTED"
expect_fail 1 "--partition 'gpu...' contains a control character (0x09" "tab in --partition refused" -- \
  "$kstudy" submit "$tiny" --array 2 --dry-run --partition "gpu"$'\t'"x"
expect_fail 1 "sbatch not found on PATH" "missing sbatch reported" -- \
  env PATH=/usr/bin/nonexistent "$kstudy" submit "$tiny" --array 3 --out-dir "$work/nosbatch"
[[ -e $work/nosbatch ]] && fail "submit without sbatch created its directory"

"$kstudy" submit "$tiny" --array 3 --partition debug --time 00:05:00 --gpus-per-task 1 --out-dir "$work/dry" --dry-run \
  > "$work/dry.sbatch" 2> "$work/err" || fail "--dry-run failed: $(cat "$work/err")"
for line in "#SBATCH --array=0-2" "#SBATCH --partition=debug" "#SBATCH --time=00:05:00" "#SBATCH --gpus-per-task=1" \
            "#SBATCH --cpus-per-task=1" "--shard \"\$shard/3\"" "shard-\"\$shard\".h5 --resume" "CUDA_VISIBLE_DEVICES"; do
  grep -qF -- "$line" "$work/dry.sbatch" || fail "--dry-run script lacks '$line'"
done
[[ -e $work/dry ]] && fail "--dry-run created its directory"
bash -n "$work/dry.sbatch" || fail "--dry-run script is not valid bash"
pass "--dry-run prints a job array script and writes nothing"

# A stub sbatch records the script it was given; running that script once per array task stands in for Slurm.
mkdir -p "$work/bin"
cat > "$work/bin/sbatch" <<'SH'
#!/bin/bash
if [[ ${STUB_MODE:-} == fail ]]; then
  echo "sbatch: error: Batch job submission failed: Invalid partition name specified" >&2; exit 1
fi
echo "sbatch: warning: a site warning on stderr" >&2
cp "${@: -1}" "$STUB_DIR/submitted-$(ls "$STUB_DIR" | grep -c submitted).sbatch"
echo "4242;testcluster"
SH
cat > "$work/bin/squeue" <<'SH'
#!/bin/bash
[[ -e $STUB_DIR/running ]] && echo "4242_1 RUNNING"
exit 0
SH
chmod +x "$work/bin/sbatch" "$work/bin/squeue"
export STUB_DIR=$work/stub; mkdir -p "$STUB_DIR"
stub_path=$work/bin:$PATH
run_tasks() {  # SCRIPT TASK...: each array task as Slurm would start it
  local script=$1; shift
  for k in "$@"; do SLURM_ARRAY_TASK_ID=$k bash "$script" > "$work/task-$k.log" 2>&1 || fail "task $k: $(tail -3 "$work/task-$k.log")"; done
}
expect_fail 1 "Invalid partition name specified" "an sbatch failure is reported with sbatch's message" -- \
  env PATH="$stub_path" STUB_MODE=fail "$kstudy" submit "$tiny" --array 3 --partition nope --out-dir "$work/failed"
grep -q "sbatch .* failed (exit 1)" "$work/err" || fail "sbatch failure: no kstudy error: $(cat "$work/err")"
PATH=$stub_path "$kstudy" submit "$tiny" --array 3 --out-dir "$work/array" > "$work/out" 2> "$work/err" ||
  fail "submit with a stub sbatch: $(cat "$work/err")"
grep -q "submitted job array 4242" "$work/out" || fail "submit does not print the job id: $(cat "$work/out")"
grep -q "4242 shards=0-2 of=3" "$work/array/kstudy-submit.jobs" || fail "job id not recorded"
run_tasks "$STUB_DIR/submitted-0.sbatch" 0 1 2
"$kstudy" merge "$work/array/merged.h5" "$work/array"/shard-{0,1,2}.h5 > /dev/null 2>&1 || fail "merge of the array's shards"
$py "$check" union "$work/array/merged.h5" shard_tiny "$work/array"/shard-{0,1,2}.h5 || fail "array merge != union"
$py "$check" same-points "$work/array/merged.h5" "$work/full.h5" shard_tiny || fail "array merge != unsharded run"

expect_fail 1 "already holds shard archives" "submit into a used directory without --resume refused" -- \
  env PATH="$stub_path" "$kstudy" submit "$tiny" --array 3 --out-dir "$work/array"
PATH=$stub_path "$kstudy" submit "$tiny" --resume --out-dir "$work/array" > "$work/out" 2>&1 || fail "resume of a complete set"
grep -q "all 3 shards of shard_tiny are complete" "$work/out" || fail "complete set resubmitted: $(cat "$work/out")"
# Shard 1 interrupted (not marked complete, some units missing), shard 2 lost: only those two go back.
$py - "$work/array/shard-1.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    # A deliberate edit drops the checksums kstudy wrote (else the archive reads as damaged).
    f.visititems(lambda n, o: o.attrs.pop("kstudy_sha256", None) and None)
    f.attrs.pop("kstudy_sha256", None)
    del f.attrs["complete"]
    s = f["/experiments/shard_tiny/samples"]
    keep = s[:][s["replication"][:] == s["replication"][0]]  # one replication's units only
    s.resize((len(keep),)); s[:] = keep
    del f["/experiments/shard_tiny/summary"]
PY
rm "$work/array/shard-2.h5"
touch "$STUB_DIR/running"
expect_fail 1 "still queued or running" "--resume refused while an earlier job runs" -- \
  env PATH="$stub_path" "$kstudy" submit "$tiny" --resume --out-dir "$work/array"
rm "$STUB_DIR/running"
PATH=$stub_path "$kstudy" submit "$tiny" --resume --out-dir "$work/array" > "$work/out" 2> "$work/err" ||
  fail "submit --resume: $(cat "$work/err")"
grep -q "#SBATCH --array=1-2" "$STUB_DIR/submitted-1.sbatch" || fail "--resume did not resubmit exactly shards 1-2: $(grep array "$STUB_DIR/submitted-1.sbatch")"
grep -q "1 complete, 1 resumed" "$work/out" || fail "--resume summary: $(cat "$work/out")"
run_tasks "$STUB_DIR/submitted-1.sbatch" 1 2
"$kstudy" merge --overwrite "$work/array/merged.h5" "$work/array"/shard-{0,1,2}.h5 > /dev/null 2>&1 || fail "merge after --resume"
$py "$check" same-points "$work/array/merged.h5" "$work/full.h5" shard_tiny || fail "resumed array merge != unsharded run"
expect_fail 1 "this submission's definition has" "--resume with another definition refused" -- \
  env PATH="$stub_path" "$kstudy" submit "$tiny" --resume --trials 4 --out-dir "$work/array"

echo "$failures failure(s)"
exit $((failures > 0))
