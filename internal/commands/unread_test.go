package commands

import (
	"errors"
	"testing"

	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/unread"
)

// TestUnreadCheck: bad names, kind options and notice ids are refused by
// Check, before anything is opened, with the library's named errors, and
// the same from both front ends.
func TestUnreadCheck(t *testing.T) {
	table := All()
	for _, tc := range []struct {
		cli  string
		args []string // CLI arguments
		resp []string // the same over RESP
		want error    // nil: accepted
	}{
		{"unread kind add", []string{"mention", "--hint", "8", "--max", "64"}, []string{"mention", "HINT", "8", "MAX", "64"}, nil},
		{"unread kind add", []string{"a.b"}, []string{"a.b"}, store.ErrInvalidName},
		{"unread kind add", []string{"x", "--hint", "0"}, []string{"x", "HINT", "0"}, store.ErrInvalidOption},
		{"unread kind add", []string{"x", "--hint", "264"}, []string{"x", "HINT", "264"}, store.ErrInvalidOption}, // not 8
		{"unread kind add", []string{"x", "--hint", "12"}, []string{"x", "HINT", "12"}, store.ErrInvalidOption},
		{"unread kind add", []string{"x", "--max", "16"}, []string{"x", "MAX", "16"}, store.ErrInvalidOption},
		{"unread kind add", []string{"x", "--hint", "32", "--max", "32"}, []string{"x", "HINT", "32", "MAX", "32"}, nil},
		{"dot mark", []string{"a b"}, []string{"a b"}, unread.ErrInvalidChannel},
		{"dot has", []string{"1", "a.b"}, []string{"1", "a.b"}, unread.ErrInvalidChannel},
		{"dot has", []string{"1", "nochan"}, []string{"1", "nochan"}, nil}, // undeclared: a read answers "no"
		{"dot clear", []string{"1", ""}, []string{"1", ""}, unread.ErrInvalidChannel},
		{"notice unread", []string{"1", "a.b"}, []string{"1", "a.b"}, unread.ErrInvalidChannel},
		{"notice read", []string{"1", "a.b"}, []string{"1", "a.b"}, unread.ErrInvalidChannel},
		{"notice post", []string{"system", "0"}, []string{"system", "0"}, unread.ErrInvalidNotice},
		{"notice post", []string{"a.b", "1"}, []string{"a.b", "1"}, unread.ErrInvalidChannel},
	} {
		c := Find(table, tc.cli)
		if c == nil {
			t.Fatalf("no command %q", tc.cli)
		}
		a, err := c.ParseCLI(tc.args)
		if err != nil {
			t.Fatalf("%s %v: %v", tc.cli, tc.args, err)
		}
		b, err := c.ParseRESP(respArgs(tc.resp...))
		if err != nil {
			t.Fatalf("%s %v over RESP: %v", tc.cli, tc.resp, err)
		}
		for _, in := range []*Input{a, b} {
			err := c.Check(in)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("%s %v: Check = %v, want %v", tc.cli, tc.args, err, tc.want)
			}
			if err != nil && errors.Is(err, ErrUsage) {
				t.Errorf("%s %v: %v is a usage error; a library refusal exits 1", tc.cli, tc.args, err)
			}
		}
	}
}

// TestUnreadModes: the reads are Read and open only the packages whose
// data exists (they never create unread); the one-value RESP forms stay.
func TestUnreadModes(t *testing.T) {
	table := All()
	for _, tc := range []struct {
		cli, resp, one string
		mode           Mode
		open           Open
	}{
		{"unread kind add", "UNREAD.KIND ADD", "", Admin, OpenCreate},
		{"unread kind list", "UNREAD.KIND LIST", "", Read, OpenExisting},
		{"unread get", "UNREAD.MGET", "UNREAD.GET", Read, OpenExisting},
		{"unread feed", "UNREAD.MFEED", "UNREAD.FEED", Read, OpenWrite},
		{"unread feed-reset", "UNREAD.FEEDRESET", "", Write, OpenWrite},
		{"dot has", "DOT.HAS", "", Read, OpenExisting},
		{"notice unread", "NOTICE.UNREAD", "", Read, OpenExisting},
		{"dot mark", "DOT.MARK", "", Write, OpenWrite},
	} {
		c := Find(table, tc.cli)
		if c == nil || c.RESP != tc.resp || c.RESPOne != tc.one || c.Mode != tc.mode || c.Open != tc.open {
			t.Errorf("%s: %+v", tc.cli, c)
		}
	}
}
