package main

import (
	"slices"

	"github.com/tallydb/tally/internal/radix"
)

// sortRows sorts ids, with their rows of n values in vals (row-major), by id
// and keeps only the last row of a repeated id, as store.Load would. Load
// accepts unsorted input, but its comparison sort costs seconds on millions
// of rows while a radix sort costs a fraction of one, and it is free on input
// that is already sorted (the common export order): that keeps the CLI's
// load at millions of rows per second. It returns the sorted slices, which
// may be the inputs.
func sortRows(ids, vals []uint64, n int) ([]uint64, []uint64) {
	sorted := true
	for i := 1; i < len(ids) && sorted; i++ {
		sorted = ids[i-1] < ids[i]
	}
	if sorted {
		return ids, vals
	}
	keys := slices.Clone(ids)
	idx := make([]uint32, len(ids))
	for i := range idx {
		idx[i] = uint32(i)
	}
	radix.Sort(keys, idx) // stable: among equal ids the last line stays last
	outIDs := keys[:0]
	outVals := make([]uint64, len(vals))
	k := 0
	for j, row := range idx {
		if j+1 < len(idx) && keys[j+1] == keys[j] {
			continue // a later line for the same id wins
		}
		outIDs = append(outIDs, keys[j])
		src, dst := vals[int(row)*n:], outVals[k*n:]
		for c := range n { // a loop: copy's call costs more for 2-3 values
			dst[c] = src[c]
		}
		k++
	}
	return outIDs, outVals[:k*n]
}
