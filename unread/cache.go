package unread

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
)

// The snapshot cache keeps decoded feed snapshots of recently read users,
// bounded in bytes, least recently used out first.
//
// Validity: every operation on a user's snapshot increments the user's
// "gen" in counter FeedCounter in the same batch. A batch's Pebble half
// becomes visible before its counters (store's commit path), so a reader
// that reads gen g and then the family sees at least every operation
// counted by g. An entry is filled with the gen read before the value it
// holds, and is used only while the user's current gen equals it: a hit is
// never older than the gen the reader just read, an operation committed
// since makes it a miss, and a miss rereads Pebble, never answers zero.
// Nothing has to be invalidated at the observer's call, which happens
// before a commit that may still fail, nor after a commit skipped as a
// re-applied entry's duplicate (it changed no gen and no snapshot). The
// other memory of unread derived from commits is the channels' tags and
// notices (channels.go: a duplicate changes neither); counts live in the
// store's counter only.
//
// Entries are immutable once published (the LRU links aside, which the
// shard's mutex guards), so a reader uses one after releasing the lock
// even if it is evicted meanwhile. An entry holds the snapshot's columns
// as stored, not decoded (see cacheEntry).

const cacheShards = 64

// cacheEntryOverhead approximates an entry's fixed cost: the struct, its
// map slot and the body's slice header.
const cacheEntryOverhead = 144

type cacheEntry struct {
	user, gen uint64
	// sgen is the store generation the snapshot was read in: after a
	// store reopen (store.Options.ReopenOnFailure) gen may count again
	// through values a discarded write had reached, so an entry of
	// another store generation is never used (reopen.go).
	sgen  uint64
	n     uint64 // the snapshot's operation count (a reset's g0)
	count uint64 // entries (dead ones too, before initialization)
	live  int    // live entries
	// body holds the snapshot's columns as stored (uncompressed): about 3
	// bytes a followee, where decoded ids and bases would take 16.
	// followees decodes them on each read (~1 µs for 200 followees), a
	// better use of the cache's bytes than holding 5× fewer users.
	body              []byte
	tagsOff, basesOff int
	size              int64

	prev, next *cacheEntry // LRU ring, under the shard's mutex
}

type cacheShard struct {
	mu    sync.Mutex
	m     map[uint64]*cacheEntry
	ring  cacheEntry // sentinel: ring.next is the most recently used
	bytes int64
	_     [40]byte // keep shards on separate cache lines
}

type snapCache struct {
	limit        int64 // per shard; < 0: disabled
	shards       [cacheShards]cacheShard
	hits, misses atomic.Uint64
}

func newSnapCache(limit int64) *snapCache {
	c := &snapCache{limit: -1}
	if limit > 0 {
		c.limit = max(limit/cacheShards, 1)
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.m = map[uint64]*cacheEntry{}
		s.ring.next, s.ring.prev = &s.ring, &s.ring
	}
	return c
}

func (c *snapCache) shard(user uint64) *cacheShard {
	return &c.shards[(user*0x9E3779B97F4A7C15)>>58]
}

func newCacheEntry(user, gen uint64, s *snapshot) *cacheEntry {
	e := &cacheEntry{user: user, gen: gen, n: s.n, count: uint64(len(s.entries)), live: s.live()}
	e.body, e.tagsOff, e.basesOff = appendColumns(nil, s)
	e.size = cacheEntryOverhead + int64(len(e.body))
	return e
}

// followees appends the live followees and their bases to ids[:0] and
// bases[:0]. The columns were checked when the entry was made.
func (e *cacheEntry) followees(ids, bases []uint64) ([]uint64, []uint64) {
	ids, bases = ids[:0], bases[:0]
	b := e.body
	io, to, bo := 0, e.tagsOff, e.basesOff
	var id, run, tag uint64
	for i := uint64(0); i < e.count; i++ {
		d, k := binary.Uvarint(b[io:])
		io += k
		id += d
		if run == 0 {
			run, k = binary.Uvarint(b[to:])
			to += k
			tag, k = binary.Uvarint(b[to:])
			to += k
		}
		run--
		if tag&1 != 0 {
			continue // dead
		}
		v, k := binary.Uvarint(b[bo:])
		bo += k
		ids = append(ids, id)
		bases = append(bases, v)
	}
	return ids, bases
}

// get returns user's entry if it holds gen of store generation sgen.
func (c *snapCache) get(user, gen, sgen uint64) *cacheEntry {
	if c.limit < 0 {
		c.misses.Add(1)
		return nil
	}
	s := c.shard(user)
	s.mu.Lock()
	e := s.m[user]
	if e == nil || e.gen != gen || e.sgen != sgen {
		s.mu.Unlock()
		c.misses.Add(1)
		return nil
	}
	s.unlink(e)
	s.pushFront(e)
	s.mu.Unlock()
	c.hits.Add(1)
	return e
}

// put publishes e unless the cache holds a newer gen of its user, then
// evicts least recently used entries down to the limit.
func (c *snapCache) put(e *cacheEntry) {
	if c.limit < 0 || e.size > c.limit {
		return
	}
	s := c.shard(e.user)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.m[e.user]; old != nil {
		if old.sgen > e.sgen || old.sgen == e.sgen && old.gen > e.gen {
			return
		}
		s.unlink(old)
		s.bytes -= old.size
	}
	s.m[e.user] = e
	s.pushFront(e)
	s.bytes += e.size
	for s.bytes > c.limit {
		lru := s.ring.prev
		s.unlink(lru)
		delete(s.m, lru.user)
		s.bytes -= lru.size
	}
}

// clear empties the cache (tests: a forced eviction of everything).
func (c *snapCache) clear() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.m = map[uint64]*cacheEntry{}
		s.ring.next, s.ring.prev = &s.ring, &s.ring
		s.bytes = 0
		s.mu.Unlock()
	}
}

func (s *cacheShard) unlink(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (s *cacheShard) pushFront(e *cacheEntry) {
	e.next, e.prev = s.ring.next, &s.ring
	s.ring.next.prev = e
	s.ring.next = e
}

type cacheStats struct {
	limit, bytes int64
	entries      int
	hits, misses uint64
}

func (c *snapCache) stats() cacheStats {
	st := cacheStats{hits: c.hits.Load(), misses: c.misses.Load(), limit: c.limit}
	if c.limit > 0 {
		st.limit = c.limit * cacheShards
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		st.bytes += s.bytes
		st.entries += len(s.m)
		s.mu.Unlock()
	}
	return st
}

// each calls fn for every entry (under its shard's lock: fn must not call
// the cache).
func (c *snapCache) each(fn func(e *cacheEntry) error) error {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for _, e := range s.m {
			if err := fn(e); err != nil {
				s.mu.Unlock()
				return err
			}
		}
		s.mu.Unlock()
	}
	return nil
}

// check verifies each shard's map, ring and byte count agree.
func (c *snapCache) check() error {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n, bytes := 0, int64(0)
		for e := s.ring.next; e != &s.ring; e = e.next {
			if s.m[e.user] != e || e.next.prev != e {
				s.mu.Unlock()
				return errCache("shard %d: ring entry of user %d is not the map's", i, e.user)
			}
			n++
			bytes += e.size
		}
		ok := n == len(s.m) && bytes == s.bytes && (c.limit < 0 && n == 0 || c.limit >= 0 && bytes <= c.limit)
		s.mu.Unlock()
		if !ok {
			return errCache("shard %d: %d ring entries of %d bytes, map %d entries, %d bytes counted, limit %d", i, n, bytes, len(s.m), s.bytes, c.limit)
		}
	}
	return nil
}
