package server

import (
	"bufio"
	"context"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/store"
)

// testServer is a server on a loopback port over a fresh store with
// counters "posts" (reposts, comments, likes; 16/32) and "key" (value;
// 16/32), and "big" (n: a 64-bit column).
type testServer struct {
	s    *Server
	db   *store.DB
	addr string
	dir  string
	done chan error
}

func newTestServer(t testing.TB, opts *Options) *testServer {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	db, err := store.Open(dir, &store.Options{Durability: store.NoSync, DisableBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	mustSchema(t, db)
	return startServer(t, db, dir, opts)
}

func mustSchema(t testing.TB, db *store.DB) {
	t.Helper()
	for _, c := range []struct {
		name string
		cols []string
		max  uint8
	}{
		{"posts", []string{"reposts", "comments", "likes"}, 32},
		{"key", []string{"value"}, 32},
		{"big", []string{"n"}, 64},
	} {
		if err := db.CreateCounter(c.name, store.CounterOptions{RangeBits: 32}); err != nil {
			t.Fatal(err)
		}
		for _, col := range c.cols {
			if err := db.AddColumn(c.name, col, store.ColumnOptions{HintBits: 16, MaxBits: c.max}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func startServer(t testing.TB, db *store.DB, dir string, opts *Options) *testServer {
	t.Helper()
	return startServerWith(t, db, dir, opts)
}

// startServerWith is startServer with more command groups registered.
func startServerWith(t testing.TB, db *store.DB, dir string, opts *Options, groups ...[]Command) *testServer {
	t.Helper()
	s, err := New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if err := s.Register(g...); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{s: s, db: db, addr: ln.Addr().String(), dir: dir, done: make(chan error, 1)}
	go func() { ts.done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-ts.done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
		if err := db.Check(); err != nil {
			t.Errorf("Check: %v", err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return ts
}

// client returns a go-redis client of the server.
func (ts *testServer) client(t testing.TB, opts *redis.Options) *redis.Client {
	t.Helper()
	if opts == nil {
		opts = &redis.Options{}
	}
	opts.Addr = ts.addr
	if opts.PoolSize == 0 {
		opts.PoolSize = 4
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// raw is a plain TCP connection for byte-level tests.
type raw struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

func (ts *testServer) raw(t testing.TB) *raw {
	t.Helper()
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &raw{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (r *raw) send(s string) {
	r.t.Helper()
	if _, err := r.nc.Write([]byte(s)); err != nil {
		r.t.Fatal(err)
	}
}

// line reads one reply line (without CRLF), or "" and the error.
func (r *raw) line() (string, error) {
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	l, err := r.r.ReadString('\n')
	return strings.TrimRight(l, "\r\n"), err
}

func (r *raw) mustLine() string {
	r.t.Helper()
	l, err := r.line()
	if err != nil {
		r.t.Fatalf("read: %v (got %q)", err, l)
	}
	return l
}

// closed reports whether the server closed the connection (EOF or reset
// within the timeout).
func (r *raw) closed() bool {
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := r.r.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// resp encodes args as one RESP command.
func resp(args ...string) string {
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	return b.String()
}

// newDBServer is a server with every command "tally serve" registers
// (the one table, the package groups) over a fresh database opened by
// tally.Open; Check of every package runs at cleanup.
func newDBServer(t testing.TB) (*testServer, *tallydb.DB) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	db, err := tallydb.Open(dir, &tallydb.Options{Store: &store.Options{Durability: store.NoSync, DisableBackground: true}})
	if err != nil {
		t.Fatal(err)
	}
	ts := startServerWith(t, db.Store(), dir, nil, DBCommands(db))
	// RegisterDB's other half (the server serves already).
	if err := ts.s.metrics.reg.Register(&packageCollector{db: db}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // runs before the server's cleanup closes the store (LIFO)
		if err := db.Check(); err != nil {
			t.Errorf("Check: %v", err)
		}
		for _, p := range db.Packages() {
			p.Close()
		}
	})
	return ts, db
}

// openApplyServer opens the store in dir (NoSync, no background work) and
// a server on it with cmds registered, for tests that apply replicated
// entries and reopen the store between applies.
func openApplyServer(t *testing.T, dir string, cmds ...Command) (*store.DB, *Server) {
	t.Helper()
	db, err := store.Open(dir, &store.Options{Durability: store.NoSync, DisableBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Register(cmds...); err != nil {
		t.Fatal(err)
	}
	return db, s
}
