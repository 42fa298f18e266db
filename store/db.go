package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tallydb/tally/cold"
	"github.com/tallydb/tally/compaction"
	"github.com/tallydb/tally/hot"
	"github.com/tallydb/tally/internal/quote"
)

// DB is an open tally store. All methods are safe for concurrent use.
//
// Lock order: DB.swap, DB.jobMu, DB.ckpt, DB.commit; DB.heal.mu is a leaf.
// Readers take no locks (reopen.go says how they stay safe across a
// reopen).
type DB struct {
	dir  string
	opts *Options
	// inst is the Pebble instance in use and the env it reports into (the
	// store's health): replaced by a reopen (reopen.go). pdb and env read
	// it.
	inst atomic.Pointer[instance]
	errs *errorLog // background errors (Stats.Errors), shared by every instance
	lock io.Closer

	cat atomic.Pointer[catalog]

	families registry          // declared and persisted key families (family.go)
	mergers  *mergerTable      // merge operators by id, shared with Pebble (merge.go)
	queue    queue             // the durable job queue (queue.go)
	sources  map[string]uint64 // idempotent-write sources (once.go), guarded by commit
	// batchUses numbers the uses of batches (Batch.Use).
	batchUses atomic.Uint64
	applying  applyState // the replicated entry being applied (apply.go), guarded by commit
	applyCmd  uint64     // the last numbered apply commit's command (apply.go, cmdMark), guarded by commit

	// commit serializes writers; see commit.go for the ordering rules.
	commit struct {
		// An RWMutex so View can hold every commit off while it reads
		// counters and families together; writers take it exclusively.
		sync.RWMutex
		lastSeq uint64 // sequence of the last committed record
	}
	// ckpt serializes checkpoints.
	ckpt struct {
		sync.Mutex
		seq         uint64 // sequence included by the newest complete checkpoint
		last        time.Time
		tierChanges int64 // DB.tierChanges when it started
	}

	tierChanges atomic.Int64 // seals and merges published (they write no log record)
	logBytes    atomic.Int64 // log bytes written since the last checkpoint
	logRecords  atomic.Int64 // log records written since the last checkpoint
	unsynced    atomic.Bool  // NoSync commits since the last interval sync
	closed      atomic.Bool

	recovery RecoveryStats

	blockCache *cold.Cache
	readerIDs  atomic.Uint64 // ids of cold readers in blockCache
	limiter    *compaction.Limiter
	jobs       compaction.Tracker
	jobMu      sync.Mutex // one job runner at a time (scheduler or Compact)
	jobCtx     context.Context
	jobCancel  context.CancelFunc // cancels running jobs on Close

	pebbleMu     sync.RWMutex // held for reading by cold block reads
	pebbleClosed bool         // guarded by pebbleMu

	// swap is held exclusively while a reopen replaces the instance and
	// the in-memory state, and shared by the readers that must see one
	// instance and its state together (Stats, Check, Verify).
	swap sync.RWMutex
	heal healer // the reopen after a failure (reopen.go)

	life lifetimes // retired cold versions and live intents (lifetime.go)

	bg struct {
		stop chan struct{}
		kick chan struct{} // nudges the checkpointer when the log grew
		wg   sync.WaitGroup
	}
}

// writable reports why the DB cannot take writes, or nil: closed, opened
// read-only, failed (ErrFailed, reopen) or out of disk space (ErrDiskFull,
// until a flush succeeds again).
func (db *DB) writable() error {
	if db.closed.Load() {
		return ErrClosed
	}
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	return db.env().writeErr()
}

// Writable reports why the DB cannot take writes now, or nil: ErrClosed,
// ErrReadOnly, ErrFailed (until a reopen heals it) or ErrDiskFull. A
// replicated host checks it after applying an entry: a command that failed
// because the store did must not count as applied (replica.Config.Apply).
func (db *DB) Writable() error { return db.writable() }

// setFailed fails the store: every later write returns ErrFailed wrapping
// err (classified: a full disk or damage stays recognisable).
func (db *DB) setFailed(err error) { db.env().fail(pebbleErr(err)) }

// pdb returns the Pebble instance in use. Callers that hold none of
// DB.commit, DB.ckpt or DB.jobMu and are not a background goroutine use
// acquire instead, so a reopen cannot close the instance under them.
func (db *DB) pdb() *pebble.DB { return db.inst.Load().pdb }

// env returns the env of the Pebble instance in use.
func (db *DB) env() *pebbleEnv { return db.inst.Load().env }

// noteLogWrite counts a log record of n bytes toward the next checkpoint.
func (db *DB) noteLogWrite(n int) {
	db.logRecords.Add(1)
	total := db.logBytes.Add(int64(n))
	if lim := db.opts.CheckpointLogBytes; lim > 0 && total >= lim {
		select { // nudge the checkpointer; one pending nudge is enough
		case db.bg.kick <- struct{}{}:
		default:
		}
	}
}

// Dir returns the directory the DB was opened on.
func (db *DB) Dir() string { return db.dir }

// ReadOnly reports whether the DB was opened with Options.ReadOnly: every
// write returns ErrReadOnly, and packages that would repair something on
// open (finish an interrupted load, say) report it instead.
func (db *DB) ReadOnly() bool { return db.opts.ReadOnly }

// Close checkpoints the hot tables, stops background work and closes the
// store. Close is safe to call more than once; later calls return nil.
func (db *DB) Close() error {
	if db.closed.Load() {
		return nil
	}
	db.stopHealer() // first: a reopen in progress finishes, none starts
	db.jobCancel()  // so a scheduled job stops before we wait for it
	db.stopBackground()
	// Wait for a running Compact, SealRange or Load, and hold the lock so
	// none starts while the store closes.
	db.jobMu.Lock()
	defer db.jobMu.Unlock()
	var errs []error
	if db.writable() == nil {
		if err := db.checkpoint(false); err != nil {
			errs = append(errs, fmt.Errorf("tally: checkpoint on close: %w", err))
		}
	}
	// Taking both locks waits for in-flight writers and checkpoints.
	db.ckpt.Lock()
	db.commit.Lock()
	db.closed.Store(true)
	db.commit.Unlock()
	db.ckpt.Unlock()
	db.pebbleMu.Lock()
	db.pebbleClosed = true
	db.pebbleMu.Unlock()
	// No block read can start now: every replaced block can go.
	db.sweep(true)
	if err := db.closeInstance(db.inst.Load()); err != nil {
		errs = append(errs, err)
	}
	db.closeRetired() // instances a reopen replaced (reopen.go)
	if err := db.lock.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CreateCounter creates an empty counter without columns.
//
// The name and options are validated (ValidateName, CounterOptions.Validate)
// and the schema is checked to read back as given before it is written; a
// refused counter changes nothing in memory or on disk. Errors:
// ErrInvalidName, ErrInvalidOption, ErrExists, ErrClosed, ErrFailed.
func (db *DB) CreateCounter(name string, opts CounterOptions) error {
	if err := validName("counter name", name); err != nil {
		return err
	}
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return err
	}
	db.commit.Lock()
	defer db.commit.Unlock()
	if err := db.writable(); err != nil {
		return err
	}
	cat := db.cat.Load()
	if cat.byName[name] != nil {
		return fmt.Errorf("%w: counter %s", ErrExists, quote.Input(name))
	}
	ci := &CounterInfo{ID: cat.nextID, Name: name, RangeBits: o.RangeBits, AutoRangeBits: o.AutoRangeBits, Age: o.Age, Owner: o.Owner}
	if err := checkSchema(ci); err != nil {
		return err
	}
	if err := db.writeSchemaLocked(ci); err != nil {
		return err
	}
	db.cat.Store(cat.with(newCounterState(ci)))
	return nil
}

// AddColumn adds a column to a live counter. Existing rows are not rewritten:
// each hot table migrates its rows lazily, and the new column reads 0 until
// written.
//
// Before the new schema is written, AddColumn checks it against every tier:
// it must read back as given, every hot table, cold delta and frozen delta
// of the counter must be able to take the column, and a future cold delta
// (the counter's columns plus a marker) must fit a hot table. A refused
// column changes nothing in memory or on disk. Errors: ErrInvalidName,
// ErrInvalidOption, ErrCounterNotFound, ErrExists, ErrTooManyColumns,
// ErrClosed, ErrFailed.
func (db *DB) AddColumn(counter, column string, opts ColumnOptions) error {
	if err := validName("column name", column); err != nil {
		return err
	}
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return err
	}
	db.commit.Lock()
	defer db.commit.Unlock()
	if err := db.writable(); err != nil {
		return err
	}
	cs := db.cat.Load().byName[counter]
	if cs == nil {
		return counterNotFound(counter)
	}
	old := cs.cols.Load()
	if _, ok := old.byName[column]; ok {
		return fmt.Errorf("%w: column %s.%s", ErrExists, cs.name, column)
	}
	if len(old.cols) >= MaxColumns {
		return fmt.Errorf("%w: counter %s has %d columns, the limit", ErrTooManyColumns, cs.name, len(old.cols))
	}
	ci := cs.info()
	ci.Columns = append(ci.Columns, Column{Name: column, HintBits: o.HintBits, MaxBits: o.MaxBits})
	if err := checkSchema(&ci); err != nil {
		return err
	}
	width := int(o.HintBits / 8)
	if err := cs.canAddColumnLocked(len(ci.Columns), width); err != nil {
		return err
	}
	// From here nothing can refuse the column: write it, then widen.
	if err := db.writeSchemaLocked(&ci); err != nil {
		return err
	}
	for _, rs := range cs.ranges.Load().m {
		if err := rs.addColumnLocked(width); err != nil {
			// Only a broken invariant gets here (every table was checked).
			db.setFailed(err)
			return fmt.Errorf("%w: add column to range %d: %v", ErrFailed, rs.id, err)
		}
	}
	cs.cols.Store(newColSet(ci.Columns))
	return nil
}

// canAddColumnLocked reports whether every tier of cs can hold ncols
// columns, the last of the given width: every table of every range, the
// blocks of cold ranges, and the delta a cold range creates later. The
// caller holds DB.commit, so no range changes shape underneath.
func (cs *counterState) canAddColumnLocked(ncols, width int) error {
	if ncols > cold.MaxColumns {
		return fmt.Errorf("%w: counter %s: %d columns do not fit a cold block (limit %d)", ErrTooManyColumns, cs.name, ncols, cold.MaxColumns)
	}
	if ncols+1 > hot.MaxColumns {
		return fmt.Errorf("%w: counter %s: %d columns and a delta marker do not fit a hot table (limit %d)", ErrTooManyColumns, cs.name, ncols, hot.MaxColumns)
	}
	for _, rs := range cs.ranges.Load().m {
		for _, t := range []struct {
			t    *hot.Table
			what string
		}{{rs.hot, "hot table"}, {rs.delta, "delta"}, {rs.frozen, "frozen delta"}} {
			if t.t == nil {
				continue
			}
			if err := t.t.CanAddColumn(width); err != nil {
				return fmt.Errorf("%w: counter %s range %d %s: %v", ErrTooManyColumns, cs.name, rs.id, t.what, err)
			}
		}
		if rs.cold != nil && rs.cold.Desc().NumColumns() > ncols {
			return fmt.Errorf("%w: counter %s range %d: blocks have %d columns, more than %d", ErrCorrupt, cs.name, rs.id, rs.cold.Desc().NumColumns(), ncols)
		}
	}
	return nil
}

func (db *DB) writeSchemaLocked(ci *CounterInfo) (err error) {
	defer recoverPebble(&err)
	key := appendCounterMetaKey(nil, ci.ID)
	if err := db.pdb().Set(key, appendSchema(nil, ci), pebble.Sync); err != nil {
		return fmt.Errorf("tally: write schema: %w", pebbleErr(err))
	}
	return nil
}

// Counters returns the schema of every counter, sorted by id.
func (db *DB) Counters() []CounterInfo {
	cat := db.cat.Load()
	out := make([]CounterInfo, 0, len(cat.byID))
	for id := uint32(0); id < cat.nextID; id++ {
		if cs := cat.byID[id]; cs != nil {
			out = append(out, cs.info())
		}
	}
	return out
}

// Counter returns a handle on the named counter. The handle stays valid
// while the DB is open and sees columns added later.
func (db *DB) Counter(name string) (*Counter, error) {
	cs := db.cat.Load().byName[name]
	if cs == nil {
		return nil, counterNotFound(name)
	}
	c := &Counter{db: db, cs: cs}
	c.cur.Store(cs)
	return c, nil
}

// flushRangeDels starts a flush of Pebble's memtable after a batch with
// range deletions (a checkpoint's log truncation, Open's cleanup), without
// waiting for it. While a memtable holds a range deletion, Pebble allocates
// an iterator for it in every point read, so family Gets would allocate
// until the next flush. A failed flush is Pebble's to retry and report.
func (db *DB) flushRangeDels() {
	if _, err := db.pdb().AsyncFlush(); err != nil {
		db.bgError(fmt.Errorf("tally: flush after range deletions: %w", err))
	}
}
