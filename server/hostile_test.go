package server

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally/store"
)

// fingerprint is what a hostile client must leave unchanged, read both
// from the store (its last sequence: no write at all was committed) and
// through another client (DBSIZE and a few rows).
func (ts *testServer) fingerprint(t *testing.T, rc *redis.Client) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(ts.snapshot(t))
	for _, cmd := range [][]any{{"DBSIZE"}, {"HGETALL", "posts:1"}, {"GET", "key:2"}, {"HGETALL", "c:1"}} {
		v, err := rc.Do(ctx, cmd...).Result()
		if err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		fmt.Fprintf(&b, "%v: %v\n", cmd, v)
	}
	return b.String()
}

// connectedClients is INFO's connected_clients.
func connectedClients(t *testing.T, rc *redis.Client) int {
	t.Helper()
	info, err := rc.Info(ctx, "clients").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "connected_clients:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	t.Fatalf("no connected_clients in %q", info)
	return 0
}

// curlRequest is what "curl -X POST http://ADDR/ --data-binary BODY" sends
// (curl 8), with the body of issue 16 item 3.
func curlRequest(addr string) string {
	body := "HINCRBY c:1 a 100\r\nLIKE.LIKE bz 1 666\r\nTL.FOLLOW 5 6\r\n"
	return "POST / HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\nContent-Type: application/x-www-form-urlencoded\r\n\r\n" + body
}

// TestHostileClients runs each request of issue 16 and each of Redis's
// protocol-error cases as one client, against a server with the default
// limits (MaxRequestBytes 4 MiB, MaxArgs 65536). Each gets its reply
// (exact text) and is dropped (or, for what Redis ignores, is served on);
// after each, another client is served, the server's goroutines and
// connected_clients return to where they were, the memory it allocated
// while handling the client stays within a few times MaxRequestBytes, the
// heap retains none of it, and the data fingerprint is unchanged. With
// redcon's reader the first case never answered and spun a core, the
// inline ECHO took 20 s and 9 GB, and the POST ran its body.
func TestHostileClients(t *testing.T) {
	ts := newTestServer(t, nil)
	if err := ts.db.CreateCounter("c", store.CounterOptions{RangeBits: 32}); err != nil {
		t.Fatal(err)
	}
	if err := ts.db.AddColumn("c", "a", store.ColumnOptions{}); err != nil {
		t.Fatal(err)
	}
	rc := ts.client(t, &redis.Options{PoolSize: 1})
	rc.HSet(ctx, "posts:1", "reposts", 1, "comments", 2, "likes", 3)
	rc.IncrBy(ctx, "key:2", 7)
	rc.HIncrBy(ctx, "c:1", "a", 5)
	before := ts.fingerprint(t, rc)
	maxBytes := DefaultMaxRequestBytes

	const (
		invalidMultibulk = "-ERR Protocol error: invalid multibulk length"
		invalidBulk      = "-ERR Protocol error: invalid bulk length"
	)
	cases := []struct {
		name    string
		in      string
		replies []string // every reply line, in order
		served  bool     // not dropped: the connection still answers PING
	}{
		// Issue 16 item 1: a count the old reader looped over forever.
		{"huge multibulk count", "*9223372036854775807\r\n", []string{invalidMultibulk}, false},
		{"multibulk count over MaxArgs", "*65537\r\n", []string{invalidMultibulk}, false},
		{"multibulk count overflow", "*92233720368547758070\r\n", []string{invalidMultibulk}, false},
		// Item 2: quadratic inline splitting.
		{"inline ECHO of 200000 args", "ECHO" + strings.Repeat(" a", 200000) + "\r\n",
			[]string{"-ERR Protocol error: more than 65536 arguments"}, false},
		{"160 KB of spaces", strings.Repeat(" ", 160000) + "\r\n", nil, true},
		{"never-ending inline line", strings.Repeat("a", maxBytes+100<<10), []string{"-ERR Protocol error: too big inline request"}, false},
		// Item 3: cross-protocol requests get no reply and run nothing.
		{"curl POST with commands in its body", curlRequest(ts.addr), nil, false},
		{"GET request line", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", nil, false},
		{"request line of another method", "PUT /x HTTP/1.0\r\n\r\nHINCRBY c:1 a 1\r\n", nil, false},
		{"Host: after a command", "HINCRBY c:1 a 1\r\nhost: evil\r\n", nil, false},
		{"POST as RESP", resp("HINCRBY", "c:1", "a", "1") + resp("post", "/"), nil, false},
		// Redis's protocol errors.
		{"negative bulk length", "*1\r\n$-5\r\n", []string{invalidBulk}, false},
		{"$-1 as a command", "*1\r\n$-1\r\n", []string{invalidBulk}, false},
		{"huge bulk length", "*1\r\n$9223372036854775807\r\nx\r\n", []string{invalidBulk}, false},
		{"bulk length beyond MaxRequestBytes", "*2\r\n$4\r\nECHO\r\n$" + strconv.Itoa(maxBytes+1) + "\r\n", []string{invalidBulk}, false},
		{"bulks beyond MaxRequestBytes", "*3\r\n$4\r\nECHO\r\n$3000000\r\n" + strings.Repeat("x", 3000000) + "\r\n$3000000\r\n",
			[]string{"-ERR Protocol error: request larger than 4194304 bytes"}, false},
		{"nested array", "*1\r\n*1\r\n$4\r\nPING\r\n", []string{"-ERR Protocol error: expected '$', got '*'"}, false},
		{"bulk not followed by CRLF", "*1\r\n$4\r\nPINGxx", []string{invalidBulk}, false},
		{"unbalanced quotes", "ECHO \"a\r\n", []string{"-ERR Protocol error: unbalanced quotes in request"}, false},
		{"bad multibulk length", "*1x\r\n", []string{invalidMultibulk}, false},
		{"*0 and *-1 are ignored", "*0\r\n*-1\r\n", nil, true},
		{"$-1 inline is an unknown command", "$-1\r\n", []string{"-ERR unknown command '$-1', with args beginning with: "}, true},
	}
	drops := int64(0)
	for _, tc := range cases {
		if !tc.served {
			drops++
		}
		t.Run(tc.name, func(t *testing.T) {
			runtime.GC()
			var m0 runtime.MemStats
			runtime.ReadMemStats(&m0)
			goroutines := runtime.NumGoroutine()
			clients := connectedClients(t, rc)

			nc, err := net.Dial("tcp", ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			r := &raw{t: t, nc: nc, r: bufio.NewReader(nc)}
			wrote := make(chan struct{})
			go func() {
				defer close(wrote)
				nc.Write([]byte(tc.in)) // fails once the server drops us
			}()
			for _, want := range tc.replies {
				if got, err := r.line(); got != want {
					t.Fatalf("reply %q (%v), want %q", got, err, want)
				}
			}
			if tc.served {
				<-wrote
				r.send(resp("PING"))
				if got := r.mustLine(); got != "+PONG" {
					t.Fatalf("PING: %q", got)
				}
			} else if !r.closed() {
				t.Fatal("the client was not dropped")
			}
			nc.Close()
			<-wrote

			// Others are served.
			if err := rc.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			var m1 runtime.MemStats
			runtime.ReadMemStats(&m1)
			if grew := m1.TotalAlloc - m0.TotalAlloc; grew > uint64(4*maxBytes+len(tc.in)) {
				t.Errorf("%d MB allocated while serving the client (MaxRequestBytes %d MB)", grew>>20, maxBytes>>20)
			}
			// The connection's goroutine ends, nothing spins, nothing leaks.
			for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > goroutines; {
				if time.Now().After(deadline) {
					buf := make([]byte, 1<<20)
					t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), goroutines, buf[:runtime.Stack(buf, true)])
				}
				time.Sleep(5 * time.Millisecond)
			}
			if n := connectedClients(t, rc); n != clients {
				t.Errorf("connected_clients %d, %d before", n, clients)
			}
			runtime.GC()
			runtime.ReadMemStats(&m1)
			if m1.HeapAlloc > m0.HeapAlloc+uint64(2*maxBytes) {
				t.Errorf("heap grew from %d to %d MB", m0.HeapAlloc>>20, m1.HeapAlloc>>20)
			}
			if after := ts.fingerprint(t, rc); after != before {
				t.Fatalf("the client changed the data:\nbefore\n%s\nafter\n%s", before, after)
			}
		})
	}
	if n := ts.s.stats.dropped.Load(); n != drops {
		t.Errorf("%d clients dropped, want %d", n, drops)
	}
}

// TestCrossProtocolCurl runs the curl command, when curl is
// installed: it gets no reply, the body's HINCRBY does not run, and the
// attack is logged and counted.
func TestCrossProtocolCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed; TestHostileClients sends the bytes curl sends")
	}
	var log syncLog
	ts := newTestServer(t, &Options{Logger: log.logger()})
	if err := ts.db.CreateCounter("c", store.CounterOptions{RangeBits: 32}); err != nil {
		t.Fatal(err)
	}
	if err := ts.db.AddColumn("c", "a", store.ColumnOptions{}); err != nil {
		t.Fatal(err)
	}
	seq := ts.db.Stats().LastSeq
	out, err := exec.Command(curl, "-sS", "-m", "10", "-X", "POST", "http://"+ts.addr+"/",
		"--data-binary", "HINCRBY c:1 a 100\r\nLIKE.LIKE bz 1 666\r\nTL.FOLLOW 5 6\r\n").CombinedOutput()
	if err == nil {
		t.Fatalf("curl got an answer: %s", out)
	}
	t.Logf("curl: %v: %s", err, out)
	if v := ts.row(t, "c", 1)[0]; v != 0 {
		t.Fatalf("c:1 a = %d after the request", v)
	}
	if ts.db.Stats().LastSeq != seq {
		t.Fatalf("the request wrote: last seq %d", ts.db.Stats().LastSeq)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log.String(), "Possible SECURITY ATTACK detected"); {
		if time.Now().After(deadline) {
			t.Fatalf("no warning logged: %q", log.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := ts.s.stats.dropped.Load(); n != 1 {
		t.Fatalf("%d drops counted", n)
	}
}

// TestCommandsBeforeGarbage is issue 16 item 7: complete commands in the
// same read as a later protocol error run and are answered, then the
// error is replied and the client dropped, as Redis does.
func TestCommandsBeforeGarbage(t *testing.T) {
	ts := newTestServer(t, nil)
	if err := ts.db.CreateCounter("c", store.CounterOptions{RangeBits: 32}); err != nil {
		t.Fatal(err)
	}
	if err := ts.db.AddColumn("c", "a", store.ColumnOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		garbage, reply string
	}{
		{"*x\r\n", "-ERR Protocol error: invalid multibulk length"},
		{"*9223372036854775807\r\n", "-ERR Protocol error: invalid multibulk length"},
		{"*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length"},
		{"PING \"open\r\n", "-ERR Protocol error: unbalanced quotes in request"},
	} {
		before := ts.row(t, "c", 1)[0]
		r := ts.raw(t)
		in := resp("HINCRBY", "c:1", "a", "1") + resp("HINCRBY", "c:1", "a", "1") + "HINCRBY c:1 a 1\r\n" + resp("PING") +
			tc.garbage + resp("HINCRBY", "c:1", "a", "100")
		r.send(in)
		for i := uint64(1); i <= 3; i++ {
			if l := r.mustLine(); l != ":"+strconv.FormatUint(before+i, 10) {
				t.Fatalf("%q: reply %d = %q", tc.garbage, i, l)
			}
		}
		if l := r.mustLine(); l != "+PONG" {
			t.Fatalf("%q: %q", tc.garbage, l)
		}
		if l := r.mustLine(); l != tc.reply {
			t.Fatalf("%q: %q, want %q", tc.garbage, l, tc.reply)
		}
		if !r.closed() {
			t.Fatalf("%q: not dropped", tc.garbage)
		}
		if got := ts.row(t, "c", 1)[0]; got != before+3 {
			t.Fatalf("%q: c:1 a = %d, want %d", tc.garbage, got, before+3)
		}
	}
}

// syncLog collects a server's log lines.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *syncLog) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }
