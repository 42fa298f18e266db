package commands

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tallydb/tally/store"
)

// Damage itself is made and detected by the store's and the packages'
// tests (they can write raw keys); here we check that verify reports
// every joined problem, one a line, and stays errors.Is-able.
func TestDamageError(t *testing.T) {
	err := newDamageError(errors.Join(
		fmt.Errorf("%w: c range 3: block 2: checksum mismatch", store.ErrCorrupt),
		fmt.Errorf("%w: likes: key 0x31: bad count\ntally: likes: second problem", store.ErrCorrupt),
	))
	want := "tally: verify: corrupt data: c range 3: block 2: checksum mismatch\n" +
		"tally: verify: corrupt data: likes: key 0x31: bad count\n" +
		"tally: verify: likes: second problem\n" +
		"tally: verify: 3 problems found"
	if err.Error() != want {
		t.Fatalf("printed:\n%s\nwant:\n%s", err, want)
	}
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("%v is not store.ErrCorrupt", err)
	}
}

// TestCompactBytesPerSec: the pace is the CLI's, checked before anything
// opens; over RESP, and inside a running server, the server's applies.
func TestCompactBytesPerSec(t *testing.T) {
	c := Find(All(), "compact")
	for _, tc := range []struct {
		cli  []string
		resp []string
		rate int64 // the CLI's open; 0: refused
	}{
		{cli: []string{}, resp: []string{}, rate: -1},
		{cli: []string{"--bytes-per-sec", "0"}, rate: -1},
		{cli: []string{"--bytes-per-sec", "1000"}, rate: 1000},
		{cli: []string{"--bytes-per-sec", "-1"}},
		{resp: []string{"BYTESPERSEC", "1000"}},
	} {
		var in *Input
		var err error
		if tc.cli != nil {
			in, err = c.ParseCLI(tc.cli)
		} else {
			in, err = c.ParseRESP(respArgs(tc.resp...))
		}
		if err == nil {
			err = c.Check(in)
		}
		if tc.rate == 0 {
			if !errors.Is(err, ErrUsage) {
				t.Errorf("%q %q: %v, want a usage error", tc.cli, tc.resp, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q %q: %v", tc.cli, tc.resp, err)
		}
		var o store.Options
		if err := c.StoreOptions(in, &o); err != nil || o.CompactionBytesPerSec != tc.rate {
			t.Errorf("%q: pace %d, %v; want %d", tc.cli, o.CompactionBytesPerSec, err, tc.rate)
		}
		// Inside tally serve the store is open with the server's pace.
		if err := c.StoreOptions(in, nil); (err != nil) != (tc.rate > 0) {
			t.Errorf("%q inside a server: %v", tc.cli, err)
		}
	}
}
