package hot

import "sync/atomic"

// slotArray is a segment's rows: nslots rows of rowBytes bytes, stored
// little-endian in 64-bit words so that readers can load them with atomic
// loads (plain MOVs on amd64 and arm64) under the segment's seqlock. Its
// shape (everything but the contents of words) never changes; growth and
// migration publish a new slotArray.
//
// NB: every access to the words of a published array is atomic, which is
// what keeps optimistic readers race-detector-clean. Plain writes are only
// for arrays not yet published (rebuild).
type slotArray struct {
	words    []uint64 // nslots*rowBytes bytes, then at least tailSlack zero bytes
	nslots   uint32   // rows (home slots plus pad)
	homes    uint32   // home slots: home(s) in [0, homes)
	ncols    uint8    // physical columns of the rows (<= Table.ncols)
	rowBytes uint8    // keyBytes + value bytes of ncols columns
}

// tailSlack is how many zero bytes follow the last row, so an 8-byte load
// at any row start or value start stays in bounds.
const tailSlack = 8

func newSlotArray(nslots, homes, ncols, rowBytes int) *slotArray {
	nbytes := nslots*rowBytes + tailSlack
	return &slotArray{
		// One extra word: load8 at the last byte offsets reads the next word.
		words:    make([]uint64, nbytes/8+2),
		nslots:   uint32(nslots),
		homes:    uint32(homes),
		ncols:    uint8(ncols),
		rowBytes: uint8(rowBytes),
	}
}

// memBytes is the array's heap footprint.
func (a *slotArray) memBytes() int { return 8 * cap(a.words) }

// load8 returns the 8 bytes at byte offset off as a little-endian word.
func (a *slotArray) load8(off int) uint64 {
	i, r := off>>3, uint(off&7)*8
	lo := atomic.LoadUint64(&a.words[i])
	hi := atomic.LoadUint64(&a.words[i+1])
	return lo>>r | hi<<(64-r) // NB: a shift by 64 yields 0 in Go
}

// loadN returns the n <= 8 bytes at off.
func (a *slotArray) loadN(off, n int) uint64 {
	return a.load8(off) & byteMask(n)
}

func byteMask(n int) uint64 { return 1<<(8*uint(n)) - 1 }

// storeN writes the low n <= 8 bytes of v at off. Writers only, under the
// segment lock with the seqlock odd (or on an unpublished array).
func (a *slotArray) storeN(off, n int, v uint64) {
	if n == 0 {
		return
	}
	i, r := off>>3, uint(off&7)*8
	m := byteMask(n)
	v &= m
	lo := atomic.LoadUint64(&a.words[i])
	atomic.StoreUint64(&a.words[i], lo&^(m<<r)|v<<r)
	if int(r)+8*n > 64 {
		s := 64 - r
		hi := atomic.LoadUint64(&a.words[i+1])
		atomic.StoreUint64(&a.words[i+1], hi&^(m>>s)|v>>s)
	}
}

// move copies n bytes from src to dst; the ranges may overlap.
func (a *slotArray) move(dst, src, n int) {
	if dst > src {
		for k := n; k > 0; {
			c := min(8, k)
			k -= c
			a.storeN(dst+k, c, a.loadN(src+k, c))
		}
		return
	}
	for k := 0; k < n; k += 8 {
		c := min(8, n-k)
		a.storeN(dst+k, c, a.loadN(src+k, c))
	}
}

// zero clears n bytes at off.
func (a *slotArray) zero(off, n int) {
	for k := 0; k < n; k += 8 {
		a.storeN(off+k, min(8, n-k), 0)
	}
}
