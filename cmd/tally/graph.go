package main

import (
	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
)

// graphStore is the database opened through tally.Open for a timeline
// command that changes the follow graph (every package wired: unread's
// observer sees every follow). The unread commands are entries of the one
// command table (internal/commands); this stays until the timeline
// commands are too.
type graphStore struct {
	all *tallydb.DB
	db  *store.DB
	tl  *timeline.Timeline
}

// openGraph opens the database named by -d with every package.
func (e *env) openGraph(create bool) (*graphStore, error) {
	mode := openWrite
	if create {
		mode = openCreate
	}
	db, err := e.openDB(mode)
	if err != nil {
		return nil, err
	}
	return &graphStore{all: db, db: db.Store(), tl: db.Timeline()}, nil
}

// close closes the database; err (fn's error) wins.
func (g *graphStore) close(err error) error { return closeTally(g.all, err) }
