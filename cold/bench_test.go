package cold

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The realistic set: TALLY_BENCH_ROWS (default 2M) random keys in a
// keyBits=32 range, two power-law columns (see powerLaw: 30% zeros, most
// under 100, a few thousand, ~5e-6 above 65535), no all-zero rows.

func benchRows() int {
	if s := os.Getenv("TALLY_BENCH_ROWS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return 2_000_000
}

var realistic struct {
	once sync.Once
	rows []Row
}

func realisticRows() []Row {
	realistic.once.Do(func() {
		n := benchRows()
		r := rand.New(rand.NewPCG(42, 7))
		keys := make([]uint64, 0, n+n/50+16)
		for len(keys) < n {
			for len(keys) < cap(keys) {
				keys = append(keys, uint64(r.Uint32()))
			}
			slices.Sort(keys)
			keys = slices.Compact(keys)
		}
		keys = keys[:n]
		flat := make([]uint64, 2*n)
		rows := make([]Row, n)
		for i, k := range keys {
			v := flat[2*i : 2*i+2]
			for v[0]|v[1] == 0 {
				v[0], v[1] = powerLaw(r, 0.3), powerLaw(r, 0.3)
			}
			rows[i] = Row{Key: k, Vals: v}
		}
		realistic.rows = rows
	})
	return realistic.rows
}

// threadCPU measures the CPU time of the benchmark's own OS thread, a
// figure the other processes on a shared machine do not inflate the way
// they inflate wall-clock ns/op. Call start on the benchmark goroutine;
// it locks it to its thread until report.
type threadCPU struct{ t0 time.Duration }

func cpuOfThread() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (c *threadCPU) start() {
	runtime.LockOSThread()
	c.t0 = cpuOfThread()
}

// report adds cpu-ns/op and returns the CPU time used.
func (c *threadCPU) report(b *testing.B) time.Duration {
	d := cpuOfThread() - c.t0
	runtime.UnlockOSThread()
	b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpu-ns/op")
	return d
}

type sizeSink struct{ blocks, bytes int64 }

func buildSize(b *testing.B, rows []Row, opts BuildOptions) (blockBytes, descBytes int64, nblocks int) {
	var s sizeSink
	desc, err := Build(rows, 2, opts, func(_ uint32, blk []byte) error {
		s.blocks++
		s.bytes += int64(len(blk))
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return s.bytes, int64(len(desc)), int(s.blocks)
}

// BenchmarkBytesPerRow reports on-disk bytes per stored row (blocks +
// descriptor) for the realistic set across block sizes and zstd levels.
func BenchmarkBytesPerRow(b *testing.B) {
	rows := realisticRows()
	for _, size := range []int{4 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10} {
		for _, level := range []int{1, 3, 7, 11} {
			b.Run(fmt.Sprintf("block=%dK/level=%d", size>>10, level), func(b *testing.B) {
				var blk, desc int64
				for range b.N {
					blk, desc, _ = buildSize(b, rows, BuildOptions{TargetBlockSize: size, ZstdLevel: level})
				}
				n := float64(len(rows))
				b.ReportMetric(float64(blk+desc)/n, "B/row")
				b.ReportMetric(float64(blk)/n, "blockB/row")
				b.ReportMetric(float64(desc)/n, "descB/row")
				b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

// BenchmarkBuild measures sealing throughput with default options.
func BenchmarkBuild(b *testing.B) {
	rows := realisticRows()
	b.ReportAllocs()
	var blk, desc int64
	var cpu threadCPU
	cpu.start()
	for range b.N {
		blk, desc, _ = buildSize(b, rows, BuildOptions{})
	}
	d := cpu.report(b)
	b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(len(rows))*float64(b.N)/d.Seconds(), "rows/cpu-s")
	b.ReportMetric(float64(blk+desc)/float64(len(rows)), "B/row")
	b.ReportMetric(DefaultTargetBlockSize, "blocksize")
	b.ReportMetric(DefaultZstdLevel, "level")
}

var benchReader struct {
	once sync.Once
	src  *memSource
	desc *Desc
}

func realisticReader(b *testing.B, cache *Cache) *Reader {
	benchReader.once.Do(func() {
		src, descBytes := build(b, realisticRows(), 2, BuildOptions{})
		d, err := DecodeDesc(descBytes)
		if err != nil {
			b.Fatal(err)
		}
		benchReader.src, benchReader.desc = src, d
	})
	return NewReader(1, benchReader.desc, benchReader.src, cache)
}

// batches returns nb batches of 10 present keys each, random over the range
// (a feed page of old items).
func batches(rows []Row, nb int) [][]uint64 {
	r := rand.New(rand.NewPCG(9, 9))
	out := make([][]uint64, nb)
	for i := range out {
		out[i] = make([]uint64, 10)
		for j := range out[i] {
			out[i][j] = rows[r.IntN(len(rows))].Key
		}
	}
	return out
}

func BenchmarkMultiGet10Cached(b *testing.B) {
	rows := realisticRows()
	cache := NewCache(1 << 30)
	rd := realisticReader(b, cache)
	// Warm: every block in the cache.
	for blk := range uint32(rd.Desc().NumBlocks()) {
		if _, err := rd.block(blk); err != nil {
			b.Fatal(err)
		}
	}
	bs := batches(rows, 4096)
	dst := make([]uint64, 0, 20)
	found := make([]bool, 10)
	b.ReportAllocs()
	b.ResetTimer()
	var cpu threadCPU
	cpu.start()
	for i := range b.N {
		var err error
		if dst, err = rd.MultiGet(bs[i%len(bs)], dst, found); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "µs/call")
}

func BenchmarkMultiGet10CachedParallel(b *testing.B) {
	rows := realisticRows()
	cache := NewCache(1 << 30)
	rd := realisticReader(b, cache)
	for blk := range uint32(rd.Desc().NumBlocks()) {
		if _, err := rd.block(blk); err != nil {
			b.Fatal(err)
		}
	}
	bs := batches(rows, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		dst := make([]uint64, 0, 20)
		found := make([]bool, 10)
		i := 0
		for pb.Next() {
			var err error
			if dst, err = rd.MultiGet(bs[i%len(bs)], dst, found); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func BenchmarkGetAbsent(b *testing.B) {
	rd := realisticReader(b, NewCache(1<<20))
	r := rand.New(rand.NewPCG(5, 5))
	keys := make([]uint64, 0, 1<<16)
	for len(keys) < cap(keys) {
		if k := uint64(r.Uint32()); !rd.Desc().Contains(k) {
			keys = append(keys, k)
		}
	}
	var dst []uint64
	b.ReportAllocs()
	b.ResetTimer()
	var cpu threadCPU
	cpu.start()
	defer cpu.report(b)
	for i := range b.N {
		var ok bool
		var err error
		if dst, ok, err = rd.Get(keys[i&(len(keys)-1)], dst); ok || err != nil {
			b.Fatal("absent key found", err)
		}
	}
}

// BenchmarkMultiGet10Uncached uses a cache of 1/64 of the decoded data, so
// most batches miss; it reports per-call p50 and p99. The sub-benchmarks
// vary the block size and level to show the miss cost each implies.
func BenchmarkMultiGet10Uncached(b *testing.B) {
	rows := realisticRows()
	for _, o := range []BuildOptions{{}, {TargetBlockSize: 16 << 10}} {
		src, descBytes := build(b, rows, 2, o)
		d, err := DecodeDesc(descBytes)
		if err != nil {
			b.Fatal(err)
		}
		o, _ = o.withDefaults()
		b.Run(fmt.Sprintf("block=%dK/level=%d", o.TargetBlockSize>>10, o.ZstdLevel), func(b *testing.B) {
			decoded := int64(len(rows)) * 4 // ~2 bytes per column decoded
			cache := NewCache(decoded / 64)
			rd := NewReader(2, d, src, cache)
			bs := batches(rows, 4096)
			dst := make([]uint64, 0, 20)
			found := make([]bool, 10)
			durs := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			var cpu threadCPU
			cpu.start()
			for i := range b.N {
				t0 := time.Now()
				var err error
				if dst, err = rd.MultiGet(bs[i%len(bs)], dst, found); err != nil {
					b.Fatal(err)
				}
				durs = append(durs, time.Since(t0))
			}
			b.StopTimer()
			cpu.report(b)
			slices.Sort(durs)
			b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds())/1000, "p50-µs")
			b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds())/1000, "p99-µs")
			st := cache.Stats()
			b.ReportMetric(float64(st.Hits)/float64(st.Hits+st.Misses), "hit-ratio")
		})
	}
}

// BenchmarkDecodeDesc measures opening a sealed range.
func BenchmarkDecodeDesc(b *testing.B) {
	_, desc := build(b, realisticRows(), 2, BuildOptions{})
	b.ReportAllocs()
	b.SetBytes(int64(len(desc)))
	b.ResetTimer()
	var cpu threadCPU
	cpu.start()
	for range b.N {
		if _, err := DecodeDesc(desc); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
	b.ReportMetric(float64(len(realisticRows()))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
