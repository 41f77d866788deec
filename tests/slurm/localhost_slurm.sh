# A private one-node Slurm on localhost for the tests in this folder; sourced, not run. Installs Debian's
# slurm-wlm and munge when missing (through scripts/bootstrap.sh), then starts munged, slurmctld and slurmd
# with a generated configuration in a temporary folder $work (private munge socket and free ports: a Slurm
# already on the machine, or another of these tests running at the same time, is not touched). Every wait is
# bounded; on failure the Slurm and munge logs are printed; the daemons are stopped and $work removed on
# exit, failed or not.
# The sourcing script sets src (the source tree) and may set slurm_extra_conf (more slurm.conf lines) and
# slurm_auth_extra (more AuthInfo options, comma first), then calls start_slurm.
die() { echo "FAIL: $*" >&2; exit 1; }  # stderr: also seen from inside $(...)
[[ $(id -u) -eq 0 ]] || die "the Slurm test runs slurmctld, slurmd and munged as root; run it as root"

if ! command -v slurmctld > /dev/null || ! command -v slurmd > /dev/null || ! command -v munged > /dev/null ||
   ! command -v sbatch > /dev/null; then
  echo "installing slurm-wlm and munge"
  "$src/scripts/bootstrap.sh" --packages-only --with-slurm || die "could not install slurm-wlm and munge"
fi
export PATH=$PATH:/usr/sbin:/sbin

work=$(mktemp -d /tmp/kstudy-slurm.XXXXXX)
chmod 755 "$work"  # munged requires its socket's folder to be searchable by everyone
conf=$work/slurm.conf
export SLURM_CONF=$conf
pids=()
job_ids=()
started=$(date +%s)

dump_logs() {
  echo "---- Slurm state ----"
  timeout 10 sinfo 2>&1; timeout 10 squeue 2>&1
  for log in "$work"/log/*.log "$work"/munge/munged.log "$work"/*/slurm-*.out; do
    [[ -f $log ]] || continue
    echo "---- $log (last 40 lines) ----"; tail -n 40 "$log"
  done
}
cleanup() {
  local rc=$?
  [[ $rc -ne 0 && $rc -ne 77 ]] && dump_logs
  for job in "${job_ids[@]}"; do timeout 10 scancel "$job" > /dev/null 2>&1; done
  # Stop what we started, newest first; SIGKILL whatever has not gone after 10 s.
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2> /dev/null; done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    for _ in $(seq 100); do kill -0 "${pids[i]}" 2> /dev/null || break; sleep 0.1; done
    kill -9 "${pids[i]}" 2> /dev/null
    wait "${pids[i]}" 2> /dev/null
  done
  rm -rf "$work"
  echo "slurm test: $(( $(date +%s) - started )) s, daemons stopped"
  exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

wait_for() {  # SECONDS DESCRIPTION COMMAND...: polls COMMAND until it succeeds
  local limit=$1 what=$2; shift 2
  local deadline=$(( $(date +%s) + limit ))
  until "$@" > /dev/null 2>&1; do
    (( $(date +%s) >= deadline )) && die "$what: not within $limit s"
    sleep 0.5
  done
}
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_slurm() {
  # ---- munge: a fresh key and a private socket
  mkdir -p "$work/munge" "$work/munge-key" "$work/state" "$work/spool" "$work/log"
  chmod 700 "$work/munge-key"
  dd if=/dev/urandom of="$work/munge-key/munge.key" bs=1024 count=1 status=none
  chmod 400 "$work/munge-key/munge.key"
  socket=$work/munge/munge.socket.2
  munged -F --key-file="$work/munge-key/munge.key" --socket="$socket" --pid-file="$work/munge/munged.pid" \
    --seed-file="$work/munge/munged.seed" --log-file="$work/munge/munged.log" > "$work/munge/munged.out" 2>&1 &
  pids+=($!)
  wait_for 20 "munged answering on $socket" bash -c "munge -S '$socket' -n | unmunge -S '$socket'"

  # ---- slurm.conf: one node, localhost, with the CPUs and memory slurmd itself reports
  node=$(slurmd -C | head -n 1 | sed -E 's/^NodeName=[^ ]+ //')
  [[ $node == *CPUs=* ]] || die "slurmd -C gave no node description: $(slurmd -C 2>&1)"
  touch "$work/plugstack.conf"
  cat > "$conf" <<EOF
ClusterName=kstudytest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket${slurm_auth_extra:-}
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
PlugStackConfig=$work/plugstack.conf
# No cgroups (a container has no delegated cgroup tree): plain process tracking, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MessageTimeout=10
NodeName=localhost NodeAddr=127.0.0.1 $node State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
${slurm_extra_conf:-}
EOF
  slurmctld -D -f "$conf" > "$work/log/slurmctld.out" 2>&1 &
  pids+=($!)
  wait_for 60 "slurmctld answering scontrol ping" bash -c "timeout 10 scontrol ping | grep -q UP"
  slurmd -D -f "$conf" -N localhost > "$work/log/slurmd.out" 2>&1 &
  pids+=($!)
  wait_for 60 "node localhost idle in sinfo" bash -c "timeout 10 sinfo -h -n localhost -o %t | grep -qx idle"
  echo "ok: munged, slurmctld and slurmd up ($node) in $(( $(date +%s) - started )) s"
}
