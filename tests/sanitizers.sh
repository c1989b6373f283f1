#!/usr/bin/env bash
# The test suite under a sanitizer (docs/TESTING.md, "Sanitizers"), as CI runs
# it (deploy/quickstart.sh test):
#   tests/sanitizers.sh asan   ASan + UBSan (gcc, -O1): builds ASAN_TARGETS
#                              (and dmg) in build/asan and runs their tests
#   tests/sanitizers.sh tsan   ThreadSanitizer: builds TSAN_TARGETS in
#                              build/tsan and runs their tests
# Any report fails the run (abort_on_error / halt_on_error;
# -fno-sanitize-recover=all). What is left out, and why, is listed below and
# in docs/TESTING.md; DMG_SANITIZER_ALL=1 builds every test binary and runs
# every test instead (hours under TSan on 2 cores).
# Prints "sanitizers: MODE: build N s, tests N s" at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"

# ASan + UBSan: the unit-level tests of the readers and the store (formats,
# bounded decompression and the memory room, generator, CSR build, layout,
# codec, image, block validation), the compute node's parts (wire codec,
# outbox, page / hot-block / header caches, state arrays, cache planner,
# block source, frontier, barrier, unit scheduler, progress record), every
# transport's conformance suite, Endpoint::Wait, the tcp server and wire
# (tcp_wire, auth, load transactions, snapshots), the engine and several
# compute nodes in one process, the workload runner; and the GPU part's
# host side in this CUDA-off build (topology analysis, the share split, the
# kernel bodies on the host fake, the engine's share, the no-GPU answers),
# so CI builds and runs it with CUDA off as the release run does with it on.
ASAN_TARGETS=(reader_test memory_limits_test generator_test build_graph_test
  layout_test block_codec_test image_test block_validation_test reference_test
  wire_codec_test outbox_test coordinator_test page_cache_test state_array_test
  claim_log_test pending_lines_test line_runs_test state_slices_test
  hot_block_cache_test
  header_cache_test cache_planner_test block_source_test frontier_test
  barrier_test unit_scheduler_test progress_test
  transport_conformance_test endpoint_wait_test tcp_wire_test
  memory_node_auth_test load_transaction_test snapshot_test
  engine_test multinode_test workload_test
  gpu_analysis_test gpu_share_test gpu_kernels_test gpu_engine_test
  gpu_device_test)
# ThreadSanitizer: the tests that run threads against each other: the
# engine and its parts (worker pool, unit scheduler, outbox, barrier,
# frontier, page / hot-block / header caches, state arrays, block
# source), several compute nodes in one process (every transport), the
# tcp server and client (wire, auth limits), every transport's conformance
# suite, Endpoint::Wait, the workload runner.
TSAN_TARGETS=(engine_test multinode_test unit_scheduler_test outbox_test
  coordinator_test
  barrier_test frontier_test page_cache_test state_array_test claim_log_test
  pending_lines_test
  hot_block_cache_test
  header_cache_test block_source_test workload_test tcp_wire_test
  memory_node_auth_test transport_conformance_test endpoint_wait_test
  snapshot_test progress_test)

# Left out of both, for CI's time; all of them run in the release run.
# - The heavy parameterised reference comparisons of several compute nodes
#   (each runs every algorithm on two scale-14 graphs on every node: ~16 s
#   of CPU in a release build, 3x under ASan, 10x+ under TSan):
#   MultiNodeTest.EveryAlgorithmMatchesTheReference but for 2 compute nodes
#   and 3 memory nodes (push, pull, auto), and UpdateModeTest but for 2
#   compute nodes with batch updates.
# - Tests that start dmg processes and kill them, or run jobs over and over
#   (minutes in a release build): LoadTransactionProcessTest,
#   SnapshotProcessTest, BlockValidationTest.ForgedWriteIntoAMemoryNode*.
# - The engine's largest generated graphs: GeneratedGraphs scale 16.
HEAVY='^Nodes/MultiNodeTest\.EveryAlgorithmMatchesTheReference/\((1|3|4), |^Nodes/MultiNodeTest\.EveryAlgorithmMatchesTheReference/\(2, 1,'
HEAVY+='|^(Modes|Pull)/UpdateModeTest\.EveryForcedUpdateModeGivesTheSameAnswers/\(3,|UpdateModeTest.*kAtomic|^Pull/'
HEAVY+='|^LoadTransactionProcessTest\.|^SnapshotProcessTest\.|^BlockValidationTest\.ForgedWrite'
HEAVY+='|^Scales/GeneratedGraphs\.AllAlgorithmsMatchReference/.*16'
# Left out of the TSan run only (10-30x slower than release there; each is
# 3-6 minutes of one core under TSan): EngineTest.CompressedBlocksGive-
# TheSameAnswers and MultiNodeTest.BoundedCachesPageTheState (the same
# engine paths run in the smaller engine and multi-node tests), and of the
# 2-compute-node comparisons all but MultiNodeTest with 3 memory nodes in
# auto mode and UpdateModeTest with batch/auto and atomic/push.
TSAN_HEAVY='^EngineTest\.CompressedBlocksGiveTheSameAnswers$|^MultiNodeTest\.BoundedCachesPageTheState$'
TSAN_HEAVY+='|^Nodes/MultiNodeTest\.EveryAlgorithmMatchesTheReference/\(2, 3, 4-byte object <0[01]'
TSAN_HEAVY+='|^Modes/UpdateModeTest\.EveryForcedUpdateModeGivesTheSameAnswers/\(2, 4-byte object <02-00 00-00>, 4-byte object <01'
TSAN_HEAVY+='|^Modes/UpdateModeTest\.EveryForcedUpdateModeGivesTheSameAnswers/\(2, 4-byte object <03-00 00-00>, 4-byte object <00'
# Not a sanitizer run's business: the clang lock-annotation check (release
# run) and the placeholders of test binaries this run did not build.
EXCLUDE="_NOT_BUILT\$|^ThreadSafetyAnnotations\$|${HEAVY}"

if [ -z "${DMG_GRAPHS_DIR:-}" ] && [ -d ../shared/graphs ]; then
  export DMG_GRAPHS_DIR="$(cd ../shared/graphs && pwd)"
fi
symbolizer=$(command -v llvm-symbolizer ||
  ls /usr/lib/llvm-*/bin/llvm-symbolizer 2>/dev/null | tail -1 || true)
export ASAN_SYMBOLIZER_PATH="${symbolizer}" TSAN_SYMBOLIZER_PATH="${symbolizer}"

case "${mode}" in
  asan) targets=("${ASAN_TARGETS[@]}") ;;
  tsan)
    targets=("${TSAN_TARGETS[@]}")
    EXCLUDE+="|${TSAN_HEAVY}"
    ;;
  *) echo "usage: $0 asan|tsan" >&2; exit 2 ;;
esac
jobs="${DMG_SANITIZER_JOBS:-$(nproc)}"
if [ "${DMG_SANITIZER_ALL:-0}" = 1 ]; then
  targets=(all)
  EXCLUDE='^ThreadSafetyAnnotations$'
fi

[ -f "build/${mode}/CMakeCache.txt" ] || cmake --preset "${mode}"
start=$SECONDS
cmake --build --preset "${mode}" -j "${jobs}" --target "${targets[@]}"
built=$SECONDS
echo "sanitizers: ${mode}: build $((built - start)) s"
status=0
rm -f "build/${mode}/Testing/Temporary/LastTestsFailed.log"
ctest --preset "${mode}" -j "${jobs}" -E "${EXCLUDE}" --output-on-failure ||
  status=$?
echo "sanitizers: ${mode}: build $((built - start)) s, tests $((SECONDS - built)) s, ctest exit ${status}"
# The failed tests' names last (a CI log is often read from its tail).
if [ -s "build/${mode}/Testing/Temporary/LastTestsFailed.log" ]; then
  sed "s/^[0-9]*:/sanitizers: ${mode}: failed: /" \
    "build/${mode}/Testing/Temporary/LastTestsFailed.log"
fi
exit "${status}"
