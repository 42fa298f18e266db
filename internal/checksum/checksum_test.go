package checksum

import "testing"

// The check value of CRC-32C (RFC 3720 appendix B.4 lists it for
// "123456789"): a wrong polynomial fails here, not in a golden file.
func TestCRC32CCheckValue(t *testing.T) {
	if got := CRC32C([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("CRC32C = %08x, want e3069283", got)
	}
}
