#!/bin/bash
# The in-VM half of rdma-vs-perftest.sh, run as test.sh by `rxevm.sh multi`
# in two VMs whose rxe devices are joined by a (virtual) wire:
#
#   A (10.77.0.1): a `dmg memory-node --transport=rdma` on :7401, and one
#      perftest server after another (ib_read_lat, ib_read_bw)
#   B (10.77.0.2): the matching perftest clients against A, then
#      transport_bench against A's memory node at the same sizes and
#      outstanding depths; each client's result line is printed as
#      "PERFTEST name: <line>", the bench's points go to bench.json
#
# Both programs READ the same pair of rxe devices over the same link, one
# after the other, so their ratio is what counts (TCG makes both slow).
set -u
cd "$(dirname "$0")" || exit 2
ROLE=${RXEVM_ROLE:?RXEVM_ROLE must be A or B}
ME=$RXE_IP
PEER=${RXE_PEER_IP:?RXE_PEER_IP must be the peer address}
case "$ROLE" in
  A) A_IP=$ME ;;
  B) A_IP=$PEER ;;
  *) echo "RXEVM_ROLE must be A or B (got $ROLE)"; exit 2 ;;
esac
MARK_PORT=7500 BENCH_PORT=7401 PERF_PORT=18515
fail=0
T0=$SECONDS
# shellcheck source=twohost-lib.sh
. ./twohost-lib.sh

# name|program and its own flags: the points transport_bench also measures
# (64 B at 1, 4 and 16 outstanding READs; 64 KiB at 16).
RUNS=(
  "lat64|ib_read_lat -s 64 -n 300"
  "bw64o1|ib_read_bw -s 64 -o 1 -n 1000"
  "bw64o4|ib_read_bw -s 64 -o 4 -n 2000"
  "bw64o16|ib_read_bw -s 64 -o 16 -n 4000"
  "bw64ko16|ib_read_bw -s 65536 -o 16 -n 300"
)
# rdma_cm for the connection (it picks the RoCEv2 GID); -F: no cpufreq check
COMMON=(-d "$RXE_DEV" -R -F -p "$PERF_PORT")

# perftest's ib_read_bw has crashed now and then at startup (a segfault in
# the client, once in three runs here): each point gets up to 3 attempts,
# a fresh server each, agreed through markers NAME-K (value ok or fail).
TRIES=3
if [ "$ROLE" = A ]; then
  start_mn "$BENCH_PORT" || bad "no memory node for transport_bench"
  for r in "${RUNS[@]}"; do
    name=${r%%|*}
    read -r -a cmd <<<"${r#*|}"
    for k in $(seq "$TRIES"); do
      timeout 180 "./bin/${cmd[0]}" "${cmd[@]:1}" "${COMMON[@]}" \
        > "srv-$name-$k.log" 2>&1 &
      srv=$!
      sleep 1  # listening (rdma_cm) before the client is told to go
      mark "srv-$name-$k"
      await "cli-$name-$k" 180 || AWAITED=""
      if [ "$AWAITED" = ok ]; then
        wait "$srv" || { bad "$name: the server failed"; cat "srv-$name-$k.log"; }
        break
      fi
      kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
      [ "$k" -lt "$TRIES" ] || bad "$name: no attempt succeeded"
    done
  done
  await done 300 gone || bad "B did not finish"
else
  for r in "${RUNS[@]}"; do
    name=${r%%|*}
    read -r -a cmd <<<"${r#*|}"
    for k in $(seq "$TRIES"); do
      await "srv-$name-$k" 180 || { bad "$name: no server"; break; }
      if timeout 120 "./bin/${cmd[0]}" "${cmd[@]:1}" "${COMMON[@]}" "$A_IP" \
          > "cli-$name.log" 2>&1; then
        # the result line: the first field is the message size
        line=$(grep -a -E '^ *[0-9]+ +[0-9]+ +[0-9.]+' "cli-$name.log" | tail -1)
        echo "PERFTEST $name: $line"
        [ -n "$line" ] || { bad "$name: no result line"; cat "cli-$name.log"; }
        mark "cli-$name-$k" ok
        break
      fi
      say "$name: ${cmd[0]} failed (attempt $k of $TRIES):"; cat "cli-$name.log"
      mark "cli-$name-$k" fail
      [ "$k" -lt "$TRIES" ] || bad "$name: ${cmd[0]} failed $TRIES times"
    done
  done
  say "== transport_bench against A's memory node $A_IP:$BENCH_PORT"
  timeout 240 ./bin/transport_bench --transport=rdma \
    --memory_nodes="$A_IP:$BENCH_PORT" --sizes=64,65536 --depths=1,4,16 \
    --windows=1,4,16 --seconds=1 --json=bench.json || bad "transport_bench failed"
  mark done
fi
if [ "$fail" = 0 ]; then echo "RDMA_VS_PERFTEST_$ROLE: PASS"; else echo "RDMA_VS_PERFTEST_$ROLE: FAIL"; fi
exit "$fail"
