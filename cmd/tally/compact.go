package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/tallydb/tally/store"
)

// The maintenance commands (compact, verify, stats, ...) are table
// entries (internal/commands/admin.go); what is here serves the demo.

// compactWithProgress runs db.Compact, and on a terminal w redraws a line
// with the running job's progress until it returns.
func compactWithProgress(ctx context.Context, e *env, db *store.DB, w io.Writer) error {
	if !isTerminal(w) {
		return db.Compact(ctx)
	}
	done := make(chan error, 1)
	e.goSafe(func() { done <- db.Compact(ctx) })
	bar := newProgress(w, "compact", "rows", 0)
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			bar.finish()
			return err
		case <-tick.C:
			jobs := db.Jobs()
			if len(jobs) == 0 {
				continue
			}
			j := jobs[0]
			bar.label = j.Kind
			bar.unit = fmt.Sprintf("rows of %s range %d (%s)", j.Counter, j.Range, j.Phase)
			bar.total = max(j.Total, 1)
			bar.update(j.Done)
		}
	}
}
