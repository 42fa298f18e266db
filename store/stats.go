package store

import (
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
	// PebbleMemBytes is the memory Pebble holds: its block cache, memtables
	// and file cache.
	PebbleMemBytes int64
	Recovery       RecoveryStats
	BlockCache     BlockCacheStats
	Jobs           []compaction.Progress // background jobs running now
	JobsFinished   int64
	// Errors are the most recent distinct background errors since Open:
	// tally's and Pebble's (failed flushes and compactions, corruption
	// found by reads). ErrorsTotal counts every one, also those not kept.
	Errors      []string
	ErrorsTotal int64
	// WriteError says why writes are refused now (disk full, a failed
	// WAL, a read-only store), or is empty.
	WriteError string
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
	Columns    []string
	HotRanges  int
	ColdRanges int   // cold and sealing ranges
	HotRows    int   // rows in hot tables
	ColdRows   int   // rows in cold blocks
	DeltaRows  int   // rows in cold deltas (written since the seal)
	MemBytes   int64 // memory of hot tables, deltas and cold descriptors
	DiskBytes  int64 // encoded cold blocks and descriptors
	Ranges     []RangeStats
}

// RangeStats describes one range of a counter.
type RangeStats struct {
	ID        uint64
	Tier      string // "hot", "sealing" or "cold"
	Rows      int    // hot rows, or cold block rows
	DeltaRows int
	MemBytes  int64
	DiskBytes int64
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

// BytesPerColdRow returns on-disk bytes per cold row (0 when none).
func (c CounterStats) BytesPerColdRow() float64 {
	if c.ColdRows == 0 {
		return 0
	}
	return float64(c.DiskBytes) / float64(c.ColdRows)
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
	s := Stats{Durability: db.opts.Durability, Recovery: db.recovery}
	db.commit.Lock()
	s.LastSeq = db.commit.lastSeq
	db.commit.Unlock()
	db.ckpt.Lock()
	s.CheckpointSeq = db.ckpt.seq
	db.ckpt.Unlock()
	s.LogRecords, s.LogBytes = db.logRecords.Load(), db.logBytes.Load()
	db.pebbleMu.RLock()
	if !db.pebbleClosed {
		m := db.pdb.Metrics()
		s.DiskBytes = m.DiskSpaceUsage()
		s.PebbleMemBytes = m.BlockCache.Size + int64(m.MemTable.Size) + m.FileCache.Size
	}
	db.pebbleMu.RUnlock()
	for _, ci := range db.Counters() {
		cs := db.cat.Load().byID[ci.ID]
		st := CounterStats{Name: ci.Name}
		for _, c := range ci.Columns {
			st.Columns = append(st.Columns, c.Name)
		}
		for _, rs := range cs.ranges.Load().m {
			r := RangeStats{ID: rs.id, Tier: rs.tier()}
			for _, t := range []*hot.Table{rs.delta, rs.frozen} {
				if t != nil {
					r.DeltaRows += t.Len()
					r.MemBytes += int64(t.MemBytes())
				}
			}
			if rs.cold != nil {
				r.Rows = int(rs.cold.Desc().Rows())
				r.DiskBytes = rs.coldDiskBytes()
				r.MemBytes += int64(len(rs.coldV.desc))
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
			st.DiskBytes += r.DiskBytes
			st.Ranges = append(st.Ranges, r)
		}
		sort.Slice(st.Ranges, func(i, j int) bool { return st.Ranges[i].ID < st.Ranges[j].ID })
		s.Counters = append(s.Counters, st)
	}
	cst := db.blockCache.Stats()
	s.BlockCache = BlockCacheStats{Hits: cst.Hits, Misses: cst.Misses, Bytes: cst.Bytes, Entries: cst.Entries}
	s.Jobs = db.jobs.Running()
	s.JobsFinished = db.jobs.Finished()
	s.Errors, s.ErrorsTotal = db.errs.list()
	switch {
	case db.opts.ReadOnly:
		s.WriteError = ErrReadOnly.Error()
	case db.env.refusal() != nil:
		s.WriteError = db.env.refusal().Error()
	}
	return s
}
