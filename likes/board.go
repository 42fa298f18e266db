package likes

// Leaderboards.
//
// A board is a score-ordered index: one key per item with a non-zero
// score, business | day | ^score | item, so the top N is a prefix scan of N
// keys. The all-time board (day dayAll) is scored by the item's likes (its
// counter); a day board by the item's likes made that UTC day and still
// standing (the likes-dayscore family). Every transition moves the item's
// key in the same batch as its count (delete the old score's key, put the
// new one), so a board is exact: an item that drops out is replaced by the
// right next one, and ties are ordered by item id.
//
// Rank is competition ranking ("1224"): 1 + the number of items with a
// strictly greater score, so tied items share a rank, in Top and Rank
// alike. Counting keys before the item would cost O(rank); instead a
// histogram (likes-hist: business | day | ^score | sign → the number of
// times an item reached (sign 0) or left (sign 1) that score, MergeAdd
// operands written with each move) lets Rank sum the counts of the distinct
// scores above the item's: its cost grows with the number of distinct
// scores ever reached above it, not with the number of items
// (BenchmarkRank measures both ends).

import (
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
	it, err := l.fam.board.NewIter(&store.IterOptions{Prefix: appendBoardPrefix(nil, b.id, day)})
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, min(n, 64))
	for len(out) < n && it.Next() {
		score, item := boardKeyScoreItem(it.Key())
		rank := len(out) + 1
		if len(out) > 0 && out[len(out)-1].Likes == score {
			rank = out[len(out)-1].Rank
		}
		out = append(out, Entry{Rank: rank, Item: item, Likes: score})
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	return out, nil
}

// Rank returns item's entry on the all-time board of business; ok is false
// when the item has no likes (it is on no board).
func (l *Likes) Rank(business string, item uint64) (e Entry, ok bool, err error) {
	b, err := l.lookup(business)
	if err != nil || b == nil {
		return Entry{Item: item}, false, err
	}
	var snap *store.Snapshot
	var vals [2]uint64
	// The count and the histogram at one moment: the counter lives in
	// memory, the histogram in Pebble.
	err = l.db.View(func() error {
		got, err := b.c.Get(item, vals[:0])
		if err != nil {
			return err
		}
		e = Entry{Item: item, Likes: got[0]}
		snap, err = l.db.NewSnapshot()
		return err
	})
	if err != nil {
		return Entry{Item: item}, false, err
	}
	defer snap.Close()
	if e.Likes == 0 {
		return e, false, nil
	}
	e.Rank, err = l.rankOf(snap, b.id, dayAll, e.Likes)
	return e, err == nil, err
}

// RankDay returns item's entry on the board of the UTC day containing day.
func (l *Likes) RankDay(business string, day time.Time, item uint64) (e Entry, ok bool, err error) {
	d, err := l.keptDay(day)
	if err != nil {
		return Entry{Item: item}, false, err
	}
	b, err := l.lookup(business)
	if err != nil || b == nil {
		return Entry{Item: item}, false, err
	}
	snap, err := l.db.NewSnapshot()
	if err != nil {
		return Entry{Item: item}, false, err
	}
	defer snap.Close()
	v, found, err := snap.Get(l.fam.dayScore, appendDayScoreKey(nil, b.id, d, item), nil)
	if err != nil || !found {
		return Entry{Item: item}, false, err
	}
	score, err := store.DecodeAdd(v)
	if err != nil || score <= 0 {
		return Entry{Item: item}, false, err
	}
	e = Entry{Item: item, Likes: uint64(score)}
	e.Rank, err = l.rankOf(snap, b.id, d, e.Likes)
	return e, err == nil, err
}

// rankOf returns 1 + the number of items of board (biz, day) scoring more
// than score, from the histogram.
func (l *Likes) rankOf(snap *store.Snapshot, biz, day uint32, score uint64) (int, error) {
	p := appendDayPrefix(nil, prefixHist, biz, day)
	it, err := snap.NewIter(l.fam.hist, &store.IterOptions{Prefix: p, Upper: appendHistScorePrefix(nil, biz, day, score)})
	if err != nil {
		return 0, err
	}
	rank := int64(1)
	for it.Next() {
		v := it.Value()
		if v == nil {
			continue // merged to nothing
		}
		n, err := store.DecodeAdd(v)
		if err != nil {
			it.Close()
			return 0, err
		}
		if _, sign := histKeyScoreSign(it.Key()); sign == histOut {
			n = -n
		}
		rank += n
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	return int(rank), nil
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
	var ids []uint32
	for _, b := range *l.biz.byName.Load() {
		if b.id >= next {
			ids = append(ids, b.id)
		}
	}
	slices.Sort(ids)
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
		b := l.db.NewBatch()
		for _, f := range []*store.Family{l.fam.board, l.fam.dayScore, l.fam.hist} {
			lo := appendDayPrefix(nil, f.Prefix(), id, 0)
			hi := appendDayPrefix(nil, f.Prefix(), id, first)
			if first > 0 {
				if err := f.DeleteRange(b, lo, hi); err != nil {
					b.Close()
					return err
				}
			}
		}
		last := i == len(ids)-1
		err := run.Commit(ctx, b, store.JobProgress{
			Cursor: binary.BigEndian.AppendUint32(nil, id+1), Done: run.Done() + 1, Total: total, Finished: last,
		})
		b.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
