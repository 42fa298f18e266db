package server

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally/internal/commands"
	"github.com/tallydb/tally/store"
)

// snapshot is what a bad command must leave unchanged: the log's last
// sequence (no write at all was committed), the schema and a few rows.
func (ts *testServer) snapshot(t *testing.T) string {
	t.Helper()
	st := ts.db.Stats()
	var b strings.Builder
	fmt.Fprintf(&b, "seq=%d\n", st.LastSeq)
	for _, ci := range ts.db.Counters() {
		fmt.Fprintln(&b, commands.CounterLine(ci))
	}
	for _, id := range []uint64{1, 2, 3} {
		fmt.Fprintln(&b, ts.row(t, "posts", id), ts.row(t, "key", id), ts.row(t, "big", id))
	}
	return b.String()
}

func TestBadInput(t *testing.T) {
	ts := newTestServer(t, nil)
	rc := ts.client(t, &redis.Options{PoolSize: 1})
	// Some data, so "unchanged" means something.
	rc.HSet(ctx, "posts:1", "reposts", 1, "comments", 2, "likes", 4294967290)
	rc.IncrBy(ctx, "key:2", 7)
	rc.HSet(ctx, "big:3", "n", "9223372036854775800")
	before := ts.snapshot(t)

	for _, tc := range []struct {
		cmd  []any
		want string // the whole error reply
	}{
		{[]any{"NOSUCH", "a", "b"}, "ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' "},
		{[]any{"nosuch"}, "ERR unknown command 'nosuch', with args beginning with: "},
		{[]any{"HINCRBY", "posts:1", "likes"}, "ERR wrong number of arguments for 'hincrby' command"},
		{[]any{"hincrby", "posts:1", "likes", 1, 2}, "ERR wrong number of arguments for 'hincrby' command"},
		{[]any{"GET"}, "ERR wrong number of arguments for 'get' command"},
		{[]any{"HSET", "posts:1", "likes"}, "ERR wrong number of arguments for 'hset' command"},
		{[]any{"HSET", "posts:1", "likes", 1, "reposts"}, "ERR wrong number of arguments for 'hset' command"},
		{[]any{"HINCRBY", "posts:x", "likes", 1}, "ERR invalid key 'posts:x': tally keys are COUNTER:ID with a decimal id"},
		{[]any{"HINCRBY", "posts:-1", "likes", 1}, "ERR invalid key 'posts:-1': tally keys are COUNTER:ID with a decimal id"},
		{[]any{"HINCRBY", "posts:18446744073709551616", "likes", 1}, "ERR invalid key 'posts:18446744073709551616': tally keys are COUNTER:ID with a decimal id"},
		{[]any{"INCR", "posts"}, "ERR invalid key 'posts': tally keys are COUNTER:ID with a decimal id"},
		{[]any{"INCR", "key:"}, "ERR invalid key 'key:': tally keys are COUNTER:ID with a decimal id"},
		{[]any{"HINCRBY", "nosuch:1", "likes", 1}, "ERR no such counter 'nosuch' (create it with TALLY.COUNTER ADD)"},
		{[]any{"INCR", "nosuch:1"}, "ERR no such counter 'nosuch' (create it with TALLY.COUNTER ADD)"},
		{[]any{"HGETALL", "nosuch:1"}, "ERR no such counter 'nosuch' (create it with TALLY.COUNTER ADD)"},
		{[]any{"DEL", "posts:1", "nosuch:1"}, "ERR no such counter 'nosuch' (create it with TALLY.COUNTER ADD)"},
		{[]any{"HINCRBY", "posts:1", "views", 1}, "ERR no such column 'views' in counter 'posts' (add it with TALLY.COLUMN ADD)"},
		{[]any{"HSET", "posts:1", "likes", 1, "views", 2}, "ERR no such column 'views' in counter 'posts' (add it with TALLY.COLUMN ADD)"},
		{[]any{"HINCRBY", "posts:1", "likes", "x"}, msgNotInteger},
		{[]any{"HINCRBY", "posts:1", "likes", "1.5"}, msgNotInteger},
		{[]any{"HINCRBY", "posts:1", "likes", "9223372036854775808"}, msgNotInteger},
		{[]any{"INCRBY", "key:1", ""}, msgNotInteger},
		{[]any{"DECRBY", "key:1", "-9223372036854775808"}, "ERR decrement would overflow"},
		{[]any{"HSET", "posts:1", "likes", -1}, msgNotInteger},
		{[]any{"HSET", "posts:1", "likes", "4294967296"}, "ERR value 4294967296 is out of range for column 'likes' (max 4294967295)"},
		// Overflow of a 32-bit column, alone and in a pipeline batch.
		{[]any{"HINCRBY", "posts:1", "likes", 6}, msgOverflow},
		{[]any{"INCRBY", "big:3", 8}, msgOverflow},
		{[]any{"TALLY.MGET", "nosuch", 1}, "ERR no such counter 'nosuch' (create it with TALLY.COUNTER ADD)"},
		{[]any{"TALLY.MGET", "posts", 1, "x"}, "ERR invalid id 'x': want a decimal integer below 2^64"},
		{[]any{"TALLY.MGET", "posts"}, "ERR wrong number of arguments for 'tally.mget' command"},
		{[]any{"SELECT", 2}, "ERR DB index is out of range"},
	} {
		err := rc.Do(ctx, tc.cmd...).Err()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v\nwant %q", tc.cmd, err, tc.want)
		}
		// The connection stays usable.
		if err := rc.Ping(ctx).Err(); err != nil {
			t.Fatalf("after %v: PING: %v", tc.cmd, err)
		}
	}
	if after := ts.snapshot(t); after != before {
		t.Fatalf("bad input changed the store:\nbefore\n%s\nafter\n%s", before, after)
	}
	// A counter without columns: WRONGTYPE for the string commands.
	if err := ts.db.CreateCounter("empty", store.CounterOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rc.Incr(ctx, "empty:1").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE counter 'empty' has no columns") {
		t.Fatalf("INCR of a counter without columns: %v", err)
	}
	if err := rc.Get(ctx, "empty:1").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatalf("GET of a counter without columns: %v", err)
	}
	// Names with control bytes are quoted safely.
	r := ts.raw(t)
	r.send(resp("HINCRBY", "no\r\nsuch:1", "x", "1"))
	if l := r.mustLine(); l != "-ERR no such counter 'no  such' (create it with TALLY.COUNTER ADD)" {
		t.Fatalf("reply with a CRLF in the key: %q", l)
	}
}

// TestPipelineOverflow checks that a batch of pipelined writes with one
// bad command gives exactly the replies of running them one by one.
func TestPipelineOverflow(t *testing.T) {
	ts := newTestServer(t, nil)
	rc := ts.client(t, nil)
	if err := rc.HSet(ctx, "posts:1", "likes", 4294967290).Err(); err != nil {
		t.Fatal(err)
	}
	pipe := rc.Pipeline()
	var cmds []*redis.IntCmd
	for i := 0; i < 10; i++ {
		cmds = append(cmds, pipe.HIncrBy(ctx, "posts:1", "likes", 1))
		cmds = append(cmds, pipe.HIncrBy(ctx, "posts:2", "reposts", 1))
	}
	pipe.Exec(ctx)
	var likes, errs []string
	for i, c := range cmds {
		if i%2 == 1 {
			if c.Val() != int64(i/2+1) || c.Err() != nil {
				t.Errorf("reposts reply %d = %d, %v", i/2, c.Val(), c.Err())
			}
			continue
		}
		if c.Err() != nil {
			errs = append(errs, c.Err().Error())
		} else {
			likes = append(likes, fmt.Sprint(c.Val()))
		}
	}
	if strings.Join(likes, " ") != "4294967291 4294967292 4294967293 4294967294 4294967295" || len(errs) != 5 || errs[0] != msgOverflow {
		t.Fatalf("likes replies %v, errors %v", likes, errs)
	}
	if got := ts.row(t, "posts", 1)[2]; got != 4294967295 {
		t.Fatalf("likes = %d", got)
	}
	if got := ts.row(t, "posts", 2)[0]; got != 10 {
		t.Fatalf("reposts = %d", got)
	}
}

func TestPipelining(t *testing.T) {
	ts := newTestServer(t, nil)
	rc := ts.client(t, nil)
	const n = 3000
	pipe := rc.Pipeline()
	incrs := make([]*redis.IntCmd, n)
	gets := make([]*redis.StringCmd, n)
	for i := 0; i < n; i++ {
		// Writes and reads interleaved: each read sees every write before it.
		incrs[i] = pipe.HIncrBy(ctx, fmt.Sprintf("posts:%d", i%7), "comments", int64(i%3))
		gets[i] = pipe.HGet(ctx, fmt.Sprintf("posts:%d", i%7), "comments")
		if i%100 == 0 {
			pipe.HSet(ctx, fmt.Sprintf("posts:%d", i%7), "reposts", i, "comments", 0, "likes", 1)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	model := map[int]int64{}
	for i := 0; i < n; i++ {
		k := i % 7
		model[k] += int64(i % 3)
		if incrs[i].Val() != model[k] || gets[i].Val() != fmt.Sprint(model[k]) {
			t.Fatalf("command %d: HINCRBY %d, HGET %s; want %d", i, incrs[i].Val(), gets[i].Val(), model[k])
		}
		if i%100 == 0 {
			model[k] = 0
		}
	}
}

// TestConcurrentClients runs 100 clients at once: each increments rows
// shared with the others and rows of its own, some also set other
// columns of the shared rows with a partial HSET (a read-modify-write that
// must not lose a concurrent increment). Afterwards every count is exact.
func TestConcurrentClients(t *testing.T) {
	ts := newTestServer(t, nil)
	const clients, rounds, shared = 100, 40, 5
	var wg sync.WaitGroup
	errc := make(chan error, clients)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rc := redis.NewClient(&redis.Options{Addr: ts.addr, PoolSize: 1})
			defer rc.Close()
			own := fmt.Sprintf("posts:%d", 1000+c)
			for r := 0; r < rounds; r++ {
				pipe := rc.Pipeline()
				pipe.HIncrBy(ctx, fmt.Sprintf("posts:%d", r%shared), "likes", 1)
				pipe.HIncrBy(ctx, own, "likes", 2)
				pipe.Incr(ctx, fmt.Sprintf("key:%d", r%shared))
				if c%4 == 0 {
					pipe.HSet(ctx, fmt.Sprintf("posts:%d", r%shared), "comments", r)
				}
				pipe.HGetAll(ctx, own)
				pipe.Do(ctx, "TALLY.MGET", "posts", 0, 1, 2, 3, 4)
				if _, err := pipe.Exec(ctx); err != nil {
					errc <- err
					return
				}
			}
		}(c)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for k := 0; k < shared; k++ {
		want := uint64(clients * rounds / shared)
		if got := ts.row(t, "posts", uint64(k))[2]; got != want {
			t.Errorf("posts:%d likes = %d, want %d", k, got, want)
		}
		if got := ts.row(t, "key", uint64(k))[0]; got != want {
			t.Errorf("key:%d = %d, want %d", k, got, want)
		}
	}
	for c := 0; c < clients; c++ {
		if got := ts.row(t, "posts", uint64(1000+c))[2]; got != 2*rounds {
			t.Errorf("posts:%d likes = %d, want %d", 1000+c, got, 2*rounds)
		}
	}
	if err := ts.db.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestLimits(t *testing.T) {
	ts := newTestServer(t, &Options{MaxRequestBytes: 64 << 10, MaxArgs: 100, MaxClients: 3})
	rc := ts.client(t, &redis.Options{PoolSize: 1})
	if err := rc.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	before := ts.snapshot(t)

	check := func(name, input, want string) {
		t.Helper()
		r := ts.raw(t)
		r.send(input)
		if l, _ := r.line(); !strings.HasPrefix(l, want) {
			t.Errorf("%s: reply %q, want %q", name, l, want)
		}
		if !r.closed() {
			t.Errorf("%s: client not dropped", name)
		}
		// Others are served.
		if err := rc.Ping(ctx).Err(); err != nil {
			t.Fatalf("%s: another client: %v", name, err)
		}
	}
	// A request over the limit: one bulk longer than the limit is refused
	// at its header (Redis: proto-max-bulk-len), bulks that add up past it
	// at the header that passes it, an inline line at the limit.
	check("big bulk", "*2\r\n$4\r\nECHO\r\n$100000\r\n"+strings.Repeat("x", 70000), "-ERR Protocol error: invalid bulk length")
	check("bulks over the limit", "*3\r\n$4\r\nECHO\r\n$40000\r\n"+strings.Repeat("x", 40000)+"\r\n$40000\r\n",
		"-ERR Protocol error: request larger than 65536 bytes")
	check("endless inline", strings.Repeat("PING ", 20000), "-ERR Protocol error: too big inline request")
	// Too many arguments: at the *N header for RESP, while splitting inline.
	check("many args", resp(append([]string{"MGET"}, strings.Split(strings.Repeat("key:1 ", 100), " ")...)...),
		"-ERR Protocol error: invalid multibulk length")
	check("many inline args", "MGET"+strings.Repeat(" key:1", 100)+"\r\n", "-ERR Protocol error: more than 100 arguments")
	// Garbage bytes: not RESP, or unreadable as an inline command.
	check("bad multibulk", "*x\r\n", "-ERR Protocol error: invalid multibulk length")
	check("bad bulk", "*1\r\n$-5\r\n", "-ERR Protocol error: invalid bulk length")
	check("no dollar", "*1\r\n:5\r\n", "-ERR Protocol error: expected '$', got ':'")
	check("binary", "\x00\x01\x02\xff\xfe\n", "-ERR Protocol error: unreadable command name")
	check("quotes", "PING \"open\n", "-ERR Protocol error: unbalanced quotes in request")
	// redcon's parser panicked on a bulk length near the int maximum.
	check("huge bulk length", "*1\r\n$9223372036854775807\r\nx\r\n", "-ERR Protocol error: invalid bulk length")
	check("huge bulk length 2", "*1\r\n$9223372036854775806\r\n", "-ERR Protocol error: invalid bulk length")

	if after := ts.snapshot(t); after != before {
		t.Fatalf("dropped clients changed the store:\n%s\n%s", before, after)
	}

	// MaxClients: 3 (rc's connection is one). The dropped clients above
	// are closed by the server asynchronously: wait until only rc is left,
	// or a slow machine would count them against the limit.
	for deadline := time.Now().Add(10 * time.Second); ts.s.Clients() > 1; {
		if time.Now().After(deadline) {
			t.Fatalf("%d clients still connected after the drops", ts.s.Clients())
		}
		time.Sleep(time.Millisecond)
	}
	a, b := ts.raw(t), ts.raw(t)
	a.send(resp("PING"))
	b.send(resp("PING"))
	a.mustLine()
	b.mustLine()
	over := ts.raw(t)
	if l := over.mustLine(); l != "-ERR max number of clients reached" {
		t.Fatalf("4th client: %q", l)
	}
	if !over.closed() {
		t.Fatal("4th client not closed")
	}
	if n := ts.s.stats.rejected.Load(); n != 1 {
		t.Fatalf("rejected = %d", n)
	}
}

// TestStuckClient checks that a client that stops reading its replies is
// dropped after WriteTimeout, and that others are served while it is
// stuck (before it is dropped).
func TestStuckClient(t *testing.T) {
	ts := newTestServer(t, &Options{WriteTimeout: 3 * time.Second})
	rc := ts.client(t, &redis.Options{PoolSize: 1})
	if err := rc.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	stuck, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	if tc, ok := stuck.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	go func() {
		cmd := []byte(resp("COMMAND"))
		for i := 0; i < 2000; i++ {
			if _, err := stuck.Write(cmd); err != nil {
				return
			}
		}
	}()
	time.Sleep(500 * time.Millisecond) // the socket buffers fill up
	for i := 0; i < 10; i++ {
		if err := rc.HIncrBy(ctx, "posts:1", "likes", 1).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if n := ts.s.stats.dropped.Load(); n != 0 {
		t.Fatalf("%d clients dropped before the write timeout", n)
	}
	deadline := time.Now().Add(20 * time.Second)
	for ts.s.stats.dropped.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := ts.s.stats.dropped.Load(); n != 1 {
		t.Fatalf("the client that stopped reading was not dropped (dropped %d)", n)
	}
	if got := ts.row(t, "posts", 1)[2]; got != 10 {
		t.Fatalf("likes = %d", got)
	}
}

func TestIdleTimeout(t *testing.T) {
	ts := newTestServer(t, &Options{IdleTimeout: 200 * time.Millisecond})
	r := ts.raw(t)
	r.send(resp("PING"))
	r.mustLine()
	if !r.closed() {
		t.Fatal("idle client not closed")
	}
}

// fakeListener hands out in-memory connections that claim a remote
// address, to test protected mode without any network traffic.
type fakeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

type fakeConn struct {
	net.Conn
	remote net.Addr
}

func (c fakeConn) RemoteAddr() net.Addr { return c.remote }

func (l *fakeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}
func (l *fakeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *fakeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func (l *fakeListener) dial(ip net.IP) net.Conn {
	client, server := net.Pipe()
	l.conns <- fakeConn{Conn: server, remote: &net.TCPAddr{IP: ip, Port: 40000}}
	return client
}

func TestProtectedMode(t *testing.T) {
	remote := net.ParseIP("203.0.113.7") // TEST-NET-3: documentation only
	for _, tc := range []struct {
		opts *Options
		want string
	}{
		{nil, "-DENIED tally is running in protected mode"},
		{&Options{AllowRemote: true}, "+PONG"},
		{&Options{Password: "pw"}, "-NOAUTH Authentication required."},
	} {
		ts := newTestServer(t, tc.opts)
		ln := &fakeListener{conns: make(chan net.Conn), done: make(chan struct{})}
		go ts.s.Serve(ln)
		c := ln.dial(remote)
		go c.Write([]byte(resp("PING")))
		buf := make([]byte, 300)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _ := c.Read(buf)
		if !strings.HasPrefix(string(buf[:n]), tc.want) {
			t.Errorf("%+v: remote client got %q, want %q", tc.opts, buf[:n], tc.want)
		}
		c.Close()
		// Loopback clients are always served.
		local := ln.dial(net.IPv4(127, 0, 0, 1))
		go local.Write([]byte(resp("QUIT")))
		local.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _ = local.Read(buf)
		if string(buf[:n]) != "+OK\r\n" && !(tc.opts != nil && tc.opts.Password != "") {
			t.Errorf("%+v: loopback client got %q", tc.opts, buf[:n])
		}
		local.Close()
	}

	for _, tc := range []struct {
		addr string
		opts *Options
		ok   bool
	}{
		{"127.0.0.1:6380", nil, true},
		{"[::1]:6380", nil, true},
		{"localhost:6380", nil, true},
		{"0.0.0.0:6380", nil, false},
		{":6380", nil, false},
		{"10.1.2.3:6380", nil, false},
		{"0.0.0.0:6380", &Options{Password: "x"}, true},
		{"0.0.0.0:6380", &Options{AllowRemote: true}, true},
	} {
		err := CheckAddr(tc.addr, tc.opts)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAddr(%q, %+v) = %v", tc.addr, tc.opts, err)
		}
	}
	if err := CheckAddr("nohost", nil); err == nil {
		t.Error("CheckAddr without a port: no error")
	}
}

func TestOptionsAndRegister(t *testing.T) {
	ts := newTestServer(t, nil)
	if _, err := New(ts.db, &Options{MaxClients: -1, MaxRequestBytes: 10, MaxArgs: 1, WriteTimeout: -1}); err == nil ||
		strings.Count(err.Error(), "invalid server option") != 4 {
		t.Fatalf("New with bad options: %v", err)
	}
	if _, err := New(nil, nil); err == nil {
		t.Fatal("New(nil): no error")
	}
	// Register: duplicates and malformed entries are refused; after Serve
	// the table is frozen.
	s, err := New(ts.db, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := func(c *Conn, args [][]byte) { c.WriteOK() }
	for _, cmd := range []Command{
		{Name: "GET", Arity: 2, Handler: h},
		{Name: "", Arity: 1, Handler: h},
		{Name: "X Y", Arity: 1, Handler: h},
		{Name: "X", Arity: 0, Handler: h},
		{Name: "X", Arity: 1},
		{Name: "X", Arity: 2, Subcommands: []Command{{Name: "A", Arity: 1, Handler: h}}},
		{Name: "X", Arity: 2, Subcommands: []Command{{Name: "A", Arity: 2, Handler: h}, {Name: "a", Arity: 2, Handler: h}}},
	} {
		if err := s.Register(cmd); err == nil {
			t.Errorf("Register(%+v): no error", cmd)
		}
	}
	if err := s.Register(Command{Name: "MY.ECHO2", Arity: 2, Handler: func(c *Conn, args [][]byte) {
		c.WriteArray(2)
		c.WriteBulk(args[1])
		c.WriteBulk(args[1])
	}}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	rc := redis.NewClient(&redis.Options{Addr: ln.Addr().String()})
	defer rc.Close()
	if v, err := rc.Do(ctx, "my.echo2", "x").Result(); err != nil || !reflect.DeepEqual(v, []any{"x", "x"}) {
		t.Fatalf("registered command = %#v, %v", v, err)
	}
	if err := s.Register(Command{Name: "LATE", Arity: 1, Handler: h}); err != ErrServing {
		t.Fatalf("Register after Serve: %v", err)
	}
	s.Close()
	if err := <-done; err != ErrServerClosed {
		t.Fatalf("Serve after Close: %v", err)
	}
	if err := s.Serve(ln); err != ErrServerClosed {
		t.Fatalf("Serve on a closed server: %v", err)
	}
}

// FuzzConn sends arbitrary bytes as one client's input: the server must
// neither panic nor hang, must end the connection when the client leaves,
// and must leave a store that passes Check. Seeds run in every go test;
// go test -fuzz=FuzzConn ./server/ explores further (FuzzRequest fuzzes the
// request reader alone, much faster).
func FuzzConn(f *testing.F) {
	for _, seed := range []string{
		resp("HINCRBY", "posts:1", "likes", "1"),
		resp("HSET", "posts:2", "reposts", "1", "comments", "2", "likes", "3") + resp("HGETALL", "posts:2"),
		resp("TALLY.MGET", "posts", "1", "2") + resp("DEL", "posts:1", "posts:2"),
		resp("INCR", "key:1") + resp("DECRBY", "key:1", "5") + resp("MGET", "key:1", "posts:1", "x"),
		"PING\r\nHINCRBY posts:3 likes -1\r\n",
		"*1\r\n$9223372036854775807\r\nx\r\n",
		"*2\r\n$4\r\nECHO\r\n$3\r\nab",
		"*-1\r\n", "$5\r\nhello\r\n", "\x00\xff\r\n", "PING \"a\n", resp("COMMAND", "DOCS"), resp("INFO"),
		resp("CLIENT", "SETNAME", "x") + resp("QUIT") + resp("INCR", "key:9"),
	} {
		f.Add([]byte(seed))
	}
	ts := newTestServer(f, &Options{MaxRequestBytes: 1 << 16, MaxArgs: 64})
	f.Fuzz(func(t *testing.T, data []byte) {
		nc, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		go func() {
			nc.Write(data)
			nc.(*net.TCPConn).CloseWrite() // the client leaves
		}()
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 64<<10)
		for {
			if _, err := nc.Read(buf); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatal("the server did not close the connection after the client left")
				}
				break
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for ts.s.Clients() > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if n := ts.s.Clients(); n > 0 {
			t.Fatalf("%d connections still open after the client left", n)
		}
		if err := ts.db.Check(); err != nil {
			t.Fatal(err)
		}
	})
}
