package server

import (
	"context"
	"io"
	"net"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally/store"
)

// TestShutdown checks the shutdown sequence: stop accepting, finish every
// command already read (its reply is sent), close the connections. Every
// command the store executed was answered, and every answer is in the
// store.
func TestShutdown(t *testing.T) {
	ts := newTestServer(t, nil)
	idle := ts.raw(t)
	idle.send(resp("PING"))
	idle.mustLine()
	partial := ts.raw(t)
	partial.send("*4\r\n$7\r\nHINCRBY\r\n$7\r\nposts:9\r\n$5\r\nlikes")

	busy := ts.raw(t)
	const n = 20000
	var pipeline strings.Builder
	for i := 0; i < n; i++ {
		pipeline.WriteString(resp("HINCRBY", "posts:1", "likes", "1"))
	}
	go busy.nc.Write([]byte(pipeline.String()))
	// Shut down while the pipeline runs.
	for ts.row(t, "posts", 1)[2] == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	replies := 0
	for {
		l, err := busy.line()
		if err != nil {
			break
		}
		if l != ":"+strconv.Itoa(replies+1) {
			t.Fatalf("reply %d = %q", replies, l)
		}
		replies++
	}
	got := ts.row(t, "posts", 1)[2]
	if uint64(replies) != got || replies == 0 {
		t.Fatalf("%d replies, the store holds %d increments", replies, got)
	}
	t.Logf("%d of %d pipelined commands ran before the shutdown", replies, n)
	if ts.row(t, "posts", 9)[2] != 0 {
		t.Fatal("a partly sent command ran")
	}
	if !idle.closed() || !partial.closed() {
		t.Fatal("connections left open")
	}
	if ts.s.Clients() != 0 {
		t.Fatalf("%d clients after Shutdown", ts.s.Clients())
	}
	if c, err := net.DialTimeout("tcp", ts.addr, time.Second); err == nil {
		c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF && err == nil {
			t.Fatal("a new connection was served after Shutdown")
		}
		c.Close()
	}
}

// TestShutdownDeadline checks that Shutdown gives up on a client stuck in a
// write when its context ends, closing the connection.
func TestShutdownDeadline(t *testing.T) {
	ts := newTestServer(t, &Options{WriteTimeout: time.Minute})
	stuck := ts.raw(t)
	if tc, ok := stuck.nc.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	go func() {
		for i := 0; i < 2000; i++ {
			// COMMAND DOCS: tens of KB a reply, so the replies the client
			// never reads fill the socket buffers fast even under -race.
			if _, err := stuck.nc.Write([]byte(resp("COMMAND", "DOCS"))); err != nil {
				return
			}
		}
	}()
	time.Sleep(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := ts.s.Shutdown(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Shutdown = %v, want DeadlineExceeded", err)
	}
	if ts.s.Clients() != 0 {
		t.Fatalf("%d clients after Shutdown", ts.s.Clients())
	}
}

func TestMetrics(t *testing.T) {
	ts := newTestServer(t, nil)
	rc := ts.client(t, nil)
	for i := 0; i < 3; i++ {
		rc.HIncrBy(ctx, "posts:1", "likes", 1)
	}
	rc.HIncrBy(ctx, "posts:1", "nosuch", 1)
	rc.Do(ctx, "NOSUCH")
	rc.Do(ctx, "CONFIG", "GET", "save")
	pipe := rc.Pipeline()
	for i := 0; i < 10; i++ {
		pipe.Incr(ctx, "key:5")
	}
	pipe.Exec(ctx)
	ts.raw(t).send("*x\r\n")
	time.Sleep(100 * time.Millisecond)

	w := httptest.NewRecorder()
	ts.s.MetricsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body := w.Body.String()
	for _, want := range []string{
		`tally_server_commands_total{command="hincrby",outcome="ok"} 3`,
		`tally_server_commands_total{command="hincrby",outcome="error"} 1`,
		`tally_server_commands_total{command="incr",outcome="ok"} 10`,
		`tally_server_commands_total{command="unknown",outcome="error"} 1`,
		`tally_server_commands_total{command="config|get",outcome="ok"} 1`,
		`tally_server_command_duration_seconds_count{command="hincrby"} 4`,
		`tally_server_command_duration_seconds_bucket{command="incr",le="+Inf"} 10`,
		`tally_server_connections 1`,
		`tally_server_clients_dropped_total{reason="protocol_error"} 1`,
		`tally_server_connections_rejected_total{reason="maxclients"} 0`,
		`tally_store_rows{counter="posts",tier="hot"} 1`,
		`tally_store_rows{counter="key",tier="cold"} 0`,
		`tally_store_ranges{counter="posts",tier="hot"} 1`,
		`tally_store_durability{mode="nosync"} 1`,
		`tally_store_last_seq 4`,
		`tally_pebble_memory_bytes `,
		`tally_store_block_cache_hits_total 0`,
		`tally_queue_jobs_pending 0`,
		`tally_queue_jobs_finished_total 0`,
		`tally_queue_oldest_job_age_seconds 0`,
		`go_goroutines `,
		`process_resident_memory_bytes `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if m := regexp.MustCompile(`tally_server_net_input_bytes_total (\d+)`).FindStringSubmatch(body); m == nil || m[1] == "0" {
		t.Errorf("net input bytes: %v", m)
	}
	if t.Failed() {
		t.Log(body)
	}
	// Two servers in one process do not share a registry.
	ts2 := newTestServer(t, nil)
	redis.NewClient(&redis.Options{Addr: ts2.addr}).Ping(ctx)
	w = httptest.NewRecorder()
	ts2.s.MetricsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body2 := w.Body.String()
	if strings.Contains(body2, `command="hincrby",outcome="ok"} 3`) {
		t.Error("the second server reports the first one's commands")
	}
	// Series exist for the commands called only (issue 20): the second
	// server ran PING (and HELLO/CLIENT as go-redis connects) and nothing
	// else, so no HINCRBY series, and few series in all.
	if strings.Contains(body2, `command="hincrby"`) || !strings.Contains(body2, `command="ping"`) {
		t.Errorf("an idle server's command series:\n%s", body2)
	}
	if n := strings.Count(body2, "tally_server_command_duration_seconds_bucket"); n > 4*14 {
		t.Errorf("%d histogram bucket series on a server that ran a few commands", n)
	}
}

// TestMetricsAuth is issue 16 item 9: with a password, /metrics needs it
// (HTTP basic auth, any user name); without one it is open.
func TestMetricsAuth(t *testing.T) {
	ts := newTestServer(t, &Options{Password: "s3cret"})
	h := ts.s.MetricsHandler()
	for _, tc := range []struct {
		name       string
		user, pass string
		basic      bool
		code       int
	}{
		{"no credentials", "", "", false, 401},
		{"wrong password", "default", "s3cre", true, 401},
		{"longer password", "default", "s3cret!", true, 401},
		{"empty password", "default", "", true, 401},
		{"user default", "default", "s3cret", true, 200},
		{"any user", "prometheus", "s3cret", true, 200},
		{"no user", "", "s3cret", true, 200},
	} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		if tc.basic {
			req.SetBasicAuth(tc.user, tc.pass)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != tc.code {
			t.Errorf("%s: %d, want %d", tc.name, w.Code, tc.code)
		}
		if tc.code == 401 {
			if !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("%s: WWW-Authenticate %q", tc.name, w.Header().Get("WWW-Authenticate"))
			}
			if strings.Contains(w.Body.String(), "tally_server") {
				t.Errorf("%s: metrics served without the password", tc.name)
			}
		} else if !strings.Contains(w.Body.String(), "tally_server_auth_failures_total 3") {
			t.Errorf("%s: wrong passwords are not counted as auth failures", tc.name)
		}
	}
	open := newTestServer(t, nil)
	w := httptest.NewRecorder()
	open.s.MetricsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != 200 {
		t.Fatalf("without a password: %d", w.Code)
	}
}

// TestShutdownEndsWaitingCommands checks that Shutdown returns soon after
// its context ends although a command waits (as TL.POST WAIT waits for a
// job): the command waits under Conn.Context, which Shutdown ends.
func TestShutdownEndsWaitingCommands(t *testing.T) {
	ts := newTestServerWith(t, []Command{{Name: "TEST.WAIT", Arity: 1, Handler: func(c *Conn, _ [][]byte) {
		<-c.Context().Done()
		c.WriteErr(c.Context().Err())
	}}})
	r := ts.raw(t)
	r.send(resp("TEST.WAIT"))
	// A stuck hostile client and a partial request too.
	ts.raw(t).send("*9223372036854775807\r\n")
	ts.raw(t).send("*2\r\n$4\r\nECHO\r\n$100\r\nab")
	time.Sleep(50 * time.Millisecond)
	sctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ts.s.Shutdown(sctx) }()
	select {
	case err := <-done:
		if err != context.DeadlineExceeded {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	if ts.s.Clients() != 0 {
		t.Fatalf("%d clients after Shutdown", ts.s.Clients())
	}
}

// newTestServerWith is newTestServer with more commands.
func newTestServerWith(t *testing.T, cmds []Command) *testServer {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	db, err := store.Open(dir, &store.Options{Durability: store.NoSync, DisableBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	mustSchema(t, db)
	return startServerWith(t, db, dir, nil, cmds)
}
