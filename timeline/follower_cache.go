package timeline

// The follower cache of small fan-outs.
//
// A publish delivered inline (and the shared job, per post) needs its
// author's followers ∩ the push set. The followers live in tl_followers,
// a key per 2^16-ordinal chunk, right for big authors; for a small one
// the read was an iterator over up to 16 keys (at 10^6 users an author's
// ~20 followers sit in ~11 chunks) and a roaring decode per chunk: 15 µs
// of the 50 µs of CPU a post cost in the timelinebench profile of
// 2026-11-24 (bench/RESULTS.md, "Sustained fan-out"). The follower
// ordinals of authors with at most maxCachedFollowers followers are kept
// here instead, exact, as sorted []uint32 (4 bytes an ordinal), bounded
// by Options.FollowerCache ordinals; a hit costs a map lookup and a
// push-set test per follower.
//
// Exactness is fcache.go's scheme on the authors' ordinals: every writer
// of tl_followers (follow, unfollow, bulk load, a cross-shard follower)
// holds the authors it changes from before its commit until after it,
// and the release drops their lists and bumps the shard's generation, so
// a read that started before cannot insert what it read. A store reopen
// clears the cache (loadState). The push set is not cached: it is
// intersected on every read, under its lock, as before.

import (
	"github.com/RoaringBitmap/roaring/v2"
)

// DefaultFollowerCache is the default of Options.FollowerCache: 8M
// follower ordinals, 32 MiB of lists (the followers of 400,000 authors
// with 20 each).
const DefaultFollowerCache = 8 << 20

// maxCachedFollowers is the most followers an author may have for the
// cache to keep their ordinals: the inline bound (inlineFollowers ×
// DefaultInlineFanout), above DefaultSharedFanout.
const maxCachedFollowers = inlineFollowers * DefaultInlineFanout

type followerCache = listCache[uint32]

// followersOf returns the follower ordinals of the author with ordinal
// aOrd, ascending (no sentinel), through the cache. The list may be the
// cache's own: the caller must not modify it.
func (t *Timeline) followersOf(aOrd uint32) ([]uint32, error) {
	c := &t.folCache
	var gen uint64
	puttable := false
	if c.perShard > 0 {
		var l []uint32
		var hit bool
		if l, hit, gen, puttable = c.get(aOrd); hit {
			return l, nil
		}
	}
	var out []uint32
	err := t.followerChunks(aOrd, 0, func(bm *roaring.Bitmap) (bool, error) {
		it := bm.Iterator()
		for it.HasNext() {
			if o := it.Next(); o&0xffff != 0 {
				out = append(out, o)
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	// An empty list is not kept: it would hold a map entry the budget,
	// counted in ordinals, does not see.
	if puttable && len(out) > 0 && len(out) <= maxCachedFollowers {
		if t.testFolCacheMiss != nil {
			t.testFolCacheMiss()
		}
		c.put(aOrd, gen, out)
	}
	return out, nil
}

// pushFollowers appends to dst the followers of the author with ordinal
// aOrd that are in the push set, ascending.
func (t *Timeline) pushFollowers(aOrd uint32, dst []uint32) ([]uint32, error) {
	fol, err := t.followersOf(aOrd)
	if err != nil {
		return dst, err
	}
	t.push.RLock()
	for _, o := range fol {
		if t.push.bm.Contains(o) {
			dst = append(dst, o)
		}
	}
	t.push.RUnlock()
	return dst, nil
}
