#!/bin/bash
# The SLURM pipeline for real: starts a private single-node SLURM (munged as
# the munge user, slurmctld and slurmd as root, proctrack/linuxproc,
# task/none, select/cons_tres, one node at 127.0.0.1 with 2 CPUs; its own
# config, ports, state and logs in a temporary folder), then runs
# tools/slurm/lookalike-slurm over generated photos with 4 shards, one of
# which fails (its database path is a file). Checks: the failed shard leaves
# the merge pending (DependencyNeverSatisfied); --resume re-submits that shard
# only and a new merge, which completes; the merged database verifies and
# gives exactly the results (ranked paths, scores within 1e-5) of one
# `index --model-from BASE` run over the whole folder, for every photo as a
# query. Waits by polling job states with a deadline (counted from the
# daemons' start, SLURM_TEST_DEADLINE seconds, 50 minutes: it only ends a hung
# run; the whole test takes about a minute on a loaded machine), never a
# fixed delay.
# Never skipped: when the daemons cannot start it fails with their logs.
#
# usage: slurm_test.sh LOOKALIKE MAKE_TEST_IMAGES   (as root)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:?usage: slurm_test.sh LOOKALIKE MAKE_TEST_IMAGES}
make_images=${2:?usage: slurm_test.sh LOOKALIKE MAKE_TEST_IMAGES}
pipeline="$root/tools/slurm/lookalike-slurm"
deadline_s=${SLURM_TEST_DEADLINE:-3000}

tmp=$(mktemp -d /tmp/lookalike-slurm-test.XXXXXX)
chmod 755 "$tmp"
export SLURM_CONF="$tmp/slurm.conf"

logs() {
  for f in "$tmp"/munge/munged.log "$tmp"/slurmctld.log "$tmp"/slurmd.log "$tmp"/work/logs/*; do
    [ -f "$f" ] || continue
    echo "----- $f (last 40 lines)"
    tail -n 40 "$f"
  done
}
stop() {
  # The pids are read once: a daemon deletes its pid file as it exits, so a
  # second read could find none (and, under set -e, fail the test).
  local pids=() pid
  for pidfile in "$tmp/slurmd.pid" "$tmp/slurmctld.pid" "$tmp/munge/munged.pid"; do
    pid=$(cat "$pidfile" 2>/dev/null) || continue
    [ -n "$pid" ] && pids+=("$pid")
  done
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  # Wait for them to go (their pid files' processes only), then remove everything.
  for pid in "${pids[@]}"; do
    # Up to 10 min (a busy machine), then killed: never removed from under them.
    for _ in $(seq 6000); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap stop EXIT
fail() {
  echo "slurm_test: FAIL: $*" >&2
  logs >&2
  exit 1
}
[ "$(id -u)" -eq 0 ] || fail "must run as root: it starts munged, slurmctld and slurmd (the README's test command runs as root)"
for b in munged munge slurmctld slurmd sbatch squeue scontrol scancel sinfo; do
  command -v "$b" >/dev/null || fail "$b not found; tools/install_deps.sh installs slurmctld slurmd slurm-client munge"
done
id munge >/dev/null 2>&1 || fail "no munge user; reinstall the munge package"

# --- munged, private socket and key, as the munge user
mkdir -p "$tmp/munge"
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chown -R munge: "$tmp/munge"
chmod 700 "$tmp/munge"
chmod 600 "$tmp/munge/munge.key"
chmod 755 "$tmp/munge"
sock="$tmp/munge/munge.sock"
runuser -u munge -- munged --socket="$sock" --key-file="$tmp/munge/munge.key" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" \
  --seed-file="$tmp/munge/munged.seed" || fail "munged did not start"
munge -n --socket="$sock" | unmunge --socket="$sock" >/dev/null || fail "munge round trip failed"

# --- slurm.conf: one node, this host at 127.0.0.1, ports of our own
host=$(hostname -s)
port=$((20000 + ($$ % 4000) * 2))
mkdir -p "$tmp/state" "$tmp/spool"
cat >"$SLURM_CONF" <<CONF
ClusterName=lookalike-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=3600
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -c || fail "slurmctld did not start"
slurmd -c || fail "slurmd did not start"

start=$SECONDS
# Polls `cmd` until it prints `want` (a regex); fails with the logs at the deadline.
wait_for() {
  local what=$1 want=$2
  shift 2
  local got=""
  while true; do
    got=$("$@" 2>/dev/null || true)
    if [[ "$got" =~ $want ]]; then return 0; fi
    [ $((SECONDS - start)) -lt "$deadline_s" ] || fail "waited ${deadline_s}s for $what; last: $got"
    sleep 0.5
  done
}
wait_for "the node to be idle" "^idle" sinfo -h -N -o %t

# What scontrol says of a job, one line per job or array task. Captured
# whole before matching: `scontrol ... | grep -q` under pipefail fails when
# grep exits first and scontrol gets SIGPIPE.
show() { scontrol show job -o "$1" 2>/dev/null || true; }
states() {  # "JobState=.. Reason=.." of job $1
  show "$1" | tr ' ' '\n' | grep -E '^(JobState|Reason|ArrayTaskId)=' | paste -sd' ' || true
}
has() {  # has JOB REGEX: some line of job JOB matches
  local text
  text=$(show "$1")
  grep -qE "$2" <<<"$text"
}
count() {  # count JOB REGEX: lines of job JOB that match
  local text
  text=$(show "$1")
  grep -cE "$2" <<<"$text" || true
}
ended() {  # prints "ended" once no task of job $1 is pending, running or completing
  local text
  text=$(show "$1")
  [ -n "$text" ] || return 0
  grep -qE 'JobState=(PENDING|RUNNING|CONFIGURING|COMPLETING|SUSPENDED)' <<<"$text" || echo ended
}
job_id() { sed -n "s/^$1 jobs\{0,1\}: *\([0-9][0-9]*\).*/\1/p" "$2"; }

# --- the photos; the model is small so the whole test stays short
"$make_images" "$tmp/photos/a" 12 1 320 240
"$make_images" "$tmp/photos/b" 12 100 320 240
train_args="--clusters 16 --pca-dim 8 --pca-min-images 10 --train-images 16"

# --- run 1: shard 2 cannot be written (its database path is a file)
mkdir -p "$tmp/work"
echo "not a database" >"$tmp/work/shard-2"
"$pipeline" "$tmp/photos" --db "$tmp/out" --shards 4 --work "$tmp/work" --lookalike "$bin" \
  --train-args "$train_args" --index-args "--threads 1" -- --cpus-per-task=1 >"$tmp/submit1.txt" ||
  fail "lookalike-slurm failed: $(cat "$tmp/submit1.txt")"
cat "$tmp/submit1.txt"
train=$(job_id train "$tmp/submit1.txt")
array=$(job_id shard "$tmp/submit1.txt")
merge=$(job_id merge "$tmp/submit1.txt")
[ -n "$train" ] && [ -n "$array" ] && [ -n "$merge" ] || fail "no job ids in: $(cat "$tmp/submit1.txt")"
wait_for "train job $train to end" "ended" ended "$train"
has "$train" "JobState=COMPLETED" || fail "train failed: $(states "$train")"
wait_for "shard jobs $array to end" "ended" ended "$array"
failed=$(count "$array" "JobState=FAILED")
completed=$(count "$array" "JobState=COMPLETED")
[ "$failed" -eq 1 ] && [ "$completed" -eq 3 ] ||
  fail "expected 3 shards completed and 1 failed, got: $(show "$array" | grep -o 'ArrayTaskId=[^ ]* .*JobState=[A-Z]*' | sed 's/ .*JobState=/ /')"
has "$array" "ArrayTaskId=2 .*JobState=FAILED" || fail "the failed task is not shard 2"
grep -q "is a file, not a directory" "$tmp"/work/logs/shard-2-*.out ||
  fail "shard 2's log does not say why it failed"
wait_for "merge $merge to be held by the failed dependency" \
  "JobState=PENDING.*Reason=DependencyNeverSatisfied|JobState=CANCELLED" states "$merge"
[ ! -e "$tmp/out" ] || fail "the merge ran although a shard failed"

# --- fix shard 2 and resume: only shard 2 and a new merge are submitted
rm "$tmp/work/shard-2"
"$pipeline" "$tmp/photos" --db "$tmp/out" --shards 4 --work "$tmp/work" --lookalike "$bin" \
  --train-args "$train_args" --index-args "--threads 1" --resume -- --cpus-per-task=1 \
  >"$tmp/submit2.txt" || fail "lookalike-slurm --resume failed: $(cat "$tmp/submit2.txt")"
cat "$tmp/submit2.txt"
grep -q "array of 1: shards 2" "$tmp/submit2.txt" || fail "--resume did not re-submit shard 2 alone"
merge2=$(job_id merge "$tmp/submit2.txt")
wait_for "merge job $merge2 to end" "ended" ended "$merge2"
has "$merge2" "JobState=COMPLETED" || fail "merge failed: $(states "$merge2")"
has "$merge" "JobState=CANCELLED" || fail "the first merge was not cancelled: $(states "$merge")"
for i in 0 1 3; do
  [ "$(ls "$tmp"/work/logs/shard-$i-*.out | wc -l)" -eq 1 ] || fail "shard $i ran again on --resume"
done

# --- the merged database equals one run over the whole folder
"$bin" verify --db "$tmp/out" || fail "verify failed on the merged database"
"$bin" index "$tmp/photos" --db "$tmp/single" --model-from "$tmp/work/base" -q >/dev/null ||
  fail "the single-machine index failed"
n_out=$("$bin" info --db "$tmp/out" --format json | sed 's/.*"images":\([0-9]*\).*/\1/')
[ "$n_out" -eq 24 ] || fail "merged database holds $n_out images, not 24"
"$bin" search --db "$tmp/out" "$tmp/photos" --format tsv -k 10 >"$tmp/merged.tsv"
"$bin" search --db "$tmp/single" "$tmp/photos" --format tsv -k 10 >"$tmp/single.tsv"
[ "$(wc -l <"$tmp/single.tsv")" -eq 240 ] || fail "expected 24 queries x 10 results"
paste "$tmp/merged.tsv" "$tmp/single.tsv" | awk -F'\t' '
  $1 != $6 || $2 != $7 || $3 != $8 || $5 != $10 { print "different hit: " $0; bad = 1 }
  { d = $4 - $9; if (d < 0) d = -d; if (d > 1e-5) { print "score differs: " $0; bad = 1 } }
  END { exit bad }' || fail "merged results differ from the single run"
echo "slurm_test: ok: 4 shards under SLURM, failed shard resumed, merged results equal the single run ($((SECONDS - start)) s)"
