package hot

// mixer is a bijection on the keyBits-bit integers. It spreads clustered keys
// (ids that grow with time are dense) uniformly over segments and home slots,
// and its inverse lets Range return the caller's key.
//
// Each step is invertible on the keyBits-bit domain:
//
//	x = x * m1 mod 2^bits   (m1 odd: inverse is the modular inverse)
//	x = x ^ x>>shift        (shift >= bits/2: the step is its own inverse)
//	x = x * m2 mod 2^bits
type mixer struct {
	mask       uint64
	m1, m2     uint64
	inv1, inv2 uint64
	shift      uint
}

func newMixer(bits uint) mixer {
	const (
		m1 = 0x9E3779B97F4A7C15 // odd
		m2 = 0xBF58476D1CE4E5B9 // odd
	)
	return mixer{
		mask:  1<<bits - 1,
		m1:    m1,
		m2:    m2,
		inv1:  inverseOdd(m1),
		inv2:  inverseOdd(m2),
		shift: (bits + 1) / 2,
	}
}

// inverseOdd returns x with a*x == 1 mod 2^64 (hence mod any 2^k). Newton's
// iteration doubles the number of correct low bits each step; a itself is
// correct to 3 bits.
func inverseOdd(a uint64) uint64 {
	x := a
	for range 5 {
		x *= 2 - a*x
	}
	return x
}

func (m *mixer) mix(x uint64) uint64 {
	x = (x * m.m1) & m.mask
	x ^= x >> m.shift
	return (x * m.m2) & m.mask
}

func (m *mixer) unmix(y uint64) uint64 {
	y = (y * m.inv2) & m.mask
	y ^= y >> m.shift
	return (y * m.inv1) & m.mask
}
