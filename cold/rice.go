package cold

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// Keys are stored once, in the range descriptor, as Rice-coded gaps: for a
// gap g (key - previous key - 1, the first key of a range relative to -1) and
// a per-block parameter k, the code is q = g>>k zero bits, a one bit, then the
// low k bits of g. Random keys have geometric gaps, for which a Rice code is
// within a few percent of the entropy; dense ranges use k = 0 (about one bit
// per key). A quotient of riceEscape or more is written as riceEscape zero
// bits followed by g as 64 raw bits, so a huge gap (the first key of a range
// at 2^47) costs 96 bits instead of 2^47.
//
// Bits are packed LSB-first into bytes.

const riceEscape = 32

type bitWriter struct {
	buf []byte
	acc uint64
	n   uint // bits in acc, < 8 between calls
}

// writeBits appends the low k bits of v; k <= 56.
func (w *bitWriter) writeBits(v uint64, k uint) {
	if k == 0 {
		return
	}
	w.acc |= (v & (1<<k - 1)) << w.n
	w.n += k
	if w.n >= 8 {
		// Store all 8 bytes of acc and keep the complete ones: one store
		// instead of a loop of byte appends (the descriptor's key stream is
		// most of Build's and Merge's non-zstd time).
		nb := w.n / 8
		if cap(w.buf)-len(w.buf) < 8 {
			// Double: append's 1.25x growth for large slices copied a
			// 3 MB key stream ~5 times over.
			w.buf = slices.Grow(w.buf, max(len(w.buf), 256))
		}
		w.buf = binary.LittleEndian.AppendUint64(w.buf, w.acc)[:len(w.buf)+int(nb)]
		w.acc >>= 8 * nb // nb == 8 shifts everything out, as it must
		w.n -= 8 * nb
	}
}

func (w *bitWriter) writeRice(g uint64, k uint) {
	q := g >> k
	if q >= riceEscape {
		w.writeBits(0, riceEscape)
		w.writeBits(g&0xffffffff, 32)
		w.writeBits(g>>32, 32)
		return
	}
	// q zeros then a one (q+1 <= 32 bits), then the low k bits of g.
	if n := uint(q) + 1 + k; n <= 56 {
		w.writeBits(1<<q|(g&(1<<k-1))<<(q+1), n)
		return
	}
	w.writeBits(1<<q, uint(q)+1)
	w.writeBits(g, k)
}

// flush pads the last partial byte with zeros.
func (w *bitWriter) flush() []byte {
	if w.n > 0 {
		w.buf = append(w.buf, byte(w.acc))
		w.acc, w.n = 0, 0
	}
	return w.buf
}

// riceCost is the number of bits writeRice(g, k) would take.
func riceCost(g uint64, k uint) uint64 {
	q := g >> k
	if q >= riceEscape {
		return riceEscape + 64
	}
	return q + 1 + uint64(k)
}

type bitReader struct {
	b   []byte
	pos int // next byte of b to load
	acc uint64
	n   uint // valid bits in acc
	bad bool // read past the end
}

func (r *bitReader) refill() {
	if r.pos+8 <= len(r.b) && r.n <= 8 {
		// Fast path: load 7 bytes at once.
		b := r.b[r.pos : r.pos+8]
		v := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48
		r.acc |= v << r.n
		r.n += 56
		r.pos += 7
		return
	}
	for r.n <= 56 && r.pos < len(r.b) {
		r.acc |= uint64(r.b[r.pos]) << r.n
		r.n += 8
		r.pos++
	}
}

// readBits reads k <= 56 bits.
func (r *bitReader) readBits(k uint) uint64 {
	if k == 0 {
		return 0
	}
	if r.n < k {
		r.refill()
		if r.n < k {
			r.bad = true
			return 0
		}
	}
	v := r.acc & (1<<k - 1)
	r.acc >>= k
	r.n -= k
	return v
}

func (r *bitReader) readRice(k uint) uint64 {
	q := uint(0)
	for {
		if r.n == 0 {
			r.refill()
			if r.n == 0 {
				r.bad = true
				return 0
			}
		}
		tz := uint(bits.TrailingZeros64(r.acc))
		if tz < r.n && q+tz < riceEscape {
			q += tz
			r.acc >>= tz + 1
			r.n -= tz + 1
			break
		}
		take := min(tz, r.n, riceEscape-q)
		q += take
		r.acc >>= take
		r.n -= take
		if q == riceEscape {
			lo := r.readBits(32)
			hi := r.readBits(32)
			return hi<<32 | lo
		}
	}
	return uint64(q)<<k | r.readBits(k)
}

// bestRiceK picks the k in 0..56 minimising the coded size of gaps.
func bestRiceK(gaps []uint64) uint {
	if len(gaps) == 0 {
		return 0
	}
	var sum uint64
	for _, g := range gaps {
		if sum+g < sum {
			sum = ^uint64(0)
			break
		}
		sum += g
	}
	mean := sum / uint64(len(gaps))
	guess := uint(0)
	if mean > 0 {
		guess = min(uint(bits.Len64(mean))-1, 56)
	}
	best, bestCost := guess, ^uint64(0)
	for k := max(int(guess)-2, 0); k <= min(int(guess)+2, 56); k++ {
		var c uint64
		for _, g := range gaps {
			c += riceCost(g, uint(k))
		}
		if c < bestCost {
			best, bestCost = uint(k), c
		}
	}
	return best
}
