package store

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// startBackground starts the interval syncer and the checkpointer.
func (db *DB) startBackground() {
	if db.opts.DisableBackground {
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

func (db *DB) bgError(err error) {
	db.bg.errMu.Lock()
	defer db.bg.errMu.Unlock()
	if len(db.bg.errors) < 16 {
		db.bg.errors = append(db.bg.errors, err)
	}
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
					db.setFailed(err)
					db.bgError(err)
				}
			}
		}
	}
}

// SyncWAL fsyncs the WAL now, making every acknowledged write durable.
func (db *DB) SyncWAL() error {
	if db.closed.Load() {
		return ErrClosed
	}
	if err := db.pdb.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("tally: sync wal: %w", err)
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
