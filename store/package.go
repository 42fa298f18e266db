package store

// Packages above store.
//
// timeline, unread and likes keep their data in a store: key families
// (declared at Open so Pebble merges them from the first read), counters
// and queued jobs. The root package tally opens them together on one
// store (tally.Open), so the invariants that span packages (unread's
// snapshots follow every change of timeline's follow graph) hold in every
// host. Each package implements Package, so tally wires them in one place
// and a new package plugs in the same way: it provides its families (a
// Families function), an opener (New(db, opts)), an Exists(db) test for
// read-only opens, and the methods below.

// Stat is one key/value figure of a package's Stats ("tally stats" prints
// it as "PACKAGE.KEY VALUE").
type Stat struct {
	Key, Value string
}

// Package is the contract of a package above store, as tally.Open holds
// it.
type Package interface {
	// PackageName is the package's name: the prefix of its Stats keys and
	// how verify names it ("timeline", "unread", "likes").
	PackageName() string
	// Check verifies every invariant of the package's data on the open
	// store (each of its families decoded, its cross-checks: counts
	// against sets, both directions of a graph, snapshots against the
	// graph) and returns the problems found, or nil. It is for tests and
	// tools on a quiet store: it reads everything.
	Check() error
	// Stats returns the package's options and figures.
	Stats() []Stat
	// Close stops the package's background work (the store stays open).
	// Close is safe to call more than once.
	Close() error
}

// JobDescriber is implemented by a package whose queued jobs (store's job
// queue) it can describe in the user's words: "fan-out of post 2001 by
// user 21" rather than a kind and a binary key. DescribeJob returns false
// for a kind that is not the package's.
type JobDescriber interface {
	DescribeJob(kind string, key []byte) (string, bool)
}
