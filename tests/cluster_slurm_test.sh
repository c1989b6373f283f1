#!/usr/bin/env bash
# deploy/cluster, slurm backend, on a real one-host Slurm (the steps of
# docs/DEPLOY.md's "Slurm on one host": munged, slurmctld, slurmd by hand,
# a slurm.conf with OverSubscribe=YES, here a private one). With the
# example deploy/clusters/slurm-1host.toml, `deploy/cluster run` writes the
# batch script, submits it and waits; its output must say verify: OK. A
# launcher stopped by SIGTERM while its job runs must cancel the job: no
# job, memory node or compute node left.
# Installs slurm-wlm and munge when missing (skips without apt).
set -euo pipefail
cd "$(dirname "$0")/.."
export DMG_BIN="${DMG_BIN:-$PWD/build/release/tools/dmg}"
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  if ! command -v apt-get >/dev/null; then
    echo "cluster_slurm_test: SKIP: no slurm-wlm/munge and no apt-get"; exit 0
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi

work=$(mktemp -d); chmod 755 "$work"
export SLURM_CONF=$work/slurm.conf
host=$(hostname -s)
own_munged=
cleanup() {
  # A job still running (a failed check) first: slurmstepd and its steps
  # would outlive slurmd.
  if [ -f "$work/slurmctld.pid" ]; then
    squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
    for _ in $(seq 50); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.1; done
  fi
  # munged only if this test started it.
  for f in "$work/slurmd.pid" "$work/slurmctld.pid" ${own_munged:+/run/munge/munged.pid}; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
  sleep 0.5; rm -rf "$work"
}
trap cleanup EXIT INT TERM

mkdir -p /run/munge /var/lib/munge /var/log/munge
chown munge:munge /run/munge /var/lib/munge /var/log/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged; own_munged=1
fi
munge -n | unmunge | grep -q "Success" || { echo "FAIL: munge does not work"; exit 1; }

mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))
mkdir -p "$work/spool/d" "$work/spool/ctld" "$work/log"
cat > "$SLURM_CONF" <<CONF
ClusterName=dmgtest
SlurmctldHost=$host
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmUser=root
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmdSpoolDir=$work/spool/d
StateSaveLocation=$work/spool/ctld
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
JobAcctGatherType=jobacct_gather/none
NodeName=$host CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
slurmctld; slurmd
for _ in $(seq 30); do sinfo -h -o %t 2>/dev/null | grep -q idle && break; sleep 1; done
sinfo -h -o %t | grep -q idle || { echo "FAIL: slurm node not idle"; cat "$work/log/"*; exit 1; }

graph=kron:16
if [ -f "${DMG_GRAPHS_DIR:-}/ca-GrQc.el" ]; then graph=$DMG_GRAPHS_DIR/ca-GrQc.el; fi
# The example as it is, but its state (and so the job's output) in $work.
C=(deploy/cluster --state "$work/state" deploy/clusters/slurm-1host.toml)
"${C[@]}" slurm-script --graph="$graph" --algo=pagerank --verify | bash -n
out=$("${C[@]}" run --algo=pagerank --graph="$graph" --verify)
echo "$out"
grep -q "verify: OK" <<<"$out" || { echo "FAIL: pagerank not verified under slurm"; exit 1; }
grep -q "2 compute nodes" <<<"$out" || { echo "FAIL: not on 2 compute nodes"; exit 1; }

# A long job: once its compute nodes run, SIGTERM to the launcher.
"${C[@]}" run --algo=pagerank --graph="$graph" --tolerance=0 --max_iters=10000000 \
  >"$work/run.log" 2>&1 &
launcher=$!
for _ in $(seq 300); do
  [ "$(pgrep -fc -- "^[^ ]*dmg run .*--compute_nodes=2" || true)" = 2 ] && break; sleep 0.1
done
[ "$(pgrep -fc -- "^[^ ]*dmg run .*--compute_nodes=2" || true)" = 2 ] ||
  { cat "$work/run.log"; echo "FAIL: the long job's compute nodes never ran"; exit 1; }
kill -TERM $launcher
rc=0; wait $launcher || rc=$?
for _ in $(seq 50); do
  left=$(squeue -h -o %i)$(pgrep -af -- "dmg (run|memory-node) .*:741[01]" || true)
  [ -z "$left" ] && break; sleep 0.1
done
[ -z "$left" ] || { cat "$work/run.log"; echo "FAIL: SIGTERM to the launcher left: $left"; exit 1; }
grep -q "cancelled job" "$work/run.log" && [ $rc = 143 ] ||
  { cat "$work/run.log"; echo "FAIL: SIGTERM: exit $rc, no word of the cancelled job"; exit 1; }
echo "cluster_slurm_test: SIGTERM to the launcher cancelled its job; nothing left"

"${C[@]}" down >/dev/null
left=$(ps -eo stat=,args= | awk '$1 !~ /^Z/' | grep -E -- '--listen=[^ ]*:741[01]' | grep -v grep || true)
if [ -n "$left" ]; then echo "FAIL: left behind: $left"; exit 1; fi
echo "cluster_slurm_test: PASS"
