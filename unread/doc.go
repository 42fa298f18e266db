// Package unread keeps the unread counts of a social platform on a tally
// store: the badge numbers a client polls without its user doing anything,
// so reads dominate (100k+/s for one kind, p9999 under 10 ms). It owns three
// models, after the published designs tally follows, and uses package store
// and the follow graph of package timeline (through FollowGraph and its
// users counter) only.
//
//	x, err := unread.New(db, &unread.Options{Graph: tl}) // tl: *timeline.Timeline
//
//	x.AddKind("mention", store.ColumnOptions{})          // one-to-one counts
//	x.Incr(user, "mention", 1); x.Get(user, buf); x.Reset(user, "mention")
//
//	x.Mark("activity"); x.Has(user, "activity"); x.Clear(user, "activity")
//	x.Post("system", noticeID); x.Unread(user, "system"); x.Read(user, "system")
//
//	x.Feed(user); x.FeedReset(user)                     // feed unread
//
// # One-to-one counts
//
// @mentions, comments, likes received...: counter KindsCounter, a row per
// user id kept hot (store.KeepHot), a column per kind. Get returns every kind
// in one hot-table read, Incr is the store's increment (never below 0, never
// above the kind's maximum: store.ErrValueRange), Reset sets kinds to 0 with
// store's Batch.SetColumn (atomically, without losing a concurrent
// increment of another kind) or deletes the row. Kinds are added live
// (AddKind: a store column, 16-bit width hint and 32-bit maximum by
// default; rows are not rewritten). A user whose counts are all zero has no
// row and costs nothing.
//
// # Red dots and system notices
//
// A channel has a tag (how many times it was marked) and a sorted list of
// notice ids, in memory and in families unread_chan and unread_notice; a
// user has, per channel, a dot tag and a last-read notice id (unread_tag).
// Mark is one write whatever the number of users; Has compares the user's
// tag with the channel's; Unread counts the notice ids above the user's last
// read one by binary search (exact, O(log n)). Channels are declared by
// their first Mark or Post; Clear and Read of an undeclared channel return
// ErrUnknownChannel, while Has and Unread read it as nothing unread (no
// dot, 0), like a missing Redis key.
//
// The published design's rules for users with no tag: a user who never
// cleared a channel has a tag older than every mark, so a broadcast
// reaches them, the first mark included; a user who never read a
// channel's notices is new and has 0 unread until their first Read. Has
// and Unread never write. Idle users' tags are not dropped: they are a few
// bytes on disk, not memory, and dropping one would lose what its user
// had read. ForgetTags drops a user's tags on request (their dots show
// again; their notices read 0).
//
// # Feed unread
//
// The new posts of the accounts a user follows, exactly:
//
//	Feed(u) = Σ over u's current followees f of max(0, posts(f) − base(u, f))
//
// where base(u, f) is f's post count at u's last FeedReset or at the moment
// u followed f, whichever is later. So a follow adds none of the followee's
// old posts, an unfollow removes that author at once, a re-follow starts
// from the count at the re-follow, an unpublished post stops counting, and a
// snapshot evicted from the cache or read after a restart answers exactly
// what it did (the published design loses accuracy in each of these cases).
//
// The snapshot {f → base} is one value per user in family unread_feed. It
// changes only by merge operands of a custom operator (snapshot.go): a
// follow or unfollow written by unread's FollowObserver inside timeline's
// own batch, so the snapshot commits atomically with the edge and at the
// followee's count of that commit; and a reset, which reads the snapshot and
// the post counts under db.View (one moment, T1) and commits an operand
// carrying the number of operations the value had applied at T1. Applied in
// commit order, the reset changes only entries no later operation touched,
// so a follow, unfollow or re-follow that commits between T1 and the reset's
// commit keeps its effect: no lock has to span timeline's commit, and
// Pebble may group the operands any way (the operator is associative:
// TestMergeAssociative). Resets of one user are serialized by a lock stripe
// (so the later reset always read later), and a reset that would change no
// base writes nothing.
//
// A read takes the snapshot from a cache (bounded by
// Options.SnapshotCacheBytes, least recently used out first; it holds the
// snapshot's columns as stored, ~3-5 bytes a followee, decoded on each read
// in about a microsecond) or reads it from Pebble, then reads every
// followee's post count with the graph's PostCounts (one MultiGet of the
// users counter, into the reader's reused buffer). The cache cannot go
// stale:
// every snapshot operation also increments the user's "gen" in counter
// FeedCounter in the same batch, a cached snapshot is used only while its
// gen is current, and a miss rereads Pebble (never reads as zero); see
// cache.go for why the order of a batch's halves makes this exact. The gen
// read is one hot-table read; a user with gen 0 in a complete store (below)
// has no snapshot and reads 0 without touching Pebble.
//
// # Shards
//
// On a sharded cluster (issue 23) a user's snapshot lives on the user's
// shard, and so do the post counts Feed reads: timeline keeps, on every
// shard with followers of an author of another shard, a copy of that
// author's post count equal to the real one (installed by the backfill
// that starts the copy, kept by the author's publish and unpublish
// messages; timeline/remote.go), stale by the cross-shard stream's lag.
// So Feed stays one local read. "The moment u followed f" is read on u's
// shard: when f's copy is installed there, timeline tells the observer
// of each visible local follower's follow anew at the installed count
// (f's posts from before the copy reached the shard are not unread).
// After a FeedReset, feed unread equals the single-shard model exactly
// (timeline's TestShardedSimulation). Nothing in this package changes.
//
// # Users whose follows predate unread
//
// unread must see every follow-graph change: every process that changes the
// graph must open unread on its timeline (New registers the observer;
// cmd/tally and server do). The first New on a store records whether the
// graph was empty then (counter timeline.UsersCounter holds no row):
//
//   - complete (the normal case): every follow went through the observer,
//     so a user's snapshot is exact from its first operation, and a user
//     without one follows nobody;
//   - lazy (unread added to a store whose graph already had follows): a
//     user's snapshot is "not initialized" until their first Feed or
//     FeedReset, which reads the graph's followees under the same View and
//     fills in the followees the snapshot misses at their current counts
//     (0 unread for them; follows unread did see keep their bases), persisted.
//     Until then an unfollow leaves a dead entry, so the filling read can
//     tell "unfollowed after T1" from "never seen"; the fill drops them. A
//     user of a lazy store who follows nobody reads the graph on each Feed
//     and writes nothing.
//
// # Families and counters
//
//	prefix  family          key (after prefix)                  value
//	------  --------------  ----------------------------------  ---------------------------------------------
//	0x30    unread_meta     name: "config"                      config record (appendConfig): complete flag
//	0x31    unread_feed     user id u64                         merge operator 0xB1 "unread-feed-v1": a whole
//	                                                            snapshot or an operation list (snapshot.go)
//	0x32    unread_chan     channel id u32 (1, 2, ...)          channel record (appendChannel): name, tag
//	0x33    unread_notice   channel id u32 | notice id u64      empty
//	0x34    unread_tag      user id u64 | channel id u32 |      tag record (appendTag): the channel's tag at
//	                        kind byte ('d' dot, 'n' notice)     the last clear, or the last read notice id
//	0x3F    (tests only)    user id u64 | followee id u64       empty: the tests' stand-in follow graph
//
// All integers in keys are big-endian, so Pebble's order is numeric order.
// Every value carries a version byte and a CRC-32C; every decoder is fuzzed
// (FuzzDecodeSnapshot) and pinned by a golden test (testdata/golden.txt).
// The merge operator's id 0xB1 is unread's within the custom range
// (128-255); declare Families() in store.Options.Families so Pebble can
// merge from the moment it opens (New registers them otherwise).
//
// Counters: KindsCounter ("unread_kinds", a column per kind) and FeedCounter
// ("unread_feed", column "gen", 16-bit hint, 64-bit maximum), both KeepHot
// with Options.RangeBits (default 32) range bits.
//
// A snapshot of 200 followees drawn from 1M users takes about 3 bytes a
// followee (TestSnapshotSize): ids as deltas and bases as varints, in
// columns; the setAt tags, nearly constant, run-length encode. zstd is
// tried on bodies of 128 bytes and more and kept only when it saves an
// eighth, which on such ids and counts it does not (it does for clustered
// ids).
//
// # Tests
//
// go test ./unread runs in seconds: table tests of every call and its bad
// inputs; TestModel (all three models against a plain model, with
// evictions, checkpoints, reopens and crashes, on complete and lazy stores);
// TestSimulation (readers, resets, follows, publishes, counts, dots and
// notices at once, Check between rounds); the datadriven transcripts in
// testdata/feed; the deterministic reset and fill races (TestFeedResetRaces,
// TestFeedInitRaces). Each runs against the real timeline and against a
// stand-in follow graph. Longer runs: TALLY_UNREAD_MODEL_SEEDS and
// TALLY_UNREAD_MODEL_STEPS (defaults 4 and 400; TALLY_UNREAD_MODEL_SEED
// repeats one), TALLY_UNREAD_SIM_ROUNDS (default 12; TALLY_UNREAD_SIM_SEED
// repeats one), go test -fuzz=FuzzDecodeSnapshot ./unread/. Benchmarks
// (bench_test.go) size their data with TALLY_UNREAD_BENCH_USERS (ids of the
// one-to-one counts), TALLY_UNREAD_BENCH_FEED_USERS,
// TALLY_UNREAD_BENCH_FOLLOWS and TALLY_UNREAD_BENCH_AUTHORS (the feed's);
// bench/cmd/unreadbench compares with Redis.
//
// # Caveats
//
//   - In a lazy store the first Feed of a user writes the filled
//     snapshot: a read that may commit. (Has and Unread never write.)
//   - A user with feed activity has a row in FeedCounter (a few bytes of
//     memory) besides the snapshot on disk.
//   - Channels (at most MaxChannels) and their notice ids (at most
//     MaxNotices each) are held in memory: 8 bytes a notice.
//   - Open one Unread per store in a process: resets of a user are
//     serialized by the Unread's lock stripes, which the exactness of a
//     reset racing another reset of the same user relies on.
package unread
