package cold

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// memSource is a BlockSource over a map, as the store's Pebble source is.
type memSource struct {
	mu     sync.Mutex
	blocks map[uint32][]byte
	reads  int
}

func (s *memSource) ReadBlock(n uint32) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	b, ok := s.blocks[n]
	if !ok {
		return nil, fmt.Errorf("block %d: %w", n, ErrMissingBlock)
	}
	return b, nil
}

// build encodes rows and returns the source holding the blocks and the
// encoded descriptor, failing the test on error.
func build(t testing.TB, rows []Row, ncols int, opts BuildOptions) (*memSource, []byte) {
	t.Helper()
	src := &memSource{blocks: map[uint32][]byte{}}
	desc, err := Build(rows, ncols, opts, func(n uint32, b []byte) error {
		if _, dup := src.blocks[n]; dup || n != uint32(len(src.blocks)) {
			return fmt.Errorf("emit out of order: %d", n)
		}
		src.blocks[n] = append([]byte(nil), b...)
		return nil
	})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return src, desc
}

// open builds rows and returns a Reader over them with the given cache.
func open(t testing.TB, rows []Row, ncols int, opts BuildOptions, cache *Cache) (*Reader, *memSource) {
	t.Helper()
	src, descBytes := build(t, rows, ncols, opts)
	d, err := DecodeDesc(descBytes)
	if err != nil {
		t.Fatalf("DecodeDesc: %v", err)
	}
	return NewReader(1, d, src, cache), src
}

// powerLaw draws a count: 0 with probability zeroP, else a discrete Pareto
// (alpha 1.1, min 1): P(v > 100) ~ 0.6%, P(v > 65535) ~ 5e-6.
func powerLaw(r *rand.Rand, zeroP float64) uint64 {
	if r.Float64() < zeroP {
		return 0
	}
	u := 1 - r.Float64() // (0, 1]
	v := math.Floor(math.Pow(u, -1/1.1))
	if v > 1e15 {
		v = 1e15
	}
	return uint64(v)
}

type valueDist int

const (
	distPowerLaw valueDist = iota
	distUniform64
	distExtremes // 0, 1, MaxUint64 and powers of two
)

// genRows returns n rows with distinct random keys below 1<<keyBits, sorted.
func genRows(r *rand.Rand, n, ncols, keyBits int, dist valueDist) []Row {
	space := uint64(1) << keyBits
	if keyBits >= 64 {
		space = 0
	}
	keys := make(map[uint64]struct{}, n)
	for len(keys) < n {
		var k uint64
		if space == 0 {
			k = r.Uint64()
		} else {
			k = r.Uint64N(space)
		}
		keys[k] = struct{}{}
	}
	sorted := make([]uint64, 0, n)
	for k := range keys {
		sorted = append(sorted, k)
	}
	slicesSort(sorted)
	rows := make([]Row, n)
	flat := make([]uint64, n*ncols)
	for i, k := range sorted {
		vals := flat[i*ncols : (i+1)*ncols]
		for {
			var any uint64
			for c := range vals {
				switch dist {
				case distPowerLaw:
					vals[c] = powerLaw(r, 0.3)
				case distUniform64:
					vals[c] = r.Uint64() >> r.IntN(64)
				case distExtremes:
					switch r.IntN(4) {
					case 0:
						vals[c] = 0
					case 1:
						vals[c] = 1
					case 2:
						vals[c] = math.MaxUint64
					default:
						vals[c] = 1 << r.IntN(64)
					}
				}
				any |= vals[c]
			}
			if any != 0 {
				break
			}
		}
		rows[i] = Row{Key: k, Vals: vals}
	}
	return rows
}
