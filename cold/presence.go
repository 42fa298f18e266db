package cold

import (
	"math/bits"
	"slices"
	"sort"
	"unsafe"
)

// presence is the in-memory set of keys of a sealed range, answering
// Contains and Rank (the key's row number) without touching a block.
//
// It is a two-level structure like a roaring bitmap: keys are split into
// chunks by key>>16, and each chunk holds its low 16 bits either as a sorted
// []uint16 (at most arrayMax keys, 2 bytes a key) or as a 65536-bit bitmap
// (8 KiB, for denser chunks). Unlike roaring it keeps the rank of the first
// key of every chunk, so Rank is two binary searches and at most 16
// popcounts; roaring's Rank walks every container before the key, which is
// 65536 containers for a sparse 32-bit range.
//
// Memory: about 2 bytes per key for sparse chunks, 1 bit per possible key
// for dense chunks, plus 24 bytes per non-empty chunk. When chunks hold
// fewer than sparseKeysPerChunk keys on average the set is kept as a sorted
// []uint64 instead (8 bytes per key): snowflake ids in 48-bit ranges put
// about one key in each 65,536-id chunk, and the chunked form cost 36-52
// bytes per key with its append slack (issue 19: 62% of the live heap of
// tallybench's tally target). finish trims every slice to its length.
type presence struct {
	// keys, if not nil, is the whole set, sorted; the fields below are
	// then empty.
	keys []uint64

	hi []uint64 // chunk number (key>>16) of each chunk, increasing
	// dense is true when hi is contiguous (every chunk between the first and
	// last is non-empty, as in any sparse-but-large range): the chunk of h is
	// then h-hi[0], one memory access instead of a binary search.
	dense bool
	ch    []chunkInfo // per chunk, parallel to hi
	n     uint64      // number of keys
	lows  []uint16
	// words holds 1024 words per bitmap chunk; cum holds, per bitmap chunk,
	// 64 counts of the keys in the chunk before each run of 16 words.
	words []uint64
	cum   []uint16
}

// chunkInfo is what a lookup needs about one chunk, in one cache line.
type chunkInfo struct {
	base uint64 // rank of the chunk's first key
	off  uint32 // array chunk: index into lows; bitmap chunk: bitmapFlag | index into words/1024
	card uint32 // number of keys in the chunk
}

const (
	arrayMax   = 4096
	bitmapFlag = 1 << 31
	// sparseKeysPerChunk is the average chunk size below which a presence
	// set is a sorted key array: at 24 bytes per chunk plus 2 per key, a
	// chunk of fewer than 4 keys costs more than 8 bytes per key.
	sparseKeysPerChunk = 4
)

// presenceBuilder accumulates keys in increasing order.
type presenceBuilder struct {
	p       presence
	n       uint64
	cur     uint64   // current chunk
	curLows []uint16 // its lows while it is open
	open    bool
}

func (b *presenceBuilder) add(key uint64) {
	h := key >> 16
	if !b.open || h != b.cur {
		b.closeChunk()
		b.cur, b.open = h, true
	}
	b.curLows = append(b.curLows, uint16(key))
	b.n++
}

func (b *presenceBuilder) closeChunk() {
	if !b.open {
		return
	}
	p := &b.p
	p.hi = append(p.hi, b.cur)
	ci := chunkInfo{base: b.n - uint64(len(b.curLows)), card: uint32(len(b.curLows))}
	if len(b.curLows) <= arrayMax {
		ci.off = uint32(len(p.lows))
		p.ch = append(p.ch, ci)
		p.lows = append(p.lows, b.curLows...)
	} else {
		idx := uint32(len(p.words) / 1024)
		ci.off = bitmapFlag | idx
		p.ch = append(p.ch, ci)
		start := len(p.words)
		p.words = append(p.words, make([]uint64, 1024)...)
		w := p.words[start:]
		for _, l := range b.curLows {
			w[l>>6] |= 1 << (l & 63)
		}
		c := 0
		for i := 0; i < 1024; i++ {
			if i%16 == 0 {
				p.cum = append(p.cum, uint16(c))
			}
			c += bits.OnesCount64(w[i])
		}
	}
	b.curLows = b.curLows[:0]
	b.open = false
}

func (b *presenceBuilder) finish() presence {
	b.closeChunk()
	b.p.n = b.n
	b.curLows = nil
	p := b.p
	if len(p.hi)*sparseKeysPerChunk > int(p.n) {
		keys := make([]uint64, 0, p.n)
		cur := p.seek(0)
		for k, ok := cur.next(); ok; k, ok = cur.next() {
			keys = append(keys, k)
		}
		return presence{keys: keys, n: p.n}
	}
	if h := p.hi; len(h) > 0 {
		p.dense = h[len(h)-1]-h[0] == uint64(len(h)-1)
	}
	// The builder's slices grew by appending (up to twice their length):
	// keep exact copies for the range's lifetime.
	p.hi, p.ch, p.lows = slices.Clone(p.hi), slices.Clone(p.ch), slices.Clone(p.lows)
	p.words, p.cum = slices.Clone(p.words), slices.Clone(p.cum)
	return p
}

// memBytes returns the bytes the set holds (its slices' capacities).
func (p *presence) memBytes() int {
	return 8*cap(p.keys) + 8*cap(p.hi) + int(unsafe.Sizeof(chunkInfo{}))*cap(p.ch) +
		2*cap(p.lows) + 8*cap(p.words) + 2*cap(p.cum)
}

// searchKeys returns the index of the first of keys >= key.
func searchKeys(keys []uint64, key uint64) int {
	lo, n := 0, len(keys)
	for n > 0 {
		half := n / 2
		if keys[lo+half] < key {
			lo += half + 1
			n -= half + 1
		} else {
			n = half
		}
	}
	return lo
}

// len returns the number of keys.
func (p *presence) len() uint64 { return p.n }

// chunk returns the index of the chunk holding key>>16, or -1.
func (p *presence) chunk(h uint64) int {
	hi := p.hi
	if p.dense {
		if i := h - hi[0]; i < uint64(len(hi)) {
			return int(i)
		}
		return -1
	}
	lo, n := 0, len(hi)
	for n > 0 {
		half := n / 2
		if hi[lo+half] < h {
			lo += half + 1
			n -= half + 1
		} else {
			n = half
		}
	}
	if lo < len(hi) && hi[lo] == h {
		return lo
	}
	return -1
}

// rank returns the number of keys less than key and whether key is present;
// for a present key that is its row number.
func (p *presence) rank(key uint64) (uint64, bool) {
	if p.keys != nil {
		i := searchKeys(p.keys, key)
		return uint64(i), i < len(p.keys) && p.keys[i] == key
	}
	c := p.chunk(key >> 16)
	if c < 0 {
		return 0, false
	}
	l := uint16(key)
	ci := p.ch[c]
	off := ci.off
	if off&bitmapFlag == 0 {
		a := p.lows[off : off+ci.card]
		lo, n := 0, len(a)
		for n > 0 {
			half := n / 2
			if a[lo+half] < l {
				lo += half + 1
				n -= half + 1
			} else {
				n = half
			}
		}
		return ci.base + uint64(lo), lo < len(a) && a[lo] == l
	}
	idx := int(off &^ bitmapFlag)
	w := p.words[idx*1024 : idx*1024+1024]
	wi := int(l >> 6)
	r := int(p.cum[idx*64+wi/16])
	for i := wi &^ 15; i < wi; i++ {
		r += bits.OnesCount64(w[i])
	}
	bit := uint64(1) << (l & 63)
	r += bits.OnesCount64(w[wi] & (bit - 1))
	return ci.base + uint64(r), w[wi]&bit != 0
}

func (p *presence) contains(key uint64) bool {
	if p.keys != nil {
		i := searchKeys(p.keys, key)
		return i < len(p.keys) && p.keys[i] == key
	}
	c := p.chunk(key >> 16)
	if c < 0 {
		return false
	}
	l := uint16(key)
	ci := p.ch[c]
	off := ci.off
	if off&bitmapFlag == 0 {
		a := p.lows[off : off+ci.card]
		lo, n := 0, len(a)
		for n > 0 {
			half := n / 2
			if a[lo+half] < l {
				lo += half + 1
				n -= half + 1
			} else {
				n = half
			}
		}
		return lo < len(a) && a[lo] == l
	}
	idx := int(off &^ bitmapFlag)
	return p.words[idx*1024+int(l>>6)]&(1<<(l&63)) != 0
}

// cursor iterates keys in increasing order from a given rank.
type cursor struct {
	p    *presence
	c    int    // chunk
	i    int    // array: index in chunk; bitmap: word index; key array: index
	word uint64 // bitmap: remaining bits of word i
}

// seek positions the cursor at the key of rank r (r < p.len()).
func (p *presence) seek(r uint64) cursor {
	if p.keys != nil {
		return cursor{p: p, i: int(r)}
	}
	c := sort.Search(len(p.ch), func(i int) bool { return p.ch[i].base+uint64(p.ch[i].card) > r })
	cur := cursor{p: p, c: c}
	if c >= len(p.hi) {
		return cur
	}
	within := int(r - p.ch[c].base)
	off := p.ch[c].off
	if off&bitmapFlag == 0 {
		cur.i = within
		return cur
	}
	idx := int(off &^ bitmapFlag)
	w := p.words[idx*1024 : idx*1024+1024]
	for i := 0; i < 1024; i++ {
		n := bits.OnesCount64(w[i])
		if within < n {
			word := w[i]
			for ; within > 0; within-- {
				word &= word - 1
			}
			cur.i, cur.word = i, word
			return cur
		}
		within -= n
	}
	return cur // unreachable for a consistent presence
}

// next returns the next key; ok is false at the end.
func (cur *cursor) next() (key uint64, ok bool) {
	p := cur.p
	if p.keys != nil {
		if cur.i < len(p.keys) {
			cur.i++
			return p.keys[cur.i-1], true
		}
		return 0, false
	}
	for cur.c < len(p.hi) {
		off := p.ch[cur.c].off
		if off&bitmapFlag == 0 {
			card := int(p.ch[cur.c].card)
			if cur.i < card {
				k := p.hi[cur.c]<<16 | uint64(p.lows[int(off)+cur.i])
				cur.i++
				return k, true
			}
		} else {
			idx := int(off &^ bitmapFlag)
			for cur.word == 0 && cur.i < 1023 {
				cur.i++
				cur.word = p.words[idx*1024+cur.i]
			}
			if cur.word != 0 {
				t := bits.TrailingZeros64(cur.word)
				cur.word &= cur.word - 1
				return p.hi[cur.c]<<16 | uint64(cur.i*64+t), true
			}
		}
		cur.c++
		cur.i = 0
		if cur.c < len(p.hi) && p.ch[cur.c].off&bitmapFlag != 0 {
			idx := int(p.ch[cur.c].off &^ bitmapFlag)
			cur.word = p.words[idx*1024]
		}
	}
	return 0, false
}
