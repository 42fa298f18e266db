package server

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/tallydb/tally/store"
)

// randomApplyEntry returns an entry of one to 24 commands, mostly
// batchable increments and sets over a few rows (some past a 64-bit
// column's cap, which fails a whole store batch), sometimes one with bad
// arguments, a command that is not batchable, or not an entry at all.
func randomApplyEntry(t *testing.T, r *rand.Rand) []byte {
	t.Helper()
	if r.IntN(40) == 0 {
		return []byte{1, 2, 3}
	}
	n := 1 + r.IntN(24)
	cmds := make([][][]byte, 0, n)
	for range n {
		var args []string
		post := fmt.Sprint("posts:", 1+r.IntN(20))
		switch k := r.IntN(100); {
		case k < 50:
			args = []string{"HINCRBY", post, "likes", fmt.Sprint(r.IntN(7) - 2)}
		case k < 62:
			args = []string{"HSET", post, "likes", fmt.Sprint(r.IntN(9)), "comments", fmt.Sprint(r.IntN(3))}
		case k < 72:
			args = []string{"INCRBY", fmt.Sprint("key:", 1+r.IntN(5)), fmt.Sprint(r.IntN(5))}
		case k < 80:
			args = []string{"DECR", fmt.Sprint("key:", 1+r.IntN(5))}
		case k < 86:
			args = []string{"HINCRBY", "big:1", "n", fmt.Sprint(int64(1) << (55 + r.IntN(8)))}
		case k < 90:
			args = []string{"HINCRBY", post, "likes", "x"} // bad input: not staged
		case k < 94:
			args = []string{"DEL", post} // not batchable
		case k < 97:
			args = []string{"HGET", post, "likes"} // not a replicated write
		default:
			args = []string{"HINCRBY", post}
		}
		argv := make([][]byte, len(args))
		for i, a := range args {
			argv[i] = []byte(a)
		}
		cmds = append(cmds, argv)
	}
	data, err := encodeEntry(cmds)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestApplyRunMatchesApply applies the same random entries to two servers
// over equal stores: one entry at a time with Apply inside
// store.DB.ApplyEntry on one, in runs of random lengths with ApplyRun
// (and Apply for what it does not fold) on the other. Every entry's reply
// and the final state must be the same, and the store's applied index
// must cover every folded run.
func TestApplyRunMatchesApply(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 22))
			g := newFakeCluster(t, 2, ClusterOptions{})
			a, b := g.nodes[0].srv, g.nodes[1].srv
			entries := make([][]byte, 300)
			for i := range entries {
				entries[i] = randomApplyEntry(t, r)
			}
			want := make([][]byte, len(entries))
			for i, e := range entries {
				index := uint64(i + 1)
				if err := a.db.ApplyEntry(index, func() error {
					want[index-1] = a.Apply(e)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			folded, fallback, lastFolded := 0, 0, uint64(0)
			for i := 0; i < len(entries); {
				first := uint64(i + 1)
				window := entries[i:min(len(entries), i+1+r.IntN(16))]
				n, replies, ok := b.ApplyRun(first, window)
				if n < 1 || n > len(window) {
					t.Fatalf("ApplyRun(%d, %d entries) took %d", first, len(window), n)
				}
				if ok {
					folded++
					lastFolded = first + uint64(n) - 1
					if len(replies) != n {
						t.Fatalf("%d replies for %d entries", len(replies), n)
					}
					for k := range n {
						if !bytes.Equal(replies[k], want[i+k]) {
							t.Fatalf("entry %d folded: reply %q, one by one %q", i+k+1, replies[k], want[i+k])
						}
					}
				} else {
					fallback++
					for k := range n {
						index := first + uint64(k)
						var got []byte
						if err := b.db.ApplyEntry(index, func() error {
							got = b.Apply(entries[index-1])
							return nil
						}); err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(got, want[index-1]) {
							t.Fatalf("entry %d after a refused run: reply %q, want %q", index, got, want[index-1])
						}
					}
				}
				i += n
			}
			if folded == 0 || fallback == 0 {
				t.Fatalf("%d folded runs, %d refused: the entries exercise only one path", folded, fallback)
			}
			if got := b.db.AppliedIndex(); got < lastFolded {
				t.Fatalf("AppliedIndex %d below the last folded entry %d", got, lastFolded)
			}
			check := func(args ...string) {
				argv := make([][]byte, len(args))
				for i, s := range args {
					argv[i] = []byte(s)
				}
				data, err := EncodeCommand(argv)
				if err != nil {
					t.Fatal(err)
				}
				if ra, rb := a.Apply(data), b.Apply(data); !bytes.Equal(ra, rb) {
					t.Fatalf("%q: %q vs %q", args, ra, rb)
				}
			}
			for id := 1; id <= 20; id++ {
				check("HINCRBY", fmt.Sprint("posts:", id), "likes", "0")
				check("HINCRBY", fmt.Sprint("posts:", id), "comments", "0")
			}
			for id := 1; id <= 5; id++ {
				check("INCRBY", fmt.Sprint("key:", id), "0")
			}
			check("HINCRBY", "big:1", "n", "0")
		})
	}
}

// TestApplyRunRefusesAppliedEntries: a run whose entries are not above
// the store's applied index changes nothing and says so.
func TestApplyRunRefusesAppliedEntries(t *testing.T) {
	g := newFakeCluster(t, 1, ClusterOptions{})
	s := g.nodes[0].srv
	e, err := EncodeCommand([][]byte{[]byte("HINCRBY"), []byte("posts:1"), []byte("likes"), []byte("5")})
	if err != nil {
		t.Fatal(err)
	}
	if n, replies, ok := s.ApplyRun(1, [][]byte{e, e}); !ok || n != 2 || string(replies[1]) != ":10\r\n" {
		t.Fatalf("run 1..2: %d %q %v", n, replies, ok)
	}
	if n, _, ok := s.ApplyRun(2, [][]byte{e}); ok || n != 1 {
		t.Fatalf("run 2..2 again: took %d, folded %v", n, ok)
	}
	if n, _, ok := s.ApplyRun(1, nil); ok || n != 0 {
		t.Fatalf("empty run: took %d, folded %v", n, ok)
	}
	if got := string(s.Apply(e)); got != ":15\r\n" {
		t.Fatalf("posts:1 likes after a refused run: %q", got)
	}
}

// BenchmarkApplyRun compares a replica's apply of pipelined HINCRBY
// entries (16 commands each, as one client's pipeline is proposed) one
// entry per store commit (Apply inside store.DB.ApplyEntry, "entry") with
// runs of 14 entries per commit (ApplyRun, "run"; 14 is about what one
// follower append carries under redis-benchmark -c 50 -P 16). ns/op is
// per command.
func BenchmarkApplyRun(b *testing.B) {
	const perRun = 14
	for _, mode := range []string{"entry", "run"} {
		b.Run(mode, func(b *testing.B) {
			g := newFakeCluster(b, 1, ClusterOptions{})
			s := g.nodes[0].srv
			r := rand.New(rand.NewPCG(1, 2))
			entries := make([][]byte, 256*perRun)
			for i := range entries {
				var cmds [][][]byte
				for range benchPipeline {
					cmds = append(cmds, [][]byte{[]byte("HINCRBY"), []byte(fmt.Sprint("posts:", r.IntN(benchKeyspace))), []byte("likes"), []byte("1")})
				}
				var err error
				if entries[i], err = encodeEntry(cmds); err != nil {
					b.Fatal(err)
				}
			}
			index := uint64(0)
			b.ResetTimer()
			for i := 0; i < b.N; i += benchPipeline * perRun {
				run := entries[(i/benchPipeline)%len(entries):][:perRun]
				if mode == "run" {
					if n, _, ok := s.ApplyRun(index+1, run); !ok || n != perRun {
						b.Fatalf("run at %d: took %d, folded %v", index+1, n, ok)
					}
					index += perRun
					continue
				}
				for _, e := range run {
					index++
					if err := s.db.ApplyEntry(index, func() error {
						if out := s.Apply(e); out[0] != ':' {
							return fmt.Errorf("reply %q", out)
						}
						return nil
					}); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestReappliedEntryNumbersCommands: a restarted replica re-applies the
// entry at its store's AppliedIndex, and a command of it may commit where
// its first apply did not: the entry "DEL posts:1, HINCRBY posts:1 likes
// 1" found no row to delete the first time, and a row (the HINCRBY's) the
// second time. Its commits were numbered one after another, so the DEL's
// took the HINCRBY's number (skipped as a duplicate) and the HINCRBY's a
// new one: it applied twice, on this replica only. Apply declares each
// command (store.DB.ApplyCommand), and each is numbered as it was.
func TestReappliedEntryNumbersCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	open := func() (*store.DB, *Server) { return openApplyServer(t, dir) }
	db, s := open()
	mustSchema(t, db)
	entry, err := encodeEntry([][][]byte{
		{[]byte("DEL"), []byte("posts:1")},
		{[]byte("HINCRBY"), []byte("posts:1"), []byte("likes"), []byte("1")},
		{[]byte("HINCRBY"), []byte("posts:2"), []byte("likes"), []byte("1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	apply := func() {
		t.Helper()
		if err := db.ApplyEntry(1, func() error {
			s.Apply(entry)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	apply()
	for range 2 { // restarts: the entry is re-applied each time
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db, s = open()
		apply()
	}
	c, err := db.Counter("posts")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{1, 2} {
		if v, err := c.GetColumn(id, "likes"); err != nil || v != 1 {
			t.Errorf("posts:%d likes = %d (%v), want 1", id, v, err)
		}
	}
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
