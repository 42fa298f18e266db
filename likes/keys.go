package likes

import (
	"encoding/binary"
	"math/bits"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/tallydb/tally/store"
)

// Family prefixes. The layouts are in the package doc and in store's family
// table; the encoders below are the one place that builds them.
const (
	prefixMeta     = 0x40 // name (ASCII)                                  config, business, secret, load intent records
	prefixState    = 0x41 // biz u32 | user u64 | item u64                 state record
	prefixItem     = 0x42 // biz u32 | item u64                            item record
	prefixSet      = 0x43 // biz u32 | item u64 | kind u8 | user u64       empty (list representation)
	prefixBitmap   = 0x44 // biz u32 | item u64 | kind u8 | chunk u32      roaring bitmap of ordinals (roaring representation)
	prefixUser     = 0x45 // biz u32 | user u64 | time u64 | item u64      empty (a user's likes by time)
	prefixBoard    = 0x46 // biz u32 | day u32 | ^bucket u16 | item u64    empty (score-ordered index)
	prefixDayScore = 0x47 // biz u32 | day u32 | item u64                  MergeAdd: the item's likes of that day
	prefixHist     = 0x48 // biz u32 | day u32 | ^bucket u16 | sign u8     MergeAdd: likes format 1's histogram, deleted on upgrade (hist.go)
	prefixOrd      = 0x49 // user u64                                      ordinal record
	prefixOrdRev   = 0x4A // ord u32                                       user record
)

// dayAll is the day of the all-time board: above every real day (days
// since 1970 fit in 32 bits for 11 million years), so pruning old days by
// range never touches it.
const dayAll = ^uint32(0)

// Set kinds, the byte after the item in set and bitmap keys.
const (
	kindLike    byte = 1
	kindDislike byte = 2
)

// Key lengths after the prefix byte.
const (
	stateKeyLen    = 20
	itemKeyLen     = 12
	setKeyLen      = 21
	bitmapKeyLen   = 17
	userKeyLen     = 28
	boardKeyLen    = 18
	dayScoreKeyLen = 16
	histKeyLen     = 11
	ordKeyLen      = 8
	ordRevKeyLen   = 4
)

// Families returns the FamilySpecs the package uses, for Options.Families
// (a host declares them at Open); New registers any not yet declared.
func Families() []store.FamilySpec {
	fixed := func(name string, p byte, n int) store.FamilySpec {
		return store.FamilySpec{Name: name, Prefix: p, MinKeyLen: n, MaxKeyLen: n}
	}
	state := fixed("likes-state", prefixState, stateKeyLen)
	state.MaxValueLen = 16
	state.CheckValue = func(_, v []byte) error { _, err := decodeState(v); return err }
	item := fixed("likes-item", prefixItem, itemKeyLen)
	item.MaxValueLen = 16
	item.CheckValue = func(_, v []byte) error { _, err := decodeItem(v); return err }
	set := fixed("likes-set", prefixSet, setKeyLen)
	set.MaxValueLen = 1
	set.CheckValue = checkEmpty
	bitmap := fixed("likes-bitmap", prefixBitmap, bitmapKeyLen)
	bitmap.Merge = store.MergeRoaring
	bitmap.MaxValueLen = 16 << 10 // a full chunk of 4,096 ordinals is an 8 KiB array container
	bitmap.CheckValue = checkChunk
	user := fixed("likes-user", prefixUser, userKeyLen)
	user.MaxValueLen = 1
	user.CheckValue = checkEmpty
	board := fixed("likes-board", prefixBoard, boardKeyLen)
	board.MaxValueLen = 1
	board.CheckValue = checkEmpty
	dayScore := fixed("likes-dayscore", prefixDayScore, dayScoreKeyLen)
	dayScore.Merge = store.MergeAdd
	hist := fixed("likes-hist", prefixHist, histKeyLen)
	hist.Merge = store.MergeAdd
	ord := fixed("likes-ord", prefixOrd, ordKeyLen)
	ord.MaxValueLen = 8
	ord.CheckValue = func(_, v []byte) error { _, err := decodeOrd(v); return err }
	ordRev := fixed("likes-ordrev", prefixOrdRev, ordRevKeyLen)
	ordRev.MaxValueLen = 16
	ordRev.CheckValue = func(_, v []byte) error { _, err := decodeOrdUser(v); return err }
	return []store.FamilySpec{
		{Name: "likes-meta", Prefix: prefixMeta, MinKeyLen: 1, MaxKeyLen: 64, MaxValueLen: 4096, CheckValue: checkMeta},
		state, item, set, bitmap, user, board, dayScore, hist, ord, ordRev,
	}
}

func be32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func be64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func appendStateKey(dst []byte, biz uint32, user, item uint64) []byte {
	dst = append(dst, prefixState)
	return be64(be64(be32(dst, biz), user), item)
}

// appendStateUserPrefix is the prefix of every state key of (biz, user).
func appendStateUserPrefix(dst []byte, biz uint32, user uint64) []byte {
	return be64(be32(append(dst, prefixState), biz), user)
}

func appendItemKey(dst []byte, biz uint32, item uint64) []byte {
	return be64(be32(append(dst, prefixItem), biz), item)
}

func appendSetKey(dst []byte, biz uint32, item uint64, kind byte, user uint64) []byte {
	dst = be64(be32(append(dst, prefixSet), biz), item)
	return be64(append(dst, kind), user)
}

// appendSetPrefix is the prefix of an item's set of one kind; kind 0 gives
// the prefix of both kinds.
func appendSetPrefix(dst []byte, biz uint32, item uint64, kind byte) []byte {
	dst = be64(be32(append(dst, prefixSet), biz), item)
	if kind != 0 {
		dst = append(dst, kind)
	}
	return dst
}

func appendBitmapKey(dst []byte, biz uint32, item uint64, kind byte, chunk uint32) []byte {
	dst = be64(be32(append(dst, prefixBitmap), biz), item)
	return be32(append(dst, kind), chunk)
}

func appendBitmapPrefix(dst []byte, biz uint32, item uint64, kind byte) []byte {
	dst = be64(be32(append(dst, prefixBitmap), biz), item)
	if kind != 0 {
		dst = append(dst, kind)
	}
	return dst
}

func appendUserKey(dst []byte, biz uint32, user uint64, ms int64, item uint64) []byte {
	dst = be64(be32(append(dst, prefixUser), biz), user)
	return be64(be64(dst, uint64(ms)), item)
}

func appendUserPrefix(dst []byte, biz uint32, user uint64) []byte {
	return be64(be32(append(dst, prefixUser), biz), user)
}

func appendBoardKey(dst []byte, biz, day uint32, bucket uint16, item uint64) []byte {
	dst = be32(be32(append(dst, prefixBoard), biz), day)
	return be64(binary.BigEndian.AppendUint16(dst, ^bucket), item)
}

// appendBoardBucketPrefix is the prefix of the board keys of one bucket.
func appendBoardBucketPrefix(dst []byte, biz, day uint32, bucket uint16) []byte {
	dst = be32(be32(append(dst, prefixBoard), biz), day)
	return binary.BigEndian.AppendUint16(dst, ^bucket)
}

func appendBoardPrefix(dst []byte, biz, day uint32) []byte {
	return be32(be32(append(dst, prefixBoard), biz), day)
}

func appendDayScoreKey(dst []byte, biz, day uint32, item uint64) []byte {
	return be64(be32(be32(append(dst, prefixDayScore), biz), day), item)
}

// Histogram signs of likes format 1's likes-hist keys (no longer written:
// hist.go): a bucket's count was its arrivals less its departures.
const (
	histIn  byte = 0
	histOut byte = 1
)

// appendHistKey is likes format 1's histogram key, kept for the golden
// test that pins the layout old stores hold (and delete on upgrade).
func appendHistKey(dst []byte, biz, day uint32, bucket uint16, sign byte) []byte {
	return append(binary.BigEndian.AppendUint16(be32(be32(append(dst, prefixHist), biz), day), ^bucket), sign)
}

func appendDayPrefix(dst []byte, prefix byte, biz, day uint32) []byte {
	return be32(be32(append(dst, prefix), biz), day)
}

func appendBizPrefix(dst []byte, prefix byte, biz uint32) []byte {
	return be32(append(dst, prefix), biz)
}

func appendOrdKey(dst []byte, user uint64) []byte { return be64(append(dst, prefixOrd), user) }

func appendOrdRevKey(dst []byte, ord uint32) []byte { return be32(append(dst, prefixOrdRev), ord) }

// Decoders of keys the package reads back while iterating. Keys come from
// a family whose length the store enforces, so they only slice.

func u32at(k []byte, off int) uint32 { return binary.BigEndian.Uint32(k[off:]) }
func u64at(k []byte, off int) uint64 { return binary.BigEndian.Uint64(k[off:]) }

// stateKeyItem returns the item of a state key.
func stateKeyItem(k []byte) uint64 { return u64at(k, 13) }

// setKeyUser returns the user of a set key.
func setKeyUser(k []byte) uint64 { return u64at(k, 14) }

// bitmapKeyChunk returns the chunk of a bitmap key.
func bitmapKeyChunk(k []byte) uint32 { return u32at(k, 14) }

// userKeyTimeItem returns the time and item of a user-list key.
func userKeyTimeItem(k []byte) (int64, uint64) { return int64(u64at(k, 13)), u64at(k, 21) }

// boardKeyBucketItem returns the bucket and item of a board key.
func boardKeyBucketItem(k []byte) (uint16, uint64) {
	return ^binary.BigEndian.Uint16(k[9:]), u64at(k, 11)
}

// Score buckets. A board orders items by bucket, and within a bucket by
// the exact score read at query time, so an item's board key moves only
// when its score leaves its bucket. Buckets are log-linear: exact (width 1)
// below 128, then 64 buckets per power of two (width 2^(k-6) for scores in
// [2^k, 2^(k+1))), so a popular item at 5,000 likes moves its key once per
// 64 likes instead of on every like, and there are at most 3,776 buckets.
const (
	bucketSub  = 64 // buckets per power of two
	bucketBits = 6  // log2(bucketSub)
)

// bucketOf returns the bucket of score (monotonic: a higher score never
// has a lower bucket).
func bucketOf(score uint64) uint16 {
	if score < 2*bucketSub {
		return uint16(score)
	}
	k := uint(bits.Len64(score) - 1) // 2^k ≤ score < 2^(k+1), k ≥ 7
	sub := (score - 1<<k) >> (k - bucketBits)
	return uint16(uint64(k-bucketBits+1)<<bucketBits | sub)
}

// bucketRange returns the lowest score of bucket b and its width.
func bucketRange(b uint16) (lo, width uint64) {
	if b < 2*bucketSub {
		return uint64(b), 1
	}
	k := uint(b>>bucketBits) + bucketBits - 1
	sub := uint64(b & (bucketSub - 1))
	return 1<<k + sub<<(k-bucketBits), 1 << (k - bucketBits)
}

// keyEnd returns the smallest key after every key starting with p.
func keyEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// checkChunk verifies that a bitmap chunk holds only members of its chunk.
func checkChunk(k, v []byte) error {
	add, _, err := store.DecodeRoaring(v)
	if err != nil {
		return err
	}
	return chunkMembersOK(add, bitmapKeyChunk(k))
}

// Roaring chunks. A roaring set is cut into one key per chunkBits of
// ordinals (4,096 ordinals): a chunk's members are at most 4,096, so its
// container is an array of at most 8 KiB (2 bytes a member). 2^16-ordinal
// chunks (roaring's own container size) were measured first, with
// transitions that read the chunk: a popular item's chunk is then an 8 KiB
// bitmap that every merge on a read decodes, validates and re-encodes (and
// the store's Finish run-optimizes it, whose validation costs more again):
// 4-5k likes/s on the workload's popular items against ~40k with lists.
// Chunks of 4,096 were then read and rewritten whole by each transition
// (read-modify-write under the item's stripe): ~1 KiB written a like on a
// popular item, half the bytes a like wrote (bench/RESULTS.md, issue 18).
// Since issue 18 a transition writes a blind MergeRoaring operand of the
// ordinals it adds and removes (its state read already says whether the
// user is a member) and never reads the chunk; the operands are merged by
// Pebble's flushes and compactions and by the reads of Likers and Check.
const chunkBits = 12

func chunkOf(ord uint32) uint32 { return ord >> chunkBits }

// chunkMembersOK checks that a chunk is not empty and holds only members
// of its chunk.
func chunkMembersOK(bm *roaring.Bitmap, chunk uint32) error {
	if bm.IsEmpty() {
		return errChunkEmpty
	}
	if chunkOf(bm.Minimum()) != chunk || chunkOf(bm.Maximum()) != chunk {
		return errChunkRange
	}
	return nil
}
