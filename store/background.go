package store

import (
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// startBackground starts the interval syncer and the checkpointer.
func (db *DB) startBackground() {
	if db.opts.DisableBackground || db.opts.ReadOnly {
		return
	}
	if db.opts.Durability == SyncInterval {
		db.bg.wg.Add(1)
		go db.syncLoop()
	}
	db.bg.wg.Add(1)
	go db.checkpointLoop()
	if db.opts.CompactionInterval > 0 {
		db.bg.wg.Add(1)
		go db.compactionLoop()
	}
	for range max(db.opts.JobWorkers, 0) {
		db.bg.wg.Add(1)
		go db.jobWorker()
	}
}

// compactionLoop ages ranges due under their policy and merges deltas past
// DeltaMergeRows, every CompactionInterval. A failed job leaves its range as
// it was and is retried on a later tick.
func (db *DB) compactionLoop() {
	defer db.bg.wg.Done()
	t := time.NewTicker(db.opts.CompactionInterval)
	defer t.Stop()
	for {
		select {
		case <-db.bg.stop:
			return
		case <-t.C:
		}
		jobs := db.pendingJobs(db.opts.Now(), db.opts.DeltaMergeRows)
		if err := db.runJobs(db.jobCtx, jobs); err != nil && db.jobCtx.Err() == nil {
			db.bgError(err)
		}
	}
}

func (db *DB) stopBackground() {
	select {
	case <-db.bg.stop:
	default:
		close(db.bg.stop)
	}
	db.bg.wg.Wait()
}

func (db *DB) bgError(err error) { db.errs.add(err) }

// errorLog holds the background errors Stats reports: tally's own and
// Pebble's (its Errorf, BackgroundError and DataCorruption events). It keeps
// the maxErrors most recent distinct messages; a message seen again is
// counted, not stored again, and new messages are rate-limited (a burst of
// maxErrors, then one a second) so a flush that fails on every retry cannot
// flood it. Nothing is printed.
type errorLog struct {
	mu      sync.Mutex
	entries []errorEntry // oldest first
	total   int64        // every add, kept or not
	tokens  float64
	refill  time.Time
}

type errorEntry struct {
	msg string
	n   int64
}

const maxErrors = 16

func newErrorLog() *errorLog { return &errorLog{tokens: maxErrors, refill: time.Now()} }

func (l *errorLog) add(err error) {
	msg := err.Error()
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total++
	for i := range l.entries {
		if l.entries[i].msg == msg {
			l.entries[i].n++
			return
		}
	}
	l.tokens = min(maxErrors, l.tokens+now.Sub(l.refill).Seconds())
	l.refill = now
	if l.tokens < 1 {
		return
	}
	l.tokens--
	if len(l.entries) == maxErrors {
		l.entries = append(l.entries[:0], l.entries[1:]...)
	}
	l.entries = append(l.entries, errorEntry{msg: msg, n: 1})
}

// list returns the kept messages, oldest first, and the count of every
// error added.
func (l *errorLog) list() ([]string, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, len(l.entries))
	for i, e := range l.entries {
		out[i] = e.msg
		if e.n > 1 {
			out[i] = fmt.Sprintf("%s (%d times)", e.msg, e.n)
		}
	}
	return out, l.total
}

// syncLoop fsyncs the WAL every SyncInterval when NoSync commits happened.
func (db *DB) syncLoop() {
	defer db.bg.wg.Done()
	t := time.NewTicker(db.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-db.bg.stop:
			return
		case <-t.C:
			if db.unsynced.Swap(false) {
				if err := db.SyncWAL(); err != nil {
					db.bgError(err)
				}
			}
		}
	}
}

// SyncWAL fsyncs the WAL now, making every acknowledged write durable.
func (db *DB) SyncWAL() (err error) {
	defer recoverPebble(&err)
	if err := db.writable(); err != nil {
		return err
	}
	if err := db.pdb().LogData(nil, pebble.Sync); err != nil {
		err = pebbleErr(err)
		db.setFailed(fmt.Errorf("wal sync: %w", err))
		return fmt.Errorf("%w: sync wal: %w", ErrFailed, err)
	}
	return nil
}

// checkpointLoop checkpoints on the time schedule and when the log grew past
// CheckpointLogBytes.
func (db *DB) checkpointLoop() {
	defer db.bg.wg.Done()
	period := db.opts.CheckpointInterval
	tick := period / 4
	if period < 0 {
		tick = time.Minute
	}
	t := time.NewTicker(max(tick, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-db.bg.stop:
			return
		case <-db.bg.kick:
		case <-t.C:
			db.ckpt.Lock()
			due := period > 0 && time.Since(db.ckpt.last) >= period
			db.ckpt.Unlock()
			if !due {
				continue
			}
		}
		if err := db.Checkpoint(); err != nil && db.writable() == nil {
			db.bgError(fmt.Errorf("tally: scheduled checkpoint: %w", err))
		}
	}
}
