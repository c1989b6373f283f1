#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/*_fuzzer.cc; the fuzz preset, clang,
# only the targets and the libraries they test) and runs each for a bounded
# time from its seed corpus (fuzz/corpus/TARGET), several at once; fails if
# any target finds a crash, a leak, a sanitizer report, a timeout or an
# out-of-memory. What a failing run found is saved as BUILD/artifacts/
# TARGET-crash-* (and leak-, timeout-, oom-): reproduce with
#   BUILD/fuzz/TARGET BUILD/artifacts/TARGET-crash-...
# New inputs that reach new code go to BUILD/corpus/TARGET (not to the
# checked-in seeds; fuzz/make_corpus.sh rewrites those).
#
# Environment (all optional):
#   DMG_FUZZ_PRESET   configure/build preset (default fuzz: build/fuzz)
#   DMG_FUZZ_SECONDS  seconds each target runs (default 32: 11 targets,
#                     352 s of fuzzing in all)
#   DMG_FUZZ_JOBS     targets run at once (default: nproc)
#   DMG_FUZZ_TARGETS  space-separated subset of targets to run
set -euo pipefail
cd "$(dirname "$0")/.."

preset="${DMG_FUZZ_PRESET:-fuzz}"
build="build/${preset}"
seconds="${DMG_FUZZ_SECONDS:-32}"
jobs="${DMG_FUZZ_JOBS:-$(nproc)}"
targets=(${DMG_FUZZ_TARGETS:-read_edge_list read_weighted_edge_list
  read_matrix_market read_dimacs read_pace read_any image block wire_codec
  memory_node snapshot})

if [ ! -f "${build}/CMakeCache.txt" ]; then cmake --preset "${preset}"; fi
cmake --build "${build}" --target fuzzers

mkdir -p "${build}/artifacts" "${build}/corpus" "${build}/fuzz-logs"
# Symbolized reports; leaks count as failures (libFuzzer's -detect_leaks).
symbolizer=$(command -v llvm-symbolizer || ls /usr/lib/llvm-*/bin/llvm-symbolizer 2>/dev/null | tail -1 || true)
export ASAN_SYMBOLIZER_PATH="${symbolizer}"
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"

run_one() {  # TARGET: runs it, its output in BUILD/fuzz-logs/TARGET.log
  local t="$1"
  mkdir -p "${build}/corpus/${t}"
  "${build}/fuzz/${t}_fuzzer" "${build}/corpus/${t}" "fuzz/corpus/${t}" \
    -max_total_time="${seconds}" -timeout=30 -rss_limit_mb=2048 \
    -artifact_prefix="${build}/artifacts/${t}-" -print_final_stats=1 \
    >"${build}/fuzz-logs/${t}.log" 2>&1
}
export -f run_one
export build seconds

echo "fuzz: ${#targets[@]} targets, ${seconds} s each, ${jobs} at once (logs: ${build}/fuzz-logs)"
start=$(date +%s)
status=0
printf '%s\n' "${targets[@]}" | xargs -P "${jobs}" -I{} bash -c 'run_one {}' ||
  status=$?
wall=$(( $(date +%s) - start ))

total_runs=0
for t in "${targets[@]}"; do
  log="${build}/fuzz-logs/${t}.log"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "${log}" | tail -1)
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "${log}" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "${log}" | tail -1 | cut -d' ' -f2)
  if grep -qE '^==[0-9]+==ERROR|^SUMMARY: |runtime error:|FUZZ_CHECK failed|^artifact_prefix|Test unit written to' "${log}"; then
    echo "fuzz: ${t}: FAILED; the end of ${log}:"
    tail -40 "${log}"
    status=1
  else
    printf 'fuzz: %-24s %9s runs in %3s s, coverage %s\n' "${t}" "${runs:-?}" \
      "${secs:-?}" "${cov:-?}"
  fi
  total_runs=$(( total_runs + ${runs:-0} ))
done
echo "fuzz: ${total_runs} runs, $(( ${#targets[@]} * seconds )) s of fuzzing in ${wall} s"
if [ "${status}" -ne 0 ]; then
  echo "fuzz: FAILED (inputs saved under ${build}/artifacts)" >&2
  exit 1
fi
