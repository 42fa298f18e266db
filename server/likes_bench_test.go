package server

import (
	"context"
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

// BenchmarkTopPath compares LIKE.TOP 100 in process (likes.Top) with the
// same read through the server's request path without the network
// (Conn.execute: parse, the read, the 100-record reply), on a board of
// 5,000 items that 20,000 likes built. The -compacted runs read the same
// board after a flush and a full compaction: the board no longer sits in
// the memtable beside the deleted keys of its moves (every like that
// moves an item up deletes its old board key).
func BenchmarkTopPath(b *testing.B) {
	setup := func(b *testing.B, compacted bool) (*testServer, *likes.Likes) {
		ts, db := newDBServer(b)
		l := db.Likes()
		if err := l.AddBusiness("video", likes.BusinessOptions{}); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < 20000; i++ {
			if _, err := l.Like("video", uint64(i*i%5000+1), uint64(i+1), 0); err != nil {
				b.Fatal(err)
			}
		}
		if compacted {
			if err := db.Store().CompactDisk(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		return ts, l
	}
	for _, compacted := range []bool{false, true} {
		suffix := ""
		if compacted {
			suffix = "-compacted"
		}
		b.Run("direct"+suffix, func(b *testing.B) {
			_, l := setup(b, compacted)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if top, err := l.Top("video", 100); err != nil || len(top) != 100 {
					b.Fatal(len(top), err)
				}
			}
		})
		b.Run("execute"+suffix, func(b *testing.B) {
			ts, _ := setup(b, compacted)
			a, peer := net.Pipe()
			defer a.Close()
			defer peer.Close()
			c := newConn(ts.s, a, 1)
			reqs := []request{{Args: [][]byte{[]byte("LIKE.TOP"), []byte("video"), []byte("100")}}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c.execute(reqs)
				if c.errReply {
					b.Fatalf("error reply %q", c.out)
				}
				c.out = c.out[:0]
			}
		})
	}
}
