package timeline

import (
	"fmt"

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
// store meanwhile. After reloads every mirror from the recovered store,
// and Release lets graphMu go. Page reads take no graphMu and read the old
// mirrors until After swaps them under their own locks. The store takes
// writes again before After runs (other packages' Afters run first), so
// whatever compares the mirrors with the store (Check) or decides a write
// from them (mutations, the jobs) takes graphMu too.
//
// A reload that fails (a read error) leaves the mirrors as they were:
// After returns the error, and the store fails again before Release, so no
// mutation or job commits from the stale mirrors; the healer's next reopen
// reloads them (TestReloadErrorFailsStore).

// followReopen registers the hook; New calls it, Close unregisters.
func (t *Timeline) followReopen() {
	t.unregisterReopen = t.db.OnReopen(store.ReopenHook{Before: t.graphMu.Lock, After: t.afterReopen, Release: t.graphMu.Unlock})
}

// afterReopen reloads the mirrors; Before took graphMu.
func (t *Timeline) afterReopen(bool) error {
	var err error
	if f := t.testReload; f != nil {
		err = f()
	}
	if err == nil {
		err = t.reloadState()
	}
	if err != nil {
		return fmt.Errorf("timeline: reload after a store reopen: %w", err)
	}
	return nil
}

// reloadState replaces every mirror by what the store holds, the
// configuration included. The caller holds graphMu's write side.
func (t *Timeline) reloadState() error {
	if err := t.loadConfig(Config{}); err != nil {
		return err
	}
	return t.loadState()
}
