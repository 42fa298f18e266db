package store

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func sampleSchema() *CounterInfo {
	return &CounterInfo{ID: 3, Name: "weibo", RangeBits: 32,
		Age:     AgePolicy{Kind: AgeByTime, MaxAge: 180 * 24 * time.Hour, IDEpochMs: 1288834974657, IDTimeShift: 22},
		Columns: []Column{{"reposts", 16, 32}, {"comments", 16, 32}, {"likes", 32, 64}}}
}

func sampleRecord() []byte {
	b := appendRecordHeader(nil, 2)
	b = appendRowImage(b, 3, 1<<40|1234, []uint64{111, 222, 333})
	b = appendRowImage(b, 0, 7, []uint64{0})
	return appendChecksum(b, 0)
}

func sampleChunk() []byte {
	return appendChunk(nil, chunkHeader{counterID: 3, rangeID: 256, kind: chunkDelta, bits: 40, ncols: 2, rangeRows: 9, nrows: 2},
		[]uint64{5, 1, 2, 70000, 0, 1 << 33})
}

// Encodings of the versions before format 3 (chunk and schema version 1),
// which stores written by older builds still hold.
const (
	goldenChunk1  = "0100000003000000000000010001020902050102f0a20400808080802018b27bdb"
	goldenSchema1 = "010000000305776569626f20020080e0e2f739c187b4a4c1251603077265706f737473102008636f6d6d656e74731020056c696b657320404288c0b6"
)

// TestDecodeVersion1 reads the version 1 chunk and schema: a chunk of the
// schema's width (bits 0) and a fixed-width schema.
func TestDecodeVersion1(t *testing.T) {
	b, err := hex.DecodeString(goldenChunk1)
	must(t, err)
	var rows [][]uint64
	h, err := decodeChunk(b, func(h *chunkHeader, k uint64, v []uint64) error {
		rows = append(rows, append([]uint64{k}, v...))
		return nil
	})
	must(t, err)
	want := chunkHeader{counterID: 3, rangeID: 256, kind: chunkDelta, ncols: 2, rangeRows: 9, nrows: 2}
	if h != want || len(rows) != 2 || rows[1][2] != 1<<33 {
		t.Fatalf("version 1 chunk: %+v %v", h, rows)
	}
	b, err = hex.DecodeString(goldenSchema1)
	must(t, err)
	ci, err := decodeSchema(b)
	must(t, err)
	if !reflect.DeepEqual(ci, sampleSchema()) || ci.AutoRangeBits {
		t.Fatalf("version 1 schema: %+v", ci)
	}
}

// TestGolden fails when an on-disk encoding changes by accident. Regenerate
// with TALLY_UPDATE_GOLDEN=1 only together with a version bump.
func TestGolden(t *testing.T) {
	got := map[string][]byte{
		"schema": appendSchema(nil, sampleSchema()),
		"record": sampleRecord(),
		"chunk":  sampleChunk(),
		"ckpt":   appendCkptPointer(nil, ckptPointer{seq: 4242, chunks: 300, hasChunks: true}),
		"ckpt1":  appendCkptPointer(nil, ckptPointer{seq: 4242}),
	}
	for name, in := range sampleIntents() {
		got[name] = appendIntent(nil, in)
	}
	path := filepath.Join("testdata", "golden.txt")
	if os.Getenv("TALLY_UPDATE_GOLDEN") != "" {
		var sb strings.Builder
		for _, k := range []string{"chunk", "ckpt", "ckpt1", "intent-ckpt", "intent-merge", "intent-obsolete", "record", "schema"} {
			sb.WriteString(k + " " + hex.EncodeToString(got[k]) + "\n")
		}
		must(t, os.WriteFile(path, []byte(sb.String()), 0o644))
	}
	data, err := os.ReadFile(path)
	must(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		name, hx, _ := strings.Cut(line, " ")
		if h := hex.EncodeToString(got[name]); h != hx {
			t.Errorf("%s encoding changed:\n got %s\nwant %s", name, h, hx)
		}
	}
}

func sampleIntents() map[string]*intent {
	return map[string]*intent{
		"intent-merge":    {kind: intentMerge, counterID: 3, rangeID: 256, first: 300},
		"intent-obsolete": {kind: intentObsolete, counterID: 3, rangeID: 256, ids: []uint32{4, 9, 299}},
		"intent-ckpt":     {kind: intentCheckpoint, seq: 4242},
	}
}

// TestIntentRoundTrip: every sample intent decodes to itself with bytes
// around it, every byte flip and truncation is caught, and a kind with
// another kind's fields is refused.
func TestIntentRoundTrip(t *testing.T) {
	for name, in := range sampleIntents() {
		pre := []byte("prefix")
		b := appendIntent(slices.Clone(pre), in)
		got, err := decodeIntent(b[len(pre):])
		must(t, err)
		if got.kind != in.kind || got.counterID != in.counterID || got.rangeID != in.rangeID ||
			got.first != in.first || got.seq != in.seq || !slices.Equal(got.ids, in.ids) {
			t.Fatalf("%s: round trip %+v, want %+v", name, got, in)
		}
		enc := b[len(pre):]
		for i := range enc {
			c := slices.Clone(enc)
			c[i] ^= 0x40
			if _, err := decodeIntent(c); err == nil {
				t.Errorf("%s: flip at %d not detected", name, i)
			}
			if _, err := decodeIntent(enc[:i]); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: truncation at %d: %v", name, i, err)
			}
		}
	}
	for _, bad := range []*intent{
		{kind: intentCheckpoint, seq: 5, counterID: 1},
		{kind: intentCheckpoint},
		{kind: intentObsolete, counterID: 1},
		{kind: intentSeal, ids: []uint32{1}},
		{kind: intentMerge, seq: 3},
		{kind: 9},
	} {
		if _, err := decodeIntent(appendIntent(nil, bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("intent %+v accepted: %v", bad, err)
		}
	}
}

func TestRoundTrips(t *testing.T) {
	// Encoders append: bytes before the value must survive, and decoders
	// must see exactly the value.
	pre := []byte("prefix")
	s := appendSchema(slices.Clone(pre), sampleSchema())
	ci, err := decodeSchema(s[len(pre):])
	must(t, err)
	if ci.Name != "weibo" || len(ci.Columns) != 3 || ci.Age.MaxAge != 180*24*time.Hour || ci.Columns[2].MaxBits != 64 {
		t.Fatalf("schema round trip: %+v", ci)
	}
	var ops []string
	must(t, decodeRecord(sampleRecord(), func(op rowImage) error {
		ops = append(ops, hex.EncodeToString(appendRowImage(nil, op.counterID, op.id, op.vals)))
		return nil
	}))
	if len(ops) != 2 {
		t.Fatalf("record ops %v", ops)
	}
	var rows [][]uint64
	h, err := decodeChunk(sampleChunk(), func(h *chunkHeader, k uint64, v []uint64) error {
		rows = append(rows, append([]uint64{k}, v...))
		return nil
	})
	must(t, err)
	if h.rangeID != 256 || len(rows) != 2 || rows[1][2] != 1<<33 {
		t.Fatalf("chunk round trip: %+v %v", h, rows)
	}
	// Every single-byte corruption and every truncation is detected.
	for name, b := range map[string][]byte{"schema": appendSchema(nil, sampleSchema()), "record": sampleRecord(), "chunk": sampleChunk()} {
		for i := range b {
			c := slices.Clone(b)
			c[i] ^= 0x40
			if decodeAny(name, c) == nil {
				t.Errorf("%s: flip at %d not detected", name, i)
			}
			if err := decodeAny(name, b[:i]); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: truncation at %d: %v", name, i, err)
			}
		}
	}
}

func decodeAny(name string, b []byte) error {
	switch name {
	case "schema":
		_, err := decodeSchema(b)
		return err
	case "record":
		return decodeRecord(b, func(rowImage) error { return nil })
	case "chunk":
		_, err := decodeChunk(b, func(*chunkHeader, uint64, []uint64) error { return nil })
		return err
	}
	_, err := decodeCkptPointer(b)
	return err
}

// The fuzz targets feed arbitrary bytes to every decoder of bytes read from
// disk. They must never panic, and anything they accept must re-encode to
// the same bytes. Seeds live in testdata/fuzz/<Name>/.

func FuzzDecodeRecord(f *testing.F) {
	f.Add(sampleRecord())
	f.Fuzz(func(t *testing.T, b []byte) {
		var out []byte
		n := 0
		err := decodeRecord(b, func(op rowImage) error {
			n++
			out = appendRowImage(out, op.counterID, op.id, op.vals)
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not marked corrupt: %v", err)
			}
			return
		}
		re := appendChecksum(append(appendRecordHeader(nil, n), out...), 0)
		if string(re) != string(b) {
			t.Fatalf("accepted record does not re-encode:\n%x\n%x", b, re)
		}
	})
}

func FuzzDecodeChunk(f *testing.F) {
	f.Add(sampleChunk())
	f.Fuzz(func(t *testing.T, b []byte) {
		var words []uint64
		h, err := decodeChunk(b, func(h *chunkHeader, k uint64, v []uint64) error {
			words = append(append(words, k), v...)
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not marked corrupt: %v", err)
			}
			return
		}
		if b[0] != chunkVersion {
			return // an older version: it decodes, but is never written again
		}
		if re := appendChunk(nil, h, words); string(re) != string(b) {
			t.Fatalf("accepted chunk does not re-encode")
		}
	})
}

func FuzzDecodeSchema(f *testing.F) {
	f.Add(appendSchema(nil, sampleSchema()))
	f.Fuzz(func(t *testing.T, b []byte) {
		ci, err := decodeSchema(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not marked corrupt: %v", err)
			}
			return
		}
		if b[0] != schemaVersion {
			return // an older version: it decodes, but is never written again
		}
		if re := appendSchema(nil, ci); string(re) != string(b) {
			t.Fatalf("accepted schema does not re-encode")
		}
	})
}

func FuzzDecodeCkptPointer(f *testing.F) {
	f.Add(appendCkptPointer(nil, ckptPointer{seq: 99, chunks: 3, hasChunks: true}))
	f.Add(appendCkptPointer(nil, ckptPointer{seq: 99}))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodeCkptPointer(b)
		if err == nil && string(appendCkptPointer(nil, p)) != string(b) {
			t.Fatalf("accepted pointer does not re-encode")
		}
	})
}

func FuzzDecodeIntent(f *testing.F) {
	for _, in := range sampleIntents() {
		f.Add(appendIntent(nil, in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := decodeIntent(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not marked corrupt: %v", err)
			}
			return
		}
		if re := appendIntent(nil, in); string(re) != string(b) {
			t.Fatalf("accepted intent does not re-encode")
		}
	})
}
