package cold

import (
	"encoding/binary"
	"errors"
	"fmt"

	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tallydb/tally/internal/checksum"
)

// seedInputs returns valid encodings to start fuzzing from: the golden
// blocks and descriptor, and a dense (bitmap-chunk) range.
func seedInputs(t testing.TB) (blocks [][]byte, descs [][]byte) {
	src, desc := build(t, goldenRows, 2, BuildOptions{TargetBlockSize: 8})
	for n := range uint32(len(src.blocks)) {
		blocks = append(blocks, src.blocks[n])
	}
	descs = append(descs, desc)
	var dense []Row
	for k := uint64(0); k < 5000; k++ {
		dense = append(dense, Row{Key: 1<<16 + k, Vals: []uint64{k + 1}})
	}
	src, desc = build(t, dense, 1, BuildOptions{TargetBlockSize: 4096})
	blocks = append(blocks, src.blocks[0])
	descs = append(descs, desc)
	return blocks, descs
}

func FuzzDecodeBlock(f *testing.F) {
	blocks, _ := seedInputs(f)
	for _, b := range blocks {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkBlock(t, b)
		// Most mutations fail the checksum; also decode with it fixed so the
		// fuzzer reaches the parser behind it.
		checkBlock(t, fixCRC(b))
	})
}

// fixCRC returns b with its trailing crc32c recomputed.
func fixCRC(b []byte) []byte {
	if len(b) < 4 {
		return b
	}
	c := slices.Clone(b)
	binary.LittleEndian.PutUint32(c[len(c)-4:], checksum.CRC32C(c[:len(c)-4]))
	return c
}

func checkBlock(t *testing.T, b []byte) {
	{
		blk, err := DecodeBlock(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		var dst []uint64
		for i := 0; i < blk.Len(); i++ {
			dst = blk.Row(i, dst[:0])
			if len(dst) != blk.NumColumns() {
				t.Fatalf("row %d has %d values", i, len(dst))
			}
		}
	}
}

func FuzzDecodeDesc(f *testing.F) {
	_, descs := seedInputs(f)
	for _, d := range descs {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDesc(t, b)
		checkDesc(t, fixCRC(b))
	})
}

func checkDesc(t *testing.T, b []byte) {
	{
		d, err := DecodeDesc(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		var prev uint64
		n := uint64(0)
		for k := range d.Keys() {
			if n > 0 && k <= prev {
				t.Fatalf("keys not increasing: %d after %d", k, prev)
			}
			b, row, ok := d.Locate(k)
			if !ok || !d.Contains(k) || row >= d.BlockRows(b) {
				t.Fatalf("key %d: Locate = %d %d %v", k, b, row, ok)
			}
			if bf, ok := d.BlockFor(k); !ok || bf != b {
				t.Fatalf("key %d: BlockFor = %d, Locate = %d", k, bf, b)
			}
			prev = k
			n++
		}
		if n != d.Rows() {
			t.Fatalf("Keys yielded %d, Rows() = %d", n, d.Rows())
		}
	}
}

// FuzzRoundTrip derives rows from the input bytes (uvarint key gaps and
// values), builds them, and reads every one back.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, uint8(2), uint16(16))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 1}, uint8(1), uint16(1))
	f.Fuzz(func(t *testing.T, in []byte, nc uint8, target uint16) {
		ncols := int(nc%MaxColumns) + 1
		var rows []Row
		next := uint64(0)
		for len(in) > 0 && len(rows) < 5000 {
			g, n := binary.Uvarint(in)
			if n <= 0 {
				break
			}
			in = in[n:]
			key := next + g
			if key < next || (len(rows) > 0 && next == 0) {
				break // wrapped
			}
			vals := make([]uint64, ncols)
			var any uint64
			for c := range vals {
				v, n := binary.Uvarint(in)
				if n > 0 {
					in = in[n:]
				}
				vals[c] = v
				any |= v
			}
			if any == 0 {
				vals[0] = 1
			}
			rows = append(rows, Row{Key: key, Vals: vals})
			next = key + 1
		}
		src, desc := build(t, rows, ncols, BuildOptions{TargetBlockSize: int(target) + 1})
		d, err := DecodeDesc(desc)
		if err != nil {
			t.Fatal(err)
		}
		rd := NewReader(1, d, src, NewCache(1<<16))
		if err := rd.Verify(); err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			got, ok, err := rd.Get(row.Key, nil)
			if err != nil || !ok || !slices.Equal(got, row.Vals) {
				t.Fatalf("Get(%d) = %v %v %v, want %v", row.Key, got, ok, err, row.Vals)
			}
			if !d.Contains(row.Key + 1) {
				if _, ok, _ := rd.Get(row.Key+1, nil); ok {
					t.Fatalf("absent key %d found", row.Key+1)
				}
			}
		}
	})
}

// TestWriteFuzzSeeds regenerates testdata/fuzz seed files when
// TALLY_WRITE_FUZZ_SEEDS=1.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("TALLY_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set TALLY_WRITE_FUZZ_SEEDS=1 to regenerate")
	}
	blocks, descs := seedInputs(t)
	write := func(name string, i int, b []byte) {
		dir := filepath.Join("testdata", "fuzz", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		data := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d", i)), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, b := range blocks {
		write("FuzzDecodeBlock", i, b)
		// Truncated and bit-flipped variants.
		write("FuzzDecodeBlock", 100+i, b[:len(b)/2])
	}
	for i, d := range descs {
		write("FuzzDecodeDesc", i, d)
		write("FuzzDecodeDesc", 100+i, d[:len(d)/2])
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzRoundTrip")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "seed0"), []byte("go test fuzz v1\n[]byte(\"\\x05\\x01\\x00\\x80\\x80\\x04\\x02\\x03\")\nuint8(1)\nuint16(3)\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "seed1"), []byte("go test fuzz v1\n[]byte(\"\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\x01\\x07\")\nuint8(0)\nuint16(0)\n"), 0o644)
}
