package timeline

import (
	"encoding/binary"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/tallydb/tally/store"
)

// Following a store reopen (store.Options.ReopenOnFailure).
//
// A reopen heals a failed store in place and replaces its state by what
// recovery finds on disk: a write that failed may turn out durable (a WAL
// write that reached the file before its sync failed), and one that was
// visible but never acknowledged may be gone. The timeline's memory
// mirrors the store: the next free ordinal (nextOrd), the pulled authors,
// the pending backfills, the removed posts, the push set and the config.
// A stale nextOrd would give a new user the ordinal a failed-but-durable
// follow gave another one: two users on one ordinal.
//
// The timeline registers a store.ReopenHook: Before takes graphMu's write
// side, so no mutation (they all hold its read side from their first read
// to their commit) runs across the reopen; they fail fast on the failed
// store meanwhile. After reloads every mirror from the recovered store and
// releases it. Page reads take no graphMu and read the old mirrors until
// After swaps them under their own locks.

// followReopen registers the hook; New calls it, Close unregisters.
func (t *Timeline) followReopen() {
	t.unregisterReopen = t.db.OnReopen(store.ReopenHook{Before: t.graphMu.Lock, After: t.afterReopen})
}

// afterReopen reloads the mirrors; Before took graphMu. A reload that
// fails (the store failed again) leaves the mirrors as they were and is
// done again by the next reopen.
func (t *Timeline) afterReopen(bool) {
	defer t.graphMu.Unlock()
	t.reloadState()
}

// reloadState replaces every mirror by what the store holds. The caller
// holds graphMu's write side.
func (t *Timeline) reloadState() error {
	if err := t.loadConfig(Config{}); err != nil {
		return err
	}
	next := uint32(1)
	it, err := t.fam.ords.NewIter(&store.IterOptions{Reverse: true})
	if err != nil {
		return err
	}
	if it.Next() {
		next = binary.BigEndian.Uint32(it.Key()[1:]) + 1
	}
	if err := closeIter(it); err != nil {
		return err
	}
	pulled := []uint64{}
	if err := t.scan(t.fam.pulled, nil, func(k, _ []byte) bool {
		pulled = append(pulled, binary.BigEndian.Uint64(k[1:]))
		return true
	}); err != nil {
		return err
	}
	pending := map[uint32]map[uint64]struct{}{}
	if err := t.scan(t.fam.pending, nil, func(k, _ []byte) bool {
		ord, author := binary.BigEndian.Uint32(k[1:]), binary.BigEndian.Uint64(k[5:])
		if pending[ord] == nil {
			pending[ord] = map[uint64]struct{}{}
		}
		pending[ord][author] = struct{}{}
		return true
	}); err != nil {
		return err
	}
	removed := roaring64.New()
	if err := t.scan(t.fam.removed, nil, func(k, _ []byte) bool {
		removed.Add(binary.BigEndian.Uint64(k[1:]))
		return true
	}); err != nil {
		return err
	}
	push, err := t.activeSet()
	if err != nil {
		return err
	}
	t.allocMu.Lock()
	t.nextOrd = next
	t.allocMu.Unlock()
	t.pulledMu.Lock()
	t.pulled.Store(&pulled)
	t.pulledMu.Unlock()
	t.pending.Lock()
	t.pending.m = pending
	t.pending.Unlock()
	t.removed.Lock()
	t.removed.bm = removed
	t.removed.Unlock()
	t.push.Lock()
	t.push.bm = push
	t.push.Unlock()
	return nil
}
