// Package timeline is tally's feed system: a home timeline per user built
// from the posts of the accounts they follow, at the scale of a microblog
// (authors with 10^7 followers, users following hundreds), kept in the
// store's Pebble instance as key families next to the users counter.
//
// It owns the follow graph (Follow, Unfollow, IsFollowing, FollowersPage,
// FolloweesPage, Followees, counts in UsersCounter), the posts (Publish,
// Unpublish: outboxes and the post index), the inboxes with their fan-out,
// backfill, cleanup and expiry jobs, and home pages (Home) by cursor. It
// uses package store only.
//
// # Data model
//
// Users and posts are 64-bit ids, 1..MaxID. Post ids are unique across
// authors and time-ordered (snowflake layout); every timeline is ordered by
// post id, newest first, so entries never tie. Each user who takes part in
// the graph gets a dense 32-bit ordinal (1, 2, ...; multiples of 2^16 are
// skipped, see Sentinels), stored both ways: in the "ord" column of
// UsersCounter (id → ordinal, in memory) and in tl_ords (ordinal → id).
// Ordinals key the sets that must be cheap to store and intersect: the
// followers of an author are roaring bitmaps of ordinals, one key per 2^16
// ordinals, and so is the push set (the users whose inbox is live).
//
// # Families
//
//	prefix  family        key (after prefix)                 value
//	------  ------------  ---------------------------------  -------------------------------------------
//	0x20    tl_config     "c"                                Config (appendConfig)
//	0x21    tl_ords       ordinal u32                        user id, u64 big-endian
//	0x22    tl_followees  user ordinal u32                   sorted followee ids (appendFollowees)
//	0x23    tl_followers  author ordinal u32 | chunk u16     MergeRoaring: follower ordinals of the chunk
//	0x24    tl_active     chunk u16                          MergeRoaring: push-set ordinals of the chunk
//	0x25    tl_pulled     author id u64                      empty: the author is pulled at read time
//	0x26    tl_posts      post id u64                        post record (appendPost): author, delivery
//	0x27    tl_outbox     author id u64 | post id u64        empty: the author's posts, in id order
//	0x28    tl_inbox      user ordinal u32                   MergeTopList: (post id, author id) entries
//	0x29    tl_pending    user ordinal u32 | author id u64   empty: a follow whose backfill has not run
//
// All integers are big-endian, so Pebble's key order is numeric order.
// UsersCounter ("users", KeepHot, 48 range bits) holds per user id the
// columns followers, followees, posts (exact counts, equal to the sizes of
// the sets above: Check verifies it), ord and read.
package timeline
