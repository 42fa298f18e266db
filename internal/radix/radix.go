// Package radix is the one radix sort of the module: a stable LSD sort of
// uint64 keys that carries a uint32 index alongside, used to sort rows for
// sealing (compaction), bulk load (store) and CSV load (cmd/tally).
//
// It is linear in the number of keys and skips every digit in which all
// keys agree, so time-ordered ids (which share their high bits) cost only
// the passes their differing low bits need. Measured in the CLI's load: a
// comparison sort took seconds on millions of rows where this takes a
// fraction of one.
package radix

// digitBits is the width of one pass: 2^11 counters (16 KiB) stay in L1.
const digitBits = 11

// Sort sorts keys ascending and permutes idx alongside (len(idx) must equal
// len(keys)). It is stable: equal keys keep their input order, so among
// repeated ids the last input row stays last.
func Sort(keys []uint64, idx []uint32) {
	if len(keys) < 2 {
		return
	}
	if len(idx) != len(keys) {
		panic("radix: len(idx) != len(keys)")
	}
	sorted := true
	var diff uint64 // the bits in which some key differs from the first
	for i := 1; i < len(keys); i++ {
		sorted = sorted && keys[i-1] <= keys[i]
		diff |= keys[i] ^ keys[0]
	}
	if sorted {
		return
	}
	const buckets = 1 << digitBits
	k2 := make([]uint64, len(keys))
	i2 := make([]uint32, len(idx))
	src, dst, si, di := keys, k2, idx, i2
	var count [buckets]int
	for shift := uint(0); shift < 64; shift += digitBits {
		if (diff>>shift)&(buckets-1) == 0 {
			continue // every key has the same digit here
		}
		clear(count[:])
		for _, k := range src {
			count[(k>>shift)&(buckets-1)]++
		}
		sum := 0
		for d, c := range count {
			count[d] = sum
			sum += c
		}
		// Scattering in input order keeps the sort stable.
		for i, k := range src {
			d := (k >> shift) & (buckets - 1)
			p := count[d]
			count[d]++
			dst[p], di[p] = k, si[i]
		}
		src, dst, si, di = dst, src, di, si
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
		copy(idx, si)
	}
}
