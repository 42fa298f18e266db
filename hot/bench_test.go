package hot

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Benchmarks load a keyBits=32 table with two 2-byte columns, the counter
// layout of the design target. The row count comes from TALLY_BENCH_ROWS
// (default 2M so `go test -bench` stays quick); the design target is 20M:
//
//	TALLY_BENCH_ROWS=20000000 go test -run=NONE -bench=. -cpu=1,2 ./hot/

const benchKeyBits = 32

func benchRows() int {
	if s := os.Getenv("TALLY_BENCH_ROWS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return 2_000_000
}

// benchKey returns the i-th distinct key: a bijection of i on 32 bits that is
// unrelated to the table's own mixer, so keys look random to the table but
// benchmarks can draw a stored key without a key array (which would add its
// own cache miss per lookup).
func benchKey(i uint64) uint64 {
	const mask = 1<<benchKeyBits - 1
	x := (i*0xD6E8FEB86659FD93 + 0x1234567) & mask
	x ^= x >> 15
	return (x * 0x2545F4914F6CDD1D) & mask
}

// benchValue returns a realistic counter value: mostly small, occasionally
// in the thousands, and about 1 in 100,000 above 65535 (overflowed).
func benchValue(r uint64) uint64 {
	switch {
	case r%100000 == 7:
		return 65535 + r%1000000
	case r%100 < 5:
		return r % 20000
	case r%100 < 30:
		return 0
	default:
		return r % 50
	}
}

type wyrand uint64

func (w *wyrand) next() uint64 {
	*w += 0xa0761d6478bd642f
	hi, lo := mul64(uint64(*w), uint64(*w)^0xe7037ed1a0b428db)
	return hi ^ lo
}

func mul64(a, b uint64) (uint64, uint64) {
	const mask32 = 1<<32 - 1
	a0, a1 := a&mask32, a>>32
	b0, b1 := b&mask32, b>>32
	w0 := a0 * b0
	t := a1*b0 + w0>>32
	w1 := t&mask32 + a0*b1
	return a1*b1 + t>>32 + w1>>32, a * b
}

func loadBenchTable(tb testing.TB, n, hint int) *Table {
	t := newTable(tb, benchKeyBits, []int{2, 2}, hint)
	r := wyrand(1)
	vals := make([]uint64, 2)
	for i := range uint64(n) {
		vals[0], vals[1] = benchValue(r.next()), benchValue(r.next())
		if vals[0] == 0 && vals[1] == 0 {
			vals[0] = 1 // every loaded key is stored, so hits are hits
		}
		if err := t.Put(benchKey(i), vals); err != nil {
			tb.Fatal(err)
		}
	}
	return t
}

var benchTable = sync.OnceValue(func() *Table {
	return loadBenchTable(&testing.B{}, benchRows(), 0)
})

// BenchmarkGet10 is a MultiGet of a feed page: 10 random stored keys, all
// columns. "absent" draws half the keys from outside the stored set (items
// with all counts 0 are read too).
func BenchmarkGet10(b *testing.B) {
	t := benchTable()
	n := uint64(t.Len())
	for _, absent := range []bool{false, true} {
		name := "hit"
		if absent {
			name = "halfabsent"
		}
		pick := func(r *wyrand) uint64 {
			x := r.next()
			if absent && x&1 == 0 {
				return benchKey(n + x>>33%n) // never loaded
			}
			return benchKey(x >> 32 % n)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			r := wyrand(2)
			buf := make([]uint64, 0, 4)
			var sink uint64
			start, cpu := time.Now(), cpuTime(rusageThread)
			for b.Loop() {
				for range 10 {
					buf, _ = t.Get(pick(&r), buf)
					sink += buf[0]
				}
			}
			reportRates(b, 10, start, cpu, rusageThread)
			_ = sink
		})
		b.Run(name+"/many", func(b *testing.B) {
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			r := wyrand(2)
			batch := make([]uint64, 10)
			vals, found := make([]uint64, 0, 20), make([]bool, 0, 10)
			start, cpu := time.Now(), cpuTime(rusageThread)
			for b.Loop() {
				for i := range batch {
					batch[i] = pick(&r)
				}
				vals, found = t.GetMany(batch, vals, found)
			}
			reportRates(b, 10, start, cpu, rusageThread)
		})
		b.Run(name+"/many/parallel", func(b *testing.B) {
			b.ReportAllocs()
			var seed sync.Mutex
			next := wyrand(3)
			start, cpu := time.Now(), cpuTime(syscall.RUSAGE_SELF)
			b.RunParallel(func(pb *testing.PB) {
				seed.Lock()
				r := wyrand(next.next())
				seed.Unlock()
				batch := make([]uint64, 10)
				vals, found := make([]uint64, 0, 20), make([]bool, 0, 10)
				for pb.Next() {
					for i := range batch {
						batch[i] = pick(&r)
					}
					vals, found = t.GetMany(batch, vals, found)
				}
			})
			reportRates(b, 10, start, cpu, syscall.RUSAGE_SELF)
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			var seed sync.Mutex
			next := wyrand(3)
			start, cpu := time.Now(), cpuTime(syscall.RUSAGE_SELF)
			b.RunParallel(func(pb *testing.PB) {
				seed.Lock()
				r := wyrand(next.next())
				seed.Unlock()
				buf := make([]uint64, 0, 4)
				for pb.Next() {
					for range 10 {
						buf, _ = t.Get(pick(&r), buf)
					}
				}
			})
			reportRates(b, 10, start, cpu, syscall.RUSAGE_SELF)
		})
	}
}

// BenchmarkGetColumn reads one column of one random stored key.
func BenchmarkGetColumn(b *testing.B) {
	t := benchTable()
	n := uint64(t.Len())
	b.ReportAllocs()
	r := wyrand(4)
	var sink uint64
	for b.Loop() {
		sink += t.GetColumn(benchKey(r.next()>>32%n), 1)
	}
	_ = sink
}

// BenchmarkPut: "update" rewrites stored rows (no growth, the steady state
// of counters); "insert" loads fresh keys into an empty table, growth
// included.
func BenchmarkPut(b *testing.B) {
	b.Run("update", func(b *testing.B) {
		t := benchTable()
		n := uint64(t.Len())
		b.ReportAllocs()
		r := wyrand(5)
		vals := make([]uint64, 2)
		for b.Loop() {
			x := r.next()
			vals[0], vals[1] = 1+x%100, x>>40%1000
			_ = t.Put(benchKey(x>>32%n), vals)
		}
	})
	b.Run("insert", func(b *testing.B) {
		t := newTable(b, benchKeyBits, []int{2, 2}, 0)
		b.ReportAllocs()
		vals := []uint64{1, 2}
		i := uint64(0)
		for b.Loop() {
			_ = t.Put(benchKey(i), vals)
			i++
		}
		b.ReportMetric(float64(t.MemBytes())/float64(t.Len()), "B/row")
	})
}

// BenchmarkMemory reports bytes of table memory per stored row after loading
// the benchmark rows with no size hint (steady-state growth) and with an
// exact hint.
func BenchmarkMemory(b *testing.B) {
	for _, hinted := range []bool{false, true} {
		name := "nohint"
		if hinted {
			name = "hint"
		}
		b.Run(name, func(b *testing.B) {
			var t *Table
			if hinted {
				for b.Loop() {
					t = loadBenchTable(b, benchRows(), benchRows())
				}
			} else {
				for b.Loop() {
					t = benchTable()
				}
			}
			b.ReportMetric(float64(t.MemBytes())/float64(t.Len()), "B/row")
			b.ReportMetric(float64(t.Len()), "rows")
			b.ReportMetric(float64(t.ovEntries.Load()), "overflow")
		})
	}
}

// rusageThread is Linux's RUSAGE_THREAD: CPU time of the calling thread.
const rusageThread = 1

func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportRates reports ids/s by wall time and ids/cpu-s by CPU time of the
// thread (single-goroutine runs, thread locked) or process (parallel runs).
// On a shared, loaded machine the CPU-time rate is the one that estimates
// what a dedicated core does; the wall rate is what this run got.
func reportRates(b *testing.B, perOp int, start time.Time, cpu0 time.Duration, who int) {
	ids := float64(b.N) * float64(perOp)
	b.ReportMetric(ids/time.Since(start).Seconds(), "ids/s")
	if cpu := cpuTime(who) - cpu0; cpu > 0 {
		b.ReportMetric(ids/cpu.Seconds(), "ids/cpu-s")
	}
}
