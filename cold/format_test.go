package cold

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.txt")

// goldenRows is a tiny fixed input: two blocks (TargetBlockSize 8), widths
// 0, 1, 2, 3 and 8 bytes, chunk-crossing keys.
var goldenRows = []Row{
	{Key: 1, Vals: []uint64{1, 0}},
	{Key: 5, Vals: []uint64{300, 7}},
	{Key: 70000, Vals: []uint64{0, 65536}},
	{Key: 1 << 40, Vals: []uint64{^uint64(0), 2}},
}

// TestGolden fails if the encoding of a fixed input changes, and checks the
// checked-in bytes still decode to it. If the change is intended (with a
// version bump), run go test -run TestGolden -update. A klauspost/compress
// upgrade may change the compressed bytes without a format change; then the
// decode half still passes and -update is safe.
func TestGolden(t *testing.T) {
	src, desc := build(t, goldenRows, 2, BuildOptions{TargetBlockSize: 8})
	var sb strings.Builder
	for n := range uint32(len(src.blocks)) {
		fmt.Fprintf(&sb, "block %d %x\n", n, src.blocks[n])
	}
	fmt.Fprintf(&sb, "desc %x\n", desc)
	const path = "testdata/golden.txt"
	if *update {
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Decode the checked-in bytes.
	gsrc := &memSource{blocks: map[uint32][]byte{}}
	var gdesc []byte
	for _, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
		var n uint32
		var h string
		if _, err := fmt.Sscanf(line, "block %d %s", &n, &h); err == nil {
			gsrc.blocks[n], _ = hex.DecodeString(h)
		} else if _, err := fmt.Sscanf(line, "desc %s", &h); err == nil {
			gdesc, _ = hex.DecodeString(h)
		}
	}
	d, err := DecodeDesc(gdesc)
	if err != nil {
		t.Fatal(err)
	}
	rd := NewReader(1, d, gsrc, nil)
	if err := rd.Verify(); err != nil {
		t.Fatal(err)
	}
	for _, row := range goldenRows {
		got, ok, err := rd.Get(row.Key, nil)
		if err != nil || !ok || !slices.Equal(got, row.Vals) {
			t.Fatalf("golden Get(%d) = %v %v %v", row.Key, got, ok, err)
		}
	}
	if sb.String() != string(want) {
		t.Fatalf("encoding changed:\n got:\n%s want:\n%s", sb.String(), want)
	}
}

// TestEncodersAppend checks the appending encoders leave a caller's prefix
// intact and that decoders reject extra bytes after a value (a block or a
// descriptor is always one whole Pebble value).
func TestEncodersAppend(t *testing.T) {
	prefix := []byte("prefix-bytes")
	var e blockEncoder
	keys := []uint64{3, 9, 12}
	cols := [][]uint64{{1, 2, 3}, {0, 1 << 20, 5}}
	plain, err := e.encode(nil, keys, cols, 1)
	if err != nil {
		t.Fatal(err)
	}
	withPrefix, err := e.encode(slices.Clone(prefix), keys, cols, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(withPrefix, prefix) || !bytes.Equal(withPrefix[len(prefix):], plain) {
		t.Fatal("block encoding depends on dst prefix")
	}
	blk, err := DecodeBlock(withPrefix[len(prefix):])
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		got := blk.Row(i, nil)
		if got[0] != cols[0][i] || got[1] != cols[1][i] {
			t.Fatalf("row %d = %v", i, got)
		}
	}
	if blk.FirstKey() != 3 || blk.LastKey() != 12 || blk.Len() != 3 || blk.NumColumns() != 2 {
		t.Fatalf("header: %d %d %d %d", blk.FirstKey(), blk.LastKey(), blk.Len(), blk.NumColumns())
	}
	if _, err := DecodeBlock(append(slices.Clone(plain), 0xAA)); err == nil {
		t.Fatal("trailing byte after block accepted")
	}

	index := []byte{4, 0} // one block of 4 rows, Rice k = 0
	kw := bitWriter{}
	next := uint64(0)
	for _, r := range goldenRows {
		kw.writeRice(r.Key-next, 0)
		next = r.Key + 1
	}
	enc := encodeDesc(slices.Clone(prefix), 2, 4, index, 1, kw.flush())
	if !bytes.HasPrefix(enc, prefix) {
		t.Fatal("prefix clobbered")
	}
	d, err := DecodeDesc(enc[len(prefix):])
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for k := range d.Keys() {
		if k != goldenRows[i].Key {
			t.Fatalf("key %d = %d", i, k)
		}
		i++
	}
}
