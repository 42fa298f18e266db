// Package compaction holds the mechanics of tally's background work on
// counter ranges: encoding a hot range's rows into cold blocks (the seal)
// and merging a cold range's delta into rewritten blocks, plus the pacing
// and progress machinery the store uses to run them. What is due is
// decided in store (policy.go), and the jobs are run and published there
// (age.go, merge.go): this package only transforms rows and blocks.
//
// It knows the hot and cold formats but nothing of Pebble, the log or what
// the data means: the store gives it a table or a reader and an emit
// function that writes blocks, and decides when a job's results are
// published. That keeps the crash-safety argument in one place (store/age.go):
// nothing compaction does is visible until the store commits the range's new
// shape in one batch.
//
// # Pacing
//
// A Limiter bounds the bytes per second written by jobs so foreground reads
// keep their latency while a range is sealed; a Tracker lists running jobs and
// how far they got, for `tally stats` and progress displays.
package compaction
