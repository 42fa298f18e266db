package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestRunNested registers TEST.NEST, which runs each of its arguments
// (split on spaces) as a nested command and replies with the replies
// joined: inside Apply they run as commands of the entry, with Apply's
// refusals; from a client RunNested refuses to run.
func TestRunNested(t *testing.T) {
	nest := Command{Name: "TEST.NEST", Arity: -2, Flags: FlagWrite, Summary: "test", Group: "test",
		Handler: func(c *Conn, args [][]byte) {
			var out []string
			for _, a := range args[1:] {
				var argv [][]byte
				for _, w := range strings.Fields(string(a)) {
					argv = append(argv, []byte(w))
				}
				reply, err := c.RunNested(argv)
				if err != nil {
					c.WriteErr(err)
					return
				}
				out = append(out, string(reply))
			}
			c.WriteBulkString(strings.Join(out, "|"))
		}}
	base := newTestServer(t, nil)
	// Register is refused once serving; the test adds TEST.NEST directly.
	base.s.mu.Lock()
	err := base.s.cmds.register(base.s.metrics, []Command{nest})
	base.s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	enc := func(args ...string) []byte {
		argv := make([][]byte, len(args))
		for i, a := range args {
			argv[i] = []byte(a)
		}
		b, err := EncodeCommand(argv)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	got := string(base.s.Apply(enc("TEST.NEST", "HINCRBY posts:1 likes 2", "HGET posts:1 likes", "NOSUCH x", "HINCRBY posts:1 likes 3")))
	want := "$120\r\n:2\r\n|-ERR tally: not a replicated command: 'hget'\r\n|-ERR unknown command 'NOSUCH', with args beginning with: 'x' \r\n|:5\r\n\r\n"
	if got != want {
		t.Fatalf("Apply reply\n got %q\nwant %q", got, want)
	}
	c := base.client(t, nil)
	if v, err := c.HGet(t.Context(), "posts:1", "likes").Result(); err != nil || v != "5" {
		t.Fatalf("HGET after nested writes: %q, %v", v, err)
	}
	err = c.Do(t.Context(), "TEST.NEST", "HINCRBY posts:1 likes 1").Err()
	var rerr redis.Error
	if !errors.As(err, &rerr) || !strings.Contains(err.Error(), ErrNotApplying.Error()) {
		t.Fatalf("RunNested from a client: %v", err)
	}
}
