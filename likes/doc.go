// Package likes is tally's like service: like, unlike, dislike and
// undislike per (business, item, user), the like and dislike counts of an
// item, a user's state on a page of items, an item's likers, a user's likes
// newest first, the likes an owner received, and exact leaderboards per
// business, all time and per UTC day. It is built on package store only:
// counts are counter rows, everything else lives in key families.
//
// # API
//
//	l, err := likes.New(db, nil)                 // or tally.Open, which wires every package
//	err = l.AddBusiness("video", likes.BusinessOptions{}) // declare, once
//	res, err := l.Like("video", item, user, owner) // res.Changed, res.Likes, res.Dislikes
//	l.Unlike / l.Dislike / l.Undislike / l.SetOwner
//	counts, err := l.Counts("video", items, nil)   // []Counts{Likes, Dislikes}
//	states, err := l.States("video", user, items, nil) // []State: None, Liked, Disliked
//	page, err := l.Likers("video", item, cursor, 100) // page.IDs, page.Next ("" at the end)
//	page, err = l.UserLikes("video", user, cursor, 100) // newest first, page.Times
//	top, err := l.Top("video", 100)             // []Entry{Rank, Item, Likes}
//	top, err = l.TopDay("video", day, 100)      // the UTC day's board
//	e, ok, err := l.Rank("video", item)         // also RankDay
//	n, err := l.Received(owner)
//	st, err := l.Load(ctx, "video", history, progress) // bulk import
//	err = l.Check()                             // every invariant, for tests and tools
//
// A business is named by a string (1 to MaxBusinessLen of [A-Za-z0-9_-]) and
// declared by AddBusiness or by a Load that names it, like counters and
// unread kinds: a like, dislike or SetOwner in a business nobody declared
// (a typo) fails with ErrUnknownBusiness and creates nothing, unless
// Options.CreateBusinesses (for hosts whose names never come from users).
// Reads of a business that does not exist answer zeros, None and empty
// pages, like a missing Redis key.
// Errors are the package's sentinels (ErrInvalidBusiness, ErrUnknownBusiness, ErrLimit,
// ErrBadCursor, ErrStaleCursor, ErrOwnerMismatch, ErrDayNotKept, ErrBadTime,
// ErrInvalidOption, ErrBusinessConflict) and the store's; bad input
// changes nothing.
//
// # Data model and invariants
//
// A user's state on an item is none, like or dislike; like and dislike
// exclude each other (a dislike replaces a like). Each transition is
// idempotent (a repeated like changes nothing and reports Changed=false)
// and writes, in one store batch: the state, the set member, the user-list
// entry, the item's counter row (likes, dislikes), its board keys when its
// score changes bucket (board.go), its day score, the owner's received
// total. So through crashes: counts equal set sizes, boards agree with
// counts, user lists with states, and received totals with the likes of
// the items owned. The boards' histograms (Rank's count of the items in
// higher buckets) live in memory, derived from the board keys (hist.go).
// Check verifies all of it.
//
// Counts: business B's counter "likes_B" (columns likes, dislikes, keyed by
// item id; shaped by BusinessOptions: range bits and age policy, default 48
// range bits and the newest 64 ranges hot). Received totals: the counter
// "likes_received" (column received, keyed by owner id, kept hot), created
// by the first transition that names an owner. The package owns these
// counters: writing them directly breaks the invariants.
//
// An item's owner is set by the first Like that names one; it is stored in
// the item's record, so Unlike needs no owner, and naming the owner late
// credits the likes already there. A Like naming another owner fails with
// ErrOwnerMismatch; SetOwner moves an item (and its likes) to a new owner.
//
// # Key families
//
// Prefixes 0x40-0x4A (store's family table lists them too). Integers are
// big-endian, so Pebble's order is numeric order.
//
//	prefix  family          key layout (after prefix)                      value
//	------  --------------  ---------------------------------------------  -----------------------------------------
//	0x40    likes-meta      name: "config", "secret", "biz/" + business,   config, cursor secret, business, load
//	                        "load/" + business id u32                      intent records (records.go; CRC-32C)
//	0x41    likes-state     biz u32 | user u64 | item u64                  state record: version<<4|state, uvarint ms
//	0x42    likes-item      biz u32 | item u64                             item record: version, flags (roaring),
//	                                                                       uvarint owner; absent when both are zero
//	0x43    likes-set       biz u32 | item u64 | kind u8 | user u64        empty: a member of a list set
//	                                                                       (kind 1 likers, 2 dislikers)
//	0x44    likes-bitmap    biz u32 | item u64 | kind u8 | chunk u32       roaring bitmap (store.MergeRoaring format)
//	                                                                       of the ordinals of one 4,096-ordinal chunk
//	0x45    likes-user      biz u32 | user u64 | ms u64 | item u64         empty: a user's like, by time
//	0x46    likes-board     biz u32 | day u32 | ^bucket u16 | item u64     empty: an item on a board (day 2^32-1 is
//	                                                                       the all-time board)
//	0x47    likes-dayscore  biz u32 | day u32 | item u64                   store.MergeAdd value: the item's likes of
//	                                                                       that UTC day still standing
//	0x48    likes-hist      biz u32 | day u32 | ^bucket u16 | sign u8      no longer written (format 2): see below
//	0x49    likes-ord       user u64                                       ordinal record: version, ordinal u32
//	0x4A    likes-ordrev    ordinal u32                                    version, user u64
//
// Until issue 18 (likes format 1) 0x48 held the boards' histograms,
// store.MergeAdd operands written with every board move: the items that
// entered (sign 0) or left (1) a bucket. They now live in memory (hist.go):
// New counts the board keys, and every batch moving board keys changes
// them as it commits (store.Batch.OnApply). The likes format is the
// version byte of the config record (records.go): the first writable New
// of a format 1 store deletes the whole likes-hist family with one range
// deletion in the batch that rewrites the config as format 2 (a crash
// before it leaves format 1, and the next New does it again); a read-only
// New ignores the keys, which nothing reads. A build of format 1 refuses a
// format 2 config (its decoder wants version 1) rather than answer Rank
// from keys that no longer count the moves. TestFormat1Store opens a store
// that build wrote and checks every board answer.
//
// Days are UTC days since 1970-01-01. The per-like values carry a version
// but no checksum of their own (like store's merge payloads they sit in
// Pebble's checksummed blocks and WAL, and the decoders reject every
// malformed shape); the meta records end with a CRC-32C. Every decoder is
// fuzzed (FuzzDecodeRecords, FuzzCursor) and pinned by TestGolden.
//
// # Like sets: lists, and roaring bitmaps where they pay
//
// A set starts as one key per member (likes-set): a like is a blind put,
// likers list in user id order, ~12 bytes a member on disk. When an item's
// likes or dislikes reach Options.RoaringThreshold (default 4,096, persisted)
// the item's sets are converted, in the batch of the transition that
// crosses it, to roaring bitmaps of user ordinals: users get dense 32-bit
// ordinals (likes-ord, likes-ordrev) the first time they join a roaring
// set, and the bitmaps are cut into chunks of 4,096 ordinals, one key each,
// written whole by the conversion and changed by a transition with a blind
// MergeRoaring operand (see chunkBits in keys.go for the measurements).
// Dense sets cost about 2 bytes
// a member there. Measured (BenchmarkBytesPerLike, 1M likes on 200k items,
// Zipf 1.1; busy machine): with 50 likes a user, 39.2 bytes a like on disk
// adaptive against 40.1 with lists only; with one like a user the ordinal
// maps (two keys a user) cost more than the bitmaps save (52.4 against
// 45.3). The set is a small part
// of a like's bytes (the state and user-list keys are most of them), so the
// default threshold converts only large sets; a set never converts back.
// Roaring sets list likers in ordinal order (the order users first joined a
// roaring set); a cursor issued before a conversion is ErrStaleCursor.
//
// # States of a page
//
// States is the most frequent read: a user's states are adjacent keys
// (business | user | item), so a page of 20 items is one iterator bounded
// to the user's keys and one forward seek per item in item order.
// BenchmarkStates measures it against a point Get per item: 16.6 µs
// against 75 µs a page (busy 2-core machine).
//
// # Concurrency
//
// Transitions of one item serialize on its stripe (hash of business and
// item, Options.Stripes, default 1,024), which makes "read the previous
// state, then commit" atomic per item. A stripe combines: the transitions
// queued while one of its batches commits are applied in order as the next
// batch, so a popular item's likes share commits and fsyncs (write.go has
// the argument and the alternatives; Stats reports groups, the largest one
// and how often a transition waited). Keys shared between items (received
// totals) are only changed blindly (counter increments); the in-memory
// histograms shared between items are changed under the store's commit
// lock as each batch applies, so Rank, which reads them and the board keys
// inside one db.View, never counts a move half applied (hist.go has the
// argument, and the lock-based alternative it beats). Ordinal allocation is serialized by its own mutex,
// and a pending ordinal is shared by every batch that needs it until one
// commits. A bounded cache of user ordinals (ordcache.go,
// Options.OrdinalCacheBytes, 1 MiB by default) spares a transition on a
// roaring set the Pebble Get of likes-ord: an ordinal never changes once
// in the store, so entries filled after a lookup or a commit stay true
// (a store reopen clears it; Check verifies it). Each stripe caches its items' records and latest day scores
// (coherent: only the stripe's leader and Load write them). A Bloom filter
// of the keys of the state, ordinal, item and day score families
// (keyfilter.go) lets a transition skip the Gets of keys that do not exist,
// most of what it reads: New fills it from the store (a scan of those
// families; none on a read-only store), a key is added before the batch
// writing it commits, and Check verifies that it holds every key. It costs
// 10 bits a key. Reads take no
// locks; Top and Rank read inside db.View so board keys and counts are of
// one moment; use db.View to read several things at one moment.
//
// # Leaderboards
//
// A board is exact for any N up to MaxTop: keys ordered by log-linear
// score bucket, a bucket sorted by exact score at read time (board.go). Day
// boards count the likes made that UTC day and still standing (an unlike
// takes a like off the day it was made); Options.BoardDays (default 7,
// persisted; negative turns them off) are kept, and older days are deleted
// by a queued job (store's job queue, paced) that the first write of a day
// enqueues. Rank is competition ranking (ties share a rank).
//
// # Bulk load
//
// Load (load.go) imports historical likes without the counter log: states
// and ordinals are read ahead in key order, batches of 16,384 likes carry
// every per-like write, and the counts are loaded at the end with
// store.DB.Load. A load intent makes it crash-safe: New recounts the sets of
// a business whose load was interrupted, and running the load again
// finishes it. A New on a read-only store cannot recount: it opens all the
// same, names the business in InterruptedLoads and Stats
// ("interrupted_loads"), and Check skips comparing that business's counts
// with its sets until a writable New finishes the load. While a load runs transitions wait, and the counts of its
// items lag their sets (readers may see it).
//
// # Cursors
//
// Likers and UserLikes return opaque cursors: the list (kind, business,
// item or user) and the position, signed with HMAC-SHA256 under a random
// per-store secret (likes-meta "secret"), base64url. A cursor this store
// did not issue for this list is ErrBadCursor.
//
// # Caveats
//
//   - Day scores are written whole, never merged to nothing. This was
//     forced by a Pebble v2.1.7 flush panic on merges that finish as
//     deletions; store no longer asks Pebble for those (store's
//     TestMergeToNothingThenFlush), which roaring chunks now rely on (a
//     chunk whose members all left merges to nothing and reads as absent).
//   - New scans the state, ordinal, item and day score families to fill
//     the key filter, and the board family to count the histograms: its
//     time grows with the likes and items stored (bench/RESULTS.md,
//     "Histograms in memory"). The histograms cost ~1 KiB a board plus
//     512 bytes for each group of 64 buckets with items.
//   - The "received" total sums over every business.
//   - A hot item's counter range must be hot for counts to be cheap: pick
//     BusinessOptions so recent items stay hot.
//
// # Tests and benchmarks
//
// go test ./likes runs in seconds. Longer runs are opt-in:
//
//	TALLY_LIKES_MODEL_STEPS=N   steps of each TestModel run (default 400)
//	TALLY_LIKES_MODEL_SEEDS=N   seeds of TestModel (default 2)
//	TALLY_LIKES_SEED=S          repeat one TestModel seed (it is logged)
//	TALLY_LIKES_SIM_ROUNDS=N    rounds of TestSimulation (default 6)
//
// and the fuzzers: go test -fuzz=FuzzDecodeRecords ./likes (or FuzzCursor).
// Benchmark sizes: TALLY_LIKES_BENCH_LIKES (likes loaded first, default
// 200,000), TALLY_LIKES_BENCH_ITEMS and TALLY_LIKES_BENCH_USERS (default
// 100,000 each); bench/cmd/likebench compares with Redis.
package likes
