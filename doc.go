// Package tally opens a tally database: one store (package store: counters
// in hot in-memory tables and cold zstd blocks, key families and the job
// queue, all in one Pebble instance) with every package above it wired in
// one place: timelines (package timeline), unread counts (package unread)
// and likes (package likes).
//
//	db, err := tally.Open("social.db", nil)
//	...
//	defer db.Close()
//	db.Timeline().Follow(1, 20)
//	n, _ := db.Unread().Feed(1)
//
// # Why one handle
//
// The packages share invariants that only hold when every host opens them
// the same way: unread's feed snapshots change in the same batch as every
// follow and unfollow of timeline's graph (unread is timeline's follow
// observer). Open declares every package's key families before Pebble
// opens (so their merges and value checks apply from the first read),
// opens the packages in dependency order and wires the observer. A host
// that opens package timeline alone on a store that holds unread data can
// read it, but its follow-graph changes are refused
// (timeline.ErrObserverMissing) instead of silently desynchronizing
// unread. A host that wants only counters may still open package store
// alone.
//
// # The package contract
//
// Each package implements store.Package (name, Check, Stats, Close) and
// offers Families, New and Exists; Open holds them as a list, so Check,
// Verify, Stats and Close cover every package, and a new package plugs in
// by adding itself to that list.
//
// # Read-only opens
//
// With Options.Store.ReadOnly, Open writes nothing: a package whose data
// the store does not hold is not opened and its accessor returns nil
// (there is nothing to read). A writable Open creates what is missing.
package tally
