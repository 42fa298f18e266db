package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Durability says when an acknowledged write has reached stable storage. It
// follows Redis's appendfsync settings.
type Durability int

const (
	// SyncAlways acknowledges a write only after the WAL holding it is
	// fsynced. Concurrent writers share fsyncs (group commit). Nothing
	// acknowledged is lost on a process kill or a power cut.
	SyncAlways Durability = iota
	// SyncInterval acknowledges a write once it is in Pebble's WAL buffer and
	// fsyncs the WAL every Options.SyncInterval. A process kill loses at most
	// the writes of the last few milliseconds still in the WAL buffer (not yet
	// handed to the OS); a power cut loses at most the writes of the last
	// SyncInterval (plus that buffer). Like Redis "appendfsync everysec".
	SyncInterval
	// NoSync never fsyncs explicitly; the OS writes the WAL back when it
	// chooses (and Pebble syncs at memtable flushes and checkpoints). A
	// process kill loses what was still in the WAL buffer; a power cut can
	// lose everything since the last checkpoint or flush. Like Redis
	// "appendfsync no".
	NoSync
)

// String returns the name used by the CLI and reports.
func (d Durability) String() string {
	switch d {
	case SyncAlways:
		return "sync"
	case SyncInterval:
		return "interval"
	case NoSync:
		return "nosync"
	}
	return fmt.Sprintf("Durability(%d)", int(d))
}

// ParseDurability parses "sync", "interval" or "nosync".
func ParseDurability(s string) (Durability, error) {
	switch s {
	case "sync", "always":
		return SyncAlways, nil
	case "interval", "everysec":
		return SyncInterval, nil
	case "nosync", "no":
		return NoSync, nil
	}
	return 0, fmt.Errorf("%w: durability %q (want sync, interval or nosync)", ErrInvalidOption, s)
}

// Options configure a DB. A nil *Options means all defaults; Open copies the
// options and fills the zero fields with defaults.
type Options struct {
	// Durability of acknowledged writes. The default is SyncAlways.
	Durability Durability
	// SyncInterval is the fsync period under SyncInterval durability. The
	// default is 1s.
	SyncInterval time.Duration
	// CheckpointInterval is the longest time between two checkpoints while
	// there are new log records. Negative disables time-based checkpoints.
	// The default is 5m.
	CheckpointInterval time.Duration
	// CheckpointLogBytes starts a checkpoint once this many bytes of log
	// records were written since the last one. Negative disables size-based
	// checkpoints. The default is 256 MiB.
	CheckpointLogBytes int64
	// CheckpointChunkRows is the largest number of rows in one checkpoint
	// chunk. The default is 65536.
	CheckpointChunkRows int
	// MemoryBudget is the memory, in bytes, the store's caches and write
	// buffers may take beside the hot tables (which hold the data and are
	// counted in Stats): Pebble's memtables (Pebble keeps up to two of
	// MemTableSize), Pebble's block cache (CacheSize) and the decoded cold
	// block cache (BlockCacheSize). Each of those three left 0 gets its
	// share: an eighth of the budget per memtable (a quarter for two), a
	// quarter for Pebble's cache, half for the cold block cache, which
	// serves cold reads without a decode. One given explicitly is used as
	// given; the budget does not bound it. At least 8 MiB. The default is
	// 64 MiB (8 MiB memtables, 16 MiB Pebble cache, 32 MiB cold block
	// cache). In tallybench's full tally run (bench/RESULTS.md, issue 19)
	// an even split (16 MiB cold block cache) cost read p99 37 µs against 9;
	// this split matches the old fixed 32+64+64 MiB's read figures.
	MemoryBudget int64
	// CacheSize is the size in bytes of Pebble's block cache. Pebble
	// reserves its memtables from its cache, so the store creates the
	// cache with room for two memtables besides CacheSize (blocks keep
	// CacheSize while two memtables are held). The default is
	// MemoryBudget/4.
	CacheSize int64
	// MemTableSize is Pebble's memtable size in bytes. The default is
	// MemoryBudget/8.
	MemTableSize uint64
	// BlockCacheSize bounds the memory of decompressed cold blocks, in
	// bytes. The default is MemoryBudget/2.
	BlockCacheSize int64
	// ColdBlockSize is the decoded size a cold block grows to before the
	// next one starts. The default is cold.DefaultTargetBlockSize.
	ColdBlockSize int
	// ColdZstdLevel is the zstd level of cold blocks. The default is
	// cold.DefaultZstdLevel.
	ColdZstdLevel int
	// CompactionBytesPerSec bounds the bytes per second background jobs
	// (aging, delta merges) write, so foreground reads keep their latency.
	// Negative means unlimited. The default is 64 MiB/s.
	CompactionBytesPerSec int64
	// CompactionInterval is how often the scheduler looks for ranges to age
	// and deltas to merge. Negative disables the scheduler (Compact still
	// works). The default is 1m.
	CompactionInterval time.Duration
	// DeltaMergeRows is the number of rows a cold range's delta reaches
	// before the scheduler merges it into new blocks. The default is 65536.
	DeltaMergeRows int
	// Now returns the current time for age policies. The default is
	// time.Now.
	Now func() time.Time
	// FS is the filesystem every file of the store goes through: Pebble's
	// and tally's own (checkpoints, the lock, the markers). The type is
	// Pebble's vfs.FS, exposed on purpose rather than wrapped: the store
	// is Pebble underneath, and Pebble's filesystems are what tests and
	// hosts use to simulate crashes (vfs.NewCrashableMem, CrashClone),
	// inject faults (vfs/errorfs: a full disk, EIO on sync) and run in
	// memory (vfs.NewMem); a tally interface would only be a copy of it.
	// The default is vfs.Default (the OS filesystem).
	FS vfs.FS
	// JobWorkers is the number of background goroutines that run queued
	// jobs of registered kinds (see RegisterJobHandler). Negative disables
	// them (RunJobs and WaitJob still run jobs). The default is 1.
	JobWorkers int
	// JobBytesPerSec paces queued jobs: each chunk waits for its batch's
	// bytes. Negative means unlimited. The default is 256 MiB/s.
	JobBytesPerSec int64
	// Families declares the key families of the packages above store (see
	// FamilySpec). A family with a custom merge operator must be declared
	// here rather than with RegisterFamily, so Pebble can merge its values
	// from the moment it opens. The default is none.
	Families []FamilySpec
	// DisableBackground turns off the background goroutines (interval sync,
	// scheduled checkpoints); tests use it to control every step. The
	// default is false.
	DisableBackground bool
	// ReadOnly opens an existing store without writing anything to its
	// directory: Pebble replays its WAL into memory without flushing it,
	// recovery cleans nothing up, no background work runs, Close writes no
	// checkpoint, and every write returns ErrReadOnly. It is how a store is
	// read on a full disk (a writable Open needs space to recover) and what
	// the CLI's read commands use. The default is false.
	ReadOnly bool
	// ReopenOnFailure makes the store heal itself after a failure that
	// would otherwise need a reopen (a failed WAL write or sync, an error
	// Pebble calls fatal): once a probe shows the disk takes writes again
	// (free space and a small write+sync+remove, at most once a second), the
	// DB reopens its Pebble instance in place and recovers its memory from
	// disk, and writes succeed again through the same *DB. Readers never
	// see an error on the way; writes before the reopen get ErrFailed, as
	// without it. State above the store that was derived from writes the
	// reopen discards must follow Generation or OnReopen (reopen.go; the
	// packages of this module do). It runs whether or not
	// DisableBackground is set, and not on a ReadOnly store. The default is
	// false: a host that caches durable state of its own opts in once those
	// caches follow a reopen; tally serve turns it on.
	ReopenOnFailure bool

	// testHookBlockWrite, if set, runs before each cold block is written;
	// an error fails the job (fault injection in tests).
	testHookBlockWrite func() error
	// testHookStep, if set, runs at the named steps of seals, merges,
	// loads and checkpoints (crash tests take a CrashClone there).
	testHookStep func(step string)
	// testOpenGrace, if set, replaces openGrace (tests of a stuck Open).
	testOpenGrace time.Duration
	// testProbeInterval, if set, replaces probeInterval and maxBackoff.
	testProbeInterval time.Duration
}

// Bounds of Options.MemoryBudget.
const (
	DefaultMemoryBudget = 64 << 20
	MinMemoryBudget     = 8 << 20
)

// EnsureDefaults returns a copy of o (which may be nil) with every zero field
// set to its default.
func (o *Options) EnsureDefaults() *Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.SyncInterval == 0 {
		c.SyncInterval = time.Second
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = 5 * time.Minute
	}
	if c.CheckpointLogBytes == 0 {
		c.CheckpointLogBytes = 256 << 20
	}
	if c.CheckpointChunkRows == 0 {
		c.CheckpointChunkRows = 65536
	}
	if c.MemoryBudget == 0 {
		c.MemoryBudget = DefaultMemoryBudget
	}
	if c.MemoryBudget >= MinMemoryBudget {
		// Below the minimum Validate refuses the options: no share.
		if c.CacheSize == 0 {
			c.CacheSize = c.MemoryBudget / 4
		}
		if c.MemTableSize == 0 {
			c.MemTableSize = uint64(c.MemoryBudget / 8)
		}
		if c.BlockCacheSize == 0 {
			c.BlockCacheSize = c.MemoryBudget / 2
		}
	}
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.CompactionBytesPerSec == 0 {
		c.CompactionBytesPerSec = 64 << 20
	}
	if c.CompactionInterval == 0 {
		c.CompactionInterval = time.Minute
	}
	if c.DeltaMergeRows == 0 {
		c.DeltaMergeRows = 65536
	}
	if c.JobWorkers == 0 {
		c.JobWorkers = 1
	}
	if c.JobBytesPerSec == 0 {
		c.JobBytesPerSec = 256 << 20
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &c
}

// Validate reports every problem with the options in one error wrapping
// ErrInvalidOption.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
	}
	if o.Durability < SyncAlways || o.Durability > NoSync {
		bad("durability %d", int(o.Durability))
	}
	if o.SyncInterval < 0 {
		bad("negative SyncInterval %v", o.SyncInterval)
	}
	if o.CheckpointChunkRows < 0 {
		bad("negative CheckpointChunkRows %d", o.CheckpointChunkRows)
	}
	if o.BlockCacheSize < 0 {
		bad("negative BlockCacheSize %d", o.BlockCacheSize)
	}
	if o.ColdBlockSize < 0 || o.ColdBlockSize > 16<<20 {
		bad("ColdBlockSize %d (want 0..16 MiB)", o.ColdBlockSize)
	}
	if o.ColdZstdLevel < 0 || o.ColdZstdLevel > 22 {
		bad("ColdZstdLevel %d (want 0..22)", o.ColdZstdLevel)
	}
	if o.DeltaMergeRows < 0 {
		bad("negative DeltaMergeRows %d", o.DeltaMergeRows)
	}
	if o.JobWorkers > 64 {
		bad("JobWorkers %d (want at most 64)", o.JobWorkers)
	}
	if o.CacheSize < 0 {
		bad("negative CacheSize %d", o.CacheSize)
	}
	if o.MemoryBudget < MinMemoryBudget {
		bad("MemoryBudget %d (want at least %d, 8 MiB)", o.MemoryBudget, MinMemoryBudget)
	}
	return errors.Join(errs...)
}
