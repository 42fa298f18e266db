// Package store is tally's storage engine: it opens a directory, owns the one
// Pebble instance inside it, the counter schema, the routing of an id to its
// range and tier, the commit path with its mutation log, checkpoints and
// recovery.
//
// # Data model
//
// A counter (for example "posts") is a named table of rows keyed by a 64-bit
// id; each row has the same named columns (for example "reposts", "comments",
// "likes"), every value an unsigned count. An id is split into a range, the
// high bits (id >> RangeBits), and a key, the low bits. Each range of a
// counter is held in memory by a fixed-width table of package hot. A row whose
// columns are all zero is not stored anywhere and reads as zeros.
//
// Counts never go below zero: an Incr whose negative delta is larger than the
// current value leaves the value at 0 (it saturates; the returned value tells
// the caller). A count never exceeds its column's maximum (2^32-1 or 2^64-1):
// an Incr or Set that would is refused with ErrValueRange and changes nothing.
//
// # Key families
//
// Pebble has one key space; tally splits it by a one-byte family prefix. Each
// family has a fixed-width big-endian key layout, so Pebble's byte order is
// numeric order. This table is the one place the families are declared; the
// encoders live in keys.go.
//
//	prefix  family       key layout (after prefix)                       value
//	------  -----------  ----------------------------------------------  -----------------------------------
//	0x01    meta         name (ASCII, e.g. "format", "ckpt",             format version; checkpoint pointer;
//	                     "counter/" + u32 counter id)                    counter schema (see schema.go)
//	0x02    log          seq u64                                         mutation record (see log.go)
//	0x03    checkpoint   ckptSeq u64 | counter u32 | range u64 |         checkpoint chunk (see checkpoint.go)
//	                     chunk u32
//	0x04    cold block   counter u32 | range u64 | block u32             cold block (package cold)
//	0x05    cold range   counter u32 | range u64                         cold range descriptor (package cold)
//	0x10-   (reserved for unread, timeline and like families)
//
// # Durability and the commit path
//
// Every mutation is first encoded as a log record holding the after-image of
// each row it changes (the full row's values after the op), written into a
// Pebble batch under the log family, together with any other family writes of
// the same tally batch, and committed as one Pebble batch. Only then is it
// applied to memory. Because records are after-images, replaying a record
// twice, or replaying it over a checkpoint that already contains it, yields the
// same state: recovery and fuzzy checkpoints rely on this. See commit.go for
// the ordering rules and Durability for what each mode can lose.
//
// # Checkpoints and recovery
//
// A checkpoint writes every hot table as chunks tagged with the log sequence
// S they include, then, in one synced batch, points the meta "ckpt" key at S
// (with the number of chunks it wrote), range-deletes the log up to S and the
// chunks of older checkpoints. Open loads the chunks of the checkpoint that
// "ckpt" points at and replays the log records after S; a chunk missing from
// the count, or a gap in the log's sequence numbers, is ErrCorrupt. An interrupted checkpoint leaves "ckpt" at the previous
// one; its partial chunks are deleted on the next Open.
//
// # Faults
//
// A full disk refuses writes with ErrDiskFull (reads go on; writes resume
// once Pebble can write sstables again) and makes a writable Open fail
// within seconds; Options.ReadOnly opens a store without writing anything.
// A failed WAL write or sync, or an error Pebble calls fatal, fails the
// store: every later write returns ErrFailed and the store must be
// reopened. Damaged files come back as ErrCorrupt naming the file, from
// Open (WAL and MANIFEST damage is checked before Pebble replays them), from
// the read that finds them, and from Verify, which reads every block of
// every sstable. Pebble's errors go to Stats.Errors, never to stderr, and
// the host process never panics. docs/FAULTS.md has the corruption matrix
// and what is not detected.
//
// # Tests
//
// The default tests take seconds. Heavier runs are opt-in:
// TALLY_FAULT_EXHAUSTIVE=1 flips every byte of the WAL and of small store
// files (and 4096 of each sstable) instead of a sample; TALLY_DISKFULL_TEST=1
// fills a real tmpfs (needs root).
//
// # Caveats
//
// A write is visible to readers as soon as it is in Pebble's WAL buffer, a
// little before its fsync completes under SyncAlways (as in Pebble itself). If
// that fsync fails the store enters a failed state: every later write returns
// ErrFailed and the process should reopen the store.
package store
