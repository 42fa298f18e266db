package likes

// Board histograms, in memory.
//
// Rank counts the items of the buckets above an item's own from a
// histogram of each board: the number of board keys per (business, day,
// bucket). Until issue 18 it was a Pebble family (likes-hist, 0x48) of
// MergeAdd operands, two written with every board move (left the old
// bucket, entered the new) for the all-time board and again for the day
// board: up to 4 of a like's ~12 Pebble keys below a score of 128 (where
// buckets are exact and every like moves), each ~1 µs of memtable insert
// plus its share of flushes and compactions (bench/RESULTS.md, "Histograms
// in memory").
//
// The histogram is derived: it is only the count of the board keys, which
// are durable in the same batches. So it lives in memory: New (and a store
// reopen in place) builds it with one scan of the board family, and every
// batch that writes or deletes board keys changes it.
//
// What must stay true: the histogram equals the board keys' counts by
// bucket as any View sees them (Rank and Above read both inside one
// db.View), and after any crash (it is rebuilt from the keys). Check
// compares it with the board keys.
//
// How it is kept of one moment with the keys: a batch that moves board
// keys registers its histogram changes with store.Batch.OnApply, which runs
// them under the store's commit lock right after Pebble accepted the batch,
// where the counter images are applied too (store/commit.go, rule 8). A
// View holds that lock shared, so it sees a batch's board keys, counts and
// histogram changes all or none; a batch Pebble refused or a redelivery
// (store apply.go) changes nothing. The other way considered, a likes
// RWMutex that writers hold shared from before their commit until after
// their histogram update while Rank holds it exclusively around its View,
// makes every Rank wait for the fsyncs of the commits in flight (writers
// hold it across SyncWait under SyncAlways) and makes new writers queue
// behind that Rank: a Rank under load would cost a fsync and pause the
// writes. The hook costs a few additions inside the commit critical
// section and no lock at all.
//
// Writers of board keys, each changing the histogram through OnApply:
// transitions (a stripe leader's group, emitItem → moveScore), a bulk load
// (its groups are the same code), the day-board prune (runPrune drops the
// days it deletes) and a replica's apply of replicated commands (the same
// groups, committed inside store.DB.ApplyEntry). A snapshot install opens a
// new store and a new Likes (New rebuilds); a reopen in place rebuilds in
// reloadAfterReopen. Every mutation happens while its writer holds loadMu
// (shared; Load and the rebuild after a reopen exclusively), so Check,
// which holds loadMu exclusively, reads a histogram no one changes.
//
// Layout: buckets go up to 3,775 (bucketOf of 2^64-1): 59 groups of
// bucketSub (64) buckets. A board keeps the count of each group and, for
// the groups it has items in, the count of each bucket (512 bytes a group,
// allocated on first use): "items above bucket b" is at most 58 group sums
// and 63 bucket counts, a move is two group and two bucket additions. A
// board costs ~1 KiB, plus 512 bytes for each group with items: ~2 KiB for
// a board whose items all score below 128 (two groups), as a day's mostly
// do.

import (
	"fmt"

	"github.com/tallydb/tally/store"
)

// histGroups is the number of groups of bucketSub buckets: bucketOf of the
// largest score, 3,775, is in the last one (TestHistogramLayout).
const histGroups = 59

// boardID names one board: a business and a day (dayAll for all time).
type boardID struct{ biz, day uint32 }

// boardHist is the histogram of one board.
type boardHist struct {
	groups  [histGroups]int64             // items per group of buckets
	buckets [histGroups]*[bucketSub]int64 // items per bucket; nil: none in the group yet
	items   int64                         // items on the board
}

// add adds d items to bucket b.
func (h *boardHist) add(b uint16, d int64) {
	g := int(b) / bucketSub
	if h.buckets[g] == nil {
		h.buckets[g] = new([bucketSub]int64)
	}
	h.buckets[g][int(b)%bucketSub] += d
	h.groups[g] += d
	h.items += d
}

// above returns the number of items in buckets above b.
func (h *boardHist) above(b uint16) int64 {
	g := int(b) / bucketSub
	var n int64
	for _, c := range h.groups[g+1:] {
		n += c
	}
	if bs := h.buckets[g]; bs != nil {
		for _, c := range bs[int(b)%bucketSub+1:] {
			n += c
		}
	}
	return n
}

// count returns the number of items in bucket b.
func (h *boardHist) count(b uint16) int64 {
	if bs := h.buckets[int(b)/bucketSub]; bs != nil {
		return bs[int(b)%bucketSub]
	}
	return 0
}

// histograms holds the histogram of every board with keys. Its map and
// boards change under the store's commit lock (OnApply) or before it is
// published (New, a rebuild), and are read inside db.View or by Check
// (which holds loadMu: see the file comment).
type histograms struct {
	boards map[boardID]*boardHist
	// err is set when a rebuild after a reopen failed: Rank and Above
	// fail with it until the next reopen rebuilds.
	err error
}

func newHistograms() *histograms { return &histograms{boards: map[boardID]*boardHist{}} }

// add adds d items to bucket b of board id.
func (hs *histograms) add(id boardID, b uint16, d int64) {
	if hs.err != nil {
		return
	}
	h := hs.boards[id]
	if h == nil {
		h = &boardHist{}
		hs.boards[id] = h
	}
	h.add(b, d)
	if h.items == 0 {
		delete(hs.boards, id) // an emptied board (an unlike of its last item)
	}
}

// above returns the number of items of board id in buckets above b.
func (hs *histograms) above(id boardID, b uint16) (int64, error) {
	if hs.err != nil {
		return 0, fmt.Errorf("likes: board histograms: %w", hs.err)
	}
	if h := hs.boards[id]; h != nil {
		return h.above(b), nil
	}
	return 0, nil
}

// dropDays forgets the day boards of biz before day first (the prune
// deleted their keys).
func (hs *histograms) dropDays(biz, first uint32) {
	if hs.err != nil {
		return
	}
	for id := range hs.boards {
		if id.biz == biz && id.day < first {
			delete(hs.boards, id)
		}
	}
}

// histMove is one board move of a group: an item left bucket from (if
// hasFrom) and entered bucket to (if hasTo) of board id.
type histMove struct {
	id             boardID
	from, to       uint16
	hasFrom, hasTo bool
}

// applyMoves applies moves to the histograms; it is the OnApply of a
// group's batch (store's commit lock held).
func (hs *histograms) applyMoves(moves []histMove) {
	for _, m := range moves {
		if m.hasFrom {
			hs.add(m.id, m.from, -1)
		}
		if m.hasTo {
			hs.add(m.id, m.to, +1)
		}
	}
}

// buildHistograms counts the board keys of the store (New, and after a
// reopen): one scan of the board family, a key per item and board.
func (l *Likes) buildHistograms() (*histograms, error) {
	hs := newHistograms()
	it, err := l.fam.board.NewIter(nil)
	if err != nil {
		return nil, err
	}
	var id boardID
	var h *boardHist
	for it.Next() {
		k := it.Key()
		if len(k) != 1+boardKeyLen {
			it.Close()
			return nil, errBoardKey(k)
		}
		if cur := (boardID{u32at(k, 1), u32at(k, 5)}); h == nil || cur != id {
			id = cur
			if h = hs.boards[id]; h == nil {
				h = &boardHist{}
				hs.boards[id] = h
			}
		}
		bucket, _ := boardKeyBucketItem(k)
		if int(bucket) >= histGroups*bucketSub {
			it.Close()
			return nil, errBoardKey(k)
		}
		h.add(bucket, 1)
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	return hs, nil
}

// hist returns the current histograms (replaced whole by a rebuild).
func (l *Likes) hist() *histograms { return l.hists.Load() }

// rebuildHistograms replaces the histograms by a count of the board keys.
// The caller keeps every writer of board keys out (loadMu held, or New).
func (l *Likes) rebuildHistograms() error {
	hs, err := l.buildHistograms()
	if err != nil {
		return err
	}
	l.hists.Store(hs)
	return nil
}

// legacyHistRange is the whole likes-hist family: the Pebble histogram of
// stores written before issue 18's change, deleted by the first writable
// New (loadConfig) and ignored by a read-only one.
func legacyHistRange() (lo, hi []byte) { return []byte{prefixHist}, []byte{prefixHist + 1} }

// errBoardKey is the error of a board key of the wrong shape (the family's
// key length is checked on write; a bucket past the last is damage).
func errBoardKey(k []byte) error {
	return fmt.Errorf("%w: likes board key %x", store.ErrCorrupt, k)
}
