#!/bin/bash
# The sharding benchmarks of issue 23, twice in a row with one tally
# binary (the machine is shared: compare the two runs). Each run prints its
# tables and appends them, with the machine, to OUT (default
# /tmp/shardbench.md); progress goes to stderr.
#   bench/shardbench.sh [OUT] [extra shardbench flags...]
# e.g. bench/shardbench.sh /tmp/sb.md --duration 8s --phases throughput
set -e
OUT=${1:-/tmp/shardbench.md}; shift || true
B=$(mktemp -d)
trap 'rm -rf $B' EXIT
go build -o $B/tally ./cmd/tally
go build -o $B/shardbench ./bench/cmd/shardbench
for run in 1 2; do
  $B/shardbench --tally $B/tally --out "$OUT" --title "Sharding (issue 23), run $run," "$@"
done
