#!/usr/bin/env bash
# The GPU checks of issue 40, for a machine with a GPU (the `device` tool's
# machines have nvcc, CMake and ninja but none of dmg's libraries, and
# reach nothing outside). Two steps:
#
#   here:   bash gpu/device-check.sh pack
#           builds dmg, the GPU tests and gpu_share_bench with CUDA (sm_80,
#           sm_90) and puts them, stripped, with every shared library they
#           need but the C library's own, in build/devkit (~20 MB);
#   there:  bash gpu/device-check.sh            (carry build/devkit)
#           runs the NUMA probe (dmg gpu-probe -> topology.json), the GPU
#           tests (device attributes, the probe, the kernels against host
#           references, both schedules) and the kernels on kron:22-24, plain
#           against NUMA, PageRank and BFS checked against CPU loops; prints
#           one table; then dmg run PageRank --gpu=on --verify on kron:20
#           (DMG_RUN_GRAPH): the engine's share, calibrated, against the
#           reference, with its gpu stats. Without build/devkit it tries
#           to build there (which needs dmg's libraries installed).
#
# Results go to $OUT (or build/device-check) as device-check.txt and
# topology.json. Under 5 minutes on an H100, the graphs' generation
# included. DMG_CHECK_GRAPHS overrides the graphs (kron:22,kron:23,kron:24).
set -uo pipefail
cd "$(dirname "$0")/.."
kit=build/devkit
targets=(dmg gpu_device_test gpu_kernels_test gpu_share_bench)

pack() {
  local build=${DMG_DEVICE_BUILD:-build/release}
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake --preset release -B "$build" -DDMG_CUDA=ON >/dev/null || exit 1
  fi
  grep -q "DMG_HAVE_CUDA.*ON\|CMAKE_CUDA_COMPILER:.*nvcc" "$build/CMakeCache.txt" ||
    { echo "device-check: $build is not a CUDA build"; exit 1; }
  cmake --build "$build" --target "${targets[@]}" || exit 1
  rm -rf "$kit" && mkdir -p "$kit/bin" "$kit/lib"
  local bins=("$build/tools/dmg" "$build/tests/gpu_device_test"
              "$build/tests/gpu_kernels_test" "$build/bench/gpu_share_bench")
  for b in "${bins[@]}"; do strip -o "$kit/bin/$(basename "$b")" "$b"; done
  # Every library they load but glibc's own (the machine's is newer).
  for b in "${bins[@]}"; do ldd "$b"; done | awk '$3 ~ /^\// {print $3}' |
    sort -u | grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
    while read -r lib; do cp -L "$lib" "$kit/lib/"; done
  # The tests call `dmg` by the path they were built with: point it here.
  echo "$(cd "$build" && pwd)/tools/dmg" > "$kit/dmg-path"
  du -sh "$kit"
  echo "device-check: carry $kit, then run: bash gpu/device-check.sh"
}

run() {
  local out=${OUT:-build/device-check}
  mkdir -p "$out"
  local bin
  if [ -x "$kit/bin/dmg" ]; then
    bin=$kit/bin
    export LD_LIBRARY_PATH="$PWD/$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # Where the tests look for dmg (the path it was built at here).
    local want; want=$(cat "$kit/dmg-path")
    if [ ! -e "$want" ]; then
      mkdir -p "$(dirname "$want")" && ln -s "$PWD/$kit/bin/dmg" "$want"
    fi
  else
    echo "device-check: no $kit: building here (needs dmg's libraries)"
    local build=build/device
    cmake --preset release -B "$build" -DDMG_CUDA=ON >/dev/null &&
      cmake --build "$build" --target "${targets[@]}" || exit 1
    mkdir -p build/devbin
    for t in tools/dmg tests/gpu_device_test tests/gpu_kernels_test \
             bench/gpu_share_bench; do
      ln -sf "$PWD/$build/$t" "build/devbin/$(basename "$t")"
    done
    bin=build/devbin
  fi
  {
    echo "== device"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
      --format=csv,noheader 2>&1
    echo "== dmg gpu-probe"
    timeout 120 "$bin/dmg" gpu-probe --output="$out/topology.json" 2>&1
    echo "== gpu_device_test"
    timeout 120 "$bin/gpu_device_test" 2>&1 | grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|Failure|error"
    echo "== gpu_kernels_test"
    timeout 120 "$bin/gpu_kernels_test" 2>&1 | grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|Failure|error"
    echo "== plain against NUMA"
    local topo=()
    [ -s "$out/topology.json" ] && topo=(--topology="$out/topology.json")
    timeout 240 "$bin/gpu_share_bench" \
      --graphs="${DMG_CHECK_GRAPHS:-kron:22,kron:23,kron:24}" "${topo[@]}" 2>&1
    # The engine's share (Engine::GatherSum): PageRank with the kernels,
    # checked against the reference; the calibration and cut in stats.
    echo "== dmg run pagerank --gpu=on"
    timeout 180 "$bin/dmg" run --algo=pagerank --graph="${DMG_RUN_GRAPH:-kron:20}" \
      --gpu=on --verify --summary_json="$out/run-summary.json" \
      --stats_json="$out/run-stats.json" 2>&1 | tail -3
    grep -o '"gpu": {[^}]*}' "$out/run-summary.json" "$out/run-stats.json"
  } | tee "$out/device-check.txt"
}

case "${1:-run}" in
  pack) pack ;;
  run) run ;;
  *) echo "usage: gpu/device-check.sh [pack|run]"; exit 2 ;;
esac
