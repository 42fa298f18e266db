package main

import "github.com/tallydb/tally/store"

// attached is a package above store opened on a DB by attachPackages.
type attached struct {
	name  string             // "timeline", "unread", "likes": the prefix of its stats lines
	stats func() [][2]string // its options and figures, as key/value pairs
}

// attachPackages opens the packages above store (timeline, unread, likes)
// on db, so their job handlers are registered and their families declared:
// "jobs wait" can then run their fan-outs and backfills, and "stats" shows
// their persisted options. Each package adds itself here.
func attachPackages(db *store.DB) ([]attached, error) {
	_ = db
	return nil, nil
}
