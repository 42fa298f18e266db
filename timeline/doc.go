// Package timeline is tally's feed system: a home timeline per user built
// from the posts of the accounts they follow, at the scale of a microblog
// (authors with 10^7 followers, users following hundreds), kept in the
// store's Pebble instance as key families next to the users counter.
//
// It owns the follow graph (Follow and FollowMany, Unfollow and
// UnfollowMany, IsFollowing, FollowersPage, FolloweesPage, Followees,
// LoadFollows, counts in UsersCounter), the posts (Publish and
// PublishMany, Unpublish and UnpublishMany: outboxes and the post index),
// the inboxes with their
// fan-out, backfill, cleanup and expiry jobs, and home pages (Home) by
// cursor. It uses package store only.
//
//	tl, err := timeline.New(db, nil)      // creates "users", registers families and job handlers
//	tl.Follow(1, 20)                      // 1's home shows 20's recent posts at once
//	res, _ := tl.Publish(20, postID)      // outbox + count + fan-out job, one batch
//	db.WaitJob(ctx, res.Job)              // or let the store's workers run it
//	page, _ := tl.Home(1, "", 20)         // newest first; page.Cursor, page.NoMore
//
// # Data model
//
// Users and posts are 64-bit ids, 1..MaxID, and nobody follows
// themselves: CheckID and Edge.Check state these rules once, for the
// package and for hosts that refuse input before calling it (ErrBadID,
// ErrSelfFollow). Post ids are unique across
// authors, for ever (an unpublished id stays its author's), and
// time-ordered (snowflake layout); every timeline is ordered by post id,
// newest first, so entries never tie. Each user who takes part in the
// graph gets a dense 32-bit ordinal (1, 2, ...; multiples of 2^16 are
// skipped, see Sentinels), stored both ways: in the "ord" column of
// UsersCounter (id → ordinal, in memory) and in tl_ords (ordinal → id).
// Ordinals key the sets that must be cheap to store and to intersect: the
// followers of an author are roaring bitmaps of ordinals, one key per 2^16
// ordinals (so an update touches one small value and a fan-out reads the
// chunks in order), and so is the push set, the users whose inbox is live.
// A fan-out intersects the two chunk by chunk.
//
// # Families
//
//	prefix  family        key (after prefix)                 value
//	------  ------------  ---------------------------------  -------------------------------------------
//	0x20    tl_config     "c"                                Config (appendConfig)
//	                      "o"                                required observer names (appendObservers)
//	0x21    tl_ords       ordinal u32                        user id, u64 big-endian
//	0x22    tl_followees  user ordinal u32                   sorted followee ids (appendFollowees)
//	0x23    tl_followers  author ordinal u32 | chunk u16     MergeRoaring: follower ordinals of the chunk
//	0x24    tl_active     chunk u16                          MergeRoaring: push-set ordinals of the chunk
//	0x25    tl_pulled     author id u64                      empty: the author is pulled at read time
//	0x26    tl_posts      post id u64                        post record (appendPost): author, delivery
//	0x27    tl_outbox     author id u64 | ^post id u64       the author's posts, newest first: empty for a post, else its type and reference (appendEntryMeta)
//	0x28    tl_inbox      user ordinal u32                   MergeTopList: (post id, author id) entries, with type and reference (Kind, Ref, RefValue)
//	0x29    tl_pending    user ordinal u32 | author id u64   empty: a follow whose backfill has not run
//	0x2a    tl_removed    post id u64                        author id u64: an unpublished post
//	0x2b    tl_fanq       post id u64                        author id u64: a post waiting for the shared fan-out job
//	0x2c    tl_mute       user id u64 | author id u64        empty: user mutes author (mute.go)
//	0x2d    tl_hide       author id u64 | follower id u64    empty: author hides their posts from follower
//	0x2e    tl_reposts    original post u64 | repost id u64  reposter id u64: the reposts of an original (repost.go)
//	0x2f    tl_xshard     'f' | author id u64 | shard u32    count u64: the author's followers on another shard (remote.go)
//	                      's' | post id u64 | shard u32      author id u64: the shard holds reposts of the post (remote.go)
//
// All integers are big-endian, so Pebble's key order is numeric order;
// ^post is 2^64-1 − post. UsersCounter ("users", KeepHot, 48 range bits)
// holds per user id the columns followers, followees, posts (exact counts,
// equal to the sizes of the sets above: Check verifies it), ord and read
// (the read mark, below). The records' field tables are next to their
// encoders in records.go; each has a version byte and a CRC-32C and is
// fuzzed. The in-memory indexes (pulled authors, pending marks, removed
// posts, the push set) mirror their families and are loaded by New.
//
// # Push to the active, pull for the rest
//
// A user whose inbox is live is in the push set and has a non-zero read
// mark: the Unix second of their last home read (renewed at most once per
// min(1h, ActiveWindow/8)). Publish writes the post into the inbox of
// every follower in the push set: in its own batch when they are few
// (see "Small fan-outs"), or else by a job it enqueues in that batch, which
// writes ChunkSize inboxes per batch, each batch committed with the job's
// cursor (store.JobRun.Commit), so a killed fan-out resumes at its first
// unwritten chunk and a chunk applied twice would still show once (an
// inbox is keyed by post id). The expiry job (hourly, or Expire) takes
// users whose read mark is older than ActiveWindow out of the push set and
// drops their inbox. The first read of a user whose inbox is not live
// rebuilds it by pull (activate): a k-way merge of the newest InboxCap+1
// posts of their followees' outboxes, one forward seek per followee.
//
// Authors with PullThreshold followers or more are pulled: their posts are
// not pushed at all, and every page merges the pulled followees' outboxes
// at read time (Twitter's approach for celebrity accounts). The flag is
// sticky: an author who falls back below stays pulled (pushing again
// would need every follower's inbox backfilled; reading a few pulled
// authors is cheap). Fan-out of a 10^6-follower author is the other path,
// and both are tested and benchmarked.
//
// # Small fan-outs
//
// Most authors have few followers in the push set, and a job per post
// (its record, a lease, a chunk batch with the progress, the record's
// deletion) cost more than the post's deliveries: 91.9k deliveries/s in
// the posts phase of timelinebench, half of Redis's (bench/RESULTS.md,
// "Sustained fan-out"). So a publish sorts its fan-out by size:
//
//   - at most Options.InlineFanout inboxes (64): the deliveries are merge
//     operands in the publish's own batch. No job; the post is in every
//     inbox when Publish returns (PublishResult.Job is 0), and a crash
//     keeps the post with its deliveries or neither. The publish reads the
//     author's followers under the author's lock (so no follow interleaves)
//     and holds pushGate shared from its read of the push set to its
//     commit; an activation adds users to the push set under pushGate
//     exclusively, before it reads the outboxes, so a post is either pushed
//     to the user or already in the outbox the rebuild reads.
//   - an author with at most Options.SharedFanout followers (1000): a
//     marker in tl_fanq, and the shared job, which many posts ride on
//     (PublishResult.Job is its id: DB.WaitJob waits for the post's
//     delivery). It delivers the markers' posts chunk by chunk, deleting
//     their markers in the chunk's batch, under the authors' read locks.
//     Its ordering rules are in shared.go.
//   - otherwise a fan-out job per post, as above.
//
// Both small kinds read the author's followers from an in-memory cache of
// small authors' follower ordinals (Options.FollowerCache,
// follower_cache.go: exact, as every writer of tl_followers holds the
// authors it changes across its commit) and test each against the push
// set, rather than iterating the author's follower chunks.
//
// Unpublish, backfill, rebuild, expiry and pulled authors see no
// difference: a delivery is the same operand whoever writes it.
//
// # Inboxes and their floors
//
// An inbox is a store.MergeTopList value: at most InboxCap (post, author)
// entries, newest first, above a floor; every delivery is a merge operand,
// so fan-out never reads an inbox. The floor says where the inbox's
// knowledge ends: a page takes entries at or above it from the inbox and
// pulls what lies below it from the followees' outboxes, down to the end
// of history.
//
// NB: the floor a read sees depends on how Pebble grouped the operands it
// merged (MergeTopList trims at the cap; a tombstone merged before a trim
// leaves more entries than one merged after it), so a floor read at one
// moment may be higher than one read later. Nothing here decides what to
// write from a floor it read (the model test found the backfill doing so,
// and missing posts). Instead every operand that adds an author's posts is
// self-contained: a backfill or rebuild merges the author's (or the
// followees') newest InboxCap+1 posts, which TopListOperand trims to the
// cap with its own floor, so the inbox is exact above the highest floor
// of the operands in any grouping.
//
// # What a page is made of
//
// Home(user, cursor, limit) reads the user's read mark, their followee
// list and their inbox, and then merges, keeping the limit+1 newest
// entries below the cursor's post id:
//
//   - inbox entries whose author the user follows, is not pulled and has
//     no backfill pending, and whose post is not removed;
//   - the outboxes of the user's pulled followees and of followees whose
//     backfill is pending (tl_pending, in memory);
//   - below the inbox's floor, the outboxes of every other followee.
//
// The page is exact (equal to pulling everything, which the model test
// checks) because the inbox holds every post of every unpulled followee
// above its floor, except posts whose fan-out has not reached it yet
// (fan-out is asynchronous by design; the model allows exactly those),
// and the filters drop what it holds wrongly: entries of accounts
// unfollowed (their cleanup job frees the slots later), of removed posts
// (an in-memory set; the removal job frees the slots later), and of
// authors read by pull. Follows, unfollows and unpublishes therefore show
// on the next read, before their jobs run. The cursor is the last post id
// returned (versioned, checksummed, bound to the user and the page kind):
// posts published after it never shift later pages, and a post inserted
// below it (a backfill, a backdated post) shows on a later page, neither
// skipped nor repeated. NoMore says the history ends with the page.
//
// The read mark makes the inbox trustworthy: a reader reads the mark, the
// inbox and the mark again, and trusts the inbox only if the mark was
// non-zero and unchanged (a sequence lock). Expiry zeroes the mark and
// leaves the push set in one batch and drops the inbox only in a later
// batch; a rebuild sets the mark in the batch that publishes the rebuilt
// inbox. So no reader ever sees a half-built or half-dropped inbox
// (TestSimulation reads "static" homes while their inboxes expire and
// rebuild around them). A user whose inbox is not live is rebuilt under
// the user's lock, once, by the first reader.
//
// What a page costs (bench/RESULTS.md, "Home pages against Redis, issue
// 21"): one Pebble Get (the inbox) and a few hot-table reads. The inbox
// is decoded only as far as the page needs (store.ReadTopList: entries
// come newest first, and the merge stops once nothing further down can
// enter), not whole (up to InboxCap entries for ~21 used). The followee
// list comes from an in-memory cache of recent readers' lists
// (Options.FolloweeCache, fcache.go: bounded in ids, invalidated by every
// writer of tl_followees from before its commit to after it, so a reader
// sees a list the store held during its call). The reader's mutes and
// hides are snapshotted once per page into a small sorted list, and
// de-duplication asks a bit filter of the reposted originals before the
// reposts map (repostIndex: a clear bit proves "never reposted").
//
// # Rebuild on return (activate)
//
//  1. add the user to the push set and drop whatever inbox is left, in one
//     batch, and then in memory; from then on every fan-out that starts
//     delivers to the user;
//  2. merge the newest InboxCap+1 posts of the followees that are not
//     pulled from their outboxes (a post published before step 1 is in
//     them; a later one is pushed);
//  3. merge the result into the inbox and set the read mark in one batch.
//
// # Follow, unfollow, re-follow
//
// Follow (FollowMany, for each new followee) writes the edge (followee
// list, follower bitmap, both counts, the observers' writes) and, if the
// user's inbox is live and the followee not pulled, a pending mark and a
// backfill job, in one batch. Until the
// backfill merges the followee's newest posts into the inbox (and drops the
// mark), reads pull the followee. Unfollow writes the edge's removal and a
// cleanup job that tombstones the followee's entries. Both jobs use the
// pair's coalescing key, so a follow and an unfollow issued close together
// replace each other's pending job and run one at a time, and each job
// checks the pair's state under the user's lock when it commits: the inbox
// ends in the last change's state whatever order the jobs ran in, and reads
// (filtered by the graph) show it from the change's commit on.
//
// # Unpublish: filter on read, then eager removal
//
// Unpublish deletes the outbox entry and the post record, records the id
// in tl_removed and decrements the count, and enqueues (same coalescing
// key as the post's fan-out) a job that tombstones the post in the push
// set's inboxes. Reads drop removed posts through the in-memory set from
// the moment the unpublish commits; the tombstones only free slots.
// Measured: the filter costs one bitmap lookup per inbox entry read (a
// removed set of a million posts is a few MB); checking each entry against
// the post index instead costs one Pebble Get per entry, ~20 per page, and
// cut pages/s about five-fold (BenchmarkHomeFilterByGet against
// BenchmarkHome; the tombstone job costs what a fan-out costs). Eager
// removal alone cannot be exact: a rebuild or backfill that read the
// outbox before the unpublish may merge the post after its tombstone, and
// a tombstone can be trimmed away before it meets its entry (see Floors).
//
// # Mute and hide: filter on read
//
// Mute (user → author: "do not show me author's posts") and hide (author →
// follower: "do not show my posts to follower") are pairs in tl_mute and
// tl_hide, mirrored in memory (loaded by New, like the pending marks).
// Neither touches the follow graph or its counts. A page reads only the
// followees visible to the reader (followed, not muted, not hiding from
// them), so inbox entries and outbox pulls of an invisible followee are
// skipped at once. Inboxes stay visibility-agnostic: fan-out (inline,
// shared, per-post jobs), backfill and rebuild deliver as before, so an
// unmute or unhide shows the author's recent posts at the next page with
// nothing to backfill. MutedPage and HiddenPage list the pairs by cursor.
// FollowObservers see visible pairs only: a mute or hide of a followed
// pair is an Unfollowed for them and its end a Followed (with the author's
// post count then), in the batch that writes the pair, under the same
// user and author locks as a follow; a follow or unfollow of an invisible
// pair is not reported (VisibleFollowees is the set they mirror). So
// unread's feed counts no muted author and no hidden post.
//
// # Typed entries and reposts
//
// An entry is a post, a repost, a comment or a reply (EntryType); a
// repost carries its original post and author, a comment or reply its
// parent and the parent's author. Type and reference are in the outbox
// value (empty for a post, so stores from before keep their bytes) and in
// every inbox entry (a toplist payload becomes version 2 once it holds a
// typed entry; version 1 payloads read as posts), so inline, shared and
// per-post fan-outs, backfills, rebuilds and read-time pulls carry them
// alike. Repost (CLI repost, TL.REPOST) and PublishWith publish them;
// HomeWith filters a page by type. A home shows each original once, at
// its newest visible instance among the shown types (the original by a
// visible followee, or a repost by one), so five followees reposting one
// post show it once, at the newest repost, with that reposter; the rule
// reads the reposts index (tl_reposts, in memory), not the page, so
// pages by cursor neither repeat nor skip. Unpublishing an original
// removes its reposts from every home on read (the removed-post set; no
// job), and a repost is also hidden from a reader who mutes the
// original's author or from whom that author hides. Details and the
// choices against Mastodon's in repost.go.
//
// # Sentinels
//
// Pebble v2.1.7's compaction iterator panics when a merge operator asks to
// delete a key, which MergeRoaring and MergeTopList do when a value merges
// to nothing. So no timeline value ever merges to nothing: every roaring
// operand adds its chunk's sentinel (the chunk's first ordinal, never given
// to a user) and every inbox operand but a delivery (a rebuild's, a
// backfill's, a cleanup's, an unpublish's removal) carries an entry with
// post id 0, which readers skip (it is trimmed once the inbox is full,
// when the floor is non-zero and keeps the value alive). Counts and Check
// subtract them. A delivery of a fan-out (inline, shared or a post's job)
// adds entries only, so it merges, in any grouping, to a value that holds
// an entry or a non-zero floor: it carries no sentinel, which makes a
// one-post delivery 19 bytes instead of 26-29 (by the post id), bytes it
// writes to the WAL, the memtable and every flush and compaction until
// its inbox is compacted. An inbox may therefore hold no sentinel (one
// only deliveries wrote: a delivery racing the expiry that dropped it);
// readers and Check skip key 0 where it is and never require it.
//
// # Commands are all or nothing
//
// FollowMany, UnfollowMany, PublishMany and UnpublishMany take many ids
// and are what the server's TL.FOLLOW, TL.UNFOLLOW, TL.POST and TL.UNPOST
// and the CLI's follow, unfollow, post and unpost call, once per command.
// Each validates the whole command (ids, self-follows, repeats, which
// count once, the followee limit counting only new follows, the owner of
// every post id) and writes it in one batch, or refuses it with nothing
// written, not even a user ordinal. The checks that read stored state run
// under the locks that keep that state still until the batch commits: the
// user's stripe for the followee list and its limit, the author's stripe
// and the post ids' stripes (postMu) for ownership, which every publisher
// and unpublisher of those ids takes whatever author it names. Before
// issue 16 each id was its own call: a follow refused at the limit on its
// second followee kept its first, and two authors racing for one post id
// could both publish it, or one got "belongs to another author" after
// publishing the command's other posts. LoadFollows checks the limit for
// the whole load and again, exactly, under the graph lock before each
// batch writes (see its doc for loads of more than one batch).
//
// # Concurrency
//
// Readers (Home without a rebuild, the lists, counts) take no locks. Writers
// take, in this order: graphMu shared (LoadFollows takes it exclusively per
// batch), the user's stripe of userMu (follow, unfollow, rebuild, expiry,
// the pair jobs' commits), the authors' stripes of authorMu (publish and
// unpublish exclusively; follow and unfollow shared, which is the
// contract's exactness rule: the post count an observer gets is the count
// at its batch's commit; the shared fan-out job's chunks shared), the post
// ids' stripes of postMu (publish and unpublish), then pushGate (shared by
// a publish delivering inline, exclusive around activate's push-set
// update) and shared.gate (shared by a publish relying on the shared job,
// exclusive when that job starts). A call holding several stripes of one
// array takes them in ascending stripe order. Fan-out chunks of a post's
// own job take no lock; shared jobs run one at a time (shared.run).
//
// # Shards
//
// With Options.Remote (issue 23), the timeline is one shard of many: a
// user's data lives on the shard of their slot. Each shard keeps, for
// every author of another shard with followers on it, a copy of that
// author's outbox and post count and the author's local follower set, so
// a post is one message per shard with followers, fanned out there by
// the machinery above, and every read stays local. Follows, unfollows,
// posts, unpublishes and hides of users on other shards travel as
// internal commands (TL.XFOLLOWER, TL.XBACKFILL, TL.XPUBLISH,
// TL.XUNPUBLISH, TL.XHIDE, TL.XSUBSCRIBE, TL.XGONE: RemoteFollower,
// InstallCopy, PublishCopy, UnpublishCopy, RemoteHide, RemoteSubscribe,
// OriginalGone), queued by Remote.Send in the batch of their cause. remote.go has the rules; docs/ARCHITECTURE.md ("Sharding:
// timelines and unread") the reasons and what is not done. A nil Remote
// is one shard, exactly as before.
//
// # Tests
//
// go test ./timeline runs in about ten seconds: behaviour tests per
// item of issue 8, the races of issue 16 (atomic_test.go: each side run
// many times, asserting all or nothing, the followee limit at 99,999
// followees), datadriven transcripts (testdata/), the model test, the
// concurrent simulation, the records' round-trip, golden and fuzz tests,
// and a kill -9 of a child process in the middle of a fan-out (and of a
// shared fan-out job); small fan-outs have their transcripts (inline,
// shared), crash tests (inline_test.go, shared_test.go) and their race
// with activation (TestInlineRacesActivation), and the model test and the
// simulation pick InlineFanout and SharedFanout per run. Heavier runs are
// opt-in:
//
//	TALLY_TL_MODEL_STEPS=3000 TALLY_TL_MODEL_SEEDS=20   the model test (default 400 steps × 3 seeds)
//	TALLY_TL_MODEL_SEED=S, TALLY_TL_MODEL_TRACE=1       repeat one seed, log every operation
//	TALLY_TL_SIM_ROUNDS=40, TALLY_TL_SIM_SEED=S         the simulation (default 8 rounds)
//	TALLY_TL_KILL_FOLLOWERS=200000                      the kill test at the size (default 20,000)
//	TALLY_TL_INLINE_RACE_POSTS=50000                    publishes racing activations (default 5,000)
//	TALLY_TL_BENCH_USERS=1000000                        benchmark world (default 20,000 users)
//	TALLY_TL_BENCH_FOLLOWEES=20, TALLY_TL_BENCH_POSTS=3 its mean followees and posts per user
//	TALLY_TL_XSHARD_STEPS=3000, TALLY_TL_XSHARD_SEED=S  the sharded simulation (default 500 steps × 2 seeds)
//
// go test -fuzz=FuzzRecords ./timeline fuzzes the decoders. The Redis
// comparison is bench/cmd/timelinebench (--quick for a smoke run); figures
// belong in bench/RESULTS.md.
//
// # Caveats
//
//   - Until compactions merge them, an inbox read merges every delivery
//     operand still in the memtable and level 0 (MergeTopList decodes and
//     re-encodes the list per operand), and Family.Get walks the whole
//     value once more to validate it (without building it; about 9 ns an
//     entry, BenchmarkTopListRead in store): pages are fastest on a
//     settled store (benchmarks compact first and say so).
//   - Sustained fan-out is bounded by flushing and compacting the delivery
//     operands, not by writing them: the store's merge resolves an
//     operand chain pairwise (each step decodes and re-encodes the list
//     so far), so k deliveries to one inbox within a memtable cost O(k²)
//     entries to flush, and a compaction re-encodes the inbox's up to
//     InboxCap entries per key. Bursts reach millions of deliveries/s;
//     back-to-back fan-outs to the same inboxes settle far lower
//     (BenchmarkFanout).
//   - The store's job queue scans every queued job to lease one (and
//     RunJobs calls its progress function per job, not per chunk): keep
//     queues short (the store's workers do) rather than enqueueing
//     millions of fan-outs and draining them at once.
//   - Ordinals are never reused; the removed-post set grows with every
//     unpublish (a roaring64 set, a few MB per million).
//   - FollowersPage lists followers in ordinal order (the order users first
//     joined the graph), not id order; FolloweesPage is in id order.
//   - A page below the inbox's floor costs one seek per followee; a user
//     may follow at most MaxFollowees accounts. A follow rewrites the
//     user's whole followee list (up to ~800 KB at the limit), once per
//     command, not once per followee.
//   - LoadFollows holds every edge in memory (16 bytes each, plus sort
//     space) and drops the inboxes of active followers it touches (they
//     rebuild on their next read) instead of queueing one backfill per
//     edge.
package timeline
