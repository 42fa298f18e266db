package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeShutdownWithStuckClient is issue 16's: SIGTERM while hostile
// clients are connected (one sent *9223372036854775807, on which redcon's
// reader spun forever, so Shutdown waited for a goroutine that never
// returned; others sent part of a request and stalled) exits 0 well within
// the shutdown timeout, and every acknowledged write is there on reopen.
func TestServeShutdownWithStuckClient(t *testing.T) {
	dir := newStore(t)
	p := startServe(t, "-d", dir)
	rc := p.client(t)
	const acked = 40
	for i := 1; i <= acked; i++ {
		if v, err := rc.HIncrBy(context.Background(), "posts:1", "likes", 1).Result(); err != nil || v != int64(i) {
			t.Fatalf("HINCRBY = %d, %v", v, err)
		}
	}
	for _, in := range []string{
		"*9223372036854775807\r\n",
		"*4\r\n$7\r\nHINCRBY\r\n$7\r\nposts:1\r\n$5\r\nlik",            // a partial bulk, then nothing
		"*3\r\n$4\r\nECHO\r\n$1000000\r\n" + strings.Repeat("x", 5000), // a long bulk, stalled
		"HINCRBY posts:1 likes 1",                                      // an inline line without its end
	} {
		nc, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if _, err := nc.Write([]byte(in)); err != nil {
			t.Fatal(err)
		}
	}
	// The clients' input has reached the server: another client's command
	// is answered after the server has read theirs (one goroutine each,
	// so this only makes it likely; the test holds either way).
	time.Sleep(200 * time.Millisecond)
	if err := rc.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := p.wait()
	took := time.Since(t0)
	if code != 0 {
		t.Fatalf("serve exited %d after SIGTERM: %s", code, p.stderr)
	}
	if took > shutdownTimeout {
		t.Fatalf("serve took %v to exit, more than the shutdown timeout %v", took, shutdownTimeout)
	}
	if strings.Contains(p.stderr.String(), "closed the remaining connections") {
		t.Fatalf("Shutdown ran out of time although no command was running: %s", p.stderr)
	}
	t.Logf("exited %v after SIGTERM", took)
	if out := mustTally(t, "-d="+dir, "get", "posts", "1"); out != fmt.Sprintf("1 reposts=0 likes=%d\n", acked) {
		t.Fatalf("after the shutdown: %q, want likes=%d", out, acked)
	}
}

// TestServeCrossProtocol is issue 16 item 3 against "tally serve" with
// every command group: the curl POST, whose body holds a HINCRBY,
// a LIKE.LIKE and a TL.FOLLOW, gets no reply and changes nothing, and the
// attack is logged. It uses curl when installed, else sends the bytes
// curl sends.
func TestServeCrossProtocol(t *testing.T) {
	dir := newStore(t)
	p := startServe(t, "-d", dir)
	rc := p.client(t)
	bg := context.Background()
	for _, cmd := range [][]any{{"TALLY.COUNTER", "ADD", "c"}, {"TALLY.COLUMN", "ADD", "c", "a"}, {"HINCRBY", "c:1", "a", 1},
		{"LIKE.BUSINESS", "ADD", "bz"}} {
		if err := rc.Do(bg, cmd...).Err(); err != nil {
			t.Fatal(cmd, err)
		}
	}
	fingerprint := func() string {
		var b strings.Builder
		for _, cmd := range [][]any{{"DBSIZE"}, {"HGETALL", "c:1"}, {"LIKE.COUNTS", "bz", 1}, {"TL.ISFOLLOWING", 5, 6},
			{"TL.FOLLOWEES", 5}} {
			v, err := rc.Do(bg, cmd...).Result()
			fmt.Fprintf(&b, "%v: %v %v\n", cmd, v, err)
		}
		return b.String()
	}
	before := fingerprint()

	body := "HINCRBY c:1 a 100\r\nLIKE.LIKE bz 1 666\r\nTL.FOLLOW 5 6\r\n"
	if curl, err := exec.LookPath("curl"); err == nil {
		out, err := exec.Command(curl, "-sS", "-m", "10", "-X", "POST", "http://"+p.addr+"/", "--data-binary", body).CombinedOutput()
		if err == nil {
			t.Fatalf("curl got an answer: %s", out)
		}
		t.Logf("curl: %v: %s", err, out)
	} else {
		nc, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		fmt.Fprintf(nc, "POST / HTTP/1.1\r\nHost: %s\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\nContent-Length: %d\r\n"+
			"Content-Type: application/x-www-form-urlencoded\r\n\r\n%s", p.addr, len(body), body)
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if b, err := io.ReadAll(nc); err != nil || len(b) > 0 {
			t.Fatalf("the request got %q, %v; want the connection closed without a reply", b, err)
		}
	}
	if after := fingerprint(); after != before {
		t.Fatalf("the request changed the data:\nbefore\n%s\nafter\n%s", before, after)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.stderr.String(), "Possible SECURITY ATTACK detected"); {
		if time.Now().After(deadline) {
			t.Fatalf("no warning on stderr: %s", p.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The same commands, sent by a Redis client, do change the data: the
	// fingerprint can see them.
	for _, l := range strings.Split(strings.TrimSpace(body), "\r\n") {
		var args []any
		for _, a := range strings.Fields(l) {
			args = append(args, a)
		}
		if err := rc.Do(bg, args...).Err(); err != nil {
			t.Fatal(l, err)
		}
	}
	if after := fingerprint(); after == before {
		t.Fatal("the fingerprint does not see the body's commands")
	}
}

// TestServeMetricsAuth is issue 16 item 9: with --requirepass, a
// non-loopback --metrics-addr is allowed and /metrics needs the password
// (HTTP basic auth).
func TestServeMetricsAuth(t *testing.T) {
	dir := newStore(t)
	p := startServe(t, "-d", dir, "--requirepass", "pw", "--metrics-addr", "0.0.0.0:0")
	_, port, err := net.SplitHostPort(p.metrics)
	if err != nil {
		t.Fatal(p.metrics, err)
	}
	url := "http://127.0.0.1:" + port + "/metrics"
	for _, tc := range []struct {
		user, pass string
		code       int
	}{
		{"", "", http.StatusUnauthorized},
		{"default", "nope", http.StatusUnauthorized},
		{"default", "pw", http.StatusOK},
		{"prometheus", "pw", http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", url, nil)
		if tc.pass != "" {
			req.SetBasicAuth(tc.user, tc.pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || (tc.code == http.StatusOK) != strings.Contains(string(b), "tally_server_connections") {
			t.Errorf("%s:%s: %d %.100q, want %d", tc.user, tc.pass, resp.StatusCode, b, tc.code)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d: %s", code, p.stderr)
	}
}
