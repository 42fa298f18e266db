package commands

import (
	"slices"
	"strings"
	"testing"
)

// TestInputKeys: the keys a parsed command line routes by are the RESP
// form's (server.TestRowKeys, TestTableKeys): the Key positional's values
// in decimal, COUNTER:ID per row of a RowKey (an ID.COLUMN by its row),
// none for a keyless command.
func TestInputKeys(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string
	}{
		{"get posts 5 6.likes 0007", []string{"posts:5", "posts:6", "posts:0007"}},
		{"incr posts 5.likes 3", []string{"posts:5"}},
		{"incr posts 5 likes -2", []string{"posts:5"}},
		{"unread get 1 2 3", []string{"1", "2", "3"}},
		{"is-following 9 1 2", []string{"9"}},
		{"counter add posts", nil},
		{"top video 10", nil},
	} {
		words := strings.Fields(c.line)
		var cmd *Command
		var args []string
		for n := 3; n >= 1 && cmd == nil; n-- {
			if n <= len(words) {
				cmd, args = Find(All(), strings.Join(words[:n], " ")), words[n:]
			}
		}
		if cmd == nil {
			t.Fatalf("%s: no command", c.line)
		}
		in, err := cmd.ParseCLI(args)
		if err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		if got := in.Keys(); !slices.Equal(got, c.want) {
			t.Errorf("%s: keys %q, want %q", c.line, got, c.want)
		}
	}
}
