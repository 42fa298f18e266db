package store

import (
	"sort"
	"time"

	"github.com/tallydb/tally/internal/limits"
)

// Aging policy: which ranges are due to leave memory and which cold deltas
// are due for a merge. The mechanics of a seal or merge (freeze, write,
// switch, publish) are in age.go; this file only decides.

// pendingJobs lists ranges due for aging under their counter's policy and
// cold ranges whose delta holds at least mergeRows rows.
func (db *DB) pendingJobs(now time.Time, mergeRows int) []pendingJob {
	var jobs []pendingJob
	cat := db.cat.Load()
	for id := uint32(0); id < cat.nextID; id++ {
		cs := cat.byID[id]
		if cs == nil {
			continue
		}
		set := cs.ranges.Load()
		m := set.m
		rids := make([]uint64, 0, len(m))
		for rid := range m {
			rids = append(rids, rid)
		}
		sort.Slice(rids, func(a, b int) bool { return rids[a] > rids[b] }) // newest first
		for i, rid := range rids {
			rs := m[rid]
			switch {
			case rs.cold == nil && rs.delta == nil:
				if cs.shouldAge(rid, set.bits, i, now) {
					jobs = append(jobs, pendingJob{jobSeal, cs, rid})
				}
			case rs.cold != nil && rs.frozen == nil && rs.delta != nil && rs.delta.Len() >= mergeRows:
				jobs = append(jobs, pendingJob{jobMerge, cs, rid})
			}
		}
	}
	return jobs
}

// shouldAge applies the age policy to range rid of width bits, the
// newestRank-th newest range of the counter (0 = newest).
func (cs *counterState) shouldAge(rid uint64, bits uint, newestRank int, now time.Time) bool {
	a := cs.age
	switch a.Kind {
	case KeepNewest:
		return newestRank >= a.HotRanges
	case AgeByTime:
		// The newest id the range can hold, and the time embedded in it.
		last := ^uint64(0)
		if rid < ^uint64(0)>>bits {
			last = (rid+1)<<bits - 1
		}
		ms := int64(last >> a.IDTimeShift)
		if ms < 0 || ms > limits.MaxIDTimeMs {
			return false // beyond any real clock: not a time-ordered id
		}
		// NB: IDEpochMs ≤ limits.MaxIDTimeMs too (validated), so the sum
		// cannot overflow.
		return now.Sub(time.UnixMilli(a.IDEpochMs+ms)) > a.MaxAge
	}
	return false
}
