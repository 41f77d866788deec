#!/usr/bin/env bash
# kstudy submit under the faults a cluster inflicts, through a real Slurm on localhost (ctest label `slurm`,
# run by .ci/run; the daemons come from localhost_slurm.sh). One array of tests/slurm/shard_faults.json in
# three shards goes through
#   preemption: task 0 gets SIGTERM mid-point, a grace period, SIGKILL, and is requeued (scontrol requeue,
#               as PreemptMode=REQUEUE would): its second attempt resumes the archive;
#   lost node:  task 1's processes are killed -9 (the job is marked FAILED); kstudy submit --resume finds
#               the incomplete archive and resubmits shard 1 alone;
# and the merge of the three shards must hold the unsharded run's samples (same points, same sample counts).
#   time limit: a one-task array with --time 1 and --stop-before 55 is stopped by Slurm's signal before its
#               limit; its archive is incomplete but resumable, and submit --resume completes it;
#   two arrays on one folder: a second kstudy submit into a folder whose array still runs is refused; the
#               same job script handed to sbatch again runs its task into the archive the first array is
#               writing: that task fails naming the lock, and the first array's archive is complete.
# The time-limit task runs beside the others: Slurm checks limits every 30 s, so its signal comes up to about
# 30 s after it starts; at 400 trials its run lasts about a minute on one core, to be still running then. Needs root; opt-in: KSTUDY_SLURM_TEST=1, otherwise it reports skipped (77).
# Usage: check_slurm_faults.sh KSTUDY_EXE SOURCE_DIR
set -uo pipefail
kstudy=$1; src=$2
if [[ ${KSTUDY_SLURM_TEST:-0} != 1 ]]; then
  echo "skipped: set KSTUDY_SLURM_TEST=1 to run (installs slurm-wlm and munge, starts slurmctld/slurmd/munged on localhost)"
  exit 77
fi
# KillWait: seconds between SIGTERM and SIGKILL when Slurm ends a task (default 30). cred_expire: a requeued
# task waits this long (+1 s) before it may start again (default 120). sched_interval: a task whose wait is
# over starts within 2 s instead of the next 60 s scheduling pass.
slurm_auth_extra=",cred_expire=10"
slurm_extra_conf="KillWait=5
JobRequeue=1
SchedulerParameters=sched_interval=2,bf_interval=2"
# shellcheck source=tests/slurm/localhost_slurm.sh
source "$src/tests/slurm/localhost_slurm.sh"
start_slurm

export KSTUDY_CEILING_BYTES=33554432 OMP_NUM_THREADS=1 OMP_PROC_BIND=false KSTUDY_QUIET=1
study=$src/tests/slurm/shard_faults.json
name=shard_faults
py=/usr/bin/python3
check=$src/tests/check_run_archive.py
cd "$work" || die "cd $work"

submit() {  # OUT_DIR ARGS...: kstudy submit shard_faults.json; prints the job id
  local dir=$1; shift
  timeout 120 "$kstudy" submit "$study" --out-dir "$dir" "$@" > "$work/submit.out" 2>&1 ||
    die "kstudy submit --out-dir $dir $*: $(cat "$work/submit.out")"
  local id
  id=$(sed -nE 's/^submitted job array ([0-9]+).*/\1/p' "$work/submit.out")
  [[ -n $id ]] || die "kstudy submit printed no job id: $(cat "$work/submit.out")"
  echo "$id"
}
task_state() {  # JOB_TASK: "STATE EXITCODE RESTARTS" as Slurm has it
  timeout 10 scontrol -o show job "$1" 2> /dev/null |
    sed -nE 's/.* JobState=([A-Z_]+) .* Restarts=([0-9]+) .* ExitCode=([0-9:]+) .*/\1 \3 \2/p' | head -n 1
}
wait_running() {  # JOB_TASK ARCHIVE: until the task runs and its archive exists, then a little longer
  local deadline=$(( $(date +%s) + 120 ))
  until [[ $(task_state "$1") == RUNNING* && -f $2 ]]; do
    (( $(date +%s) >= deadline )) && die "task $1 not running with its archive $2 within 120 s ($(task_state "$1"))"
    sleep 0.3
  done
  sleep 1.5  # mid-point: past the ceilings, into the sweep
}
wait_gone() {  # JOB [SECONDS]: until squeue no longer lists any task of JOB
  local deadline=$(( $(date +%s) + ${2:-300} ))
  while [[ -n $(timeout 10 squeue -h -j "$1" -o %i 2> /dev/null) ]]; do
    (( $(date +%s) >= deadline )) && die "job $1 not finished within ${2:-300} s"
    sleep 1
  done
}
expect_state() {  # JOB_TASK "STATE EXIT RESTARTS" WHAT
  local got
  got=$(task_state "$1")
  [[ $got == "$2" ]] || die "$3: task $1 is '$got', expected '$2'"
  echo "ok: $3: task $1 $got (state, exit code, restarts)"
}
incomplete() {  # ARCHIVE: the run's root attribute complete is not "true"
  $py - "$1" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    sys.exit(0 if f.attrs.get("complete") != "true" else 1)
PY
}

# ---- time limit: started first, it runs beside everything below
tl=$work/timelimit
tl_job=$(submit "$tl" --array 1 --trials 400 --time 1 --stop-before 55) || exit 1
job_ids+=("$tl_job")
grep -q '^#SBATCH --signal=B:TERM@55$' "$tl/kstudy-$name.sbatch" || die "the job script asks for no early SIGTERM"
grep -q '^#SBATCH --requeue$' "$tl/kstudy-$name.sbatch" || die "the job script does not ask to be requeueable"

# ---- the unsharded reference, on this machine beside Slurm's tasks
timeout 600 nice "$kstudy" run "$study" --out "$work/reference.h5" -q > "$work/reference.out" 2>&1 &
reference_pid=$!

# ---- three shards; a second submit into their folder while they run is refused
d=$work/shards
# Submitted held: each task is released when its turn comes, so that no task is over before its fault.
job=$(submit "$d" --array 3 --time 10 --sbatch-option=--hold) || exit 1
job_ids+=("$job")
timeout 60 "$kstudy" submit "$study" --out-dir "$d" --array 3 --time 10 > "$work/second.out" 2>&1
rc=$?
[[ $rc -eq 1 ]] && grep -q "earlier jobs of $d are still queued or running: $job" "$work/second.out" ||
  die "a second submit into a running array's folder: exit $rc, expected 1 naming job $job: $(cat "$work/second.out")"
[[ $(grep -c . "$d/kstudy-submit.jobs") -eq 1 ]] ||
  die "the refused submit recorded a job: $(cat "$d/kstudy-submit.jobs")"
echo "ok: a second submit into $d while job $job runs is refused (exit 1, nothing submitted)"

# ---- preemption of task 0: SIGTERM to the batch shell (kstudy), a grace period, SIGKILL, requeue
timeout 10 scontrol release "${job}_0" "${job}_2" || die "scontrol release ${job}_0 ${job}_2"
wait_running "${job}_0" "$d/shard-0.h5"
# scancel may answer "Job can not be altered now" for a task that has just started although the signal is
# delivered: asked again until the task's log shows the stop, or the task has ended.
log0=$d/slurm-${job}_0.out
for _ in 1 2 3; do
  timeout 10 scancel --signal=TERM --batch "${job}_0" 2> "$work/scancel.err"
  for _ in $(seq 10); do
    [[ $(task_state "${job}_0") == RUNNING* ]] && ! grep -q "stopped by signal 15" "$log0" || break 2
    sleep 0.3
  done
done
for _ in $(seq 10); do [[ $(task_state "${job}_0") == RUNNING* ]] || break; sleep 0.3; done
timeout 10 scancel --signal=KILL "${job}_0" 2> /dev/null  # the end of the grace period, if it still runs
incomplete "$d/shard-0.h5" || die "shard 0 was complete before its preemption; the shard is too small"
timeout 10 scontrol requeue "${job}_0" || die "scontrol requeue ${job}_0"
echo "ok: task ${job}_0 preempted mid-run (SIGTERM, grace period, SIGKILL had it still run) and requeued"

# ---- lost node under task 1: every process of the task killed -9
timeout 10 scontrol release "${job}_1" || die "scontrol release ${job}_1"
wait_running "${job}_1" "$d/shard-1.h5"
# listpids takes the task's own job id, not JOB_TASK
task_job_id=$(timeout 10 scontrol -o show job "${job}_1" | sed -nE 's/^JobId=([0-9]+) .*/\1/p')
pids_of_task=$(timeout 10 scontrol listpids "$task_job_id" 2> /dev/null | awk 'NR > 1 && $1 ~ /^[0-9]+$/ {print $1}')
[[ -n $pids_of_task ]] || die "scontrol listpids ${job}_1 listed no process"
kill -9 $pids_of_task 2> /dev/null
for p in $pids_of_task; do wait_for 20 "process $p of task ${job}_1 gone after kill -9" bash -c "! kill -0 $p"; done
echo "ok: task ${job}_1's processes killed -9 ($(echo $pids_of_task | wc -w) processes)"

wait_gone "$job"
expect_state "${job}_0" "COMPLETED 0:0 1" "preempted task resumed after its requeue"
expect_state "${job}_1" "FAILED 0:9 0" "lost task marked failed"
expect_state "${job}_2" "COMPLETED 0:0 0" "untouched task"
grep -q "attempt 1," "$log0" && grep -q "attempt 2," "$log0" ||
  die "task 0's log does not hold both attempts: $(cat "$log0")"
grep -q "stopped by signal 15" "$log0" || die "task 0 did not stop cleanly on SIGTERM: $(cat "$log0")"
echo "ok: task 0's log holds both attempts; the first stopped cleanly on SIGTERM"
incomplete "$d/shard-1.h5" || die "shard 1 was complete before its processes were killed; the shard is too small"

timeout 120 "$kstudy" merge "$work/partial.h5" "$d"/shard-{0,1,2}.h5 > /dev/null 2> "$work/merge.err"
rc=$?
[[ $rc -eq 3 ]] || die "merge with shard 1 incomplete: exit $rc, expected 3: $(cat "$work/merge.err")"
resume_job=$(submit "$d" --resume --time 10) || exit 1
job_ids+=("$resume_job")
grep -q '#SBATCH --array=1$' "$d/kstudy-$name.sbatch" ||
  die "--resume did not resubmit exactly shard 1: $(grep array= "$d/kstudy-$name.sbatch")"
grep -q "(2 complete, 1 resumed)" "$work/submit.out" || die "submit --resume: $(cat "$work/submit.out")"
echo "ok: submit --resume resubmits shard 1 alone (job $resume_job)"
wait_gone "$resume_job"
expect_state "$resume_job" "COMPLETED 0:0 0" "lost shard completed by submit --resume"

wait "$reference_pid" || die "the unsharded reference run failed: $(tail -n 20 "$work/reference.out")"
timeout 120 "$kstudy" merge "$d/merged.h5" "$d"/shard-{0,1,2}.h5 || die "kstudy merge"
$py "$check" union "$d/merged.h5" "$name" "$d"/shard-{0,1,2}.h5 || die "merged archive != union of the shards"
$py "$check" same-points "$d/merged.h5" "$work/reference.h5" "$name" ||
  die "the merge after preemption and a lost task does not hold the unsharded run's samples"

# ---- time limit: Slurm's early SIGTERM stopped the task; the archive resumes
wait_gone "$tl_job" 240
tl_log=$tl/slurm-${tl_job}_0.out
expect_state "${tl_job}_0" "FAILED 130:0 0" "task stopped by Slurm before its time limit"
grep -q "stopped by signal 15" "$tl_log" || die "the time-limited task did not stop on SIGTERM: $(cat "$tl_log")"
incomplete "$tl/shard-0.h5" || die "the time-limited shard is complete"
echo "ok: the time-limited task left an incomplete archive"
tl_resume=$(submit "$tl" --resume --trials 400 --time 10) || exit 1
job_ids+=("$tl_resume")
grep -q "(0 complete, 1 resumed)" "$work/submit.out" || die "submit --resume: $(cat "$work/submit.out")"
wait_gone "$tl_resume" 300
expect_state "$tl_resume" "COMPLETED 0:0 0" "time-limited shard completed by submit --resume"
$py "$check" attr "$tl/shard-0.h5" complete true || die "the resumed time-limited shard is not complete"
$py "$check" schema "$tl/shard-0.h5" "$name" || die "the resumed time-limited shard's schema"

# ---- the same job script submitted twice: the second array's task fails on the first one's archive
dup=$work/duplicate
dup_job=$(submit "$dup" --array 1 --time 10) || exit 1
job_ids+=("$dup_job")
wait_running "${dup_job}_0" "$dup/shard-0.h5"
dup_again=$(timeout 30 sbatch --parsable "$dup/kstudy-$name.sbatch") || die "sbatch the job script again"
dup_again=${dup_again%%;*}
job_ids+=("$dup_again")
wait_gone "$dup_again" 120
wait_gone "$dup_job" 120
expect_state "${dup_job}_0" "COMPLETED 0:0 0" "first array on the folder"
expect_state "${dup_again}_0" "FAILED 1:0 0" "second array on the same folder"
grep -q "is open in another process" "$dup/slurm-${dup_again}_0.out" ||
  die "the second array's task does not name the lock: $(cat "$dup/slurm-${dup_again}_0.out")"
$py "$check" attr "$dup/shard-0.h5" complete true || die "the first array's archive is not complete"
$py "$check" same-points "$dup/shard-0.h5" "$work/reference.h5" "$name" || die "the first array's archive"
echo "ok: Slurm fault tests passed"
