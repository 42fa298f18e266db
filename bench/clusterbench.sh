#!/bin/bash
# The replication benchmarks of issue 22, twice in a row with one tally
# binary (the machine is shared: compare the two runs). Each run prints its
# tables and appends them, with the machine, to OUT (default
# /tmp/clusterbench.md); progress goes to stderr.
#   bench/clusterbench.sh [OUT] [extra clusterbench flags...]
# e.g. bench/clusterbench.sh /tmp/cb.md --duration 8s --read-rows 100000 --catchup-rows 1500000
set -e
OUT=${1:-/tmp/clusterbench.md}; shift || true
B=$(mktemp -d)
trap 'rm -rf $B' EXIT
go build -o $B/tally ./cmd/tally
go build -o $B/clusterbench ./bench/cmd/clusterbench
for run in 1 2; do
  $B/clusterbench --tally $B/tally --out "$OUT" --title "Replication (issue 22), run $run," "$@"
done
