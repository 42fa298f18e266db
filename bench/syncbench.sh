#!/bin/bash
# Group commit across connections (issue 18, item 3b): tally serve
# --durability sync against redis-server --appendfsync always as clients
# grow, HINCRBY with redis-benchmark -P 16 over 1M random rows of one
# counter, each server started alone on an empty directory. With FSYNCS=1
# the tally server runs under strace -c and the fdatasync count is printed
# (strace slows it: read requests per fsync from it, not requests/s).
# Needs redis-server and redis-benchmark and a built tally:
#   go build -o /tmp/tally ./cmd/tally && bench/syncbench.sh /tmp/tally "50 200 500" [N]
# usage: syncbench.sh BIN CLIENTS [REQUESTS]
BIN=$1; CLIENTS=${2:-50}; N=${3:-300000}
rate() { grep -o "[0-9.]* requests per second" | head -1; }
for c in $CLIENTS; do
  D=$(mktemp -d); PORT=$((20000 + RANDOM % 10000))
  redis-server --port $PORT --dir $D --save "" --appendonly yes --appendfsync always >/dev/null 2>&1 &
  RP=$!; sleep 0.5
  r=$(redis-benchmark -p $PORT -c $c -P 16 -n $N -r 1000000 -q HINCRBY posts:__rand_int__ likes 1 2>/dev/null | rate)
  kill $RP; wait $RP 2>/dev/null
  $BIN -d $D/db counter add posts --range-bits 32 >/dev/null
  $BIN -d $D/db column add posts likes >/dev/null
  $BIN -d $D/db --durability sync serve --addr 127.0.0.1:0 > $D/out 2>$D/err &
  TP=$!
  for i in $(seq 50); do grep -q "^addr" $D/out && break; sleep 0.1; done
  TPORT=$(grep "^addr" $D/out | sed 's/.*://')
  if [ -n "$FSYNCS" ]; then strace -f -c -e trace=fdatasync,fsync -p $TP -o $D/strace 2>/dev/null & SP=$!; sleep 0.5; fi
  t=$(redis-benchmark -p $TPORT -c $c -P 16 -n $N -r 1000000 -q HINCRBY posts:__rand_int__ likes 1 2>/dev/null | rate)
  if [ -n "$FSYNCS" ]; then kill -INT $SP; wait $SP 2>/dev/null; f=" fdatasync $(awk '/fdatasync/ {print $4}' $D/strace)"; fi
  kill -TERM $TP; wait $TP 2>/dev/null; rm -rf $D
  echo "-c $c: redis always: $r | tally sync: $t$f"
done
