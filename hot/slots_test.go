package hot

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestSlotArrayBytes checks the word-packed byte operations against a plain
// byte slice.
func TestSlotArrayBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	a := newSlotArray(40, 30, 1, 7) // 280 bytes
	ref := make([]byte, 8*len(a.words))
	bytesOf := func() []byte {
		b := make([]byte, 8*len(a.words))
		for i := range a.words {
			binary.LittleEndian.PutUint64(b[8*i:], a.words[i])
		}
		return b
	}
	limit := 40*7 + tailSlack
	for step := range 20000 {
		switch rng.IntN(3) {
		case 0:
			n := 1 + rng.IntN(8)
			off := rng.IntN(limit - n)
			v := rng.Uint64()
			a.storeN(off, n, v)
			for k := range n {
				ref[off+k] = byte(v >> (8 * k))
			}
		case 1:
			n := rng.IntN(100)
			src, dst := rng.IntN(limit-n), rng.IntN(limit-n)
			a.move(dst, src, n)
			copy(ref[dst:dst+n], ref[src:src+n])
		default:
			off := rng.IntN(limit - 8)
			n := 1 + rng.IntN(8)
			want := binary.LittleEndian.Uint64(ref[off:]) & byteMask(n)
			if got := a.loadN(off, n); got != want {
				t.Fatalf("step %d: loadN(%d, %d) = %#x, want %#x", step, off, n, got, want)
			}
		}
	}
	if got := bytesOf(); string(got) != string(ref) {
		t.Fatalf("contents differ:\n%x\n%x", got, ref)
	}
	a.zero(3, 50)
	clear(ref[3:53])
	if got := bytesOf(); string(got) != string(ref) {
		t.Fatal("zero differs")
	}
}
