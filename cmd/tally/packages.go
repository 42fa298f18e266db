package main

import (
	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/unread"
)

// attached is a package above store opened on a DB by attachPackages.
type attached struct {
	name  string             // "timeline", "unread", "likes": the prefix of its stats lines
	stats func() [][2]string // its options and figures, as key/value pairs
	close func()
}

// attachPackages opens the packages above store (timeline, unread, likes)
// that the store holds, so their job handlers are registered: "jobs wait"
// can then run their fan-outs and backfills, and "stats" shows their
// persisted options. A package the store does not hold is not opened, so a
// read-only Open (stats) never has to create one.
func attachPackages(db *store.DB) ([]attached, error) {
	var out []attached
	if hasTimeline(db) {
		tl, err := openTimeline(db)
		if err != nil {
			return nil, err
		}
		out = append(out, attached{name: "timeline", close: func() { tl.Close() }, stats: func() [][2]string {
			var kv [][2]string
			for _, s := range tl.Stats() {
				kv = append(kv, [2]string{s.Key, s.Value})
			}
			return kv
		}})
	}
	// Unread's stats need no graph: they read its own counters and
	// families.
	if _, err := db.Counter(unread.KindsCounter); err == nil {
		x, err := unread.New(db, nil)
		if err != nil {
			closeAttached(out)
			return nil, err
		}
		out = append(out, attached{name: "unread", close: func() {}, stats: func() [][2]string {
			var kv [][2]string
			for _, s := range x.Stats() {
				kv = append(kv, [2]string{s.Key, s.Value})
			}
			return kv
		}})
	}
	if likes.Exists(db) {
		l, err := likes.New(db, nil)
		if err != nil {
			closeAttached(out)
			return nil, err
		}
		out = append(out, attached{name: "likes", close: func() {}, stats: func() [][2]string {
			var kv [][2]string
			for _, s := range l.Stats() {
				kv = append(kv, [2]string{s.Key, s.Value})
			}
			return kv
		}})
	}
	return out, nil
}

// closeAttached closes what attachPackages opened.
func closeAttached(pkgs []attached) {
	for _, p := range pkgs {
		p.close()
	}
}
