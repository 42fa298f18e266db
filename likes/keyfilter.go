package likes

// The key filter: what lets a transition skip reading keys that do not
// exist.
//
// A transition reads before it writes: the user's state on the item, the
// user's ordinal (roaring items), the item's record and its day score. Most
// of those keys do not exist (a like is usually a new (user, item) pair, a
// user joins a roaring set once, most items have no record), and in Pebble
// the Get of an absent key is the costliest: every level whose range holds
// the key is searched, an index and a data block each, and with the store's
// 16 MiB block cache against a store of millions of likes nearly every block
// is read from the file and decompressed. BenchmarkLike's CPU profile (2M
// likes loaded, bench/RESULTS.md "Likes on the write path (issue 18)") put
// 83% of a transition's own CPU in Pebble Gets, 63 points of it in the state
// and ordinal lookups.
//
// So likes keeps a Bloom filter of the keys of four families: likes-state,
// likes-ord, likes-item and likes-dayscore. A key the filter has never seen
// is absent and its Get is skipped; a key it may have seen is read as
// before (about 1% of absent keys, at 10 bits a key).
//
// What must stay true: every key of those families in the store is in the
// filter. A key missing from it would make a transition take an existing
// like for none and count it twice. Hence:
//
//   - New fills the filter from the four families before any transition
//     runs (a scan of their keys), unless the store is read-only (then
//     there is no filter and every read goes to Pebble);
//   - a key is added before the batch that writes it commits (emitItem,
//     putOrdinal), so it is in the filter whatever the commit's outcome,
//     including a failed commit that a store reopen finds durable after all;
//   - a deleted key stays in the filter (a Bloom filter cannot forget): it
//     costs a false positive, one Get, until the next New;
//   - nothing else writes those families (Load goes through emitItem and
//     putOrdinal too). Check verifies that every key it meets is in the
//     filter.
//
// Alternatives measured (BenchmarkLike nosync, 1M likes loaded, CPU µs a
// like on a busy machine): Pebble's own Bloom filters (10 bits a key on
// every level) did not help: a table's filter block is as likely to miss
// the block cache as its data blocks. A bigger block cache (256 MiB instead
// of 16) took 28% off, but it is the host's memory decision
// (store.Options.MemoryBudget). An exact set of the keys in memory, the
// bound for any filter, took 37% off.
//
// Cost: 10 bits a key of capacity, about 1.3-2.5 bytes a like (states are
// most of the keys; New sizes the filter at twice the keys it finds, and it
// grows by segments of doubling capacity), and New's scan of the four
// families. likebench, 2M likes loaded into an empty store: heap 12.3 to
// 15.6 bytes a like. The filter is not in Stats: `tally stats` compares a
// store opened for one command with a live server's (cmd/tally's
// remote_test), and a live filter also holds keys deleted since its New.

import (
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/tallydb/tally/store"
)

// filterBitsPerKey is the filter's size per key of its capacity: 10 bits
// and 7 probes in a 512-bit block give about 1% false positives.
const (
	filterBitsPerKey = 10
	filterProbes     = 7
	filterBlockWords = 8 // 512 bits: one cache line
	// filterMinKeys is the capacity of a filter's first segment.
	filterMinKeys = 1 << 16
)

// keyFilter is a Bloom filter that grows: a chain of segments, each twice
// the capacity of the one before; a key is added to the newest, and looked
// for in all. Adds and lookups are lock-free (atomic words); growing takes
// mu.
type keyFilter struct {
	seed maphash.Seed
	segs atomic.Pointer[[]*filterSeg]
	mu   sync.Mutex // serializes growth
}

type filterSeg struct {
	words   []atomic.Uint64
	nblocks uint64
	cap     int64
	n       atomic.Int64
}

func newKeyFilter(capacity int64) *keyFilter {
	f := &keyFilter{seed: maphash.MakeSeed()}
	segs := []*filterSeg{newFilterSeg(max(capacity, filterMinKeys))}
	f.segs.Store(&segs)
	return f
}

func newFilterSeg(capacity int64) *filterSeg {
	nblocks := uint64(capacity*filterBitsPerKey+511) / 512
	return &filterSeg{words: make([]atomic.Uint64, nblocks*filterBlockWords), nblocks: nblocks, cap: capacity}
}

// add records key; it is safe with concurrent adds and lookups.
func (f *keyFilter) add(key []byte) {
	if f == nil {
		return
	}
	h := maphash.Bytes(f.seed, key)
	segs := *f.segs.Load()
	s := segs[len(segs)-1]
	s.set(h)
	// Every add past the capacity asks for the next segment (grow does
	// nothing once it exists): if only the add that reached it did, a
	// writer descheduled before grow would let the others overfill the
	// segment, and its false positives climb (seen: 10% instead of 1%).
	if s.n.Add(1) >= s.cap {
		f.grow(s)
	}
}

// grow appends a segment of twice full's capacity, if full is still the
// newest.
func (f *keyFilter) grow(full *filterSeg) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := *f.segs.Load()
	if old[len(old)-1] != full {
		return
	}
	segs := append(old[:len(old):len(old)], newFilterSeg(2*full.cap))
	f.segs.Store(&segs)
}

// mayContain reports whether key may have been added: false means it never
// was. A nil filter may contain anything.
func (f *keyFilter) mayContain(key []byte) bool {
	if f == nil {
		return true
	}
	h := maphash.Bytes(f.seed, key)
	for _, s := range *f.segs.Load() {
		if s.has(h) {
			return true
		}
	}
	return false
}

// block returns the words of h's block and the hash that picks its bits.
func (s *filterSeg) block(h uint64) ([]atomic.Uint64, uint64) {
	// The high bits pick the block (a multiply-shift reduction), the low
	// bits, mixed again, the bits in it.
	b, _ := bits.Mul64(h, s.nblocks)
	return s.words[b*filterBlockWords : (b+1)*filterBlockWords], h * 0x9E3779B97F4A7C15
}

func (s *filterSeg) set(h uint64) {
	w, x := s.block(h)
	for range filterProbes {
		p := x & 511
		w[p>>6].Or(1 << (p & 63))
		x >>= 9
	}
}

func (s *filterSeg) has(h uint64) bool {
	w, x := s.block(h)
	for range filterProbes {
		p := x & 511
		if w[p>>6].Load()&(1<<(p&63)) == 0 {
			return false
		}
		x >>= 9
	}
	return true
}

// stats returns the filter's memory in bytes and the keys added.
func (f *keyFilter) stats() (bytes, keys int64) {
	if f == nil {
		return 0, 0
	}
	for _, s := range *f.segs.Load() {
		bytes += int64(len(s.words)) * 8
		keys += s.n.Load()
	}
	return bytes, keys
}

// filterFamilies returns the families whose keys the filter holds.
func (l *Likes) filterFamilies() []*store.Family {
	return []*store.Family{l.fam.state, l.fam.ord, l.fam.item, l.fam.dayScore}
}

// buildFilter returns a filter of every key of the filtered families: a
// first scan counts them, so that one segment holds them all with room for
// as many again before the filter grows, and a second adds them.
func (l *Likes) buildFilter() (*keyFilter, error) {
	var n int64
	if err := l.scanFilterKeys(func([]byte) { n++ }, nil); err != nil {
		return nil, err
	}
	f := newKeyFilter(2 * n)
	// The same pass warms the ordinal cache (ordcache.go) with the
	// ordinals it meets, as many as it holds.
	warm := func(k, v []byte) {
		if ord, err := decodeOrd(v); err == nil {
			l.ords.cache.put(u64at(k, 1), ord)
		} // a bad value is reported by the lookup that reads it
	}
	if l.ords.cache == nil {
		warm = nil
	}
	if err := l.scanFilterKeys(f.add, warm); err != nil {
		return nil, err
	}
	return f, nil
}

// scanFilterKeys calls fn with every key of the filtered families, and
// ords (if not nil) with every key and value of likes-ord.
func (l *Likes) scanFilterKeys(fn func(key []byte), ords func(k, v []byte)) error {
	for _, fam := range l.filterFamilies() {
		it, err := fam.NewIter(nil)
		if err != nil {
			return err
		}
		for it.Next() {
			fn(it.Key())
			if ords != nil && fam == l.fam.ord {
				ords(it.Key(), it.Value())
			}
		}
		if err := it.Close(); err != nil {
			return err
		}
	}
	return nil
}

// checkFilter reports a key of a filtered family that the filter says was
// never added (Check).
func (l *Likes) checkFilter(snap *store.Snapshot) error {
	if l.filter == nil {
		return nil
	}
	for _, fam := range l.filterFamilies() {
		it, err := snap.NewIter(fam, nil)
		if err != nil {
			return err
		}
		for it.Next() {
			if !l.filter.mayContain(it.Key()) {
				err := fmt.Errorf("likes: check: key %x is not in the key filter", it.Key())
				it.Close()
				return err
			}
		}
		if err := it.Close(); err != nil {
			return err
		}
	}
	return nil
}
