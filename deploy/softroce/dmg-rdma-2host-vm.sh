#!/bin/bash
# The in-VM half of dmg-rdma-2host-test.sh: copied into each VM's share as
# test.sh and run by `rxevm.sh multi` in two VMs ("hosts") whose rxe devices
# are joined by a (virtual) wire. Role A (10.77.0.1) and role B (10.77.0.2):
#
#   A: memory node 0 on A:7400, and a lone memory node on A:7401
#   B: memory node 1 on B:7400
#   B: `dmg load` onto A:7401 alone, then PageRank and BFS --verify on one
#      compute node in B against it, then rdma_test's RdmaRemoteTest from
#      B against it (several batches in flight across the wire, every byte
#      checked), plus (BENCH=1, the default) a short transport_bench from B
#      against it, windows 1 and 4
#   A: `dmg load` onto A:7400,B:7400, then PageRank and BFS --verify on two
#      compute nodes: compute node 0 in A, compute node 1 in B
#   every output byte-identical to the embedded run (no transport flags)
#   each VM: its rxe0 must have sent and received RoCE packets, and RoCEv2
#   datagrams must have come in over its NIC
#
# The VMs meet over the network: each serves marker files over HTTP
# (busybox httpd on port 7500) and polls the peer's (`mark`, `await`); every
# wait is bounded. Meant to run on two real hosts with rdma_rxe or RoCE NICs
# too (untried): `RXEVM_ROLE=A RXE_PEER_IP=<B's address> DMG_2HOST_GRAPH=G
# rxevm.sh native SHARE` on one and the same with B on the other.
set -u
cd "$(dirname "$0")" || exit 2
G=${DMG_2HOST_GRAPH:-kron:12}
ROLE=${RXEVM_ROLE:?RXEVM_ROLE must be A or B}
ME=$RXE_IP
PEER=${RXE_PEER_IP:?RXE_PEER_IP must be the peer address}
case "$ROLE" in
  A) A_IP=$ME B_IP=$PEER ;;
  B) A_IP=$PEER B_IP=$ME ;;
  *) echo "RXEVM_ROLE must be A or B (got $ROLE)"; exit 2 ;;
esac
MARK_PORT=7500 MN_PORT=7400 SOLO_PORT=7401
NODES=$A_IP:$MN_PORT,$B_IP:$MN_PORT    # memory node 0 in A, 1 in B
SOLO=$A_IP:$SOLO_PORT                   # the 1-memory-node case
# Joining a job waits this long for its record: the two compute nodes start
# within a second of each other, but TCG is slow.
JOB_FLAGS=(--transport_timeout_ms=60000)
fail=0
T0=$SECONDS
MN7400="" MN7401=""   # memory node pids (start_mn sets them)

# say, bad, mark, await, start_mn, stop_mn (and the markers' httpd)
# shellcheck source=twohost-lib.sh
. ./twohost-lib.sh

# ---- RoCE counters of this VM's rxe device and its NIC, before
CNT=/sys/class/infiniband/$RXE_DEV/ports/1/hw_counters
NIC=/sys/class/net/$RXE_IF/statistics
# rxe also counts packets of its internal loopback (a compute node and a
# memory node in the same VM); UDP datagrams received (/proc/net/snmp) count
# only RoCEv2 packets that came in over the NIC (loopback skips the UDP stack,
# and nothing else here speaks UDP).
udp_in() { awk '/^Udp:/ { if (h) { print $2; exit } h = 1 }' /proc/net/snmp; }
declare -A C0=()
for f in "$CNT"/* "$NIC"/tx_packets "$NIC"/rx_packets; do
  read -r v < "$f" 2>/dev/null && C0[$f]=$v
done
UDP0=$(udp_in)

# same_as_embedded ALGO FILE WHAT
same_as_embedded() {
  if cmp -s "$1.local" "$2"; then say "$1 $3: output identical to the embedded run"
  else bad "$1 $3: OUTPUT DIFFERS from the embedded run"; fi
}

say "role $ROLE: this VM $ME, peer $PEER; graph $G; rxe $RXE_DEV gid $RXE_GIDX on $RXE_IF"

# ---- memory nodes, and the embedded reference outputs meanwhile
mn_ok=ok
if [ "$ROLE" = A ]; then
  start_mn $MN_PORT || mn_ok=fail
  start_mn $SOLO_PORT || mn_ok=fail
else
  start_mn $MN_PORT || mn_ok=fail
fi
mark mn "$mn_ok"
for algo in pagerank bfs; do
  ./bin/dmg run --algo=$algo --graph="$G" --threads=1 --output=$algo.local \
    > $algo.local.log 2>&1 || { bad "embedded $algo failed"; cat $algo.local.log; }
done
say "embedded reference outputs written"
if ! await mn 180 || [ "$AWAITED" != ok ]; then bad "the peer's memory node(s) are not up"; fi
peer_mn=$AWAITED

if [ "$ROLE" = A ]; then
  # ---- load the 2-memory-node graph (memory node 0 here, 1 in B)
  loaded=fail
  if [ "$peer_mn" = ok ] && [ "$mn_ok" = ok ]; then
    if ./bin/dmg load --graph="$G" --memory_nodes="$NODES"; then loaded=ok
    else bad "dmg load onto $NODES failed"; fi
  fi
  mark loaded $loaded
  # B first runs its 1-compute-node jobs on the lone memory node
  await ready 300 || bad "B never got ready for the 2-compute-node jobs"
  if [ "$loaded" = ok ] && [ "$AWAITED" = ok ]; then
    for algo in pagerank bfs; do
      say "== $algo, 2 compute nodes (0 here, 1 in B) x 2 memory nodes ($NODES)"
      timeout 300 ./bin/dmg run --algo=$algo --graph="$G" --threads=1 \
        --transport=rdma --memory_nodes="$NODES" --compute_nodes=2 \
        --compute_node_id=0 --job=2host-$algo "${JOB_FLAGS[@]}" \
        --output=$algo.2x2 --stats_json=$algo.2x2.json --verify \
        || bad "$algo, compute node 0 of 2, failed"
      same_as_embedded $algo $algo.2x2 "on 2 compute x 2 memory nodes across the link"
    done
  else
    bad "2-compute-node jobs not run"
  fi
else
  # ---- 1 compute node here against A's lone memory node
  solo=fail
  if [ "$peer_mn" = ok ]; then
    if ./bin/dmg load --graph="$G" --memory_nodes="$SOLO"; then solo=ok
    else bad "dmg load onto $SOLO failed"; fi
  fi
  if [ "$solo" = ok ]; then
    for algo in pagerank bfs; do
      say "== $algo, 1 compute node here x A's memory node $SOLO"
      timeout 300 ./bin/dmg run --algo=$algo --graph="$G" --threads=1 \
        --transport=rdma --memory_nodes="$SOLO" --output=$algo.1x1 \
        --stats_json=$algo.1x1.json --verify || bad "$algo against $SOLO failed"
      same_as_embedded $algo $algo.1x1 "from B on A's memory node"
    done
    # Several READ batches in flight across the wire: a PageRank whose
    # blocks stream every iteration (a bound below the store: with the
    # whole graph cached, one batch reads everything once), and the stats'
    # max_outstanding, the batches one worker's endpoint really had in
    # flight at once (prefetch window 2).
    say "== pagerank, 1 compute node here x $SOLO, blocks streamed (0.12 MB bound)"
    timeout 300 ./bin/dmg run --algo=pagerank --graph="$G" --threads=1 \
      --transport=rdma --memory_nodes="$SOLO" --cache_mb=0.12 --max_iters=5 \
      --stats_json=pagerank.stream.json > /dev/null || bad "streamed pagerank against $SOLO failed"
    mo=$(grep -ao '"max_outstanding": [0-9]*' pagerank.stream.json \
         | awk '{print $2}' | sort -n | tail -1)
    say "  at most ${mo:-?} READ batches in flight per endpoint (stats max_outstanding)"
    [ "${mo:-0}" -gt 1 ] || bad "pagerank over the wire never had more than one batch in flight (max_outstanding ${mo:-none})"
    # The suites below against A's daemon. On two emulated CPUs soft-RoCE
    # now and then loses a completion for good (a READ unanswered for the
    # whole 30 s wait, one case in a run; 3 clean-clone runs in 5 on one
    # day, none the day before, with the same transport code): a failed
    # case is said, with its output, and run once more in a fresh process;
    # failing again fails the test.
    twice() {  # twice LOG BINARY FILTER: runs the gtest cases, again if failed
      local log=$1 bin=$2 filter=$3
      DMG_RDMA_REMOTE_NODE=$SOLO timeout 240 "$bin" --gtest_brief=1 \
        --gtest_filter="$filter" > "$log" 2>&1 && return 0
      local failed rc
      failed=$(grep -a -o '^\[  FAILED  \] [^ ,]*' "$log" | awk '{print $4}' |
               sort -u | tr '\n' ':' | sed 's/:$//')
      [ -n "$failed" ] || return 1
      say "failed once: $failed; again, in a fresh process (the first run's output comes after)"
      DMG_RDMA_REMOTE_NODE=$SOLO timeout 240 "$bin" --gtest_brief=1 \
        --gtest_filter="$failed" > "$log.again" 2>&1
      rc=$?
      grep -a -v '^[IW]2' "$log.again"
      return $rc
    }
    say "== rdma_test RdmaRemoteTest from B against A's memory node $SOLO"
    twice remote-test.log ./bin/rdma_test 'RdmaRemoteTest.*' \
      || bad "rdma_test RdmaRemoteTest against $SOLO failed"
    grep -a -v '^I2' remote-test.log
    grep -a 'batches in flight' remote-test.log | sed 's/^.*\] /  /'
    if grep -a -q SKIPPED remote-test.log; then bad "RdmaRemoteTest skipped"; fi
    say "== transport conformance suite (rdma) from B against A's memory node $SOLO"
    twice conformance.log ./bin/transport_conformance_test \
      'Backends/ConformanceTest.*/rdma' \
      || bad "transport conformance (rdma) against $SOLO failed"
    grep -a -v '^[IW]2' conformance.log
    # Only the memory-node-death case may skip: B cannot kill A's daemon.
    skipped=$(grep -a -o '^\[  SKIPPED \] [0-9]* test' conformance.log | awk '{print $4}' | head -1)
    [ "${skipped:-0}" -le 1 ] || bad "transport conformance: $skipped tests skipped"
    if [ "${BENCH:-1}" = 1 ]; then
      say "== transport_bench from B against A's memory node (TCG: ratios, not speeds)"
      # A measurement, not a check of its own: on two emulated CPUs a burst
      # of 64 READs in flight has once stalled soft-RoCE past the 10 s wait
      # (1 clean-clone run in ~10). A failed run is said and made again in a
      # fresh process; the second failure fails the test.
      bench() {
        timeout 120 ./bin/transport_bench --transport=rdma \
          --memory_nodes="$SOLO" --sizes=64,65536 --depths=1,16 \
          --windows=1,4 --seconds=0.3 --json=bench-2host.json
      }
      if ! bench; then
        say "transport_bench against $SOLO failed once (above); again"
        bench || bad "transport_bench against $SOLO failed twice"
      fi
    fi
  fi
  mark ready
  await loaded 300 || true
  if [ "$AWAITED" = ok ]; then
    for algo in pagerank bfs; do
      say "== $algo, compute node 1 of 2 (0 in A) x 2 memory nodes ($NODES)"
      timeout 300 ./bin/dmg run --algo=$algo --graph="$G" --threads=1 \
        --transport=rdma --memory_nodes="$NODES" --compute_nodes=2 \
        --compute_node_id=1 --job=2host-$algo "${JOB_FLAGS[@]}" --verify \
        || bad "$algo, compute node 1 of 2, failed"
    done
  else
    bad "A did not load the graph onto $NODES; 2-compute-node jobs not run"
  fi
fi

# ---- keep the memory nodes up until the peer is finished with them
mark "done"
await "done" 300 gone || bad "the peer did not finish within 300 s"
if [ "$ROLE" = A ]; then
  stop_mn "$MN7400" 7400; stop_mn "$MN7401" 7401
else
  stop_mn "$MN7400" 7400
fi

# ---- RoCE packets: this VM's rxe device must have sent and received some
declare -A D=()
line=""
for f in "$CNT"/* "$NIC"/tx_packets "$NIC"/rx_packets; do
  [ "${f##*/}" = lifespan ] && continue
  read -r v < "$f" 2>/dev/null || continue
  D[$f]=$((v - ${C0[$f]:-0}))
  case "$f" in "$CNT"/*) [ "${D[$f]}" = 0 ] || line+=" ${f##*/}=${D[$f]}" ;; esac
done
sent=${D[$CNT/sent_pkts]:-0} rcvd=${D[$CNT/rcvd_pkts]:-0}
wire=$(( $(udp_in) - UDP0 ))
say "rxe counters (deltas, nonzero):${line:- none}"
echo "DMG_RDMA_2HOST_${ROLE}_ROCE: $RXE_DEV sent_pkts=$sent rcvd_pkts=$rcvd;" \
  "RoCEv2 datagrams in from the wire=$wire;" \
  "$RXE_IF tx_packets=${D[$NIC/tx_packets]:-0} rx_packets=${D[$NIC/rx_packets]:-0}"
if [ "$sent" -le 0 ] || [ "$rcvd" -le 0 ]; then
  bad "no RoCE packets (sent $sent, received $rcvd)"
fi
if [ "$wire" -le 0 ]; then bad "no RoCEv2 packet came in over the NIC"; fi

if [ $fail = 0 ]; then echo "DMG_RDMA_2HOST_$ROLE: PASS"; else echo "DMG_RDMA_2HOST_$ROLE: FAIL"; fi
exit $fail
