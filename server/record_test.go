package server

import (
	"bytes"
	"math"
	"net"
	"testing"
)

// TestWriteUintRecord3: the one-call record writes the bytes of WriteMap(3)
// and a WriteBulkString and WriteUint per field, counts past 2^63-1 (bulk
// strings) included, without allocating once the buffer has room.
func TestWriteUintRecord3(t *testing.T) {
	a, peer := net.Pipe()
	defer a.Close()
	defer peer.Close()
	ts, _ := newDBServer(t)
	c := newConn(ts.s, a, 1)
	names := [3]string{"rank", "item", "likes"}
	for _, vals := range [][3]uint64{
		{1, 1234, 5120},
		{0, 0, 0},
		{7, math.MaxInt64, math.MaxInt64 + 1},
		{math.MaxUint64, 10, 99},
	} {
		c.out = c.out[:0]
		c.WriteMap(3)
		for i := range names {
			c.WriteBulkString(names[i])
			c.WriteUint(vals[i])
		}
		want := append([]byte(nil), c.out...)
		c.out = c.out[:0]
		c.WriteUintRecord3(&names, vals)
		if !bytes.Equal(c.out, want) {
			t.Errorf("%v: %q, want %q", vals, c.out, want)
		}
	}
	c.out = c.out[:0]
	if n := testing.AllocsPerRun(100, func() {
		c.out = c.out[:0]
		c.WriteUintRecord3(&names, [3]uint64{3, math.MaxUint64, 4})
	}); n != 0 {
		t.Errorf("%v allocations a record, want 0", n)
	}
}
