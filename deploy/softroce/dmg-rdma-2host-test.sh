#!/bin/bash
# DMG over real RoCE between two "hosts": two soft-RoCE VMs (rxevm.sh multi)
# whose NICs are joined by a qemu socket netdev, an rxe device in each, so every
# RDMA operation crosses a (virtual) wire instead of one device's loopback.
#
#   VM A (10.77.0.1): memory node 0 (:7400), a lone memory node (:7401),
#                     compute node 0 of the 2-compute-node jobs
#   VM B (10.77.0.2): memory node 1 (:7400), compute node 1 of those jobs,
#                     and 1-compute-node PageRank and BFS against A's lone
#                     memory node, rdma_test's RdmaRemoteTest (several
#                     batches in flight across the wire, a stale key after
#                     free) and the transport conformance suite against
#                     it, and a
#                     short transport_bench (BENCH=1) with windows 1 and 4
#
# PageRank and BFS run with --verify on 2 compute nodes x 2 memory nodes, one
# of each per VM, and their outputs must be byte-identical to the embedded
# run's; each VM's rxe0 must have sent and received RoCE packets. The in-VM
# half is dmg-rdma-2host-vm.sh. Prints "DMG_RDMA_2HOST: PASS" and exits 0, or
# FAIL and non-zero. Needs a release build (build/release).
#
# Knobs: BUILD (build/release), OUT (build/rxe-2host: one share per VM in
# OUT/a and OUT/b), TIMEOUT (420 s per VM, qemu killed after it), BENCH (1),
# MEM (1024 MiB per VM), DMG_GRAPHS_DIR (ca-GrQc.el from there, else kron:12).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
BUILD=${BUILD:-$REPO/build/release}
OUT=${OUT:-$REPO/build/rxe-2host}
HERE=$REPO/deploy/softroce
T0=$(date +%s%N)

for b in "$BUILD/tools/dmg" "$BUILD/bench/transport_bench" \
         "$BUILD/tests/rdma_test" "$BUILD/tests/transport_conformance_test"; do
  [ -x "$b" ] || { echo "dmg-rdma-2host-test: missing $b (build first)" >&2; exit 2; }
done
"$HERE/rxevm.sh" prepare

# A small real graph when the shared graphs are around, else a generated one.
GRAPH=kron:12
if [ -n "${DMG_GRAPHS_DIR:-}" ] && [ -f "$DMG_GRAPHS_DIR/ca-GrQc.el" ]; then
  GRAPH=ca-GrQc.el
fi
for s in a b; do
  rm -rf "${OUT:?}/$s" && mkdir -p "$OUT/$s"
  "$HERE/rxevm.sh" exec "$OUT/$s" "$BUILD/tools/dmg" "$BUILD/bench/transport_bench" \
    "$BUILD/tests/rdma_test" "$BUILD/tests/transport_conformance_test" 2>/dev/null
  cp "$HERE/dmg-rdma-2host-vm.sh" "$OUT/$s/test.sh"
  cp "$HERE/twohost-lib.sh" "$OUT/$s/"
  chmod +x "$OUT/$s/test.sh"
  if [ "$GRAPH" != "${GRAPH#ca-}" ]; then cp "$DMG_GRAPHS_DIR/ca-GrQc.el" "$OUT/$s/"; fi
done

export DMG_2HOST_GRAPH=$GRAPH BENCH=${BENCH:-1}
export TIMEOUT=${TIMEOUT:-420} MEM=${MEM:-1024}
rc=0
RXEVM_ENV="${RXEVM_ENV:-} DMG_2HOST_GRAPH BENCH" \
  "$HERE/rxevm.sh" multi "$OUT/a" "$OUT/b" || rc=$?

# every VM's own verdict and packet counts, from its console log
for s in a b; do
  grep -a -E '^DMG_RDMA_2HOST_[AB]' "$OUT/$s/rxevm-console.log" 2>/dev/null \
    || echo "dmg-rdma-2host-test: VM $s printed no verdict (log $OUT/$s/rxevm-console.log)"
done
for s in a b; do
  grep -a -q "^DMG_RDMA_2HOST_[AB]: PASS" "$OUT/$s/rxevm-console.log" 2>/dev/null \
    || { [ "$rc" != 0 ] || rc=1; }
done
ms=$(( ($(date +%s%N) - T0) / 1000000 ))
echo "dmg-rdma-2host-test: graph $GRAPH, wall $((ms / 1000)).$(printf %03d $((ms % 1000))) s"
if [ "$rc" = 0 ]; then echo "DMG_RDMA_2HOST: PASS"; else echo "DMG_RDMA_2HOST: FAIL"; fi
exit "$rc"
