package bench

import (
	"time"

	"github.com/tallydb/tally/bench/workload"
)

// Durability is what an acknowledged write survives, on one scale for every
// system so that each peer is compared with the tally mode that promises the
// same.
type Durability int

const (
	// DurNone: writes may be lost on a power cut (and, for Redis without
	// AOF, on any crash).
	DurNone Durability = iota
	// DurInterval: writes of about the last second may be lost on a power
	// cut (Redis appendfsync everysec, tally SyncInterval).
	DurInterval
	// DurAlways: an acknowledged write survives a power cut.
	DurAlways
)

// String returns "none", "interval" or "always".
func (d Durability) String() string {
	switch d {
	case DurInterval:
		return "interval"
	case DurAlways:
		return "always"
	}
	return "none"
}

// Memory is what a target holds in memory for its data, three ways. They
// differ, and only Heap and RSS compare like with like across systems (see
// the package doc).
type Memory struct {
	// Own is the system's own accounting of its data structures: tally's
	// Stats (tables, deltas, descriptors, the decoded block cache, and its
	// Pebble's block cache, memtables and file cache), Pebble's Metrics
	// (block cache, memtables, file cache), Redis's used_memory.
	Own int64
	// Heap is the growth of live allocations since just before the target
	// was opened: for the in-process targets the Go heap after a full
	// collection plus the memory Pebble allocates with C's allocator in
	// cgo builds (block cache, memtables); for Redis, used_memory (its
	// allocator's count of live bytes).
	Heap int64
	// RSS is the growth of the resident set since just before the target
	// was opened: this process's for the in-process targets (after
	// returning freed pages to the OS), redis-server's used_memory_rss.
	RSS int64
}

// Target is one system under test, opened on its own directory. The runner
// calls Load once, then NewClient once per client goroutine, then Memory,
// DiskBytes, Reopen and Close, in that order. Clients are closed before
// Reopen.
type Target interface {
	// Load stores every non-zero item of w (zero items are not stored but are
	// read as zeros) and returns once they are readable and as durable as the
	// target's mode makes writes.
	Load(w *workload.Workload) error
	// NewClient returns a client for one goroutine.
	NewClient() (Client, error)
	// Memory returns the memory the target uses for its data.
	Memory() (Memory, error)
	// DiskBytes returns the bytes the target's files take.
	DiskBytes() (int64, error)
	// Reopen stops the target and starts it again on the same files, and
	// returns the time until it answers reads with all data loaded.
	Reopen() (time.Duration, error)
	// Close stops the target. Its directory is removed by the runner.
	Close() error
}

// Client issues one goroutine's operations. It need not be safe for
// concurrent use.
type Client interface {
	// MultiGet appends the counts of every column of every id, row-major
	// (Columns values per id, 0 for anything absent), to dst[:0].
	MultiGet(ids []uint64, dst []uint64) ([]uint64, error)
	// Incr adds delta to column col of id.
	Incr(id uint64, col int, delta int64) error
	// Close releases the client.
	Close() error
}

// Spec names a target configuration and opens it.
type Spec struct {
	// Name is the system and data layout, e.g. "pebble-merge".
	Name string
	// Durability is the promise the configuration makes.
	Durability Durability
	// Mode describes the configuration's durability in the system's own
	// terms, e.g. "Sync per write" or "appendfsync everysec".
	Mode string
	// Tally marks tally's own configurations; every other spec is a peer
	// compared with the tally spec of the same Durability.
	Tally bool
	// Served marks tally reached over RESP through a "tally serve" process
	// (the tally-serve targets); the table compares peers with it in a
	// second, like-for-like table.
	Served bool
	// Skip, when not empty, says why this target is not run.
	Skip string
	// Open opens the target on an empty directory for workload w.
	Open func(dir string, w *workload.Workload) (Target, error)
}

// Label returns "name (mode)".
func (s Spec) Label() string { return s.Name + " (" + s.Mode + ")" }
