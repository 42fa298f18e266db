package store

import "sort"

// Stats is a snapshot of the store's state for tools and monitoring.
type Stats struct {
	Durability    Durability
	Counters      []CounterStats
	LastSeq       uint64 // sequence of the last committed log record
	CheckpointSeq uint64 // sequence included by the newest checkpoint
	LogRecords    int64  // log records since the newest checkpoint
	LogBytes      int64  // log bytes since the newest checkpoint
	DiskBytes     uint64 // bytes of all files of the Pebble instance
	Recovery      RecoveryStats
	Errors        []string // background errors since Open
}

// CounterStats describes one counter.
type CounterStats struct {
	Name      string
	Columns   []string
	HotRanges int
	Rows      int   // stored (non-zero) rows
	MemBytes  int64 // memory held by its hot tables
	Ranges    []RangeStats
}

// RangeStats describes one range of a counter.
type RangeStats struct {
	ID       uint64
	Tier     string // "hot"
	Rows     int
	MemBytes int64
}

// BytesPerRow returns memory bytes per stored row (0 when empty).
func (c CounterStats) BytesPerRow() float64 {
	if c.Rows == 0 {
		return 0
	}
	return float64(c.MemBytes) / float64(c.Rows)
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
	if !db.closed.Load() {
		s.DiskBytes = db.pdb.Metrics().DiskSpaceUsage()
	}
	for _, ci := range db.Counters() {
		cs := db.cat.Load().byID[ci.ID]
		st := CounterStats{Name: ci.Name}
		for _, c := range ci.Columns {
			st.Columns = append(st.Columns, c.Name)
		}
		for _, rs := range cs.ranges.Load().m {
			r := RangeStats{ID: rs.id, Tier: "hot", Rows: rs.hot.Len(), MemBytes: int64(rs.hot.MemBytes())}
			st.HotRanges++
			st.Rows += r.Rows
			st.MemBytes += r.MemBytes
			st.Ranges = append(st.Ranges, r)
		}
		sort.Slice(st.Ranges, func(i, j int) bool { return st.Ranges[i].ID < st.Ranges[j].ID })
		s.Counters = append(s.Counters, st)
	}
	db.bg.errMu.Lock()
	for _, e := range db.bg.errors {
		s.Errors = append(s.Errors, e.Error())
	}
	db.bg.errMu.Unlock()
	return s
}
