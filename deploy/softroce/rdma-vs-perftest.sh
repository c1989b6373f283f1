#!/bin/bash
# DMG's RDMA READ path against perftest on the same pair of soft-RoCE VMs
# (issue 15): two VMs joined by a qemu socket netdev (rxevm.sh multi), rxe
# in each. VM A serves perftest (ib_read_lat, ib_read_bw) and a `dmg
# memory-node --transport=rdma`; VM B runs perftest's clients and then
# bench/transport_bench at the same message sizes and outstanding READs, in
# one run. Prints one table of DMG/perftest ratios:
#
#   64 B, 1 outstanding:  latency, DMG depth 1 window 1's median batch
#                         (transport_bench typical_us) against ib_read_lat's
#                         typical (t_typical, its median), and the means
#   64 B, 4 and 16:       ops/s, DMG depth N window 1 (one batch of N READs,
#                         posted and waited for, as the engine issues them)
#                         and depth 1 window N (N single READs kept in
#                         flight, what ib_read_bw -o N does), against
#                         ib_read_bw -o N's message rate
#   64 KiB, 16:           bandwidth, the same two DMG shapes against
#                         ib_read_bw -s 65536 -o 16 (message rate x size:
#                         no MB-vs-MiB question)
#
# TCG-emulated rxe makes every figure slow; the ratios are what count.
# Exit 0 when both VMs pass (the ratios are reported, not judged). Needs a
# release build and perftest on the host (apt-get install perftest).
# Knobs: BUILD (build/release), OUT (build/rxe-perftest), TIMEOUT (600 s).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
BUILD=${BUILD:-$REPO/build/release}
OUT=${OUT:-$REPO/build/rxe-perftest}
HERE=$REPO/deploy/softroce

for b in "$BUILD/tools/dmg" "$BUILD/bench/transport_bench"; do
  [ -x "$b" ] || { echo "rdma-vs-perftest: missing $b (build first)" >&2; exit 2; }
done
LAT=$(command -v ib_read_lat || true) BW=$(command -v ib_read_bw || true)
if [ -z "$LAT" ] || [ -z "$BW" ]; then
  echo "rdma-vs-perftest: perftest is not installed (apt-get install perftest)" >&2
  exit 2
fi
"$HERE/rxevm.sh" prepare
for s in a b; do
  rm -rf "${OUT:?}/$s" && mkdir -p "$OUT/$s"
  "$HERE/rxevm.sh" exec "$OUT/$s" "$BUILD/tools/dmg" \
    "$BUILD/bench/transport_bench" "$LAT" "$BW" 2>/dev/null
  cp "$HERE/rdma-vs-perftest-vm.sh" "$OUT/$s/test.sh"
  cp "$HERE/twohost-lib.sh" "$OUT/$s/"
  chmod +x "$OUT/$s/test.sh"
done
rc=0
TIMEOUT=${TIMEOUT:-600} "$HERE/rxevm.sh" multi "$OUT/a" "$OUT/b" || rc=$?
for s in a b; do
  grep -a -q "^RDMA_VS_PERFTEST_[AB]: PASS" "$OUT/$s/rxevm-console.log" 2>/dev/null \
    || { echo "rdma-vs-perftest: VM $s failed (log $OUT/$s/rxevm-console.log)"; rc=1; }
done
[ "$rc" = 0 ] || exit "$rc"

python3 - "$OUT/b/rxevm-console.log" "$OUT/b/bench.json" <<'EOF'
import json, re, sys
log, bench = open(sys.argv[1], errors="replace").read(), json.load(open(sys.argv[2]))
perf = {}
for name, line in re.findall(r"^PERFTEST (\w+): (.*)$", log, re.M):
    perf[name] = [float(x) for x in line.split()]
def dmg(size, depth, window):
    for p in bench:
        if (p["bytes"], p["depth"], p["window"]) == (size, depth, window):
            return p
    sys.exit(f"rdma-vs-perftest: no transport_bench point {size} B x {depth} x {window}")
rows = []
# ib_read_lat: bytes iterations t_min t_max t_typical t_avg ...
typical = perf["lat64"][4]
# DMG's median batch time against perftest's typical (its median too);
# the means beside them
d = dmg(64, 1, 1)["typical_us"]
rows.append(("64 B, 1 outstanding", "typical us", f"{typical:.1f}",
             "depth 1 x window 1", f"{d:.1f}", d / typical, "<= 1.2x"))
mean, dm = perf["lat64"][5], dmg(64, 1, 1)["batch_us"]
rows.append(("64 B, 1 outstanding", "mean us", f"{mean:.1f}",
             "depth 1 x window 1", f"{dm:.1f}", dm / mean, ""))
# ib_read_bw: bytes iterations BW_peak BW_average MsgRate[Mpps]
for n, name in ((1, "bw64o1"), (4, "bw64o4"), (16, "bw64o16")):
    ops = perf[name][4] * 1e3  # kops/s
    for depth, window in ((1, 1),) if n == 1 else ((n, 1), (1, n)):
        k = dmg(64, depth, window)["kops"]
        rows.append((f"64 B, {n} outstanding", "kops/s", f"{ops:.2f}",
                     f"depth {depth} x window {window}", f"{k:.2f}", k / ops,
                     ">= 0.8x" if n > 1 else ""))
mbs = perf["bw64ko16"][4] * 65536  # Mpps x bytes = MB/s (10^6 bytes)
for depth, window in ((16, 1), (1, 16)):
    m = dmg(65536, depth, window)["MBps"]
    rows.append(("64 KiB, 16 outstanding", "MB/s", f"{mbs:.1f}", f"depth {depth} x window {window}", f"{m:.1f}", m / mbs, ">= 0.8x"))
print("DMG transport_bench against perftest, VM B reading VM A over one socket netdev (soft-RoCE, TCG)")
print(f"{'point':24} {'unit':10} {'perftest':>9}  {'DMG shape':20} {'DMG':>9} {'DMG/perftest':>13}  target")
for p, u, a, shape, b, r, t in rows:
    print(f"{p:24} {u:10} {a:>9}  {shape:20} {b:>9} {r:12.2f}x  {t}")
EOF
