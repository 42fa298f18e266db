package main

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// get fetches url with basic auth pass (none if empty) and returns the
// status code and body.
func get(t *testing.T, url, pass string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pass != "" {
		req.SetBasicAuth("any", pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestServePprof: with --pprof, the profiles are served under /debug/pprof/
// on --metrics-addr behind the password /metrics needs; the mutex profile
// has its sampling rate set; an execution trace can be taken while
// serving. Without --pprof nothing is served there.
func TestServePprof(t *testing.T) {
	dir := newStore(t)
	p := startServe(t, "-d", dir, "--requirepass", "pw", "--metrics-addr", "127.0.0.1:0", "--pprof")
	base := "http://" + p.metrics
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline", "/debug/pprof/trace?seconds=0.1"} {
		if code, b := get(t, base+path, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without the password: %d %.100q, want 401", path, code, b)
		}
		if code, b := get(t, base+path, "wrong"); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong password: %d %.100q, want 401", path, code, b)
		}
	}
	if code, b := get(t, base+"/debug/pprof/", "pw"); code != http.StatusOK || !bytes.Contains(b, []byte("goroutine")) {
		t.Errorf("index: %d %.200q", code, b)
	}
	// serve's accept loop is in the goroutine profile. serve prints its
	// address before that goroutine is scheduled, so the profile is
	// polled until it shows up (or a deadline passes).
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, b := get(t, base+"/debug/pprof/goroutine?debug=1", "pw")
		if code == http.StatusOK && bytes.Contains(b, []byte("server.(*Server).Serve")) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutine profile: %d %.200q", code, b)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, b := get(t, base+"/debug/pprof/mutex?debug=1", "pw"); code != http.StatusOK || !bytes.Contains(b, []byte("sampling period=100\n")) {
		t.Errorf("mutex profile: %d %.200q, want its sampling period 100", code, b)
	}
	if code, b := get(t, base+"/debug/pprof/cmdline", "pw"); code != http.StatusOK || !bytes.Contains(b, []byte("--pprof")) {
		t.Errorf("cmdline: %d %.200q", code, b)
	}
	// An execution trace starts with its header, "go 1.NN trace".
	if code, b := get(t, base+"/debug/pprof/trace?seconds=0.1", "pw"); code != http.StatusOK || !bytes.HasPrefix(b, []byte("go 1.")) {
		t.Errorf("trace: %d %.40q", code, b)
	}
	// /metrics is still there, with the same rule.
	if code, b := get(t, base+"/metrics", "pw"); code != http.StatusOK || !strings.Contains(string(b), "tally_server_connections") {
		t.Errorf("metrics: %d %.100q", code, b)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d: %s", code, p.stderr)
	}

	p = startServe(t, "-d", dir, "--metrics-addr", "127.0.0.1:0")
	if code, b := get(t, "http://"+p.metrics+"/debug/pprof/", ""); code != http.StatusNotFound {
		t.Errorf("without --pprof: /debug/pprof/ answered %d %.100q, want 404", code, b)
	}
	if code, _ := get(t, "http://"+p.metrics+"/metrics", ""); code != http.StatusOK {
		t.Errorf("without --pprof or a password: /metrics answered %d", code)
	}
}
