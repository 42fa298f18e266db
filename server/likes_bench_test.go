package server

import (
	"net"
	"strconv"
	"testing"

	"github.com/tallydb/tally/likes"
)

// BenchmarkLikePath compares one like made in process (likes.Like) with
// the same like run through the server's request path without the
// network: Conn.execute of a parsed LIKE.LIKE (lookup, the command
// table's parse and check, the handler, the RESP reply, metrics, slowlog
// and latency accounting). The difference is what the server adds to a
// like besides its socket reads and writes.
func BenchmarkLikePath(b *testing.B) {
	b.Run("direct", func(b *testing.B) {
		_, db := newDBServer(b)
		l := db.Likes()
		if err := l.AddBusiness("video", likes.BusinessOptions{}); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := l.Like("video", uint64(i%5000+1), uint64(i+1), 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("execute", func(b *testing.B) {
		ts, db := newDBServer(b)
		if err := db.Likes().AddBusiness("video", likes.BusinessOptions{}); err != nil {
			b.Fatal(err)
		}
		a, peer := net.Pipe()
		defer a.Close()
		defer peer.Close()
		c := newConn(ts.s, a, 1)
		reqs := []request{{Args: [][]byte{[]byte("LIKE.LIKE"), []byte("video"), nil, nil}}}
		var item, user [20]byte
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			reqs[0].Args[2] = strconv.AppendUint(item[:0], uint64(i%5000+1), 10)
			reqs[0].Args[3] = strconv.AppendUint(user[:0], uint64(i+1), 10)
			c.execute(reqs)
			if c.errReply {
				b.Fatalf("error reply %q", c.out)
			}
			c.out = c.out[:0]
		}
	})
}
