package likes

// Per-shard parts of the reads a sharded cluster gathers (issue 23).
//
// In a sharded cluster an item's likes (its sets, counts and board
// entries) live on the shard of its slot, so a business's board, a user's
// likes list and an owner's received total are spread over the shards.
// Each shard answers its part with the calls of this file (and Top, and
// Received); merge.go merges the parts exactly.

import (
	"fmt"
	"time"

	"github.com/tallydb/tally/store"
)

// Above returns, for each score of scores, the number of items of the
// all-time board of business whose likes are strictly more than it: an
// item's global rank is 1 + the sum over shards of Above(its likes). A
// business that does not exist yet has no items (zeros). At most
// MaxStates scores; the result is in dst[:0] (grown if needed).
func (l *Likes) Above(business string, scores []uint64, dst []uint64) ([]uint64, error) {
	return l.above(business, dayAll, scores, dst)
}

// AboveDay is Above on the board of the UTC day containing day (kept
// days only: ErrDayNotKept otherwise).
func (l *Likes) AboveDay(business string, day time.Time, scores []uint64, dst []uint64) ([]uint64, error) {
	d, err := l.keptDay(day)
	if err != nil {
		return dst[:0], err
	}
	return l.above(business, d, scores, dst)
}

func (l *Likes) above(business string, day uint32, scores []uint64, dst []uint64) ([]uint64, error) {
	dst = dst[:0]
	if len(scores) > MaxStates {
		return dst, fmt.Errorf("%w: %d scores (limit %d)", ErrLimit, len(scores), MaxStates)
	}
	b, err := l.lookup(business)
	if err != nil {
		return dst, err
	}
	for range scores {
		dst = append(dst, 0)
	}
	if b == nil {
		return dst, nil
	}
	err = l.db.View(func() error {
		for i, s := range scores {
			n, err := l.countAbove(b, day, s)
			if err != nil {
				return err
			}
			dst[i] = uint64(max(n, 0))
		}
		return nil
	})
	if err != nil {
		return dst[:0], err
	}
	return dst, nil
}

// countAbove is the number of items of board (b, day) scoring strictly
// more than score: those of the buckets above score's, from the
// histogram, and those of its bucket with a higher exact score. It runs
// inside l.db.View.
func (l *Likes) countAbove(b *business, day uint32, score uint64) (int64, error) {
	bucket := bucketOf(score)
	n, err := l.histAbove(b.id, day, bucket)
	if err != nil {
		return 0, err
	}
	if _, w := bucketRange(bucket); w == 1 {
		return n, nil
	}
	var items []uint64
	it, err := l.fam.board.NewIter(&store.IterOptions{Prefix: appendBoardBucketPrefix(nil, b.id, day, bucket)})
	if err != nil {
		return 0, err
	}
	for it.Next() {
		_, other := boardKeyBucketItem(it.Key())
		items = append(items, other)
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	got, err := l.scores(b, day, items)
	if err != nil {
		return 0, err
	}
	for _, s := range got {
		if s > score {
			n++
		}
	}
	return n, nil
}

// Scores returns the scores of items on the all-time board of business
// (their likes; 0 for items with none, or kept on another shard), in
// dst[:0] (grown if needed). At most MaxStates items.
func (l *Likes) Scores(business string, items []uint64, dst []uint64) ([]uint64, error) {
	return l.boardScores(business, dayAll, items, dst)
}

// ScoresDay is Scores on the board of the UTC day containing day: the
// items' likes made that day and still standing.
func (l *Likes) ScoresDay(business string, day time.Time, items []uint64, dst []uint64) ([]uint64, error) {
	d, err := l.keptDay(day)
	if err != nil {
		return dst[:0], err
	}
	return l.boardScores(business, d, items, dst)
}

func (l *Likes) boardScores(business string, day uint32, items []uint64, dst []uint64) ([]uint64, error) {
	dst = dst[:0]
	if len(items) > MaxStates {
		return dst, fmt.Errorf("%w: %d items (limit %d)", ErrLimit, len(items), MaxStates)
	}
	b, err := l.lookup(business)
	if err != nil {
		return dst, err
	}
	if b == nil {
		for range items {
			dst = append(dst, 0)
		}
		return dst, nil
	}
	var got []uint64
	err = l.db.View(func() error {
		var err error
		got, err = l.scores(b, day, items)
		return err
	})
	if err != nil {
		return dst, err
	}
	return append(dst, got...), nil
}

// Position is a place in a user's likes list, newest first: the like
// time (Unix milliseconds) and item of the last entry already returned.
type Position struct {
	Ms   int64
	Item uint64
}

// UserLikesBefore returns at most limit (1..MaxPage) of user's likes in
// business, newest first, that come after pos in that order (strictly
// older, or as old with a smaller item id), or from the newest when pos
// is nil. Unlike UserLikes it takes and returns positions rather than
// signed cursors: it is the per-shard part of a gathered read, whose
// merge decides where each shard's next page starts. The page's Times
// are filled; Next is "" and more reports whether entries follow.
func (l *Likes) UserLikesBefore(business string, user uint64, pos *Position, limit int) (pg Page, more bool, err error) {
	if limit < 1 || limit > MaxPage {
		return Page{}, false, fmt.Errorf("%w: page of %d (want 1..%d)", ErrLimit, limit, MaxPage)
	}
	if pos != nil && (pos.Ms < 0 || pos.Ms > maxTimeMs) {
		return Page{}, false, fmt.Errorf("%w: position time %d", ErrBadCursor, pos.Ms)
	}
	b, err := l.lookup(business)
	if err != nil || b == nil {
		return Page{}, false, err
	}
	o := &store.IterOptions{Prefix: appendUserPrefix(nil, b.id, user), Reverse: true}
	if pos != nil {
		o.Upper = appendUserKey(nil, b.id, user, pos.Ms, pos.Item)
	}
	it, err := l.fam.user.NewIter(o)
	if err != nil {
		return Page{}, false, err
	}
	for it.Next() {
		if len(pg.IDs) == limit {
			more = true
			break
		}
		ms, item := userKeyTimeItem(it.Key())
		pg.IDs = append(pg.IDs, item)
		pg.Times = append(pg.Times, ms)
	}
	if err := it.Close(); err != nil {
		return Page{}, false, err
	}
	return pg, more, nil
}
