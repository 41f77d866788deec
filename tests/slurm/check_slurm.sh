#!/usr/bin/env bash
# kstudy submit / merge against a real Slurm (ctest label `slurm`, run by .ci/run):
#   starts a private one-node Slurm on localhost (localhost_slurm.sh: munged, slurmctld and slurmd in a
#   temporary folder, installed when missing, stopped on exit), submits a small CPU experiment as a job
#   array through `kstudy submit`, merges the shards, checks the merged archive holds exactly the union of
#   the shard samples, then loses a shard and completes the set with `kstudy submit --resume`.
#   Every wait is bounded; on failure the Slurm and munge logs are printed. Faults (preemption, a task
#   killed -9, time limit, two arrays on one folder) are check_slurm_faults.sh's.
# Needs root (the daemons run as root: SlurmUser=root). Opt-in, because it installs packages and starts
# daemons: KSTUDY_SLURM_TEST=1; otherwise it reports skipped (77).
# Usage: check_slurm.sh KSTUDY_EXE SOURCE_DIR
set -uo pipefail
kstudy=$1; src=$2
if [[ ${KSTUDY_SLURM_TEST:-0} != 1 ]]; then
  echo "skipped: set KSTUDY_SLURM_TEST=1 to run (installs slurm-wlm and munge, starts slurmctld/slurmd/munged on localhost)"
  exit 77
fi
# shellcheck source=tests/slurm/localhost_slurm.sh
source "$src/tests/slurm/localhost_slurm.sh"
start_slurm

# ---- the experiment as a job array
export KSTUDY_CEILING_BYTES=33554432 OMP_NUM_THREADS=1 OMP_PROC_BIND=false
tiny=$src/tests/shard_tiny.json
shards=$work/shards
cd "$work" || die "cd $work"
submit() {  # kstudy submit ARGS...; prints the job id
  timeout 120 "$kstudy" submit "$tiny" --out-dir "$shards" --time 00:10:00 "$@" > "$work/submit.out" 2>&1 ||
    die "kstudy submit $*: $(cat "$work/submit.out")"
  local id
  id=$(sed -nE 's/^submitted job array ([0-9]+).*/\1/p' "$work/submit.out")
  [[ -n $id ]] || die "kstudy submit printed no job id: $(cat "$work/submit.out")"
  echo "$id"
}
wait_job() {  # JOB TASKS: waits until Slurm has finished the array, then checks every task completed
  local job=$1 tasks=$2
  local deadline=$(( $(date +%s) + 300 ))
  while [[ -n $(timeout 10 squeue -h -j "$job" -o %i 2> /dev/null) ]]; do
    (( $(date +%s) >= deadline )) && die "job array $job not finished within 300 s"
    sleep 1
  done
  local states
  states=$(timeout 10 scontrol -o show job "$job" | sed -E 's/.*JobState=([A-Z_]+).* ExitCode=([0-9:]+).*/\1 \2/' |
           sort | uniq -c | tr -s ' ')
  [[ $states == " $tasks COMPLETED 0:0" ]] || die "job array $job: expected $tasks tasks COMPLETED 0:0, got: $states"
  echo "ok: job array $job: $tasks tasks completed in Slurm"
}

job=$(submit --array 3) || exit 1
job_ids+=("$job")
echo "ok: kstudy submit: job array $job ($(grep -c . "$shards/kstudy-submit.jobs") submission recorded)"
grep -q '#SBATCH --array=0-2' "$shards/kstudy-shard_tiny.sbatch" || die "the job script is not a 3-task array"
for line in '#SBATCH --requeue' '#SBATCH --open-mode=append' '#SBATCH --signal=B:TERM@120' "exec '$kstudy' run"; do
  grep -qF -- "$line" "$shards/kstudy-shard_tiny.sbatch" || die "the job script lacks '$line'"
done
wait_job "$job" 3
for k in 0 1 2; do [[ -f $shards/shard-$k.h5 ]] || die "shard $k wrote no archive: $(cat "$shards"/slurm-*_$k.out)"; done

py=/usr/bin/python3
check=$src/tests/check_run_archive.py
timeout 120 "$kstudy" merge "$shards/merged.h5" "$shards"/shard-{0,1,2}.h5 || die "kstudy merge"
$py "$check" union "$shards/merged.h5" shard_tiny "$shards"/shard-{0,1,2}.h5 || die "merged archive != union of the shards"
$py "$check" schema "$shards/merged.h5" shard_tiny || die "merged archive schema"
$py "$check" attr "$shards/merged.h5" slurm_array_job_id "$job" || die "merged archive does not name the array job"
cp "$shards/merged.h5" "$work/first-merge.h5"
$py - "$shards/merged.h5" <<'PY' || die "the merged archive does not record each shard's array task"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    tasks = {k: f["shards"][k].attrs["slurm_array_task_id"] for k in f["shards"]}
assert tasks == {"0": "0", "1": "1", "2": "2"}, tasks
print(f"ok: /shards records array tasks {sorted(tasks.values())}")
PY

# ---- a lost shard: merge reports it, submit --resume reruns only it, the merge is whole again
mv "$shards/shard-1.h5" "$work/lost-shard-1.h5"
timeout 60 "$kstudy" merge "$work/partial.h5" "$shards"/shard-{0,2}.h5 > /dev/null 2> "$work/merge.err"
rc=$?
[[ $rc -eq 3 ]] && grep -q "missing shards of 0..2: 1" "$work/merge.err" ||
  die "merge without shard 1: exit $rc, expected 3 naming shard 1: $(cat "$work/merge.err")"
echo "ok: merge reports missing shard 1 (exit 3)"
job=$(submit --resume) || exit 1
job_ids+=("$job")
grep -q '#SBATCH --array=1$' "$shards/kstudy-shard_tiny.sbatch" || die "--resume did not resubmit exactly shard 1"
wait_job "$job" 1
timeout 120 "$kstudy" merge --overwrite "$shards/merged.h5" "$shards"/shard-{0,1,2}.h5 || die "merge after --resume"
$py "$check" union "$shards/merged.h5" shard_tiny "$shards"/shard-{0,1,2}.h5 || die "merge after --resume != union"
$py "$check" same-points "$shards/merged.h5" "$work/first-merge.h5" shard_tiny ||
  die "the merge after --resume does not hold the same samples as the first"
echo "ok: Slurm job array test passed"
