// Package procmem measures the process's memory for benchmarks that report
// memory per row or per counter as measured growth, next to a store's own
// accounting.
//
// Measure collects garbage first (twice: objects held only by a sync.Pool
// survive one collection in the pool's victim cache) and returns freed
// pages to the OS, so that two measurements around a load differ by what
// the load keeps. Heap is the Go heap's live bytes; RSS the resident set
// (Linux /proc/self/status; 0 elsewhere). Memory a C library allocates
// (Pebble's block cache and memtables when built with cgo, see Cgo) is in
// RSS, not in Heap; memory C's allocator freed may stay resident, so an RSS
// growth measured after an earlier cgo user closed can read low.
package procmem

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// Mem is one measurement.
type Mem struct {
	Heap int64 // live Go heap bytes after a full collection
	RSS  int64 // resident set bytes after returning freed pages
}

// Measure collects garbage and measures.
func Measure() Mem {
	runtime.GC()
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return Mem{Heap: int64(ms.HeapAlloc), RSS: RSS()}
}

// Sub returns m − base.
func (m Mem) Sub(base Mem) Mem { return Mem{Heap: m.Heap - base.Heap, RSS: m.RSS - base.RSS} }

// RSS returns the process's resident set size in bytes (Linux; 0
// elsewhere).
func RSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
