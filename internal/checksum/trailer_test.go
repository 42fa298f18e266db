package checksum

import (
	"bytes"
	"errors"
	"testing"
)

// TestTrailerGolden pins the trailer's bytes: the check value of
// "123456789", big-endian, after the record, with bytes before start left
// out of the sum.
func TestTrailerGolden(t *testing.T) {
	got := AppendTrailer([]byte("xx123456789"), 2)
	want := append([]byte("xx123456789"), 0xe3, 0x06, 0x92, 0x83)
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendTrailer = %x, want %x", got, want)
	}
}

// TestTrailerRoundTrip checks that CutTrailer returns what AppendTrailer
// summed, with bytes before start (a caller's buffer) left alone, and
// refuses every single-bit flip, every truncation and a short value.
func TestTrailerRoundTrip(t *testing.T) {
	prefix := []byte("prefix")
	for _, rec := range [][]byte{{}, {1}, []byte("a record of some length")} {
		enc := AppendTrailer(append(append([]byte{}, prefix...), rec...), len(prefix))
		if !bytes.Equal(enc[:len(prefix)], prefix) {
			t.Fatalf("prefix changed: %q", enc)
		}
		b := enc[len(prefix):]
		body, err := CutTrailer(b)
		if err != nil || !bytes.Equal(body, rec) {
			t.Fatalf("CutTrailer(%x) = %x, %v; want %x", b, body, err, rec)
		}
		for i := range len(b) * 8 {
			d := bytes.Clone(b)
			d[i/8] ^= 1 << (i % 8)
			if _, err := CutTrailer(d); !errors.Is(err, ErrMismatch) {
				t.Fatalf("bit %d flipped in %x: %v, want ErrMismatch", i, b, err)
			}
		}
		for n := TrailerLen; n < len(b); n++ {
			if _, err := CutTrailer(b[:n]); !errors.Is(err, ErrMismatch) {
				t.Fatalf("%x cut to %d bytes: %v, want ErrMismatch", b, n, err)
			}
		}
	}
	for n := range TrailerLen {
		if _, err := CutTrailer(make([]byte, n)); !errors.Is(err, ErrShort) {
			t.Fatalf("%d bytes: %v, want ErrShort", n, err)
		}
	}
}

// TestCutRecord checks the version-and-trailer frame: the body between
// them comes back, a wrong version is ErrVersion, damage is ErrMismatch
// even where it hits the version byte, and a value without room for both
// is ErrShort.
func TestCutRecord(t *testing.T) {
	rec := AppendTrailer([]byte{3, 'a', 'b'}, 0)
	if body, err := CutRecord(rec, 3); err != nil || string(body) != "ab" {
		t.Fatalf("CutRecord = %q, %v", body, err)
	}
	if _, err := CutRecord(rec, 4); !errors.Is(err, ErrVersion) {
		t.Fatalf("version 3 read as 4: %v", err)
	}
	d := bytes.Clone(rec)
	d[0] = 4
	if _, err := CutRecord(d, 4); !errors.Is(err, ErrMismatch) {
		t.Fatalf("damaged version byte: %v", err)
	}
	empty := AppendTrailer([]byte{3}, 0)
	if body, err := CutRecord(empty, 3); err != nil || len(body) != 0 {
		t.Fatalf("empty body: %q, %v", body, err)
	}
	if _, err := CutRecord(empty[:4], 3); !errors.Is(err, ErrShort) {
		t.Fatalf("4 bytes: %v", err)
	}
}
