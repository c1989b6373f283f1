#!/usr/bin/env bash
# Regenerates the checked-in seed corpora fuzz/corpus/TARGET: make_corpus
# (built in build/fuzz, or build/${DMG_FUZZ_PRESET}) writes the text,
# image, block, frame and post seeds; gzip and xz add compressed graph
# files for read_any. Deterministic: rerunning it changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${DMG_FUZZ_PRESET:-fuzz}"
build="build/${preset}"
if [ ! -f "${build}/CMakeCache.txt" ]; then cmake --preset "${preset}"; fi
cmake --build "${build}" --target make_corpus
rm -rf fuzz/corpus
ASAN_OPTIONS=detect_leaks=1 "${build}/fuzz/make_corpus" fuzz/corpus
c=fuzz/corpus
gzip -9n <"$c/read_edge_list/snap.el" >"$c/read_any/snap.el.gz"
gzip -9n <"$c/read_matrix_market/symmetric.mtx" >"$c/read_any/symmetric.mtx.gz"
xz -9e <"$c/read_dimacs/sp.gr" >"$c/read_any/sp.gr.xz"
xz -9e <"$c/read_weighted_edge_list/w.wel" >"$c/read_any/w.wel.xz"
# Two gzip members back to back (gzip -d reads both).
cat "$c/read_any/snap.el.gz" "$c/read_any/snap.el.gz" >"$c/read_any/two.gz"
du -sh fuzz/corpus
