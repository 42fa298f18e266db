package store

// The commit path.
//
// Ordering rules (what must stay true):
//
//  1. All writers go through DB.commit (a mutex). Under it a writer computes
//     the after-image of every row its batch touches from the current
//     in-memory state, assigns the next log sequence, encodes one mutation
//     record and hands the Pebble batch (record + any family writes) to
//     Pebble's commit pipeline without waiting for the fsync
//     (ApplyNoSyncWait). Because this happens under the mutex, log sequence
//     order, WAL order and in-memory apply order are the same order.
//     Before taking the mutex the writer reads its rows once (prefetch) so
//     their cache misses are not taken while every other writer waits;
//     what that read returned is never used.
//  2. Only after Pebble accepted the batch are the after-images applied to
//     the hot tables (still under DB.commit). If Pebble refuses the batch,
//     nothing in memory changed: a failed commit changes nothing.
//  3. The writer then releases DB.commit and, under SyncAlways, waits for the
//     WAL fsync (SyncWait) before acknowledging. Concurrent writers queue
//     their batches while one fsync is in flight, so their fsyncs are shared
//     (group commit) by Pebble's WAL writer: 8.4 connection batches per
//     fdatasync under `tally serve` with 50 connections, 16.7 with 200
//     (bench/RESULTS.md, issue 18, 2026-11-24). A leader/follower queue
//     that committed concurrent batches as one Pebble batch was built and
//     measured no faster, and worse at p99 in process (followers park),
//     so it is not kept; TestConcurrentCommitsSharedRows stays to guard
//     any such change.
//  4. A write is therefore visible to readers slightly before it is durable
//     (as in Pebble). If the fsync fails, the DB enters the failed state.
//  5. Schema changes (CreateCounter, AddColumn) also hold DB.commit and are
//     always written with a synced Pebble write before they are published,
//     so no record can reference a column whose schema is not durable.
//  6. Family writes (Put, Delete, DeleteRange, Merge), job enqueues and job
//     progress (queue.go) and the source mark of an idempotent batch
//     (once.go) ride in the same Pebble batch as the log record, so a batch
//     is all or nothing through a crash. A batch of family writes only
//     writes no log record: Pebble's WAL makes it durable, and there is
//     nothing for recovery to replay into memory. Its in-memory effects (the
//     queue's and the sources' maps) are applied after Pebble accepted the
//     batch, under DB.commit, like counter images.
//  7. DB.commit is an RWMutex: View holds it shared, so a reader that must
//     see counters and families at one moment never sees a batch whose
//     Pebble part is visible and whose counter part is not yet applied.
//  8. A package above the store that keeps an index derived from its
//     family writes in memory (likes' board histograms) registers an
//     OnApply function with the batch: it runs under DB.commit right after
//     Pebble accepted the batch, like the counter images, so View sees the
//     index and the keys it is derived from at one moment. It does not run
//     for a batch Pebble refused or a redelivery (nothing was written).

import (
	"fmt"
	"math"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tallydb/tally/hot"
	"github.com/tallydb/tally/internal/quote"
)

type opKind uint8

const (
	opIncr opKind = iota + 1
	opSet
	opDelete
	opSetColumn
)

type batchOp struct {
	cs     *counterState
	id     uint64
	kind   opKind
	col    int
	delta  int64  // opIncr; opSetColumn: the value
	limit  uint64 // opIncr: a ceiling below the column's maximum (IncrCapped); 0 for none
	valOff int    // opSet: b.vals[valOff : valOff+valN]
	valN   int
}

// image is the after-image of one row being built by a commit.
type image struct {
	cs   *counterState
	id   uint64
	n    int
	vals [MaxColumns]uint64
}

// A Batch groups counter operations, family writes (Family.Put, Delete,
// DeleteRange, Merge) and job enqueues that commit atomically: all of them
// or none, through crashes. A Batch is not safe for concurrent use. Close it
// when done.
type Batch struct {
	db       *DB
	ops      []batchOp
	vals     []uint64
	images   []image
	byRow    map[imageKey]int // index of images, once a batch has many rows
	results  []uint64         // per op: the column value after commit (opIncr, opSetColumn)
	prev     []uint64         // per op: the column value before it (opIncr, opSetColumn)
	pb       *pebble.Batch    // family writes, created by the first one
	jobs     []jobEnqueue     // Enqueue (queue.go)
	jobIDs   []JobID          // ids given to jobs at commit
	progress *jobProgress     // JobRun.Commit (queue.go)
	once     onceMark         // Once (once.go)
	dup      bool             // the commit was a redelivery and changed nothing
	sync     bool             // SetSync: fsync this commit whatever the durability (apply.go)
	local    bool             // SetLocal: node-local derived state, never an entry's commit (apply.go)
	run      entryRun         // MarkEntries: the commit applies these entries (apply.go)
	record   bool             // write a log record even without counter ops
	gen      uint64           // DB.Generation when the batch was made or reset
	use      uint64           // Use: this use of the (pooled) batch
	buf      []byte
	key      []byte
	err      error
	pf       prefetchBuf // prefetch's scratch
	onApply  []func()    // OnApply: run under DB.commit once Pebble took the batch
}

// prefetchBuf is the scratch of Batch.prefetch, kept with the (pooled)
// batch.
type prefetchBuf struct {
	keys  []uint64
	vals  []uint64
	found []bool
}

var batchPool = sync.Pool{New: func() any { return new(Batch) }}

// NewBatch returns an empty batch.
func (db *DB) NewBatch() *Batch {
	b := batchPool.Get().(*Batch)
	b.db = db
	b.gen = db.Generation()
	b.use = db.batchUses.Add(1)
	return b
}

// Use identifies this use of the batch: different for every NewBatch and
// Reset of one store while it is open (batches are pooled, so a pointer
// alone does not tell one use from the next). A package that keeps state
// per batch being built (xshard's outbox stage) keys it by the pointer
// and Use.
func (b *Batch) Use() uint64 { return b.use }

// Generation returns the store generation the batch was built in
// (DB.Generation when NewBatch or Reset ran). A batch of an older
// generation than the store's fails to commit with ErrFailed: the reopen in
// between may have discarded state its writes were decided on. A package
// that keeps state derived from the store compares it with the generation
// its state was loaded in, after NewBatch and before reading that state.
func (b *Batch) Generation() uint64 { return b.gen }

// SetGeneration declares that the batch was decided on state read in
// store generation gen (DB.Generation before the reads): if a reopen
// came after gen, Commit fails with ErrFailed instead of writing what
// the discarded state decided. The next Reset forgets it.
func (b *Batch) SetGeneration(gen uint64) { b.gen = gen }

// OnApply registers fn to run when the batch's writes become visible:
// under DB.commit, right after Pebble accepted the batch and before any
// View or other commit can run (ordering rule 8). It does not run if the
// commit fails before that, nor for a redelivery (Duplicate). fn must be
// short and must not touch the store. The next Reset forgets it.
func (b *Batch) OnApply(fn func()) { b.onApply = append(b.onApply, fn) }

// Close releases the batch. It must not be used afterwards.
func (b *Batch) Close() {
	b.Reset()
	b.db = nil
	batchPool.Put(b)
}

// Reset empties the batch for reuse.
func (b *Batch) Reset() {
	b.ops = b.ops[:0]
	b.vals = b.vals[:0]
	b.images = b.images[:0]
	b.byRow = nil
	b.results = b.results[:0]
	b.prev = b.prev[:0]
	if b.pb != nil {
		b.pb.Close()
		b.pb = nil
	}
	clear(b.jobs)
	b.jobs = b.jobs[:0]
	b.jobIDs = b.jobIDs[:0]
	b.progress = nil
	b.once = onceMark{}
	b.dup = false
	b.sync = false
	b.local = false
	b.run = entryRun{}
	b.record = false
	b.err = nil
	clear(b.onApply)
	b.onApply = b.onApply[:0]
	if b.db != nil {
		b.gen = b.db.Generation()
		b.use = b.db.batchUses.Add(1)
	}
}

// Len returns the number of counter operations in the batch.
func (b *Batch) Len() int { return len(b.ops) }

// Empty reports whether the batch holds nothing to commit.
func (b *Batch) Empty() bool {
	return len(b.ops) == 0 && b.pb == nil && len(b.jobs) == 0 && b.progress == nil && !b.record && b.run.last == 0
}

// pebble returns the Pebble batch that holds the family writes.
func (b *Batch) pebble() *pebble.Batch {
	if b.pb == nil {
		b.pb = b.db.pdb().NewBatch()
	}
	return b.pb
}

// Result returns the value of the incremented column after the commit of
// the i-th operation, which must be an Incr.
// A batch skipped as a duplicate (Once, ApplyEntry) has no results: Result
// returns 0.
func (b *Batch) Result(i int) uint64 {
	if i >= len(b.results) {
		return 0
	}
	return b.results[i]
}

// Previous returns the value the column of the i-th operation (an Incr or
// a SetColumn) held just before it, in the commit: the row's value before
// the batch for the first operation on a column, the one before's result
// after. It returns 0 where Result does.
func (b *Batch) Previous(i int) uint64 {
	if i >= len(b.prev) {
		return 0
	}
	return b.prev[i]
}

func (b *Batch) counter(name string) (*counterState, error) {
	cs := b.db.cat.Load().byName[name]
	if cs == nil {
		return nil, counterNotFound(name)
	}
	return cs, nil
}

// Incr adds delta (which may be negative) to column of row id of counter.
// A negative delta larger than the current value leaves it at 0; a result
// above the column's maximum fails the commit with ErrValueRange. An unknown
// counter or column is reported here and by Commit.
func (b *Batch) Incr(counter string, id uint64, column string, delta int64) error {
	cs, err := b.counter(counter)
	if err != nil {
		return b.fail(err)
	}
	return b.incr(cs, id, column, delta)
}

func (b *Batch) incr(cs *counterState, id uint64, column string, delta int64) error {
	return b.incrCapped(cs, id, column, delta, 0)
}

// IncrCapped is Incr with a ceiling below the column's maximum: if the
// column's value after the increment would exceed limit (or the column's
// maximum, when that is lower), Commit fails with ErrValueRange and the
// batch changes nothing. A limit of 0 means the column's maximum. tally
// serve uses it to keep a 64-bit column's results within a RESP integer
// (2^63-1) while batching pipelined increments.
func (b *Batch) IncrCapped(counter string, id uint64, column string, delta int64, limit uint64) error {
	cs, err := b.counter(counter)
	if err != nil {
		return b.fail(err)
	}
	return b.incrCapped(cs, id, column, delta, limit)
}

// IncrColumn is IncrCapped on a counter handle and a column's position
// (its index in Counter.Columns and CounterInfo.Columns, which never
// changes: columns are only added): no lookup of either by name, for a
// caller that resolved them once (tally serve's pipelined increments). A
// position past the counter's columns is ErrColumnNotFound.
func (b *Batch) IncrColumn(c *Counter, id uint64, col int, delta int64, limit uint64) error {
	cs := c.state()
	if n := len(cs.cols.Load().cols); col < 0 || col >= n {
		return b.fail(fmt.Errorf("%w: %s has %d columns, no column %d", ErrColumnNotFound, cs.name, n, col))
	}
	b.ops = append(b.ops, batchOp{cs: cs, id: id, kind: opIncr, col: col, delta: delta, limit: limit})
	return nil
}

func (b *Batch) incrCapped(cs *counterState, id uint64, column string, delta int64, limit uint64) error {
	col, ok := cs.cols.Load().byName[column]
	if !ok {
		return b.fail(columnNotFound(cs, column))
	}
	b.ops = append(b.ops, batchOp{cs: cs, id: id, kind: opIncr, col: col, delta: delta, limit: limit})
	return nil
}

// Set sets every column of row id of counter, in column order; the number of
// values must equal the number of columns (ErrColumnCount otherwise).
func (b *Batch) Set(counter string, id uint64, values ...uint64) error {
	cs, err := b.counter(counter)
	if err != nil {
		return b.fail(err)
	}
	return b.set(cs, id, values)
}

func (b *Batch) set(cs *counterState, id uint64, values []uint64) error {
	if n := len(cs.cols.Load().cols); len(values) != n {
		return b.fail(fmt.Errorf("%w: %s has %d columns, got %d values", ErrColumnCount, cs.name, n, len(values)))
	}
	b.ops = append(b.ops, batchOp{cs: cs, id: id, kind: opSet, valOff: len(b.vals), valN: len(values)})
	b.vals = append(b.vals, values...)
	return nil
}

// SetColumn sets one column of row id of counter to value, leaving the
// other columns as they are, atomically (the row is read under the commit
// lock, as for Incr). A value above the column's maximum fails the commit
// with ErrValueRange.
func (b *Batch) SetColumn(counter string, id uint64, column string, value uint64) error {
	cs, err := b.counter(counter)
	if err != nil {
		return b.fail(err)
	}
	return b.setColumn(cs, id, column, value)
}

func (b *Batch) setColumn(cs *counterState, id uint64, column string, value uint64) error {
	col, ok := cs.cols.Load().byName[column]
	if !ok {
		return b.fail(fmt.Errorf("%w: %s.%s", ErrColumnNotFound, cs.name, quote.Input(column)))
	}
	b.ops = append(b.ops, batchOp{cs: cs, id: id, kind: opSetColumn, col: col, delta: int64(value)})
	return nil
}

// Delete removes row id of counter (all its columns read 0 afterwards).
func (b *Batch) Delete(counter string, id uint64) error {
	cs, err := b.counter(counter)
	if err != nil {
		return b.fail(err)
	}
	b.ops = append(b.ops, batchOp{cs: cs, id: id, kind: opDelete})
	return nil
}

// commitOne commits a batch of the single op add puts in it (the Counter
// methods: the handle already holds its counter, so no name lookup).
func (db *DB) commitOne(add func(*Batch) error) (uint64, error) {
	b := db.NewBatch()
	defer b.Close()
	if err := add(b); err != nil {
		return 0, err
	}
	if err := b.Commit(); err != nil {
		return 0, err
	}
	return b.Result(0), nil // 0 for a duplicate skipped by ApplyEntry
}

func (b *Batch) fail(err error) error {
	if err != nil && b.err == nil {
		b.err = err
	}
	return err
}

// Commit applies the batch atomically under the DB's durability. It returns
// only once the batch is durable as the durability mode promises. On error
// nothing of the batch is applied. A batch made idempotent with Once that
// was already applied commits nothing and returns nil; Duplicate reports it.
func (b *Batch) Commit() error {
	if b.err != nil {
		return b.err
	}
	if b.Empty() {
		return nil
	}
	return b.db.commitBatch(b)
}

// imageKey identifies a row of a batch.
type imageKey struct {
	cs *counterState
	id uint64
}

// imageScan is the number of rows a batch looks up by a linear scan; past
// it a map keeps large batches (bulk load, pipelined server commands)
// linear.
const imageScan = 16

// imageFor returns the after-image being built for (cs, id), loading the
// current row on first use.
func (b *Batch) imageFor(cs *counterState, id uint64, ncols int) (*image, error) {
	if b.byRow != nil {
		if i, ok := b.byRow[imageKey{cs, id}]; ok {
			return &b.images[i], nil
		}
	} else {
		for i := range b.images {
			if im := &b.images[i]; im.cs == cs && im.id == id {
				return im, nil
			}
		}
	}
	b.images = append(b.images, image{cs: cs, id: id, n: ncols})
	switch n := len(b.images); {
	case n == imageScan+1:
		b.byRow = make(map[imageKey]int, 2*n)
		for i := range b.images {
			b.byRow[imageKey{b.images[i].cs, b.images[i].id}] = i
		}
	case n > imageScan+1:
		b.byRow[imageKey{cs, id}] = n - 1
	}
	im := &b.images[len(b.images)-1]
	return im, cs.readRow(id, im.vals[:ncols])
}

// buildImagesLocked computes the after-images of every op. The caller holds
// DB.commit, so the current values cannot change underneath.
func (b *Batch) buildImagesLocked() error {
	b.images = b.images[:0]
	b.results = b.results[:0]
	b.prev = b.prev[:0]
	for i := range b.ops {
		op := &b.ops[i]
		if op.cs.dead.Load() {
			op.cs = b.db.liveState(op.cs) // a reopen came between Add and Commit
		}
		cols := op.cs.cols.Load()
		im, err := b.imageFor(op.cs, op.id, len(cols.cols))
		if err != nil {
			return err
		}
		var res, prev uint64
		if op.kind == opIncr || op.kind == opSetColumn {
			prev = im.vals[op.col]
		}
		switch op.kind {
		case opIncr:
			v := im.vals[op.col]
			switch {
			case op.delta >= 0:
				d := uint64(op.delta)
				max := cols.max[op.col]
				if op.limit != 0 && op.limit < max {
					max = op.limit
				}
				if d > max || v > max-d {
					return fmt.Errorf("%w: %s %d.%s = %d + %d exceeds max %d", ErrValueRange,
						op.cs.name, op.id, cols.cols[op.col].Name, v, op.delta, max)
				}
				v += d
			case op.delta == math.MinInt64 || uint64(-op.delta) >= v:
				v = 0
			default:
				v -= uint64(-op.delta)
			}
			im.vals[op.col] = v
			res = v
		case opSet:
			vals := b.vals[op.valOff : op.valOff+op.valN]
			for c, v := range vals {
				if v > cols.max[c] {
					return fmt.Errorf("%w: %s %d.%s = %d exceeds max %d", ErrValueRange,
						op.cs.name, op.id, cols.cols[c].Name, v, cols.max[c])
				}
			}
			copy(im.vals[:im.n], vals)
		case opDelete:
			clear(im.vals[:im.n])
		case opSetColumn:
			v := uint64(op.delta)
			if v > cols.max[op.col] {
				return fmt.Errorf("%w: %s %d.%s = %d exceeds max %d", ErrValueRange,
					op.cs.name, op.id, cols.cols[op.col].Name, v, cols.max[op.col])
			}
			im.vals[op.col] = v
			res = v
		}
		b.results = append(b.results, res)
		b.prev = append(b.prev, prev)
	}
	return nil
}

// encodeRecord encodes the images as one mutation record into b.buf.
func (b *Batch) encodeRecord() []byte {
	b.buf = appendRecordHeader(b.buf[:0], len(b.images))
	for i := range b.images {
		im := &b.images[i]
		b.buf = appendRowImage(b.buf, im.cs.id, im.id, im.vals[:im.n])
	}
	return appendChecksum(b.buf, 0)
}

func (db *DB) commitBatch(b *Batch) (err error) {
	defer recoverPebble(&err)
	if err := db.writable(); err != nil {
		return err
	}
	b.prefetch()
	db.commit.Lock()
	c, err := db.writeLocked(b)
	db.commit.Unlock()
	if err != nil {
		return err
	}
	return db.finishCommit(c)
}

// prefetch reads the rows of the batch's ops from the hot tables their
// after-images are read from and written to, before DB.commit is taken,
// and drops what it read: buildImagesLocked reads them again under the
// lock (the values may have changed since), but their cache lines are
// then loaded. The misses (one per row in a table larger than the CPU's
// caches: 12% of tally serve's CPU per HINCRBY, bench/RESULTS.md issue 18)
// are taken outside the critical section every writer queues on, and
// GetMany overlaps the misses of up to 16 rows of one table instead of
// taking them one after another. Cold blocks are not read ahead.
func (b *Batch) prefetch() {
	pf := &b.pf
	pf.keys = pf.keys[:0]
	var cur *hot.Table
	for i := range b.ops {
		op := &b.ops[i]
		rs, key := op.cs.ranges.Load().lookup(op.id)
		if rs == nil {
			continue
		}
		t := rs.delta
		if t == nil {
			t = rs.hot
		}
		if t == nil {
			continue
		}
		if t != cur || len(pf.keys) == prefetchMax {
			b.prefetchFrom(cur)
			cur = t
		}
		pf.keys = append(pf.keys, key)
	}
	b.prefetchFrom(cur)
}

// prefetchMax is the number of rows prefetch reads with one GetMany.
const prefetchMax = 16

// prefetchFrom reads b.pf.keys from t and empties them.
func (b *Batch) prefetchFrom(t *hot.Table) {
	pf := &b.pf
	if t != nil && len(pf.keys) > 0 {
		pf.vals, pf.found = t.GetMany(pf.keys, pf.vals, pf.found)
	}
	pf.keys = pf.keys[:0]
}

// commitEmptyRecordLocked commits a log record with no ops, moving the
// sequence on: for changes that write no record of their own (a seal, a
// merge, hot rows of a bulk load) but must not let the next checkpoint be
// skipped as "nothing new". The caller holds DB.commit.
//
// NB: the record is node-local (apply.go): a checkpoint writes it from
// a background goroutine, maybe while a replicated entry applies, and it
// changes nothing a read returns. Were it numbered as the entry's commit,
// it would take the entry's first apply mark, and a crash before the
// entry's own first commit would make the re-apply skip that commit.
func (db *DB) commitEmptyRecordLocked() error {
	return db.commitLocked(&Batch{db: db, record: true, local: true, gen: db.Generation()})
}

// commitLocked commits b while the caller holds DB.commit (bulk load). The
// fsync wait happens under the lock, so other writers wait for it.
func (db *DB) commitLocked(b *Batch) (err error) {
	defer recoverPebble(&err)
	c, err := db.writeLocked(b)
	if err != nil {
		return err
	}
	return db.finishCommit(c)
}

// pendingCommit is a commit handed to Pebble and applied to memory, waiting
// for its fsync.
type pendingCommit struct {
	pb       *pebble.Batch
	sync     bool
	n        int
	applyErr error
}

// writeLocked does steps 1 and 2 of the ordering rules: after-images, log
// record, Pebble, memory. The caller holds DB.commit.
func (db *DB) writeLocked(b *Batch) (pendingCommit, error) {
	c := pendingCommit{sync: db.opts.Durability == SyncAlways || b.sync}
	if err := db.writable(); err != nil {
		return c, err
	}
	if b.gen != db.Generation() {
		return c, fmt.Errorf("%w: %w", ErrFailed, errReopened)
	}
	// The apply mark of a replicated entry (apply.go), beside the batch's
	// own Once mark if it has one.
	raft, marked, err := db.applyMarkLocked(b)
	if err != nil {
		return c, err
	}
	if marked {
		c.sync = b.sync // the raft log, not the apply, is what is fsynced
	}
	if (b.once.source != "" && db.isDuplicateLocked(&b.once)) || (marked && db.isDuplicateLocked(&raft)) {
		// A redelivery: commit nothing. NB: before the images, the queue
		// and the marks, so nothing in memory changes either: no hot row
		// (TestApplyEntryReapplyIsNoop), no job (JobIDs is empty).
		b.dup = true
		return c, nil
	}
	if err := b.buildImagesLocked(); err != nil {
		return c, err
	}
	pb := b.pb
	b.pb = nil
	if pb == nil {
		pb = db.pdb().NewBatch()
	}
	record := len(b.ops) > 0 || b.record
	seq := db.commit.lastSeq
	if record {
		rec := b.encodeRecord()
		seq++
		b.key = appendLogKey(b.key[:0], seq)
		if err := pb.Set(b.key, rec, nil); err != nil {
			pb.Close()
			return c, err
		}
		c.n = len(rec) + len(b.key)
	}
	qc, err := db.queue.prepareLocked(db, b, pb)
	if err != nil {
		pb.Close()
		return c, err
	}
	cmd, cmdOK := db.cmdMarkLocked(b, &raft)
	for _, m := range [...]*onceMark{&b.once, &raft, &cmd} {
		if m.source == "" {
			continue
		}
		var err error
		if b.buf, err = m.write(pb, b.buf); err != nil {
			qc.abort()
			pb.Close()
			return c, err
		}
	}
	err = db.applyLocked(pb, c.sync)
	if err != nil {
		qc.abort()
		pb.Close()
		return c, fmt.Errorf("tally: commit: %w", pebbleErr(err))
	}
	db.commit.lastSeq = seq
	c.pb = pb
	for _, fn := range b.onApply {
		fn()
	}
	c.applyErr = b.applyImagesLocked()
	if c.applyErr == nil {
		b.widenImagesLocked()
	}
	qc.apply()
	if b.once.source != "" {
		db.applyOnceLocked(&b.once)
	}
	if marked {
		db.appliedLocked(b, &raft)
	}
	if cmdOK {
		db.applyCmd = cmd.seq
	}
	return c, nil
}

// applyLocked hands pb to Pebble's commit pipeline. A Fatalf of Pebble's
// inside it (a WAL rotation that failed) is turned into the store's failed
// state and an error here, so the caller's locks are released normally.
func (db *DB) applyLocked(pb *pebble.Batch, sync bool) (err error) {
	defer recoverPebble(&err)
	if sync {
		return db.pdb().ApplyNoSyncWait(pb, pebble.Sync)
	}
	return db.pdb().Apply(pb, pebble.NoSync)
}

// finishCommit does step 3: wait for the fsync (SyncAlways), then report.
func (db *DB) finishCommit(c pendingCommit) error {
	if c.pb == nil {
		return nil // a duplicate: nothing was written
	}
	defer c.pb.Close()
	if db.opts.Durability != SyncAlways {
		db.unsynced.Store(true) // the interval syncer fsyncs it
	}
	if c.n > 0 {
		db.noteLogWrite(c.n)
	}
	if c.sync {
		if err := c.pb.SyncWait(); err != nil {
			err = pebbleErr(err)
			db.setFailed(fmt.Errorf("wal sync: %w", err))
			return fmt.Errorf("%w: wal sync: %w", ErrFailed, err)
		}
	}
	if c.applyErr != nil {
		// The record is durable but memory could not take it: memory now
		// disagrees with the log, which only a reopen repairs.
		db.setFailed(c.applyErr)
		return fmt.Errorf("%w: apply: %w", ErrFailed, c.applyErr)
	}
	return nil
}

// applyImagesLocked writes the after-images into memory.
func (b *Batch) applyImagesLocked() error {
	for i := range b.images {
		im := &b.images[i]
		if err := im.cs.applyLocked(im.id, im.vals[:im.n]); err != nil {
			return err
		}
	}
	return nil
}

// applyLocked stores row id's values in its range. The caller holds
// DB.commit (or is recovering, alone).
func (cs *counterState) applyLocked(id uint64, vals []uint64) error {
	rs, key := cs.ranges.Load().lookup(id)
	if rs == nil {
		if allZero(vals) {
			return nil
		}
		var err error
		if rs, err = cs.ensureRangeLocked(id, 0); err != nil {
			return err
		}
	}
	rs, err := cs.ensureDeltaLocked(rs)
	if err != nil {
		return err
	}
	return rs.put(key, vals)
}

func allZero(vals []uint64) bool {
	for _, v := range vals {
		if v != 0 {
			return false
		}
	}
	return true
}
