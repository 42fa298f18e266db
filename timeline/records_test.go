package timeline

import (
	"bytes"
	"encoding/hex"
	"errors"
	"slices"
	"testing"
	"time"
)

// The encoders append to a caller's buffer: a prefix stays as it was, and
// a decoder given the value with a byte more or less refuses it.
func TestRecordsRoundTrip(t *testing.T) {
	prefix := []byte("prefix")
	cfg := Config{InboxCap: 800, ActiveWindow: 7 * 24 * time.Hour, PullThreshold: 1_000_000, ChunkSize: 1000}
	cases := []struct {
		name   string
		enc    []byte
		decode func([]byte) (any, error)
		want   any
	}{
		{"config", appendConfig(slices.Clone(prefix), cfg), func(b []byte) (any, error) { return decodeConfig(b) }, cfg},
		{"post", appendPost(slices.Clone(prefix), postRecord{author: 7, delivered: 300, fanned: true}),
			func(b []byte) (any, error) { return decodePost(b) }, postRecord{author: 7, delivered: 300, fanned: true}},
		{"followees", appendFollowees(slices.Clone(prefix), []uint64{1, 2, 300, MaxID}),
			func(b []byte) (any, error) {
				l, err := decodeFollowees(b, nil)
				return slices.Clone(l), err
			}, []uint64{1, 2, 300, MaxID}},
		{"payload", appendPayload(slices.Clone(prefix), opRemove, 9, 10),
			func(b []byte) (any, error) {
				op, a, c, err := decodePayload(b)
				return [3]uint64{uint64(op), a, c}, err
			}, [3]uint64{opRemove, 9, 10}},
		{"job cursor", appendJobCursor(slices.Clone(prefix), jobCursor{phase: 1, next: 1 << 20, count: 42}),
			func(b []byte) (any, error) { return decodeJobCursor(b) }, jobCursor{phase: 1, next: 1 << 20, count: 42}},
	}
	for _, c := range cases {
		if !bytes.HasPrefix(c.enc, prefix) {
			t.Fatalf("%s: prefix overwritten", c.name)
		}
		v := c.enc[len(prefix):]
		got, err := c.decode(v)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !equalAny(got, c.want) {
			t.Fatalf("%s: %v, want %v", c.name, got, c.want)
		}
		if _, err := c.decode(append(slices.Clone(v), 0)); err == nil {
			t.Errorf("%s: a trailing byte accepted", c.name)
		}
		if _, err := c.decode(v[:len(v)-1]); err == nil {
			t.Errorf("%s: a truncated value accepted", c.name)
		}
		for i := range v {
			d := slices.Clone(v)
			d[i] ^= 0x10
			if _, err := c.decode(d); err == nil {
				t.Errorf("%s: a flipped byte %d accepted", c.name, i)
			}
		}
	}
}

func equalAny(a, b any) bool {
	switch x := a.(type) {
	case []uint64:
		return slices.Equal(x, b.([]uint64))
	}
	return a == b
}

// Golden bytes: a change of any format fails here, not in a store written
// by an older build.
func TestRecordsGolden(t *testing.T) {
	for _, c := range []struct {
		name string
		got  []byte
		want string
	}{
		{"config", appendConfig(nil, DefaultConfig()), "01a00680f524c0843de8075a847739"},
		{"post", appendPost(nil, postRecord{author: 7, delivered: 300, fanned: true}), "01000000000000000701ac0210bd80b1"},
		{"followees", appendFollowees(nil, []uint64{3, 5, 900}), "01030302ff065826bf38"},
		{"payload", appendPayload(nil, opAdd, 9, 10), "01010000000000000009000000000000000abe071fb7"},
		{"job cursor", appendJobCursor(nil, jobCursor{phase: 1, next: 70000, count: 5}), "0101f0a20405193be0cb"},
		{"cursor", []byte(encodeCursor(cursorHome, 1, 99)), "41576741414141414141414141514141414141414141426a313650707477"},
	} {
		if h := hex.EncodeToString(c.got); h != c.want {
			t.Errorf("%s: %s, golden %s", c.name, h, c.want)
		}
	}
}

func TestCursor(t *testing.T) {
	c := encodeCursor(cursorHome, 5, 1234)
	pos, ok, err := decodeCursor(c, cursorHome, 5)
	if err != nil || !ok || pos != 1234 {
		t.Fatalf("decode %d %v %v", pos, ok, err)
	}
	if _, ok, err := decodeCursor("", cursorHome, 5); ok || err != nil {
		t.Fatalf("empty cursor: %v %v", ok, err)
	}
	for name, bad := range map[string]string{
		"other user":  encodeCursor(cursorHome, 6, 1234),
		"other kind":  encodeCursor(cursorFollowees, 5, 1234),
		"not base64":  "!!!!",
		"short":       c[:10],
		"flipped":     c[:5] + string(c[5]^1) + c[6:],
		"padded":      c + "=",
		"huge":        string(bytes.Repeat([]byte("A"), 100)),
		"other bytes": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
	} {
		if _, _, err := decodeCursor(bad, cursorHome, 5); !errors.Is(err, ErrBadCursor) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzRecords feeds arbitrary bytes to every decoder: none panics, and
// what one accepts re-encodes to the same bytes (one encoding per value).
func FuzzRecords(f *testing.F) {
	f.Add(appendConfig(nil, DefaultConfig()))
	f.Add(appendPost(nil, postRecord{author: 1}))
	f.Add(appendFollowees(nil, []uint64{1, 9}))
	f.Add(appendPayload(nil, opAdd, 1, 2))
	f.Add(appendJobCursor(nil, jobCursor{next: 5}))
	f.Add([]byte(encodeCursor(cursorHome, 1, 2)))
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := decodeConfig(b); err == nil && !bytes.Equal(appendConfig(nil, c), b) {
			t.Fatalf("config %+v re-encodes differently", c)
		}
		if p, err := decodePost(b); err == nil && !bytes.Equal(appendPost(nil, p), b) {
			t.Fatalf("post %+v re-encodes differently", p)
		}
		if l, err := decodeFollowees(b, nil); err == nil && !bytes.Equal(appendFollowees(nil, l), b) {
			t.Fatalf("followees %v re-encode differently", l)
		}
		if op, a, c, err := decodePayload(b); err == nil && !bytes.Equal(appendPayload(nil, op, a, c), b) {
			t.Fatalf("payload re-encodes differently")
		}
		if c, err := decodeJobCursor(b); err == nil && b != nil && !bytes.Equal(appendJobCursor(nil, c), b) {
			t.Fatalf("job cursor %+v re-encodes differently", c)
		}
		for _, kind := range []byte{cursorHome, cursorFollowers, cursorFollowees} {
			s := string(b)
			if pos, ok, err := decodeCursor(s, kind, 1); err == nil && ok && encodeCursor(kind, 1, pos) != s {
				t.Fatalf("cursor %q re-encodes differently", s)
			}
		}
	})
}
