package store

// Exactly-once apply of replicated log entries.
//
// A replicated store (package replica) applies the committed entries of a
// Raft log in order, each through a function that makes ordinary store
// commits. A crash can come between two commits of one entry, or after an
// entry's commits but before the replica recorded that it applied it; on
// restart the replica applies the entry again. ApplyEntry makes that
// re-apply a no-op for the commits that are already in the store: while it
// runs, the n-th commit of entry index carries the idempotency mark
// Once("raft", index<<16 | n) (once.go), written in the same Pebble batch
// as the commit's effects, and a commit whose mark is not above the stored
// one is skipped as a duplicate.
//
// What must stay true:
//
//  1. ApplyEntry calls are serial (one apply goroutine) and their indexes
//     increase. The mark of a commit is decided under DB.commit from the
//     apply state set by ApplyEntry, so a commit of another goroutine made
//     while an entry applies would be marked as that entry's: in
//     replicated mode every write except a job's progress commit
//     (JobRun.Commit, Batch.progress) and a node-local derived write
//     (Batch.SetLocal: what a read path commits, such as an inbox rebuilt
//     when a user returns) comes through the apply loop. Neither is ever
//     marked: they are local work, not part of the entry, and a read that
//     commits while an entry applies must not take the entry's numbers.
//  2. An entry's commits must be the same sequence on a re-apply as on the
//     first apply: fn decides them from the entry and from the state before
//     the entry, not from what its own earlier commits wrote (a re-apply
//     sees those; a commit that would be skipped anyway is harmless, but a
//     commit that is left out shifts the numbering of the next ones). A
//     host whose entries carry several commands declares them
//     (ApplyCommand, "Commands of an entry" below): then this binds the
//     commits of each command, not those of the whole entry.
//  3. Apply commits do not wait for an fsync, whatever the durability: the
//     Raft log, fsynced before an entry is acknowledged, is what makes the
//     entry durable, and Pebble's WAL is written in order, so a crash that
//     loses an apply commit loses the marks after it too and the entry is
//     applied again on restart. Batch.SetSync forces an fsync on a batch
//     (the replica's log appends).
//  4. AppliedIndex never runs ahead of what is applied: it is the index of
//     the highest mark in the store, and a mark is only written with the
//     effects of its entry's first commit, or by SetAppliedIndex for an
//     entry the caller has applied completely. An entry whose first commit
//     is in the store may not be complete (a crash between its commits), so
//     a replica restarts its apply at AppliedIndex, not after it.
//  5. A schema change (CreateCounter, AddColumn, RegisterFamily) is not a
//     Batch commit and takes no mark; re-applying it reports that the
//     counter or column exists, and changes nothing.

// A run of entries in one commit (Batch.MarkEntries). Most entries are a
// few counter writes that fold into one batch, and one Pebble commit per
// entry is most of a replica's apply cost; a host may instead stage the
// effects of several consecutive entries into one batch and commit it once,
// marked as the complete apply of entries first..last: the batch carries
// the mark Once("raft", last<<16 | applyCompleteN), as if SetAppliedIndex
// (last) were written with it. It is all or nothing: after a crash either
// the whole run is in the store (AppliedIndex is last, and every entry up
// to it is complete, so a re-apply of any of them commits nothing) or none
// of it is (AppliedIndex is below first, and the entries apply again, one
// by one or in runs grouped differently: what a run commits must be exactly
// what its entries would commit one after another). The run's commit is
// refused (ErrValueRange, nothing changed) when any part of an entry of
// the run is in the store already (AppliedIndex >= first: the entry at
// AppliedIndex may be partly applied, and a run cannot skip the part that
// is), while ApplyEntry runs, and when first is not above the last index
// given to ApplyEntry or a run; the caller then applies those entries one
// by one with ApplyEntry. Invariants 1, 3 and 4 hold for runs as for
// entries: runs and ApplyEntry calls are serial with increasing indexes,
// a run's commit waits for no fsync, and its mark is written only with
// the whole run's effects.

// Commands of an entry (DB.ApplyCommand). An entry may carry several
// commands (a client's pipeline), and what a command commits depends on
// the state it finds: a command that changes nothing commits nothing (an
// unlike of an item not liked, a DEL of an absent key). A re-apply sees
// the state its entry's later commands left, so a command may commit
// where it did not (or not where it did), and numbered one after another
// the entry's commits would then shift: a commit that was left out makes
// the next command's commit take its number and be skipped as a
// duplicate (a lost write on that replica), a commit that was added makes
// the next command's commit take a number above the stored one and apply
// twice. Invariant 2 cannot hold for such commands, and holding every
// command to "commit once, whatever the state" would cost a Pebble write
// for each command that changes nothing. So a host that runs commands
// declares each one with ApplyCommand(k), k = 1, 2, ... in the entry's
// order, and every numbered commit records, beside its apply mark, the
// command it belongs to and the number of that command's first commit
// (source applyCmdSource, in the same Pebble batch: cmdMark). Re-applying
// the entry of the stored mark:
//
//   - a command before the recorded one finished before the crash: every
//     commit it makes is a duplicate, however many it makes;
//   - the recorded command is numbered from its recorded first commit, as
//     before the crash: invariant 2 holds within one command;
//   - a command after it never committed: its commits are numbered above
//     the stored mark, whatever the commands before it made this time.
//
// Invariant 2 then binds only the commits of one command, most of which
// make one commit or none (TestApplyCommandNumbering). Without
// ApplyCommand (a host whose entry is one command) the numbering is as
// before; so it is for an entry whose record is missing (written before
// the record existed).

import "fmt"

// applyCmdSource is the source key under which the command of the last
// numbered apply commit is recorded (cmdMark); it is not a source of the
// store's (SourceSeq does not know it). Like ApplySource it is reserved.
const applyCmdSource = "raft.cmd"

// maxApplyCommand is the highest command number ApplyCommand takes.
const maxApplyCommand = 1<<16 - 1

// cmdMark encodes the command record of a numbered commit of entry
// index: its low 32 bits of index, command k, and the number of k's
// first commit (1..applyCompleteN-1).
//
//	bits   meaning
//	-----  --------------------------------------------
//	63-32  entry index mod 2^32 (the record's entry)
//	31-16  command k (1..maxApplyCommand)
//	15-0   number of the command's first commit
func cmdMark(index, k, start uint64) uint64 {
	return (index&0xffffffff)<<32 | k<<16 | start
}

// ApplySource is the Once source of replicated entries' apply marks.
const ApplySource = "raft"

// applyCompleteN is the commit number SetAppliedIndex records: above every
// commit of the entry, so a re-apply of it commits nothing.
const applyCompleteN = 1<<16 - 1

// MaxApplyIndex is the highest entry index ApplyEntry takes (the mark keeps
// 16 bits for the commit number).
const MaxApplyIndex = 1<<48 - 1

// applyState is the entry being applied. Guarded by DB.commit.
type applyState struct {
	active bool
	index  uint64
	n      uint64 // number of the entry's last numbered commit so far
	cmd    uint64 // the command running (ApplyCommand); 0: none declared
	start  uint64 // number of the command's first commit
	skip   bool   // the command finished before a crash: its commits are duplicates
}

// ApplyEntry runs fn as the apply of replicated entry index: every batch
// fn's path commits (every Batch.Commit on this DB that is not a job's
// progress commit) while ApplyEntry runs is made idempotent with
// Once(ApplySource, index<<16 | n) for its n-th commit (n from 1), so after
// a crash a re-applied entry skips the batches it already committed. Calls
// must be serial (one apply goroutine) and index must increase; an index
// not above the last one given is refused with ErrValueRange, as is an
// entry of more than 65534 commits (its later commits fail). fn's error is
// returned as is; the commits fn made before it stay.
func (db *DB) ApplyEntry(index uint64, fn func() error) error {
	if index == 0 || index > MaxApplyIndex {
		return fmt.Errorf("%w: apply index %d (want 1..%d)", ErrValueRange, index, uint64(MaxApplyIndex))
	}
	db.commit.Lock()
	if db.applying.active {
		db.commit.Unlock()
		return fmt.Errorf("%w: ApplyEntry(%d) while entry %d applies", ErrValueRange, index, db.applying.index)
	}
	if index <= db.applying.index {
		db.commit.Unlock()
		return fmt.Errorf("%w: apply index %d not above %d", ErrValueRange, index, db.applying.index)
	}
	db.applying = applyState{active: true, index: index, start: 1}
	db.commit.Unlock()
	defer func() {
		db.commit.Lock()
		db.applying.active = false
		db.commit.Unlock()
	}()
	return fn()
}

// SetLocal declares the batch node-local derived state (a cache a read
// fills, an ordinal a read allocates, an inbox rebuilt on a user's return):
// its commit is never counted as, nor marked as, a commit of the replicated
// entry that happens to be applying (ApplyEntry) while it commits. Such a
// batch must be idempotent and must not change what any read returns, as
// only then may it be made on one replica and not another, or twice on one
// replica when an entry is applied again after a crash. One exception: an
// entry's "ensure" write, made only when the store lacks it and decided
// from the store alone (so every replica's apply makes it alike), is local
// so that a re-apply finding it in place does not make one numbered commit
// fewer (rule 2); the re-apply writes it again exactly when a crash lost
// it. Reset forgets it.
func (b *Batch) SetLocal() { b.local = true }

// entryRun is the run of replicated entries a batch's commit applies
// completely (MarkEntries); last == 0 for none.
type entryRun struct{ first, last uint64 }

// MarkEntries makes the batch's commit the complete apply of the
// replicated entries first..last (see apply.go, "A run of entries in one
// commit"): the commit carries their apply mark, and is refused with
// ErrValueRange, changing nothing, if the run cannot be marked (part of it
// is in the store already, an ApplyEntry is running, or first is not above
// the last index applied through this DB). A batch holding nothing else
// still commits the mark. Invalid indexes fail the batch (its Commit
// returns the error). Reset forgets it.
func (b *Batch) MarkEntries(first, last uint64) error {
	if first == 0 || last < first || last > MaxApplyIndex {
		return b.fail(fmt.Errorf("%w: entry run %d..%d (want 1 <= first <= last <= %d)", ErrValueRange, first, last, uint64(MaxApplyIndex)))
	}
	if b.local || b.progress != nil {
		return b.fail(fmt.Errorf("%w: a node-local batch cannot apply entries", ErrValueRange))
	}
	b.run = entryRun{first: first, last: last}
	return nil
}

// applyMarkLocked returns the apply mark b's commit carries, if an entry is
// applying and b is not a job's progress commit, or b applies a run of
// entries (MarkEntries). It counts the commit in the entry. The caller
// holds DB.commit.
func (db *DB) applyMarkLocked(b *Batch) (onceMark, bool, error) {
	a := &db.applying
	if r := b.run; r.last != 0 {
		switch {
		case a.active:
			return onceMark{}, false, fmt.Errorf("%w: entries %d..%d committed while entry %d applies", ErrValueRange, r.first, r.last, a.index)
		case r.first <= a.index:
			return onceMark{}, false, fmt.Errorf("%w: entries %d..%d not above %d", ErrValueRange, r.first, r.last, a.index)
		case db.sources[ApplySource]>>16 >= r.first:
			return onceMark{}, false, fmt.Errorf("%w: entries %d..%d: entry %d is applied already", ErrValueRange, r.first, r.last, db.sources[ApplySource]>>16)
		}
		return onceMark{source: ApplySource, seq: r.last<<16 | applyCompleteN}, true, nil
	}
	if !a.active || b.progress != nil || b.local {
		return onceMark{}, false, nil
	}
	if a.skip {
		// A duplicate (the stored mark is of this entry, past this
		// command): it takes no number.
		return onceMark{source: ApplySource, seq: a.index<<16 | 1}, true, nil
	}
	if a.n >= applyCompleteN-1 {
		// An entry of that many commits cannot be marked; fail the commit
		// rather than reuse a number (Once would skip it).
		return onceMark{}, false, fmt.Errorf("%w: entry %d commits more than %d batches", ErrValueRange, a.index, applyCompleteN-1)
	}
	a.n++
	return onceMark{source: ApplySource, seq: a.index<<16 | a.n}, true, nil
}

// ApplyCommand declares that the entry ApplyEntry is applying runs its
// k-th command (k from 1, in the entry's order) from now on: see
// "Commands of an entry" in apply.go. Outside ApplyEntry it does nothing.
// k must not go down within an entry, nor exceed 65535 (ErrValueRange).
func (db *DB) ApplyCommand(k uint64) error {
	db.commit.Lock()
	defer db.commit.Unlock()
	a := &db.applying
	if !a.active {
		return nil
	}
	if k == 0 || k > maxApplyCommand || k < a.cmd {
		return fmt.Errorf("%w: command %d of entry %d (after command %d; want 1..%d, not going down)", ErrValueRange, k, a.index, a.cmd, maxApplyCommand)
	}
	a.cmd, a.skip = k, false
	stored := db.sources[ApplySource]
	if n := stored & applyCompleteN; stored>>16 == a.index && n != applyCompleteN {
		// A re-apply of the entry a crash cut: where was it?
		rec := db.applyCmd
		if rec>>32 == a.index&0xffffffff && rec>>16&0xffff != 0 {
			switch recK, recStart := rec>>16&0xffff, rec&0xffff; {
			case k < recK:
				a.skip = true
			case k == recK:
				a.n = recStart - 1
			default:
				a.n = max(a.n, n)
			}
		}
	}
	a.start = a.n + 1
	return nil
}

// cmdMarkLocked returns the command record b's commit carries with its
// apply mark m: for a numbered commit of a declared command. The caller
// holds DB.commit.
func (db *DB) cmdMarkLocked(b *Batch, m *onceMark) (onceMark, bool) {
	a := &db.applying
	if b.run.last != 0 || !a.active || a.cmd == 0 || a.skip || m.source == "" {
		return onceMark{}, false
	}
	return onceMark{source: applyCmdSource, seq: cmdMark(a.index, a.cmd, a.start)}, true
}

// appliedLocked records m, the apply mark of b's commit, once the commit
// is in Pebble; a run's last entry becomes the last index applied. The
// caller holds DB.commit.
func (db *DB) appliedLocked(b *Batch, m *onceMark) {
	db.applyOnceLocked(m)
	if b.run.last > db.applying.index {
		db.applying.index = b.run.last
	}
}

// AppliedIndex returns the highest entry index whose first commit (or an
// explicit SetAppliedIndex) is in the store's state. The entry at that
// index may be only partly applied (see apply.go); every entry before it
// is applied completely.
func (db *DB) AppliedIndex() uint64 {
	db.commit.RLock()
	defer db.commit.RUnlock()
	return db.sources[ApplySource] >> 16
}

// SetAppliedIndex records that every entry up to index is applied, for
// entries that commit nothing (no-ops, configuration changes). It writes
// the mark without an fsync: a crash that loses it loses nothing else after
// it (Pebble's WAL is ordered), and the entries are applied again. An index
// not above AppliedIndex changes nothing. It must not run concurrently
// with ApplyEntry.
func (db *DB) SetAppliedIndex(index uint64) (err error) {
	defer recoverPebble(&err)
	if index == 0 || index > MaxApplyIndex {
		return fmt.Errorf("%w: apply index %d (want 1..%d)", ErrValueRange, index, uint64(MaxApplyIndex))
	}
	if err := db.writable(); err != nil {
		return err
	}
	db.commit.Lock()
	defer db.commit.Unlock()
	m := onceMark{source: ApplySource, seq: index<<16 | applyCompleteN}
	if db.isDuplicateLocked(&m) {
		return nil
	}
	pb := db.pdb().NewBatch()
	defer pb.Close()
	if _, err := m.write(pb, nil); err != nil {
		return err
	}
	if err := db.applyLocked(pb, false); err != nil {
		return fmt.Errorf("tally: set applied index: %w", pebbleErr(err))
	}
	db.applyOnceLocked(&m)
	if index > db.applying.index {
		db.applying.index = index
	}
	db.unsynced.Store(true)
	return nil
}

// SetSync makes the batch's commit wait for an fsync whatever the store's
// durability (a replica's Raft log append before it is acknowledged).
// Reset clears it.
func (b *Batch) SetSync(sync bool) { b.sync = sync }
