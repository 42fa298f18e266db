package store_test

// Family benchmarks (issue 7). Sizes:
//
//	TALLY_BENCH_FAMILY_KEYS=1000000   keys in the Get and scan benchmarks
//
// Keys are drawn uniformly (every user equally likely): the cache-friendly
// case of a skewed draw would flatter the figures.

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tallydb/tally/internal/testutil"
	"github.com/tallydb/tally/store"
)

var (
	benchBox  = store.FamilySpec{Name: "box", Prefix: 0x10, MinKeyLen: 16, MaxKeyLen: 16, MaxValueLen: 256}
	benchSums = store.FamilySpec{Name: "sums", Prefix: 0x11, MinKeyLen: 8, MaxKeyLen: 8, Merge: store.MergeAdd}
)

// boxKey is user u64 | item u64.
func boxKey(dst []byte, user, item uint64) []byte {
	dst = append(dst, benchBox.Prefix)
	dst = binary.BigEndian.AppendUint64(dst, user)
	return binary.BigEndian.AppendUint64(dst, item)
}

func openFamilyBench(b *testing.B, d store.Durability) (*store.DB, *store.Family, *store.Family, *store.Counter) {
	b.Helper()
	db, err := store.Open(b.TempDir(), &store.Options{Durability: d, CompactionInterval: -1,
		Families: []store.FamilySpec{benchBox, benchSums}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if err := db.CreateCounter("posts", store.CounterOptions{RangeBits: 32}); err != nil {
		b.Fatal(err)
	}
	if err := db.AddColumn("posts", "likes", store.ColumnOptions{}); err != nil {
		b.Fatal(err)
	}
	box, _ := db.Family("box")
	sums, _ := db.Family("sums")
	c, _ := db.Counter("posts")
	return db, box, sums, c
}

// BenchmarkMixedBatch commits batches of one counter increment alone
// ("counter") or with three family writes ("mixed": two Puts and a Merge,
// what a like or a publish writes) under each durability with 1, 8 and 64
// writers, on the real filesystem. Ids and users are uniform over 1M.
func BenchmarkMixedBatch(b *testing.B) {
	for _, d := range []store.Durability{store.SyncAlways, store.SyncInterval, store.NoSync} {
		for _, kind := range []string{"counter", "mixed"} {
			for _, writers := range []int{1, 8, 64} {
				b.Run(fmt.Sprintf("%s/%s/writers=%d", d, kind, writers), func(b *testing.B) {
					db, box, sums, _ := openFamilyBench(b, d)
					val := make([]byte, 16)
					add := store.AddOperand(nil, 1)
					runWriters(b, writers, func(rng *rand.Rand, buf *[]byte) error {
						user, item := rng.Uint64N(1_000_000), rng.Uint64N(1_000_000)
						bt := db.NewBatch()
						defer bt.Close()
						if err := bt.Incr("posts", item, "likes", 1); err != nil {
							return err
						}
						if kind == "mixed" {
							k := boxKey((*buf)[:0], user, item)
							box.Put(bt, k, val)
							box.Put(bt, boxKey(k[:0], item, user), val)
							k = binary.BigEndian.AppendUint64(append(k[:0], benchSums.Prefix), user)
							sums.Merge(bt, k, add)
							*buf = k
						}
						return bt.Commit() // reports any error of the writes above
					})
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
				})
			}
		}
	}
}

// loadBox writes n keys: n/50 users with 50 items each, flushed and
// compacted, so reads meet the steady state (sstables, block cache).
func loadBox(b *testing.B, db *store.DB, box *store.Family, n int) (users uint64) {
	b.Helper()
	users = uint64(max(n/50, 1))
	val := make([]byte, 16)
	bt := db.NewBatch()
	var k []byte
	for u := uint64(0); u < users; u++ {
		for i := uint64(0); i < 50; i++ {
			k = boxKey(k[:0], u, i*7919)
			if err := box.Put(bt, k, val); err != nil {
				b.Fatal(err)
			}
		}
		if u%2000 == 1999 {
			if err := bt.Commit(); err != nil {
				b.Fatal(err)
			}
			bt.Reset()
		}
	}
	if err := bt.Commit(); err != nil {
		b.Fatal(err)
	}
	bt.Close()
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	return users
}

// BenchmarkFamilyGet reads random keys with Family.Get into a caller
// buffer, one goroutine and all CPUs.
func BenchmarkFamilyGet(b *testing.B) {
	n := testutil.EnvInt(b, "TALLY_BENCH_FAMILY_KEYS", 200_000)
	db, box, _, _ := openFamilyBench(b, store.NoSync)
	users := loadBox(b, db, box, n)
	for _, par := range []bool{false, true} {
		b.Run(fmt.Sprintf("keys=%d/parallel=%v", n, par), func(b *testing.B) {
			b.ReportAllocs()
			get := func(rng *rand.Rand, k, buf []byte) ([]byte, []byte) {
				k = boxKey(k[:0], rng.Uint64N(users), rng.Uint64N(50)*7919)
				v, ok, err := box.Get(k, buf)
				if err != nil || !ok {
					b.Fatal(err, ok)
				}
				return k, v
			}
			if !par {
				rng := rand.New(rand.NewPCG(1, 2))
				var k, buf []byte
				for b.Loop() {
					k, buf = get(rng, k, buf)
				}
			} else {
				var seed atomic.Uint64
				b.RunParallel(func(pb *testing.PB) {
					rng := rand.New(rand.NewPCG(seed.Add(1), 2))
					var k, buf []byte
					for pb.Next() {
						k, buf = get(rng, k, buf)
					}
				})
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "gets/s")
		})
	}
}

// BenchmarkFamilyScan20 reads the 20 newest keys of a random user (a
// reverse prefix iteration, as a page of a list).
func BenchmarkFamilyScan20(b *testing.B) {
	n := testutil.EnvInt(b, "TALLY_BENCH_FAMILY_KEYS", 200_000)
	db, box, _, _ := openFamilyBench(b, store.NoSync)
	users := loadBox(b, db, box, n)
	b.ReportAllocs()
	rng := rand.New(rand.NewPCG(3, 4))
	prefix := make([]byte, 9)
	prefix[0] = benchBox.Prefix
	for b.Loop() {
		binary.BigEndian.PutUint64(prefix[1:], rng.Uint64N(users))
		it, err := box.NewIter(&store.IterOptions{Prefix: prefix, Reverse: true})
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for got < 20 && it.Next() {
			_ = it.Value()
			got++
		}
		if err := it.Close(); err != nil || got != 20 {
			b.Fatal(err, got)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "scans/s")
}

// BenchmarkIncrOnce compares Incr with IncrOnce (64 sources, each with
// growing sequences) under each durability, 1 and 8 writers.
func BenchmarkIncrOnce(b *testing.B) {
	for _, d := range []store.Durability{store.SyncAlways, store.SyncInterval, store.NoSync} {
		for _, once := range []bool{false, true} {
			for _, writers := range []int{1, 8} {
				name := "Incr"
				if once {
					name = "IncrOnce"
				}
				b.Run(fmt.Sprintf("%s/%s/writers=%d", d, name, writers), func(b *testing.B) {
					_, _, _, c := openFamilyBench(b, d)
					sources := make([]string, 64)
					for i := range sources {
						sources[i] = fmt.Sprintf("kafka-%d", i)
					}
					var seqs [64]uint64
					var locks [64]sync.Mutex
					runWriters(b, writers, func(rng *rand.Rand, _ *[]byte) error {
						id := rng.Uint64N(1_000_000)
						if !once {
							_, err := c.Incr(id, "likes", 1)
							return err
						}
						// A source delivers in order: hold its lock from
						// sequence to commit.
						s := rng.IntN(len(sources))
						locks[s].Lock()
						defer locks[s].Unlock()
						seqs[s]++
						_, _, err := c.IncrOnce(id, "likes", 1, sources[s], seqs[s])
						return err
					})
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "incr/s")
				})
			}
		}
	}
}
