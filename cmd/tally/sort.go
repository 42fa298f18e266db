package main

// sortRows sorts ids, with their rows of n values in vals (row-major), by id
// and keeps only the last row of a repeated id, as store.Load would. Load
// accepts unsorted input, but its comparison sort costs seconds on millions
// of rows while an LSD radix sort costs a fraction of one, and it is cheap
// on input that is already sorted (the common export order): that keeps the
// CLI's load at millions of rows per second. It returns the sorted slices,
// which may be the inputs.
func sortRows(ids, vals []uint64, n int) ([]uint64, []uint64) {
	sorted := true
	var diff uint64 // the bits in which some id differs from the first
	for i := 1; i < len(ids); i++ {
		sorted = sorted && ids[i-1] < ids[i]
		diff |= ids[i] ^ ids[0]
	}
	if sorted {
		return ids, vals
	}
	type kv struct {
		id  uint64
		row uint64 // index of the input line
	}
	a := make([]kv, len(ids))
	for i, id := range ids {
		a[i] = kv{id, uint64(i)}
	}
	b := make([]kv, len(ids))
	const bits = 11
	const buckets = 1 << bits
	var counts [buckets]int
	for shift := uint(0); shift < 64; shift += bits {
		if (diff>>shift)&(buckets-1) == 0 {
			continue // every id has the same digit here
		}
		clear(counts[:])
		for _, e := range a {
			counts[(e.id>>shift)&(buckets-1)]++
		}
		sum := 0
		for d, c := range counts {
			counts[d] = sum
			sum += c
		}
		// Scattering in input order keeps the sort stable, so among equal
		// ids the last line stays last.
		for _, e := range a {
			d := (e.id >> shift) & (buckets - 1)
			b[counts[d]] = e
			counts[d]++
		}
		a, b = b, a
	}
	outIDs := make([]uint64, len(ids))
	outVals := make([]uint64, len(vals))
	k := 0
	for j, e := range a {
		if j+1 < len(a) && a[j+1].id == e.id {
			continue // a later line for the same id wins
		}
		outIDs[k] = e.id
		src, dst := vals[int(e.row)*n:], outVals[k*n:]
		for c := range n { // a loop: copy's call costs more for 2-3 values
			dst[c] = src[c]
		}
		k++
	}
	return outIDs[:k], outVals[:k*n]
}
