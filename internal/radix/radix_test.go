package radix

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestSort(t *testing.T) {
	for _, n := range []int{0, 1, 2, 100, 5000} {
		for _, bits := range []uint{1, 4, 20, 48, 64} {
			for _, base := range []uint64{0, 1 << 60} { // shared high bits, as snowflake ids
				rng := rand.New(rand.NewPCG(uint64(n), uint64(bits)))
				keys := make([]uint64, n)
				idx := make([]uint32, n)
				for i := range keys {
					keys[i] = base | rng.Uint64()>>(64-bits)
					idx[i] = uint32(i)
				}
				orig := slices.Clone(keys)
				Sort(keys, idx)
				if !slices.IsSorted(keys) {
					t.Fatalf("n=%d bits=%d: not sorted", n, bits)
				}
				for i := range keys {
					if orig[idx[i]] != keys[i] {
						t.Fatalf("n=%d bits=%d: idx does not follow keys", n, bits)
					}
					if i > 0 && keys[i] == keys[i-1] && idx[i] < idx[i-1] {
						t.Fatalf("n=%d bits=%d: not stable", n, bits)
					}
				}
			}
		}
	}
}

func TestSortAlreadySorted(t *testing.T) {
	keys := []uint64{1, 2, 2, 7}
	idx := []uint32{3, 0, 1, 2}
	Sort(keys, idx)
	if !slices.Equal(idx, []uint32{3, 0, 1, 2}) {
		t.Fatalf("sorted input permuted: %v", idx)
	}
}

func BenchmarkSort1M(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	orig := make([]uint64, 1<<20)
	for i := range orig {
		orig[i] = 1<<62 | rng.Uint64()>>24 // 40 varying bits
	}
	keys := make([]uint64, len(orig))
	idx := make([]uint32, len(orig))
	b.SetBytes(int64(len(orig) * 12))
	b.ReportAllocs()
	for b.Loop() {
		copy(keys, orig)
		for i := range idx {
			idx[i] = uint32(i)
		}
		Sort(keys, idx)
	}
}
