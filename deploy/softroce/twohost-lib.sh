# Helpers shared by the in-VM halves of the two-VM soft-RoCE scripts
# (dmg-rdma-2host-vm.sh, rdma-vs-perftest-vm.sh), sourced from the share
# next to test.sh. The caller sets ROLE, ME (this VM's address), PEER,
# MARK_PORT, T0 and fail=0 first.
# shellcheck shell=bash

say() { echo "[$ROLE +$((SECONDS - T0))s] $*"; }
bad() { say "FAIL: $*"; fail=1; }

# ---- markers: files served to the peer over HTTP
MK=/tmp/dmg-2host-markers
rm -rf "$MK" && mkdir -p "$MK"
httpd -f -p "$ME:$MARK_PORT" -h "$MK" & HTTPD=$!
PIDS=("$HTTPD")
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  wait 2>/dev/null
}
trap cleanup EXIT

mark() {  # NAME [VALUE]
  echo "${2:-ok}" > "$MK/.$1" && mv "$MK/.$1" "$MK/$1"
  say "marker $1=${2:-ok}"
}
# peer_get NAME: fetches the peer's marker over HTTP/1.0 with bash's /dev/tcp
# (the image's static busybox wget crashes on non-local addresses). Sets CODE
# (200, 404, ...; empty when the peer did not answer) and BODY.
CODE="" BODY=""
peer_get() {
  local resp
  CODE="" BODY=""
  # shellcheck disable=SC2016  # expanded by the inner bash
  resp=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2" || exit 1
    printf "GET /%s HTTP/1.0\r\n\r\n" "$3" >&3; cat <&3' _ "$PEER" "$MARK_PORT" "$1" \
    2>/dev/null) || return 1
  resp=${resp//$'\r'/}
  read -r _ CODE _ <<<"$resp"
  case "$resp" in *$'\n\n'*) BODY=${resp#*$'\n\n'} ;; esac
  [ -n "$CODE" ]
}
# await NAME SECONDS [gone]: waits for the peer's marker NAME and sets
# AWAITED to its value. With `gone`, a peer that no longer answers at all
# (twice in a row) counts too: it has powered off, so it needs nothing more.
AWAITED=""
await() {
  local name=$1 secs=$2 gone=${3:-} t0=$SECONDS misses=0
  while [ $((SECONDS - t0)) -lt "$secs" ]; do
    if peer_get "$name"; then
      misses=0
      if [ "$CODE" = 200 ]; then
        AWAITED=$BODY
        say "peer's $name=$BODY (waited $((SECONDS - t0))s)"
        return 0
      fi
    else
      misses=$((misses + 1))
      if [ -n "$gone" ] && [ "$misses" -ge 2 ]; then
        AWAITED=gone; say "peer no longer answers (waited $((SECONDS - t0))s)"; return 0
      fi
    fi
    sleep 0.3
  done
  AWAITED=""
  say "peer's $name: not there after ${secs}s (last answer: ${CODE:-none})"
  return 1
}

# start_mn PORT: a memory node on this VM; waits until it listens (bounded)
start_mn() {
  local port=$1
  ./bin/dmg memory-node --transport=rdma --listen="$ME:$port" > "mn$port.log" 2>&1 &
  PIDS+=("$!"); eval "MN$port=$!"
  for _ in $(seq 300); do
    grep -q "listening on" "mn$port.log" && { say "$(head -1 "mn$port.log")"; return 0; }
    kill -0 "$!" 2>/dev/null || break
    sleep 0.1
  done
  bad "memory node on $ME:$port did not start:"; cat "mn$port.log"; return 1
}
stop_mn() {
  local pid=$1 port=$2
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" || bad "memory node $ME:$port did not stop cleanly"
}
