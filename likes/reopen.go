package likes

import "fmt"

// Following a store reopen (store.Options.ReopenOnFailure).
//
// A reopen heals a failed store in place and replaces its state by what
// recovery finds on disk: a write that failed may turn out durable, and
// one that was visible but never acknowledged may be gone. What likes keeps
// in memory:
//
//   - the businesses (biz.byName): a business whose record write failed
//     may exist on disk after all, and taking its id again would make two
//     businesses share one. They are reloaded after a reopen
//     (reloadAfterReopen) and before a creation decides an id
//     (syncBusinessesLocked), and the record is written in a batch pinned
//     to the generation the ids were read in (putMetaIn).
//   - user ordinals (ords.next): never reused after a failed commit, so
//     a durable failed write cannot collide with it (only a duplicate's,
//     which surely wrote nothing, are handed back: ordAlloc.unuse).
//   - the ordinal cache (ordcache.go) holds ordinals read from the store or
//     committed, and one visible before a failed fsync may be gone: it is
//     cleared after a reopen.
//   - the stripes' caches hold only what a committed group wrote (a failed
//     commit forgets its items); they are cleared after a reopen anyway.
//   - groups, loads and checks: the hook's Before takes loadMu, so none
//     runs across a reopen; a group's batch is also pinned to the
//     generation it read in (group.gen).
//   - the board histograms (hist.go) count the board keys, and a write
//     that failed may be durable after all: they are rebuilt from the
//     keys (a failed rebuild makes Rank and Above fail until the next
//     reopen succeeds; the store is failed until then anyway).
//   - the likes_received and business counters are store.Counter handles,
//     which follow a reopen by themselves.

// reloadAfterReopen is the After of the store's ReopenHook; its Before
// took loadMu (Release lets it go), so no group, load or check ran across
// the reopen. A reload that fails returns the error: the store fails again
// before loadMu goes, so no group commits from the state of before the
// reopen, and the next reopen reloads (TestReloadErrorFailsStore).
func (l *Likes) reloadAfterReopen(bool) error {
	l.clearCaches()
	l.ords.cache.clear() // a visible ordinal may not have been durable
	err := l.reloadState()
	if err != nil {
		return fmt.Errorf("likes: reload after a store reopen: %w", err)
	}
	return nil
}

// reloadState rebuilds the histograms and reloads the businesses.
func (l *Likes) reloadState() error {
	if f := l.testReload; f != nil {
		if err := f(); err != nil {
			return err
		}
	}
	if err := l.rebuildHistograms(); err != nil {
		l.hists.Store(&histograms{err: err}) // Rank and Above fail until a reopen rebuilds them
		return err
	}
	l.biz.mu.Lock()
	defer l.biz.mu.Unlock()
	_, err := l.syncBusinessesLocked()
	return err
}

// syncBusinessesLocked reloads the businesses if the store was reopened
// since they were loaded, and returns the generation they are current
// with. The caller holds biz.mu.
func (l *Likes) syncBusinessesLocked() (uint64, error) {
	gen := l.db.Generation()
	if gen == l.biz.gen {
		return gen, nil
	}
	if err := l.loadBusinesses(); err != nil {
		return 0, err
	}
	l.biz.gen = gen
	return gen, nil
}

// putMetaIn writes one meta record in its own batch, decided on state of
// store generation gen (store.Batch.SetGeneration); dup reports a commit
// skipped as a re-applied entry's duplicate (it wrote nothing). The batch
// is node-local (store.Batch.SetLocal): its one caller, a business's
// declaration, writes the record only when the store lacks it, so inside
// a replicated entry (LIKE.BUSINESS pipelined with a LIKE) a re-apply
// after a crash that kept the record makes one commit fewer; numbered,
// the record shifted the numbers of the entry's later commits and the
// re-apply skipped the first of them as a duplicate (store/apply.go rule
// 2; TestReappliedBusinessEntry). Unnumbered, it is decided from the
// store alone, the same on every replica's apply, and written again by a
// re-apply whenever a crash lost it.
func (l *Likes) putMetaIn(gen uint64, key, value []byte) (dup bool, err error) {
	b := l.db.NewBatch()
	defer b.Close()
	b.SetGeneration(gen)
	b.SetLocal()
	if err := l.fam.meta.Put(b, key, value); err != nil {
		return false, err
	}
	err = b.Commit()
	return err == nil && b.Duplicate(), err
}
