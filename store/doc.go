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
// high bits (id >> range bits), and a key, the low bits. Each range of a
// counter is held in memory by a fixed-width table of package hot. A row whose
// columns are all zero is not stored anywhere and reads as zeros.
//
// A range costs ~22 KiB before its first row, so ranges must hold many rows.
// A counter created without CounterOptions.RangeBits starts at 32 bits and
// widens its ranges (40, 48, 56 or 64 bits, while every range is hot) when
// the ids leave few rows per range: dense, snowflake and random 64-bit ids
// all cost ~8-13 bytes per 2-column row (widen.go, TestBytesPerRowByIDScheme).
// An explicit RangeBits stays fixed; Stats warns when it costs more than
// twice a row's target (CounterStats.Warning).
//
// # Memory
//
// Stats' MemBytes counts what the hot tier holds (hot tables by allocation,
// deltas, cold descriptors, range states); TestMemBytesMatchesHeap checks
// the heap grows by it. Caches and write buffers beside it (Pebble's
// memtables and block cache, the decoded cold block cache) are sized from
// one knob, Options.MemoryBudget (64 MiB by default), shown in Stats.Memory.
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
// encoders live in keys.go, except the job and source keys (queue.go's
// appendJobKey, once.go's appendSourceKey) and the family records (family.go).
//
//	prefix  family       key layout (after prefix)                       value
//	------  -----------  ----------------------------------------------  -----------------------------------
//	0x01    meta         name (ASCII, e.g. "format", "ckpt",             format version; checkpoint pointer;
//	                     "counter/" + u32 counter id,                    counter schema (see schema.go);
//	                     "intent/" + u64 intent id,                      intent (see lifetime.go);
//	                     "family/" + prefix byte,                        family record (see family.go);
//	                     "rangebits/" + u32 counter id)                  widened range width (see widen.go)
//	0x02    log          seq u64                                         mutation record (see log.go)
//	0x03    checkpoint   ckptSeq u64 | counter u32 | range u64 |         checkpoint chunk (see checkpoint.go)
//	                     chunk u32
//	0x04    cold block   counter u32 | range u64 | block u32             cold block (package cold)
//	0x05    cold range   counter u32 | range u64                         cold range descriptor (package cold)
//	0x06    job          job id u64                                      job record (see queue.go)
//	0x07    source       source name (1-256 bytes)                       highest applied seq (see once.go)
//	0x08-0F (reserved for store)
//
// Families of the packages above store (0x10-0xFF) are declared by their
// owners with a FamilySpec (see family.go) and listed here, so every prefix
// of the module is in one place. Each owner documents its layouts in its
// own package doc. Ranges: 0x20-0x2F timeline, 0x30-0x3F unread, 0x40-0x4F
// likes; 0x50-0x5F replica (package replica: the Raft log and state of a
// replicated store; its apply marks are the source "raft" of 0x07, see
// apply.go); 0x10-0x1F and 0x60-0xDF are free for hosts; 0xE0-0xEF are used
// by store's own tests.
//
//	prefix  family       owner     key layout (after prefix)                     value
//	------  -----------  --------  --------------------------------------------  ----------------------------
//	0x20    tl_config     timeline  "c" / "o"                                     timeline Config / required observers
//	0x21    tl_ords       timeline  ordinal u32                                   user id u64
//	0x22    tl_followees  timeline  user ordinal u32                              sorted followee ids
//	0x23    tl_followers  timeline  author ordinal u32 | chunk u16                MergeRoaring (follower ordinals)
//	0x24    tl_active     timeline  chunk u16                                     MergeRoaring (push set)
//	0x25    tl_pulled     timeline  author id u64                                 empty
//	0x26    tl_posts      timeline  post id u64                                   post record (author, delivery)
//	0x27    tl_outbox     timeline  author id u64 | ^post id u64 (inverted)      empty, or a typed post's type and reference
//	0x28    tl_inbox      timeline  user ordinal u32                              MergeTopList (post, author; type, reference)
//	0x29    tl_pending    timeline  user ordinal u32 | author id u64              empty (backfill pending)
//	0x2a    tl_removed    timeline  post id u64                                   author id u64 (unpublished post)
//	0x2b    tl_fanq       timeline  post id u64                                   author id u64 (post waiting for the shared fan-out)
//	0x2c    tl_mute       timeline  user id u64 | author id u64                   empty (user mutes author)
//	0x2d    tl_hide       timeline  author id u64 | follower id u64               empty (author hides from follower)
//	0x2e    tl_reposts    timeline  original post u64 | repost id u64            reposter id u64
//	0x2f    tl_xshard     timeline  'f' | author u64 | shard u32 / 's' | post u64 | shard u32  count / author (sharding)
//	0x30    unread_meta   unread    name ("config")                               unread config (flags)
//	0x31    unread_feed   unread    user id u64                                   feed snapshot: custom merge 0xB1
//	                                                                              (snapshot or operation list)
//	0x32    unread_chan   unread    channel id u32                                channel record (name, tag)
//	0x33    unread_notice unread    channel id u32 | notice id u64                empty
//	0x34    unread_tag    unread    user id u64 | channel id u32 | kind byte      dot tag or last-read notice id
//	0x3F    (tests)       unread    user u64 | followee u64                       unread's test follow graph only
//	(filled by timeline, unread and likes as they declare their families)
//	0x40    likes-meta      likes  name: "config", "secret", "biz/"+name,       config/secret/business/load intent
//	                               "load/"+business u32                          records (CRC-32C)
//	0x41    likes-state     likes  biz u32 | user u64 | item u64                 state: version<<4|state, uvarint ms
//	0x42    likes-item      likes  biz u32 | item u64                            version, flags, uvarint owner
//	0x43    likes-set       likes  biz u32 | item u64 | kind u8 | user u64       empty (list set member)
//	0x44    likes-bitmap    likes  biz u32 | item u64 | kind u8 | chunk u32      roaring32 (MergeRoaring) of ordinals
//	0x45    likes-user      likes  biz u32 | user u64 | ms u64 | item u64        empty (a user's like by time)
//	0x46    likes-board     likes  biz u32 | day u32 | ^bucket u16 | item u64    empty (score-ordered board)
//	0x47    likes-dayscore  likes  biz u32 | day u32 | item u64                  add-int64 (MergeAdd): day's likes
//	0x48    likes-hist      likes  biz u32 | day u32 | ^bucket u16 | sign u8     add-int64 (MergeAdd): bucket counts of likes format 1 (now in memory)
//	0x49    likes-ord       likes  user u64                                      version, ordinal u32
//	0x4A    likes-ordrev    likes  ordinal u32                                   version, user u64
//	0x50    raft-log        replica  index u64                                   entry (term, type, data; see replica/storage.go)
//	0x51    raft-state      replica  "hard" / "conf" / "snap" / "members" /      hard state; conf state; snapshot metadata
//	                                 "boot"                                      and truncated index/term; member table; starts
//
// Families hosts declared in the free range (0x60-0xDF):
//
//	0x60    shard-meta     shard/meta  "state"                                   the metadata group's slot map, request ids, applied index
//	0x68    xshard-out     xshard   target u32 | seq u64                         a cross-shard message (time, argv)
//	0x69    xshard-state   xshard   'h' | target u32 / 'i' | source u32          outbox head (last, acked) / inbox record
//
// Values of a family with a merge operator start with the operator's id
// byte (merge.go); a value whose first byte is 0 is a deferred merge list.
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
// A checkpoint writes an intent naming S, then every hot table as chunks
// tagged with the log sequence S they include, then, in one synced batch,
// points the meta "ckpt" key at S (with the number of chunks it wrote),
// range-deletes the log up to S and the chunks of older checkpoints, and
// deletes the intent. Open loads the chunks of the checkpoint that "ckpt"
// points at and replays the log records after S; a chunk missing from the
// count, or a gap in the log's sequence numbers, is ErrCorrupt. An interrupted checkpoint leaves "ckpt" at the previous one and its
// intent, by which the next Open knows its partial chunks are garbage.
//
// # Lifetimes and intents
//
// Nothing on disk is deleted for being unknown. Seals, merges, cold loads
// and checkpoints write an intent before their data, naming what they may
// leave; a merge's replaced blocks are named by an intent too and deleted
// only after the last reader of the old blocks lets go. Open deletes what
// intents name and nothing a value references; it refuses checkpoint
// chunks with no pointer or intent (ErrCorrupt, nothing changed) and lists
// other unaccounted data in RecoveryStats.Unaccounted; Verify reports every
// block and chunk that nothing accounts for. The rules, and the reference
// counts readers take on a cold range's blocks, are at the top of
// lifetime.go.
//
// # Tests
//
// go test ./store runs in seconds. Longer runs are opt-in:
// TALLY_SIM_STEPS=N sets the rounds of TestSimulation (default 60, 15 with
// -short; each round runs readers, writers and jobs at once and may end in
// a reopen or a crash) and TALLY_SIM_SEED repeats a run's seed (logged by
// the test). The benchmarks' sizes are set by the variables listed in
// bench_test.go and big_bench_test.go.
//
// # Schema changes
//
// CreateCounter and AddColumn validate a change against every tier before
// it becomes durable (see DB.AddColumn and docs/ARCHITECTURE.md), with the
// limits of package internal/limits; a refused change leaves memory and
// disk as they were. TestSchemaModel checks this against a model with
// options at and past every limit, interleaved with writes, seals, merges,
// reopens and crashes; heavier runs set TALLY_SCHEMA_SEEDS and
// TALLY_SCHEMA_STEPS (defaults 6 and 500), and FuzzSchemaOps drives the same
// simulation from fuzzer bytes (go test -fuzz=FuzzSchemaOps ./store/).
//
// # Faults
//
// A full disk refuses writes with ErrDiskFull (reads go on; writes resume
// once Pebble can write sstables again) and makes a writable Open fail
// within seconds; Options.ReadOnly opens a store without writing anything.
// A failed WAL write or sync, or an error Pebble calls fatal, fails the
// store: every later write returns ErrFailed and the store must be
// reopened, or, with Options.ReopenOnFailure, reopens itself in place once
// a probe shows the disk takes writes again (reopen.go): the same *DB and
// its handles go on, readers never see an error, and packages above
// follow through DB.OnReopen and Batch generations. Damaged files come back as ErrCorrupt naming the file, from
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
// ErrFailed and the process should reopen the store (or let
// Options.ReopenOnFailure do it in place). A reopen in place replaces the
// state by what recovery finds: state a host derived from the store (an id
// allocator, a cache) must follow it (DB.OnReopen, DB.Generation).
package store
