#!/usr/bin/env bash
# Profiles the release countdown-server during a fan-out; the evidence behind bench/PROFILE.md.
#
#   bench/profile.sh [VIEWERS_PERF] [VIEWERS_CALLGRIND]      # defaults 10000 and 1000
#   MODE=perf bench/profile.sh 19000                         # perf only
#   TARGET=floor MODE=perf bench/profile.sh 19000            # the C floor, same procedure
#   MODE=strace bench/profile.sh 19000                       # syscall counts over 6 s of ticks
#   LOOP=poll MODE=perf bench/profile.sh 19000               # either target on lws's poll()
#   SESSIONS=1000 MODE=perf bench/profile.sh 10000           # viewers spread over 1000 sessions
#
# 1. perf: VIEWERS_PERF viewers on one session, a long countdown; `perf record -g`
#    on the server for 6 s of ticks; flat and caller reports.
# 2. callgrind: the server under valgrind with instrumentation off until every
#    viewer has its snapshot, then on for 5 ticks: exact call counts of
#    malloc, lws_write, the patch encoder, ... over the window.
#
# Needs the release server and the C programs (bench/run builds them; or set
# SERVER=... CLIENT=...). Writes everything under $OUT (default /tmp/countdown-profile).
set -euo pipefail
cd "$(dirname "$0")/.."
VIEWERS_PERF=${1:-10000}
VIEWERS_CG=${2:-1000}
SERVER=${SERVER:-.build/release/countdown-server}
CLIENT=${CLIENT:-.build/bench-c/loadclient}
OUT=${OUT:-/tmp/countdown-profile}
MODE=${MODE:-both}   # perf, callgrind, both, or strace
TARGET=${TARGET:-server}   # server, or floor (bench/floor.c with bench/run's settings)
FLOOR=${FLOOR:-.build/bench-c/floor}
LOOP=${LOOP:-libev}        # libev or poll, for either target
SESSIONS=${SESSIONS:-1}    # sessions the viewers are spread over, starts spread over 1 s
mkdir -p "$OUT"

if [ "$TARGET" = floor ]; then
  target=("$FLOOR" --port 0 --rx-buffer 512 --event-loop "$LOOP")
else
  target=("$SERVER" --port 0 --public Public --event-loop "$LOOP")
  if "$SERVER" --help | grep -q -- --max-connections-per-ip; then
    target+=(--max-connections-per-ip 20000)
  fi
fi
spread=()
if [ "$SESSIONS" -gt 1 ]; then
  spread=(--per-session $(( (VIEWERS_PERF + SESSIONS - 1) / SESSIONS )) --spread-ms 1000)
fi

# start_server CMD... : runs it, sets SPID and PORT
start_server() {
  "$@" > "$OUT/server.out" 2> "$OUT/server.err" &
  SPID=$!
  for _ in $(seq 200); do
    PORT=$(sed -n 's/.*:\([0-9]*\)\/$/\1/p' "$OUT/server.out")
    [ -n "$PORT" ] && return 0
    sleep 0.1
  done
  echo "server did not start" >&2
  exit 1
}

# start_client VIEWERS: runs loadclient, waits for its @ready line, sets CPID
start_client() {
  "$CLIENT" --port "$PORT" --viewers "$1" --seconds 3600 --ticks "$2" --prefix prof "${spread[@]}" \
    > "$OUT/client-$1.json" 2> "$OUT/client-$1.err" &
  CPID=$!
  for _ in $(seq 1200); do
    grep -q '^@ready' "$OUT/client-$1.err" && return 0
    sleep 0.1
  done
  echo "client not ready" >&2
  exit 1
}

stop() {
  kill -TERM "$SPID" 2>/dev/null || true
  wait "$SPID" 2>/dev/null || true
  kill -TERM "$CPID" 2>/dev/null || true
  wait "$CPID" 2>/dev/null || true
}

# start_ticking VIEWERS: the target with VIEWERS viewers, its long countdown started
start_ticking() {
  start_server "${target[@]}"
  start_client "$1" 8
  sleep 1.5
  kill -USR1 "$CPID"
}

if [ "$MODE" = strace ]; then
  echo "== strace: $VIEWERS_PERF viewers" >&2
  start_ticking "$VIEWERS_PERF"
  # -c counts calls and time per syscall; poll() is one pass over every socket.
  timeout -s INT 6 strace -c -e trace=poll,epoll_wait,epoll_ctl,sendto,recvfrom,read,write -p "$SPID" \
    2> "$OUT/strace.txt" || true
  stop
  cat "$OUT/strace.txt"
  exit 0
fi

if [ "$MODE" != callgrind ]; then
echo "== perf: $VIEWERS_PERF viewers" >&2
start_ticking "$VIEWERS_PERF"
perf record -F 4999 -g -p "$SPID" -o "$OUT/perf.data" -- sleep 6 2> "$OUT/perf-record.err"
sleep 3
stop
perf report -i "$OUT/perf.data" --no-children --sort dso,sym -g none --percent-limit 0.3 --stdio \
  > "$OUT/perf-flat.txt" 2>/dev/null
perf report -i "$OUT/perf.data" --children --sort sym -g none --percent-limit 1 --stdio \
  > "$OUT/perf-children.txt" 2>/dev/null
perf report -i "$OUT/perf.data" --no-children --sort dso -g none --stdio > "$OUT/perf-dso.txt" 2>/dev/null
fi
[ "$MODE" = perf ] && { echo "wrote $OUT" >&2; exit 0; }

echo "== callgrind: $VIEWERS_CG viewers" >&2
start_server valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/callgrind.out" \
  "${target[@]}"
start_client "$VIEWERS_CG" 5
sleep 2
callgrind_control -i on "$SPID" > /dev/null
kill -USR1 "$CPID"
# the start patch, then 5 ticks; stop before the client's report
sleep 5.6
callgrind_control -i off "$SPID" > /dev/null
sleep 1
stop
callgrind_annotate --inclusive=yes "$OUT/callgrind.out" > "$OUT/callgrind-inclusive.txt" 2>/dev/null || true
callgrind_annotate --tree=caller "$OUT/callgrind.out" > "$OUT/callgrind-callers.txt" 2>/dev/null || true
echo "wrote $OUT" >&2
