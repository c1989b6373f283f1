#!/usr/bin/env bash
# The two README commands. Both install what is missing, build (reusing the
# build folder), then:
#   demo  run the main job on the embedded default
#   test  run the whole test suite (this is what .ci/run calls)
#
# demo installs and builds only what the dmg binary needs, and prints each
# phase's time. It installs `install-deps.sh --demo` (a fresh Debian 12 with
# g++ and cmake lacks 16 packages, 13 MB to download, 156 MB installed: Boost
# is most of it) and builds `--target dmg` in build/demo (the demo preset:
# -O2 without debug info, no tests, benchmarks or CUDA, a unity build; ~40
# objects, 75-85 s of CPU against 135 s without unity). From a fresh clone on
# 2 cores with the packages present: 37.7 s idle (build 36.8 s, run 0.3 s),
# 76 s with another build running. The packages, fetched and unpacked on that
# machine: apt-get update 2 s, download 2.4 s, dpkg 4 s. CI runs the demo
# first on its fresh machine (.ci/run), so its log has the full figure.
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-}"
case "$mode" in demo|test) ;; *)
  echo "usage: $0 demo|test" >&2; exit 2 ;;
esac

if [ "$mode" = demo ]; then
  phases=()
  phase() {  # phase NAME COMMAND...: runs COMMAND, prints and keeps its time
    local name="$1"; shift
    echo "quickstart: == $name"
    local t0; t0=$(date +%s%N)
    "$@"
    local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    local took="$((ms / 1000)).$((ms % 1000 / 100)) s"
    echo "quickstart: == $name: $took"
    phases+=("$name $took")
  }
  demo_t0=$(date +%s%N)
  phase install bash deploy/install-deps.sh --demo
  phase configure cmake --preset demo
  phase build cmake --build --preset demo --target dmg
  # PageRank on a generated Kronecker graph, on the embedded cluster (one
  # memory node and one compute node in this process, local transport).
  phase run build/demo/tools/dmg run --algo=pagerank --graph=kron:18 --top=10
  ms=$(( ($(date +%s%N) - demo_t0) / 1000000 ))
  summary="$(printf '%s, ' "${phases[@]}")"
  echo "quickstart: demo took $((ms / 1000)).$((ms % 1000 / 100)) s: ${summary%, }"
  exit 0
fi

bash deploy/install-deps.sh
if [ ! -f build/release/CMakeCache.txt ]; then
  cmake --preset release
fi
cmake --build --preset release

# Every step below runs even when an earlier one failed, so that one run
# shows everything that fails; the summary at the end names each failed
# step, and the script exits non-zero if any did.
failed=()
step() {  # step NAME COMMAND...: runs COMMAND, records NAME if it fails
  local name="$1"; shift
  echo "quickstart: == $name"
  local t0=$SECONDS rc=0
  "$@" || rc=$?
  if [ "$rc" -ne 0 ]; then
    failed+=("$name (exit $rc after $((SECONDS - t0)) s)")
    echo "quickstart: == $name FAILED (exit $rc)"
  fi
}

# Real graphs: tests read them through DMG_GRAPHS_DIR and skip when absent.
if [ -z "${DMG_GRAPHS_DIR:-}" ] && [ -d ../shared/graphs ]; then
  export DMG_GRAPHS_DIR="$(cd ../shared/graphs && pwd)"
fi
echo "quickstart: DMG_GRAPHS_DIR=${DMG_GRAPHS_DIR:-<unset: real-graph tests skip>}"
rm -f build/release/Testing/Temporary/LastTestsFailed.log
step "ctest (release)" ctest --preset release -j "$(nproc)" --output-on-failure
# The names of the tests that failed, kept for the summary at the end (a CI
# log is often read from its tail only).
ctest_failed=()
if [ -s build/release/Testing/Temporary/LastTestsFailed.log ]; then
  mapfile -t ctest_failed < build/release/Testing/Temporary/LastTestsFailed.log
fi

# Fuzzing (docs/TESTING.md): the libFuzzer targets for 10 x 32 s, two at a
# time. DMG_SKIP_FUZZ=1 skips them.
if [ "${DMG_SKIP_FUZZ:-0}" = 1 ]; then
  echo "quickstart: DMG_SKIP_FUZZ=1: skipping the fuzzers"
else
  step "fuzzers (fuzz/run.sh)" bash fuzz/run.sh
fi
# The sanitizer runs (tests/sanitizers.sh; docs/TESTING.md says what each
# covers and leaves out): the unit, transport, engine and in-process
# multi-node tests under ASan + UBSan, then the concurrency tests under
# TSan, each in its own build folder (build/asan, build/tsan). Any report
# fails the run. DMG_SKIP_SANITIZERS=1 skips them (local use; CI runs them).
if [ "${DMG_SKIP_SANITIZERS:-0}" = 1 ]; then
  echo "quickstart: DMG_SKIP_SANITIZERS=1: skipping the sanitizer runs"
else
  step "asan (tests/sanitizers.sh asan)" bash tests/sanitizers.sh asan
  step "tsan (tests/sanitizers.sh tsan)" bash tests/sanitizers.sh tsan
fi

# deploy/cluster on every backend: local, netns, ssh against a real sshd in
# a namespace, a one-host Slurm (about 35 s together; docs/DEPLOY.md).
# DMG_SKIP_CLUSTER_TESTS=1 skips them (they need root and ip netns).
if [ "${DMG_SKIP_CLUSTER_TESTS:-0}" = 1 ]; then
  echo "quickstart: DMG_SKIP_CLUSTER_TESTS=1: skipping the cluster launcher tests"
else
  for t in local netns ssh slurm; do
    step "cluster launcher: $t" bash "tests/cluster_${t}_test.sh"
  done
fi

# The experiment runner: a tiny sweep (CSV + PNGs), a bad sweep file, and
# Ctrl-C in the middle leaving nothing behind (about 20 s; no root needed).
step "experiments (tests/experiments_test.sh)" bash tests/experiments_test.sh

# The two-VM stage, once more with fresh VMs when the first try failed
# because qemu's emulated link stopped: a VM's console then shows the
# guest's virtio NIC transmit watchdog (NETDEV WATCHDOG: the host side no
# longer takes its packets; a few runs in twenty on this kind of machine,
# with DMG's code unchanged). Any other failure fails the step as it is.
rdma_two_vms() {
  local rc=0 logs=(build/rxe-2host/a/rxevm-console.log
                   build/rxe-2host/b/rxevm-console.log)
  bash deploy/softroce/dmg-rdma-2host-test.sh || rc=$?
  if [ "$rc" -ne 0 ] && grep -a -q "NETDEV WATCHDOG" "${logs[@]}" 2>/dev/null; then
    echo "quickstart: the VMs' emulated link stopped (NETDEV WATCHDOG in a" \
      "VM's console): the two-VM stage once more, with fresh VMs"
    rc=0
    bash deploy/softroce/dmg-rdma-2host-test.sh || rc=$?
  fi
  return "$rc"
}

# RDMA: the conformance suite and an end-to-end job over real verbs, on
# soft-RoCE inside a small qemu VM (this machine's kernel may lack rdma_rxe);
# then two VMs joined by an emulated link, memory and compute nodes on both,
# so RoCE crosses an interface.
# DMG_SKIP_RDMA_VM=1 skips it (say, on a machine that cannot run qemu).
if [ "${DMG_SKIP_RDMA_VM:-0}" = 1 ]; then
  echo "quickstart: DMG_SKIP_RDMA_VM=1: skipping the soft-RoCE VM tests"
else
  step "soft-RoCE VM (dmg-rdma-test.sh)" bash deploy/softroce/dmg-rdma-test.sh
  step "soft-RoCE two VMs (dmg-rdma-2host-test.sh)" rdma_two_vms
fi

if [ ${#failed[@]} -gt 0 ]; then
  # Each failed test once more, alone, its output's tail here at the end
  # (whether it fails again says whether it depends on the load); the run
  # fails either way.
  for t in "${ctest_failed[@]}"; do
    name="${t#*:}"
    echo "quickstart: ctest failed: $name; again, alone:"
    # The name as a literal regex: parameterised names hold ( ) < > etc.
    pattern="$(printf '%s' "$name" | sed 's/[][\\.*^$()+?{}|]/\\&/g')"
    ctest --preset release -R "^${pattern}\$" --output-on-failure 2>&1 |
      tail -n 40 | sed 's/^/quickstart:   | /'
  done
  echo "quickstart: ${#failed[@]} step(s) FAILED:"
  for f in "${failed[@]}"; do echo "quickstart:   - $f"; done
  for t in "${ctest_failed[@]}"; do echo "quickstart:   - ctest: ${t#*:}"; done
  exit 1
fi
echo "quickstart: every step passed"
