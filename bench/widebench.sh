#!/bin/bash
# The width penalty of issue 18: tally serve's HINCRBY on a default column
# and on a 64-bit one (--max 64), redis-benchmark -c 50 -P 16, 400,000
# requests over 1M random rows. Needs redis-tools (apt-get install -y
# redis-tools) and a built tally:
#   go build -o /tmp/tally ./cmd/tally && bench/widebench.sh /tmp/tally now [sync|interval|nosync]
# usage: widebench.sh BIN LABEL [DURABILITY]
BIN=$1; L=$2; D=$(mktemp -d)
$BIN -d $D/db counter add posts --range-bits 32 >/dev/null
$BIN -d $D/db column add posts likes >/dev/null
$BIN -d $D/db column add posts views --max 64 >/dev/null
$BIN -d $D/db --durability ${3:-interval} serve --addr 127.0.0.1:0 > $D/out 2>$D/err &
PID=$!
for i in $(seq 50); do grep -q "^addr" $D/out && break; sleep 0.1; done
PORT=$(grep "^addr" $D/out | sed 's/.*://')
for col in likes views; do
  r=$(redis-benchmark -p $PORT -c 50 -P 16 -n 400000 -r 1000000 -q HINCRBY posts:__rand_int__ $col 1 2>/dev/null | grep -o "[0-9.]* requests per second" | head -1)
  echo "$L $col: $r"
done
kill -TERM $PID; wait $PID 2>/dev/null; rm -rf $D
