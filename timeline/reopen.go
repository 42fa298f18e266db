package timeline

import (
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
// After swaps them under their own locks. The store takes writes again
// before After runs (other packages' Afters run first), so whatever
// compares the mirrors with the store (Check) or decides a write from
// them takes graphMu too.

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

// reloadState replaces every mirror by what the store holds, the
// configuration included. The caller holds graphMu's write side.
func (t *Timeline) reloadState() error {
	if err := t.loadConfig(Config{}); err != nil {
		return err
	}
	return t.loadState()
}
