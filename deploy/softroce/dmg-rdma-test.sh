#!/bin/bash
# DMG's RDMA tests on soft-RoCE: boots the rxe VM (rxevm.sh) and runs, inside
# it, (0) `dmg doctor` (exit 0, rxe0 and the GID index reported), (1) the
# transport conformance suite with the rdma backend and (2) an
# end-to-end job — `dmg memory-node --transport=rdma`, `dmg load`, `dmg run
# --transport=rdma --verify` for PageRank, BFS, CC, BC and TC — whose outputs
# must be identical to the embedded cluster's, then PageRank and BFS on 2
# compute nodes x 2 memory nodes over rdma (dmg run --compute_nodes=2). Prints "DMG_RDMA_VM: PASS" and exits 0, or FAIL and
# non-zero. Needs a release build (build/release). README command 2 and CI
# run it; on a kernel with rdma_rxe, `NATIVE=1` runs the same test.sh here.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
BUILD=${BUILD:-$REPO/build/release}
SHARE=${SHARE:-$REPO/build/rxe-dmg}
HERE=$REPO/deploy/softroce

for b in "$BUILD/tools/dmg" "$BUILD/tests/transport_conformance_test" \
         "$BUILD/tests/rdma_test" "$BUILD/bench/transport_bench"; do
  [ -x "$b" ] || { echo "dmg-rdma-test: missing $b (build first)" >&2; exit 2; }
done
rm -rf "$SHARE" && mkdir -p "$SHARE"
"$HERE/rxevm.sh" exec "$SHARE" "$BUILD/tools/dmg" \
  "$BUILD/tests/transport_conformance_test" "$BUILD/tests/rdma_test" \
  "$BUILD/bench/transport_bench" >/dev/null

# A small real graph when the shared graphs are around, else a generated one.
GRAPH=kron:12
if [ -n "${DMG_GRAPHS_DIR:-}" ] && [ -f "$DMG_GRAPHS_DIR/ca-GrQc.el" ]; then
  cp "$DMG_GRAPHS_DIR/ca-GrQc.el" "$SHARE/ca-GrQc.el"
  GRAPH=ca-GrQc.el
fi

cat > "$SHARE/test.sh" <<TEST
#!/bin/bash
set -u
cd "\$(dirname "\$0")"
G=$GRAPH
fail=0
ulimit -l unlimited 2>/dev/null || true   # as the VM's init does (verbs registration)

echo "== dmg doctor: must find \$RXE_DEV and GID index \$RXE_GIDX, exit 0"
./bin/dmg doctor > doctor.txt 2>&1; rc=\$?
cat doctor.txt
[ \$rc = 0 ] || { echo "dmg doctor exited \$rc, not 0"; fail=1; }
grep -q "OK    \$RXE_DEV port 1: GID index \$RXE_GIDX " doctor.txt \
  || { echo "dmg doctor did not report \$RXE_DEV with GID index \$RXE_GIDX"; fail=1; }

echo "== DMG conformance suite, rdma backend (device \$RXE_DEV, gid \$RXE_GIDX)"
./bin/transport_conformance_test --gtest_brief=1 \\
  --gtest_filter='Backends/ConformanceTest.*/rdma' || fail=1
# Any rdma test that skipped means the device was not usable: a failure here.
./bin/transport_conformance_test --gtest_filter='Backends/ConformanceTest.*/rdma' \\
  | grep -q 'SKIPPED' && { echo "rdma conformance tests were skipped"; fail=1; }

echo "== rdma backend unit tests"
./bin/rdma_test --gtest_brief=1 || fail=1

if [ "\${BENCH:-0}" = 1 ]; then
  echo "== READ micro-benchmark, rdma (soft-RoCE under TCG: emulated, not a NIC)"
  ./bin/transport_bench --transport=rdma --host=\$RXE_IP --seconds=0.3 \
    --json=bench-rdma.json
  echo "== READ batches in flight: window 1, 2, 4 (rdma, soft-RoCE under TCG)"
  ./bin/transport_bench --transport=rdma --host=\$RXE_IP --seconds=0.5 \
    --sizes=4096,65536 --depths=16 --windows=1,2,4 --json=bench-rdma-window.json
fi

echo "== end-to-end: memory node over rdma, \$G"
./bin/dmg memory-node --listen=\$RXE_IP:7400 --transport=rdma > mn.log 2>&1 &
mn=\$!
for i in \$(seq 100); do grep -q "listening on" mn.log && break; sleep 0.1; done
cat mn.log
./bin/dmg load --graph=\$G --memory_nodes=\$RXE_IP:7400 || fail=1
for run in pagerank bfs cc "bc --sources=4" tc; do
  algo=\${run%% *}
  ./bin/dmg run --algo=\$run --graph=\$G --threads=2 --output=\$algo.local \\
    || fail=1
  ./bin/dmg run --algo=\$run --threads=2 --transport=rdma \\
    --memory_nodes=\$RXE_IP:7400 --output=\$algo.rdma \\
    --stats_json=\$algo.rdma.json --graph=\$G --verify || fail=1
  if cmp -s \$algo.local \$algo.rdma; then
    echo "\$algo over rdma: output identical to the embedded run"
  else
    echo "\$algo over rdma: OUTPUT DIFFERS from the embedded run"; fail=1
  fi
done
kill -TERM \$mn; wait \$mn || { echo "memory node did not stop cleanly"; fail=1; }

echo "== 2 compute nodes x 2 memory nodes over rdma, \$G"
for port in 7400 7401; do
  ./bin/dmg memory-node --listen=\$RXE_IP:\$port --transport=rdma > mn\$port.log 2>&1 &
done
for i in \$(seq 100); do
  grep -q "listening on" mn7400.log && grep -q "listening on" mn7401.log && break
  sleep 0.1
done
NODES=\$RXE_IP:7400,\$RXE_IP:7401
./bin/dmg load --graph=\$G --memory_nodes=\$NODES || fail=1
for algo in pagerank bfs; do
  ./bin/dmg run --algo=\$algo --threads=1 --transport=rdma --memory_nodes=\$NODES \\
    --compute_nodes=2 --output=\$algo.rdma2x2 --stats_json=\$algo.rdma2x2.json \\
    --graph=\$G --verify || fail=1
  if cmp -s \$algo.local \$algo.rdma2x2; then
    echo "\$algo on 2 compute x 2 memory nodes over rdma: output identical"
  else
    echo "\$algo on 2 compute x 2 memory nodes: OUTPUT DIFFERS"; fail=1
  fi
done
kill -TERM \$(jobs -p) 2>/dev/null; wait || true
if [ \$fail = 0 ]; then echo "DMG_RDMA_VM: PASS"; else echo "DMG_RDMA_VM: FAIL"; fi
exit \$fail
TEST
chmod +x "$SHARE/test.sh"

if [ "${NATIVE:-0}" = 1 ]; then
  exec "$HERE/rxevm.sh" native "$SHARE"
fi
"$HERE/rxevm.sh" prepare
RXEVM_ENV="BENCH" "$HERE/rxevm.sh" run "$SHARE"
