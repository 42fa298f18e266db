package server

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tallydb/tally/store"

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
			if err := c.NestCommands(len(args) - 1); err != nil {
				c.WriteErr(err)
				return
			}
			for i, a := range args[1:] {
				var argv [][]byte
				for _, w := range strings.Fields(string(a)) {
					argv = append(argv, []byte(w))
				}
				reply, err := c.RunNested(i, argv)
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

// TestInternalRefused: a command marked FlagInternal (one shard's message
// to another) is refused from a client and from a client's replicated
// entry, and runs nested.
func TestInternalRefused(t *testing.T) {
	ran := 0
	cmds := []Command{
		{Name: "TEST.XMSG", Arity: 1, Flags: FlagWrite | FlagInternal, Summary: "test", Group: "test",
			Handler: func(c *Conn, _ [][]byte) { ran++; c.WriteOK() }},
		{Name: "TEST.OUTER", Arity: 1, Flags: FlagWrite, Summary: "test", Group: "test",
			Handler: func(c *Conn, _ [][]byte) {
				if err := c.NestCommands(1); err != nil {
					c.WriteErr(err)
					return
				}
				reply, err := c.RunNested(0, [][]byte{[]byte("TEST.XMSG")})
				if err != nil {
					c.WriteErr(err)
					return
				}
				c.WriteBulk(reply)
			}},
	}
	ts := newTestServer(t, nil)
	ts.s.mu.Lock()
	err := ts.s.cmds.register(ts.s.metrics, cmds)
	ts.s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	entry, err := EncodeCommand([][]byte{[]byte("TEST.XMSG")})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(ts.s.Apply(entry)); !strings.Contains(got, "internal command") || ran != 0 {
		t.Fatalf("an entry's TEST.XMSG replied %q and ran %d times, want refused", got, ran)
	}
	entry, _ = EncodeCommand([][]byte{[]byte("TEST.OUTER")})
	if got := string(ts.s.Apply(entry)); !strings.Contains(got, "+OK") || ran != 1 {
		t.Fatalf("nested TEST.XMSG replied %q and ran %d times, want OK once", got, ran)
	}
	c := redis.NewClient(&redis.Options{Addr: ts.addr})
	defer c.Close()
	if err := c.Do(t.Context(), "TEST.XMSG").Err(); err == nil || !strings.Contains(err.Error(), "internal command") || ran != 1 {
		t.Fatalf("a client's TEST.XMSG: %v (ran %d), want refused", err, ran)
	}
}

// TestNestedReapplyNumbersMessages: an entry's command runs nested
// commands whose commits depend on the state they find (a DEL commits
// only when the key is there). The first apply stops after the first
// nested command (a crash); the re-apply finds the DEL done, so the DEL
// commits nothing, and the HINCRBY after it must still apply: it is
// numbered as a command of its own (NestCommands), not as the DEL's
// commit number (before, it took that number and was skipped as a
// duplicate: the lost follow of the cluster simulation's lossy seed 107).
func TestNestedReapplyNumbersMessages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	stopAfter := -1 // the first apply's crash point (nested commands run)
	nest := Command{Name: "TEST.NEST", Arity: -2, Flags: FlagWrite, Summary: "test", Group: "test",
		Handler: func(c *Conn, args [][]byte) {
			if err := c.NestCommands(len(args) - 1); err != nil {
				c.WriteErr(err)
				return
			}
			for i, a := range args[1:] {
				if i == stopAfter {
					c.WriteErr(errors.New("crash"))
					return
				}
				var argv [][]byte
				for _, w := range strings.Fields(string(a)) {
					argv = append(argv, []byte(w))
				}
				if _, err := c.RunNested(i, argv); err != nil {
					c.WriteErr(err)
					return
				}
			}
			c.WriteOK()
		}}
	open := func() (*store.DB, *Server) { return openApplyServer(t, dir, nest) }
	enc := func(cmds ...[]string) []byte {
		var e [][][]byte
		for _, cmd := range cmds {
			var argv [][]byte
			for _, a := range cmd {
				argv = append(argv, []byte(a))
			}
			e = append(e, argv)
		}
		b, err := encodeEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	db, s := open()
	mustSchema(t, db)
	apply := func(index uint64, entry []byte) {
		t.Helper()
		if err := db.ApplyEntry(index, func() error {
			s.Apply(entry)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	apply(1, enc([]string{"HINCRBY", "posts:1", "likes", "5"}))
	// TEST.NEST is the entry's last command: its stop is the end of the
	// first apply, as a crash would be.
	entry := enc(
		[]string{"HINCRBY", "posts:4", "likes", "1"},
		[]string{"TEST.NEST", "DEL posts:1", "HINCRBY posts:2 likes 1", "HINCRBY posts:3 likes 1"},
	)
	stopAfter = 1
	apply(2, entry)
	stopAfter = -1
	for range 2 { // restarts: the entry is re-applied each time
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db, s = open()
		apply(2, entry)
	}
	c, err := db.Counter("posts")
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[uint64]uint64{1: 0, 2: 1, 3: 1, 4: 1} {
		if v, err := c.GetColumn(id, "likes"); err != nil || v != want {
			t.Errorf("posts:%d likes = %d (%v), want %d", id, v, err, want)
		}
	}
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
