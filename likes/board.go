package likes

// Leaderboards.
//
// A board is a score-ordered index: one key per item with a non-zero
// score, business | day | ^bucket | item, where the bucket is a log-linear
// function of the score (bucketOf: exact below 128, then 64 buckets per
// power of two). The top N is a prefix scan: whole buckets in descending
// order, each sorted by the items' exact scores (a bucket of width 1, every
// bucket below 128, is already in order), until N items are out. The
// all-time board (day dayAll) is scored by the item's likes (its counter);
// a day board by the item's likes made that UTC day and still standing (the
// likes-dayscore family). A transition moves the item's key in the same
// batch as its count, but only when the score leaves its bucket, so the
// board is exact (an item that drops out is replaced by the right next one,
// ties are ordered by item id) while a popular item's likes rarely touch
// it: a key per score would put a delete and a put into every like and
// leave a trail of tombstones the top-N scan walks over until compaction
// (measured: 1.8 ms for a top 10 behind an item with 5,000 likes).
//
// Rank is competition ranking ("1224"): 1 + the number of items with a
// strictly greater score, so tied items share a rank, in Top and Rank
// alike. Counting keys before the item would cost O(rank); instead a
// histogram of each board (the number of its keys per bucket, kept in
// memory: hist.go) gives the items of every bucket above the item's, and
// the item's own bucket is read whole (its members' exact scores): the
// cost grows with the items of its bucket, not with the number of items
// (BenchmarkRank measures both ends).

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/tallydb/tally/store"
)

// Entry is one item of a leaderboard.
type Entry struct {
	Rank  int // 1-based competition rank: tied items share a rank
	Item  uint64
	Likes uint64
}

// Top returns the n items with the most likes of business, best first
// (ties by item id), 1 ≤ n ≤ MaxTop. Items without likes are on no board.
func (l *Likes) Top(business string, n int) ([]Entry, error) {
	return l.top(business, dayAll, n)
}

// TopDay returns the top n items by likes made on the UTC day containing
// day (and not undone since). Days before the kept window
// (Options.BoardDays, today included) are ErrDayNotKept.
func (l *Likes) TopDay(business string, day time.Time, n int) ([]Entry, error) {
	d, err := l.keptDay(day)
	if err != nil {
		return nil, err
	}
	return l.top(business, d, n)
}

// keptDay returns day's number if its board is kept.
func (l *Likes) keptDay(day time.Time) (uint32, error) {
	ms := day.UnixMilli()
	if ms < 0 || ms > maxTimeMs {
		return 0, fmt.Errorf("%w: %s", ErrDayNotKept, day.UTC().Format(time.DateOnly))
	}
	d := dayOf(ms)
	first, ok := l.firstKeptDay(l.today())
	if !ok {
		return 0, fmt.Errorf("%w: daily boards are off (board days 0)", ErrDayNotKept)
	}
	if d < first {
		return 0, fmt.Errorf("%w: %s is older than the %d days kept", ErrDayNotKept, day.UTC().Format(time.DateOnly), l.cfg.boardDays)
	}
	return d, nil
}

func (l *Likes) top(bizName string, day uint32, n int) ([]Entry, error) {
	if n < 1 || n > MaxTop {
		return nil, fmt.Errorf("%w: top %d (want 1..%d)", ErrLimit, n, MaxTop)
	}
	b, err := l.lookup(bizName)
	if err != nil || b == nil {
		return nil, err
	}
	var out []Entry
	// The board keys and the exact scores at one moment: counts live in
	// memory, keys and day scores in Pebble.
	err = l.db.View(func() error {
		it, err := l.fam.board.NewIter(&store.IterOptions{Prefix: appendBoardPrefix(nil, b.id, day)})
		if err != nil {
			return err
		}
		// Whole buckets until n items are in (a bucket of width 1 is in
		// order already, so it may stop inside one).
		var wide []int // positions in out of items of wide buckets
		var cur uint16
		for it.Next() {
			bucket, item := boardKeyBucketItem(it.Key())
			if bucket != cur && len(out) >= n {
				break
			}
			cur = bucket
			lo, w := bucketRange(bucket)
			if w == 1 && len(out) >= n {
				break
			}
			if w > 1 {
				wide = append(wide, len(out))
			}
			out = append(out, Entry{Item: item, Likes: lo})
		}
		if err := it.Close(); err != nil {
			return err
		}
		if len(wide) == 0 {
			return nil
		}
		items := make([]uint64, len(wide))
		for i, p := range wide {
			items[i] = out[p].Item
		}
		scores, err := l.scores(b, day, items)
		if err != nil {
			return err
		}
		// NB: a score outside its bucket is possible only while a bulk
		// load runs (its counts lag its board keys until it returns,
		// load.go): the item is then ranked by its count so far. Check
		// finds real damage.
		for i, p := range wide {
			out[p].Likes = scores[i]
		}
		// Buckets are in descending order and hold disjoint score
		// ranges, so sorting everything by score orders within buckets.
		slices.SortStableFunc(out, func(a, c Entry) int { return cmp.Compare(c.Likes, a.Likes) })
		return nil
	})
	if err != nil {
		return nil, err
	}
	out = out[:min(n, len(out))]
	for i := range out {
		out[i].Rank = i + 1
		if i > 0 && out[i].Likes == out[i-1].Likes {
			out[i].Rank = out[i-1].Rank
		}
	}
	return out, nil
}

// scores returns the exact scores of items on a board: their likes for
// the all-time board, their day scores for a day board.
func (l *Likes) scores(b *business, day uint32, items []uint64) ([]uint64, error) {
	out := make([]uint64, len(items))
	if day == dayAll {
		for start := 0; start < len(items); start += MaxStates {
			part := items[start:min(start+MaxStates, len(items))]
			vals, err := b.c.MultiGet(part, nil)
			if err != nil {
				return nil, err
			}
			for i := range part {
				out[start+i] = vals[2*i]
			}
		}
		return out, nil
	}
	var key, val []byte
	for i, item := range items {
		key = appendDayScoreKey(key[:0], b.id, day, item)
		n, err := l.readAdd(l.fam.dayScore, key, &val)
		if err != nil {
			return nil, err
		}
		out[i] = uint64(max(n, 0))
	}
	return out, nil
}

// Rank returns item's entry on the all-time board of business; ok is false
// when the item has no likes (it is on no board).
func (l *Likes) Rank(business string, item uint64) (Entry, bool, error) {
	return l.rank(business, dayAll, item)
}

// RankDay returns item's entry on the board of the UTC day containing day.
func (l *Likes) RankDay(business string, day time.Time, item uint64) (Entry, bool, error) {
	d, err := l.keptDay(day)
	if err != nil {
		return Entry{Item: item}, false, err
	}
	return l.rank(business, d, item)
}

// rank is 1 + the number of items scoring more than item: those of the
// buckets above its own, from the histogram, and those of its bucket with
// a higher exact score. The View makes the item's score, the board keys
// and the histogram of one moment (hist.go).
func (l *Likes) rank(business string, day uint32, item uint64) (e Entry, ok bool, err error) {
	e = Entry{Item: item}
	b, err := l.lookup(business)
	if err != nil || b == nil {
		return e, false, err
	}
	err = l.db.View(func() error {
		s, err := l.scores(b, day, []uint64{item})
		if err != nil || s[0] == 0 {
			return err
		}
		e.Likes, ok = s[0], true
		above, err := l.countAbove(b, day, e.Likes)
		if err != nil {
			return err
		}
		rank := 1 + above
		e.Rank = int(rank)
		return nil
	})
	if err != nil || !ok {
		return Entry{Item: item}, false, err
	}
	return e, true, nil
}

// histAbove returns the number of items of board (biz, day) in buckets
// above bucket, from the in-memory histogram (hist.go). It runs inside
// l.db.View, which sees the histogram and the board keys at one moment.
func (l *Likes) histAbove(biz, day uint32, bucket uint16) (int64, error) {
	return l.hist().above(boardID{biz, day}, bucket)
}

// Day boards are deleted by a queued job (store's durable job queue, paced
// by Options.JobBytesPerSec): a group commit that is the first of a new day
// enqueues it in its own batch, and New enqueues one too. Jobs of the one
// key coalesce, so a day enqueues at most one pending prune.
const (
	pruneJobKind = "likes-prune"
	pruneJobKey  = "likes-prune"
)

// enqueuePrune adds a prune job for today to b.
func (l *Likes) enqueuePrune(b *store.Batch, today uint32) error {
	first, ok := l.firstKeptDay(today)
	if !ok {
		first = dayAll // boards off: delete every day board
	}
	return b.Enqueue(pruneJobKind, []byte(pruneJobKey), binary.BigEndian.AppendUint32(nil, first), 0)
}

// notePrune records that a prune for today is queued.
func (l *Likes) notePrune(today uint32) {
	for {
		cur := l.pruneDay.Load()
		if today <= cur || l.pruneDay.CompareAndSwap(cur, today) {
			return
		}
	}
}

// schedulePrune queues a prune for today (New calls it).
func (l *Likes) schedulePrune() error {
	today := l.today()
	b := l.db.NewBatch()
	defer b.Close()
	if err := l.enqueuePrune(b, today); err != nil {
		return err
	}
	if err := b.Commit(); err != nil {
		return err
	}
	l.notePrune(today)
	return nil
}

// runPrune deletes every day board older than the payload's first kept
// day, one business per chunk (the cursor is the next business id).
func (l *Likes) runPrune(ctx context.Context, run *store.JobRun) error {
	p := run.Payload()
	if len(p) != 4 {
		return fmt.Errorf("%w: likes prune payload of %d bytes", store.ErrCorrupt, len(p))
	}
	first := binary.BigEndian.Uint32(p)
	var next uint32
	if c := run.Cursor(); len(c) == 4 {
		next = binary.BigEndian.Uint32(c)
	}
	ids := l.pruneIDs(next)
	if len(ids) == 0 {
		b := l.db.NewBatch()
		defer b.Close()
		return run.Commit(ctx, b, store.JobProgress{Done: run.Done(), Total: run.Done(), Finished: true})
	}
	total := run.Done() + int64(len(ids))
	for i, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := l.pruneBusiness(ctx, run, id, first, total, i == len(ids)-1); err != nil {
			return err
		}
	}
	return nil
}

// pruneIDs returns the ids of the businesses from id next on, in order.
// It reads them under loadMu's read side, as each business's prune runs:
// a store reopen reloads the businesses in its ReopenHook.After, after the
// store takes writes again, and a run in between (a caller's RunJobs or
// WaitJob) listed the businesses of before the reopen (TestPruneDuringReopen).
func (l *Likes) pruneIDs(next uint32) []uint32 {
	l.loadMu.RLock()
	defer l.loadMu.RUnlock()
	var ids []uint32
	for _, b := range *l.biz.byName.Load() {
		if b.id >= next {
			ids = append(ids, b.id)
		}
	}
	slices.Sort(ids)
	return ids
}

// pruneBusiness deletes the day boards of business id before day first in
// one job commit, and drops their histograms when it applies. It holds
// loadMu shared, as a group does, so Check and a reopen's rebuild see no
// prune half done.
func (l *Likes) pruneBusiness(ctx context.Context, run *store.JobRun, id, first uint32, total int64, last bool) error {
	l.loadMu.RLock()
	defer l.loadMu.RUnlock()
	b := l.db.NewBatch()
	defer b.Close()
	if first > 0 {
		for _, f := range []*store.Family{l.fam.board, l.fam.dayScore} {
			lo := appendDayPrefix(nil, f.Prefix(), id, 0)
			hi := appendDayPrefix(nil, f.Prefix(), id, first)
			if err := f.DeleteRange(b, lo, hi); err != nil {
				return err
			}
		}
		b.OnApply(func() { l.hist().dropDays(id, first) })
	}
	return run.Commit(ctx, b, store.JobProgress{
		Cursor: binary.BigEndian.AppendUint32(nil, id+1), Done: run.Done() + 1, Total: total, Finished: last,
	})
}

// DescribeJob says what a queued job of likes does (store.JobDescriber):
// the prune of day boards that left the kept window.
func (l *Likes) DescribeJob(kind string, _ []byte) (string, bool) {
	if kind != pruneJobKind {
		return "", false
	}
	return fmt.Sprintf("prune of day boards older than %d days", l.cfg.boardDays), true
}
