package zpool

import (
	"bytes"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	enc, err := Encoder(1)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := Encoder(1); again != enc {
		t.Fatal("Encoder(1) built a second encoder")
	}
	dec, err := Decoder()
	if err != nil {
		t.Fatal(err)
	}
	in := bytes.Repeat([]byte("tally "), 1000)
	z := enc.EncodeAll(in, nil)
	if len(z) >= len(in)/10 {
		t.Fatalf("compressed %d bytes to %d", len(in), len(z))
	}
	out, err := dec.DecodeAll(z, make([]byte, 0, len(in)))
	if err != nil || !bytes.Equal(out, in) {
		t.Fatalf("round trip: %v", err)
	}
	// A destination smaller than the frame is refused, not grown.
	if _, err := dec.DecodeAll(z, make([]byte, 0, len(in)/2)); err == nil {
		t.Fatal("DecodeAll grew a capped destination")
	}
}
