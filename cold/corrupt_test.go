package cold

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// corruptSetup builds a small multi-block range and returns its reader
// pieces plus one present key of each block.
func corruptSetup(t *testing.T) ([]Row, *memSource, []byte) {
	t.Helper()
	r := rand.New(rand.NewPCG(11, 12))
	rows := genRows(r, 3000, 2, 24, distPowerLaw)
	src, desc := build(t, rows, 2, BuildOptions{TargetBlockSize: 2048})
	if len(src.blocks) < 3 {
		t.Fatalf("want several blocks, got %d", len(src.blocks))
	}
	return rows, src, desc
}

// keysOfBlock returns the keys stored in block b.
func keysOfBlock(t *testing.T, d *Desc, rows []Row, b uint32) []uint64 {
	var ks []uint64
	for _, row := range rows {
		if bb, _, ok := d.Locate(row.Key); ok && bb == b {
			ks = append(ks, row.Key)
		}
	}
	if len(ks) == 0 {
		t.Fatalf("block %d has no keys", b)
	}
	return ks
}

// expectAll checks that Get, MultiGet, Iter and Verify all fail with want
// when reading key from src.
func expectAll(t *testing.T, d *Desc, src BlockSource, key uint64, want error) {
	t.Helper()
	rd := NewReader(7, d, src, NewCache(1<<20))
	if _, _, err := rd.Get(key, nil); !errors.Is(err, want) {
		t.Errorf("Get: %v, want %v", err, want)
	}
	rd = NewReader(8, d, src, NewCache(1<<20))
	if _, err := rd.MultiGet([]uint64{key, key + 1}, nil, make([]bool, 2)); !errors.Is(err, want) {
		t.Errorf("MultiGet: %v, want %v", err, want)
	}
	if err := rd.Iter(func(uint64, []uint64) error { return nil }); !errors.Is(err, want) {
		t.Errorf("Iter: %v, want %v", err, want)
	}
	if err := rd.Verify(); !errors.Is(err, want) {
		t.Errorf("Verify: %v, want %v", err, want)
	}
}

func cloneSource(src *memSource) *memSource {
	c := &memSource{blocks: map[uint32][]byte{}}
	for n, b := range src.blocks {
		c.blocks[n] = append([]byte(nil), b...)
	}
	return c
}

func TestCorruptBlockBytes(t *testing.T) {
	rows, src, descBytes := corruptSetup(t)
	d, err := DecodeDesc(descBytes)
	if err != nil {
		t.Fatal(err)
	}
	key := keysOfBlock(t, d, rows, 1)[0]
	blk := src.blocks[1]
	for i := range blk {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			bad := cloneSource(src)
			bad.blocks[1][i] ^= x
			rd := NewReader(1, d, bad, nil)
			if _, _, err := rd.Get(key, nil); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip byte %d ^%02x: Get = %v", i, x, err)
			}
		}
	}
	bad := cloneSource(src)
	bad.blocks[1][len(blk)/2] ^= 0x10
	expectAll(t, d, bad, key, ErrCorrupt)
	for _, n := range []int{0, 1, 5, len(blk) / 2, len(blk) - 1} {
		bad := cloneSource(src)
		bad.blocks[1] = bad.blocks[1][:n]
		expectAll(t, d, bad, key, ErrCorrupt)
	}
	bad = cloneSource(src)
	bad.blocks[1] = append(bad.blocks[1], 0)
	expectAll(t, d, bad, key, ErrCorrupt)
}

func TestMissingBlock(t *testing.T) {
	rows, src, descBytes := corruptSetup(t)
	d, _ := DecodeDesc(descBytes)
	bad := cloneSource(src)
	delete(bad.blocks, 2)
	expectAll(t, d, bad, keysOfBlock(t, d, rows, 2)[0], ErrMissingBlock)
	// Keys of other blocks still read.
	rd := NewReader(1, d, bad, nil)
	if _, ok, err := rd.Get(keysOfBlock(t, d, rows, 0)[0], nil); !ok || err != nil {
		t.Fatalf("Get from intact block: %v %v", ok, err)
	}
}

func TestSwappedBlocks(t *testing.T) {
	rows, src, descBytes := corruptSetup(t)
	d, _ := DecodeDesc(descBytes)
	bad := cloneSource(src)
	bad.blocks[1], bad.blocks[2] = bad.blocks[2], bad.blocks[1]
	expectAll(t, d, bad, keysOfBlock(t, d, rows, 1)[0], ErrCorrupt)
}

// TestMismatchedPresence pairs blocks with the descriptor of a range whose
// keys differ: in every block (caught on load), or only inside one block
// with the same first key, last key and count (caught by Verify's key
// checksum).
func TestMismatchedPresence(t *testing.T) {
	rows, src, _ := corruptSetup(t)
	other := make([]Row, len(rows))
	for i, row := range rows {
		other[i] = Row{Key: row.Key*2 + 1, Vals: row.Vals}
	}
	_, otherDesc := build(t, other, 2, BuildOptions{TargetBlockSize: 2048})
	od, err := DecodeDesc(otherDesc)
	if err != nil {
		t.Fatal(err)
	}
	expectAll(t, od, src, other[0].Key, ErrCorrupt)

	d0, _ := DecodeDesc(mustBuildDesc(t, rows))
	ks := keysOfBlock(t, d0, rows, 1)
	mid := ks[len(ks)/2]
	shifted := make([]Row, 0, len(rows))
	for _, row := range rows {
		if row.Key == mid {
			if row.Key-1 == ks[len(ks)/2-1] {
				t.Skip("no gap to shift into")
			}
			row.Key--
		}
		shifted = append(shifted, row)
	}
	sd, err := DecodeDesc(mustBuildDesc(t, shifted))
	if err != nil {
		t.Fatal(err)
	}
	if err := NewReader(1, sd, src, nil).Verify(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify with a shifted key = %v, want ErrCorrupt", err)
	}
}

func mustBuildDesc(t *testing.T, rows []Row) []byte {
	_, desc := build(t, rows, 2, BuildOptions{TargetBlockSize: 2048})
	return desc
}

func TestCorruptDesc(t *testing.T) {
	_, _, desc := corruptSetup(t)
	for i := range desc {
		bad := append([]byte(nil), desc...)
		bad[i] ^= 0x04
		if _, err := DecodeDesc(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip byte %d: %v", i, err)
		}
	}
	for n := 0; n < len(desc); n += 1 + n/4 {
		if _, err := DecodeDesc(desc[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncate to %d: %v", n, err)
		}
	}
	if _, err := DecodeDesc(append(append([]byte(nil), desc...), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing byte: %v", err)
	}
}

// TestVerifyZeroRow feeds a well-formed block holding an all-zero row,
// which a Builder never writes.
func TestVerifyZeroRow(t *testing.T) {
	rows := []Row{{1, []uint64{1}}, {2, []uint64{2}}, {3, []uint64{3}}}
	src, desc := build(t, rows, 1, BuildOptions{})
	var e blockEncoder
	blk, err := e.encode(nil, []uint64{1, 2, 3}, [][]uint64{{1, 0, 3}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	src.blocks[0] = blk
	d, _ := DecodeDesc(desc)
	if err := NewReader(1, d, src, nil).Verify(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify = %v, want ErrCorrupt", err)
	}
}

func TestSourceError(t *testing.T) {
	rows, _, desc := corruptSetup(t)
	d, _ := DecodeDesc(desc)
	boom := errors.New("disk on fire")
	rd := NewReader(1, d, errSource{boom}, nil)
	if _, _, err := rd.Get(rows[0].Key, nil); !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Get = %v", err)
	}
	rd = NewReader(1, d, errSource{nil}, nil) // (nil, nil): missing
	if _, _, err := rd.Get(rows[0].Key, nil); !errors.Is(err, ErrMissingBlock) {
		t.Fatalf("Get = %v", err)
	}
}

type errSource struct{ err error }

func (s errSource) ReadBlock(uint32) ([]byte, error) { return nil, s.err }
