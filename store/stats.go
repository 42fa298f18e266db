package store

import (
	"context"
	"fmt"
	"sort"

	"github.com/tallydb/tally/compaction"
	"github.com/tallydb/tally/hot"
)

// Stats is a snapshot of the store's state for tools and monitoring.
type Stats struct {
	Durability    Durability
	Counters      []CounterStats
	LastSeq       uint64 // sequence of the last committed log record
	CheckpointSeq uint64 // sequence included by the newest checkpoint
	LogRecords    int64  // log records since the newest checkpoint
	LogBytes      int64  // log bytes since the newest checkpoint
	DiskBytes     uint64 // bytes of all files of the Pebble instance
	// TableBytes is the bytes of Pebble's live data files (sstables and
	// blob files): DiskBytes without the WAL, the manifest and obsolete
	// files awaiting deletion. Data still in a memtable is not in them, and
	// deleted or overwritten keys stay until a compaction drops them: Flush
	// or CompactDisk first for a settled figure.
	TableBytes uint64
	// PebbleMemBytes is the memory Pebble holds: its block cache, memtables
	// and file cache.
	PebbleMemBytes int64
	// PebbleManualBytes is the part of PebbleMemBytes Pebble allocates
	// itself (block cache and memtables): with C's allocator, outside the
	// Go heap, in cgo builds.
	PebbleManualBytes int64
	Recovery          RecoveryStats
	// Memory is what the options give the caches and write buffers.
	Memory     MemoryStats
	BlockCache BlockCacheStats
	// Pebble holds figures of Pebble's own work.
	Pebble       PebbleStats
	Jobs         []compaction.Progress // background jobs running now (seals, merges, queued jobs)
	JobsFinished int64                 // seals and merges finished since Open
	Queue        QueueStats            // the durable job queue
	Families     []FamilyStats         // families declared or found on disk, by prefix
	Sources      int                   // idempotent-write sources remembered (once.go)
	// Errors are the most recent distinct background errors since Open:
	// tally's and Pebble's (failed flushes and compactions, corruption
	// found by reads). ErrorsTotal counts every one, also those not kept.
	Errors      []string
	ErrorsTotal int64
	// WriteError says why writes are refused now (disk full, a failed
	// WAL, a read-only store), or is empty.
	WriteError string
	// Reopens counts the reopens in place since Open
	// (Options.ReopenOnFailure): each healed a failure without a restart.
	Reopens int64
}

// PebbleStats are figures of the Pebble instance under the store.
type PebbleStats struct {
	Flushes, Compactions int64  // since Open
	ReadAmp              int    // sublevels a point read may visit
	L0Files              int64  // files in level 0
	CompactionDebt       uint64 // estimated bytes compactions still owe
	WALBytes             uint64 // live WAL bytes
}

// MemoryStats are the sizes Options.MemoryBudget (or explicit options)
// gave the store's caches and write buffers.
type MemoryStats struct {
	Budget          int64 // Options.MemoryBudget
	MemTableSize    int64 // one of Pebble's (up to two) memtables
	PebbleCacheSize int64 // Pebble's block cache
	BlockCacheSize  int64 // decoded cold blocks
}

// QueueStats describes the durable job queue.
type QueueStats struct {
	Pending, Running int
	Finished         int64 // jobs finished since Open
}

// FamilyStats describes a key family.
type FamilyStats struct {
	Name     string
	Prefix   byte
	Merge    string // merge operator, "" if none
	Declared bool   // declared by this process (else found on disk only)
}

// BlockCacheStats describes the decompressed cold block cache.
type BlockCacheStats struct {
	Hits, Misses uint64
	Bytes        int64
	Entries      int
}

// HitRate returns hits / (hits + misses), or 0 before any lookup.
func (b BlockCacheStats) HitRate() float64 {
	if b.Hits+b.Misses == 0 {
		return 0
	}
	return float64(b.Hits) / float64(b.Hits+b.Misses)
}

// CounterStats describes one counter.
type CounterStats struct {
	Name       string
	Owner      string // the owning package, "" for the host's counters
	Columns    []string
	HotRanges  int
	ColdRanges int // cold and sealing ranges
	HotRows    int // rows in hot tables
	ColdRows   int // rows in cold blocks
	DeltaRows  int // rows in cold deltas (written since the seal)
	// MemBytes is the store's own accounting of the memory it holds for
	// the counter: hot tables (slot arrays and segment headers by the size
	// the allocator gave them, overflow maps estimated), deltas, cold
	// descriptors (encoded, and decoded: block index and presence set) and
	// each range's own state (rangeStateBytes). The process's heap grows
	// by more (allocator size classes, garbage not yet collected, the
	// decoded block cache, Pebble): the benchmarks report both.
	MemBytes int64
	// ColdPayloadBytes is the encoded size of the counter's cold blocks
	// and descriptors: what tally hands Pebble, not what Pebble's files
	// take (Pebble adds keys, index and filter blocks, and compresses
	// again). File bytes are only known store-wide: Stats.TableBytes.
	ColdPayloadBytes int64
	// RangeBits is the counter's current range width: CounterInfo.RangeBits,
	// or wider once AutoRangeBits widened the ranges.
	RangeBits int
	// TargetBytesPerRow is what a hot row should cost at the current width
	// and columns (hot.ExpectedBytesPerRow), without per-range costs.
	TargetBytesPerRow float64
	// Warning, if not empty, says the hot tier costs more than twice
	// TargetBytesPerRow per row, and by at least warnExcessBytes in total:
	// ranges too narrow for the ids (a fixed RangeBits), or segments left
	// at their peak after mass deletes. It names the remedy.
	Warning string
	Ranges  []RangeStats
}

// warnExcessBytes is the least excess over twice the target that
// CounterStats.Warning reports: a new counter's first ranges cost more per
// row than the target and are no problem.
const warnExcessBytes = 4 << 20

// rangeStateBytes is what a range costs besides its tables and cold
// descriptor: its rangeState (40 bytes, a 48-byte size class) and its entry
// in the counter's range map (16-byte key and pointer plus a control byte,
// at the swiss table's 7/8 maximum load, rounded up).
const rangeStateBytes = 48 + 24

// memoryWarning returns CounterStats.Warning for c.
func memoryWarning(c *CounterStats, autoBits bool) string {
	var mem int64
	for _, r := range c.Ranges {
		if r.Tier == "hot" {
			mem += r.MemBytes
		}
	}
	limit := 2 * c.TargetBytesPerRow * float64(c.HotRows)
	if float64(mem) <= limit+warnExcessBytes {
		return ""
	}
	msg := fmt.Sprintf("hot rows cost %.1f B each, more than twice the %.1f B target (%d rows in %d ranges of %d bits)",
		c.BytesPerHotRow(), c.TargetBytesPerRow, c.HotRows, c.HotRanges, c.RangeBits)
	if !autoBits {
		msg += "; the range width is fixed: recreate the counter without --range-bits (or wider) and reload it"
	}
	return msg
}

// RangeStats describes one range of a counter.
type RangeStats struct {
	ID        uint64
	Tier      string // "hot", "sealing" or "cold"
	Rows      int    // hot rows, or cold block rows
	DeltaRows int
	MemBytes  int64
	// PayloadBytes is the encoded size of a cold range's blocks and
	// descriptor (0 for hot ranges).
	PayloadBytes int64
}

// Rows returns all stored rows: hot, cold and delta (a delta row may shadow
// a cold one, so this can count a row twice).
func (c CounterStats) Rows() int { return c.HotRows + c.ColdRows + c.DeltaRows }

// BytesPerHotRow returns hot-table memory bytes per hot row (0 when empty).
func (c CounterStats) BytesPerHotRow() float64 {
	var mem int64
	for _, r := range c.Ranges {
		if r.Tier == "hot" {
			mem += r.MemBytes
		}
	}
	if c.HotRows == 0 {
		return 0
	}
	return float64(mem) / float64(c.HotRows)
}

// PayloadBytesPerColdRow returns the encoded cold payload per cold row
// (ColdPayloadBytes; 0 when none).
func (c CounterStats) PayloadBytesPerColdRow() float64 {
	if c.ColdRows == 0 {
		return 0
	}
	return float64(c.ColdPayloadBytes) / float64(c.ColdRows)
}

// BytesPerRow returns memory bytes per stored row over all tiers (0 when
// empty).
func (c CounterStats) BytesPerRow() float64 {
	if c.Rows() == 0 {
		return 0
	}
	return float64(c.MemBytes) / float64(c.Rows())
}

// Stats returns a snapshot of the store's state.
func (db *DB) Stats() Stats {
	db.swap.RLock() // one instance and its state (reopen.go)
	defer db.swap.RUnlock()
	s := Stats{Durability: db.opts.Durability, Recovery: db.recovery, Reopens: db.heal.reopens.Load(), Memory: MemoryStats{
		Budget: db.opts.MemoryBudget, MemTableSize: int64(db.opts.MemTableSize),
		PebbleCacheSize: db.opts.CacheSize, BlockCacheSize: db.opts.BlockCacheSize,
	}}
	db.commit.Lock()
	s.LastSeq = db.commit.lastSeq
	db.commit.Unlock()
	db.ckpt.Lock()
	s.CheckpointSeq = db.ckpt.seq
	db.ckpt.Unlock()
	s.LogRecords, s.LogBytes = db.logRecords.Load(), db.logBytes.Load()
	db.pebbleMu.RLock()
	if !db.pebbleClosed {
		m := db.pdb().Metrics()
		s.DiskBytes = m.DiskSpaceUsage()
		s.TableBytes = m.Table.Local.LiveSize + m.BlobFiles.LiveSize
		s.PebbleManualBytes = m.BlockCache.Size + int64(m.MemTable.Size)
		s.PebbleMemBytes = s.PebbleManualBytes + m.FileCache.Size
		s.Pebble = PebbleStats{
			Flushes: m.Flush.Count, Compactions: m.Compact.Count, ReadAmp: m.ReadAmp(),
			L0Files: m.Levels[0].TablesCount, CompactionDebt: m.Compact.EstimatedDebt,
			WALBytes: m.WAL.PhysicalSize,
		}
	}
	db.pebbleMu.RUnlock()
	q := &db.queue
	q.mu.Lock()
	for _, st := range q.jobs {
		switch {
		case st.replaced:
		case st.leased:
			s.Queue.Running++
		default:
			s.Queue.Pending++
		}
	}
	s.Queue.Finished = q.finished
	q.mu.Unlock()
	r := &db.families
	r.mu.Lock()
	for p := 0; p < 256; p++ {
		d, rec := r.declared[p], r.persist[p]
		switch {
		case d != nil:
			fs := FamilyStats{Name: d.spec.Name, Prefix: byte(p), Declared: true}
			if d.spec.Merge != nil {
				fs.Merge = d.spec.Merge.Name
			}
			s.Families = append(s.Families, fs)
		case rec != nil:
			s.Families = append(s.Families, FamilyStats{Name: rec.name, Prefix: byte(p), Merge: rec.mergeName})
		}
	}
	r.mu.Unlock()
	s.Sources = db.NumSources()
	for _, ci := range db.Counters() {
		cs := db.cat.Load().byID[ci.ID]
		st := CounterStats{Name: ci.Name, Owner: ci.Owner}
		for _, c := range ci.Columns {
			st.Columns = append(st.Columns, c.Name)
		}
		for _, rs := range cs.ranges.Load().m {
			r := RangeStats{ID: rs.id, Tier: rs.tier(), MemBytes: rangeStateBytes}
			for _, t := range []*hot.Table{rs.delta, rs.frozen} {
				if t != nil {
					r.DeltaRows += t.Len()
					r.MemBytes += int64(t.MemBytes())
				}
			}
			if rs.cold != nil {
				r.Rows = int(rs.cold.Desc().Rows())
				r.PayloadBytes = rs.coldPayloadBytes()
				// The encoded descriptor is kept (merges re-encode from
				// it) beside its decoded form (block index, presence set).
				r.MemBytes += int64(len(rs.cold.v.desc)) + int64(rs.cold.Desc().MemBytes())
				st.ColdRanges++
				st.ColdRows += r.Rows
			} else {
				r.Rows = rs.hot.Len()
				r.MemBytes += int64(rs.hot.MemBytes())
				if rs.delta != nil {
					st.ColdRanges++ // sealing
				} else {
					st.HotRanges++
				}
				st.HotRows += r.Rows
			}
			st.DeltaRows += r.DeltaRows
			st.MemBytes += r.MemBytes
			st.ColdPayloadBytes += r.PayloadBytes
			st.Ranges = append(st.Ranges, r)
		}
		sort.Slice(st.Ranges, func(i, j int) bool { return st.Ranges[i].ID < st.Ranges[j].ID })
		st.RangeBits = int(cs.rangeBits())
		st.TargetBytesPerRow = hot.ExpectedBytesPerRow(cs.rangeBits(), cs.cols.Load().widths)
		st.Warning = memoryWarning(&st, cs.autoBits)
		s.Counters = append(s.Counters, st)
	}
	cst := db.blockCache.Stats()
	s.BlockCache = BlockCacheStats{Hits: cst.Hits, Misses: cst.Misses, Bytes: cst.Bytes, Entries: cst.Entries}
	s.Jobs = db.Jobs()
	s.JobsFinished = db.jobs.Finished()
	s.Errors, s.ErrorsTotal = db.errs.list()
	switch {
	case db.opts.ReadOnly:
		s.WriteError = ErrReadOnly.Error()
	case db.env().refusal() != nil:
		s.WriteError = db.env().refusal().Error()
	}
	return s
}

// CompactDisk flushes Pebble's memtables and compacts its whole key space,
// so that its files hold only live data (deleted log records, superseded
// checkpoint chunks and replaced blocks gone) and disk figures are settled.
// It rewrites every file: for benchmarks and offline maintenance.
func (db *DB) CompactDisk(ctx context.Context) error {
	db.pebbleMu.RLock()
	defer db.pebbleMu.RUnlock()
	if db.pebbleClosed {
		return ErrClosed
	}
	if err := db.pdb().Flush(); err != nil {
		return fmt.Errorf("tally: flush: %w", err)
	}
	if err := db.pdb().Compact(ctx, []byte{0}, []byte{0xff}, true); err != nil {
		return fmt.Errorf("tally: compact: %w", err)
	}
	return nil
}

// Flush writes Pebble's memtables to sstables and waits, so that the disk
// figures of Stats count everything the store holds. It is for tools and benchmarks; the store never needs it.
func (db *DB) Flush() error {
	db.pebbleMu.RLock()
	defer db.pebbleMu.RUnlock()
	if db.pebbleClosed {
		return ErrClosed
	}
	if err := db.pdb().Flush(); err != nil {
		return fmt.Errorf("tally: flush: %w", err)
	}
	return nil
}
