package bench

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseClusterStatus(t *testing.T) {
	v := []any{
		"id", int64(3), "role", "leader", "term", int64(7), "leader", int64(3), "leader_addr", "127.0.0.1:7002",
		"commit", int64(120), "applied", int64(119), "log", "100-120",
		"members", []any{
			[]any{"id", int64(1), "raft_addr", "127.0.0.1:17000", "client_addr", "127.0.0.1:7000", "voter", int64(1), "match", int64(118), "lag", int64(2)},
			[]any{"id", int64(3), "raft_addr", "127.0.0.1:17002", "client_addr", "127.0.0.1:7002", "voter", int64(1), "match", int64(120), "lag", int64(0)},
		},
	}
	st, err := parseClusterStatus(v)
	if err != nil {
		t.Fatal(err)
	}
	if st.Role != "leader" || st.Term != 7 || st.Commit != 120 || st.Applied != 119 || st.LeaderID != 3 ||
		st.LeaderAddr != "127.0.0.1:7002" || st.Log != "100-120" {
		t.Fatalf("status %+v", st)
	}
	if st.MemberMatch[1] != 118 || st.MemberLags[1] != 2 || st.MemberMatch[3] != 120 || st.MemberLags[3] != 0 {
		t.Fatalf("members %v %v", st.MemberMatch, st.MemberLags)
	}
	if _, err := parseClusterStatus([]any{"id", int64(1)}); err == nil {
		t.Fatal("a status without a role parsed")
	}
}

func TestFailoverQuantile(t *testing.T) {
	var r FailoverResult
	if r.Quantile(0.5) != 0 {
		t.Fatal("empty result has a quantile")
	}
	for _, ms := range []int{900, 100, 500, 300, 700} {
		r.Times = append(r.Times, time.Duration(ms)*time.Millisecond)
	}
	for q, want := range map[float64]int{0: 100, 0.2: 100, 0.5: 500, 0.99: 900, 1: 900} {
		if got := r.Quantile(q); got != time.Duration(want)*time.Millisecond {
			t.Errorf("Quantile(%v) = %v, want %dms", q, got, want)
		}
	}
	if r.Times[0] != 900*time.Millisecond {
		t.Fatal("Quantile reordered the times")
	}
}

func TestClusterConfigValidate(t *testing.T) {
	c := ClusterConfig{Phases: []string{"writes", "bogus"}, Durabilities: []string{"nosync"}}
	c.fill()
	err := c.validate()
	if err == nil {
		t.Fatal("a bad configuration passed")
	}
	for _, want := range []string{"TallyBin", `"bogus"`, `"nosync"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	c = ClusterConfig{TallyBin: "/bin/true"}
	c.fill()
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
}

// fakeServer answers every RESP command with ":1", counting commands and
// WAITs; a command named FAIL gets an error reply.
type fakeServer struct {
	ln   net.Listener
	mu   sync.Mutex
	cmds map[string]int
}

func startFake(t *testing.T) *fakeServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{ln: ln, cmds: map[string]int{}}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeServer) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	w := bufio.NewWriter(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		var args []string
		for i := 0; i < n; i++ {
			hdr, err := r.ReadString('\n')
			if err != nil {
				return
			}
			l, _ := strconv.Atoi(strings.TrimSpace(hdr[1:]))
			b := make([]byte, l+2)
			if _, err := ioFull(r, b); err != nil {
				return
			}
			args = append(args, string(b[:l]))
		}
		f.mu.Lock()
		f.cmds[args[0]]++
		f.mu.Unlock()
		switch args[0] {
		case "FAIL", "HGET":
			w.WriteString("-ERR no\r\n")
		case "READONLY":
			w.WriteString("+OK\r\n")
		default:
			w.WriteString(":1\r\n")
		}
		if r.Buffered() == 0 {
			if w.Flush() != nil {
				return
			}
		}
	}
}

func ioFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (f *fakeServer) count(cmd string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cmds[cmd]
}

func TestRunPipeWait(t *testing.T) {
	f := startFake(t)
	addr := f.ln.Addr().String()
	r := runPipe(context.Background(), pipeSpec{Addrs: []string{addr}, Conns: 3, Pipeline: 4, Op: opHINCRBY,
		Keyspace: 10, Dur: 50 * time.Millisecond, Wait: true, ReadOnly: true})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.Ops == 0 || r.Ops%4 != 0 {
		t.Fatalf("ops %d: want a positive multiple of the pipeline", r.Ops)
	}
	if got := f.count("HINCRBY"); int64(got) != r.Ops {
		t.Fatalf("server saw %d HINCRBY, client counted %d", got, r.Ops)
	}
	if got := f.count("WAIT"); int64(got)*4 != r.Ops {
		t.Fatalf("server saw %d WAIT for %d writes in batches of 4", got, r.Ops)
	}
	if got := f.count("READONLY"); got != 3 {
		t.Fatalf("READONLY sent %d times, want once per connection", got)
	}
	if r.Lat.Count() == 0 || int64(r.Lat.Count())*4 != r.Ops {
		t.Fatalf("%d latencies for %d writes in batches of 4", r.Lat.Count(), r.Ops)
	}
}

func TestRunPipeErrorReply(t *testing.T) {
	f := startFake(t)
	r := runPipe(context.Background(), pipeSpec{Addrs: []string{f.ln.Addr().String()}, Conns: 1, Pipeline: 2, Op: opHGET,
		Keyspace: 10, Dur: time.Second})
	if r.Err == nil || !strings.Contains(r.Err.Error(), "no") {
		t.Fatalf("an error reply did not fail the run: %v", r.Err)
	}
	if r := runPipe(context.Background(), pipeSpec{Conns: 1, Pipeline: 1, Keyspace: 1}); r.Err == nil {
		t.Fatal("a run without addresses did not fail")
	}
}

func TestLoadRows(t *testing.T) {
	f := startFake(t)
	if _, err := loadRows(context.Background(), f.ln.Addr().String(), 1003, 3, 100); err != nil {
		t.Fatal(err)
	}
	if got := f.count("HSET"); got != 1003 {
		t.Fatalf("%d HSET for 1003 rows", got)
	}
}

func TestClusterMarkdown(t *testing.T) {
	rep := &ClusterReport{Config: ClusterConfig{}}
	rep.Config.fill()
	rep.Writes = []WriteRow{
		{Target: "tally 1 node", Durability: "sync", Piped: pipeResult{Ops: 1000, Secs: 1}},
		{Target: "redis + replica", Durability: "sync", Wait: true, Piped: pipeResult{Ops: 500, Secs: 1}},
	}
	rep.Failover = &FailoverResult{Times: []time.Duration{time.Second, 2 * time.Second}}
	md := rep.Markdown()
	for _, want := range []string{"| redis + replica, WAIT 1 0 | appendfsync always | 500 | 0.50 |", "| 2 | 1.00s | 2.00s | 2.00s | 1000 2000 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// TestRunClusterQuick runs every phase small against real processes. It
// takes a minute or more and starts servers, so it runs only with
// TALLY_CLUSTERBENCH=1 (and redis-server installed).
func TestRunClusterQuick(t *testing.T) {
	if os.Getenv("TALLY_CLUSTERBENCH") == "" {
		t.Skip("set TALLY_CLUSTERBENCH=1 to run the replication benchmarks' smoke test")
	}
	if skip := ServeSkip(); skip != "" {
		t.Skip(skip)
	}
	bin := filepath.Join(t.TempDir(), "tally")
	if err := BuildTally(bin, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := RunCluster(context.Background(), ClusterConfig{TallyBin: bin, Dir: t.TempDir(), Durabilities: []string{"sync"},
		Duration: time.Second, Failovers: 2, ReadRows: 2000, CatchupRows: 30000})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failover.Lost != 0 {
		t.Fatalf("%d acknowledged increments lost over the failovers", rep.Failover.Lost)
	}
	if len(rep.Writes) != 4 || len(rep.Reads) != 6 || rep.Catchup.Seconds <= 0 {
		t.Fatalf("report incomplete:\n%s", rep.Markdown())
	}
}
