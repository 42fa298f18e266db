package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/internal/commands"
	"github.com/tallydb/tally/store"
)

// fakeGroup is a replication group in one process: its nodes are Servers
// over their own stores, and a proposal on the leader is applied, in log
// order, on every node that is not paused (a paused node catches up when
// resumed), through Server.Apply, as package replica applies committed
// entries. The leader is switched by the test.
type fakeGroup struct {
	mu      sync.Mutex
	leader  int // index into nodes; -1: none
	term    uint64
	log     [][]byte
	nodes   []*fakeNode
	fail    error // returned by the next Propose, then cleared
	entries int   // proposals applied
}

type fakeNode struct {
	g         *fakeGroup
	i         int
	id        uint64
	addr      string
	srv       *Server
	db        *tallydb.DB
	applied   int // entries of g.log applied
	paused    bool
	readIndex int // ReadIndex calls
}

// newFakeCluster starts n servers in cluster mode over fresh databases
// with every command "tally serve" registers and the test schema; node 0
// leads.
func newFakeCluster(t testing.TB, n int, co ClusterOptions) *fakeGroup {
	t.Helper()
	return newFakeClusterWith(t, n, co, nil)
}

// newFakeClusterWith is newFakeCluster with the servers' options.
func newFakeClusterWith(t testing.TB, n int, co ClusterOptions, opts *Options, extra ...Command) *fakeGroup {
	t.Helper()
	g := &fakeGroup{leader: 0, term: 1}
	for i := range n {
		dir := filepath.Join(t.TempDir(), "db")
		db, err := tallydb.Open(dir, &tallydb.Options{Store: &store.Options{Durability: store.NoSync, DisableBackground: true}})
		if err != nil {
			t.Fatal(err)
		}
		mustSchema(t, db.Store())
		s, err := New(db.Store(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterDB(db); err != nil {
			t.Fatal(err)
		}
		if err := s.Register(extra...); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		node := &fakeNode{g: g, i: i, id: uint64(i + 1), addr: ln.Addr().String(), srv: s, db: db}
		g.nodes = append(g.nodes, node)
		o := co
		o.Addr = node.addr
		if err := s.SetReplication(node, o); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Serve(ln) }()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			if err := <-done; !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve: %v", err)
			}
			if err := db.Check(); err != nil {
				t.Errorf("Check: %v", err)
			}
			for _, p := range db.Packages() {
				p.Close()
			}
			if err := db.Store().Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	return g
}

func (g *fakeGroup) setLeader(i int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.leader = i
	g.term++
}

func (g *fakeGroup) pause(i int, on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nodes[i].paused = on
	if !on {
		g.catchUp(g.nodes[i])
	}
}

// catchUp applies the entries n has not applied; g.mu is held.
func (g *fakeGroup) catchUp(n *fakeNode) []byte {
	var last []byte
	for n.applied < len(g.log) {
		last = n.srv.Apply(g.log[n.applied])
		n.applied++
	}
	return last
}

func (n *fakeNode) notLeader() error {
	if n.g.leader < 0 {
		return &NotLeaderError{}
	}
	l := n.g.nodes[n.g.leader]
	return &NotLeaderError{LeaderID: l.id, Addr: l.addr}
}

func (n *fakeNode) Propose(ctx context.Context, data []byte) ([]byte, error) {
	g := n.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.leader != n.i {
		return nil, n.notLeader()
	}
	if err := g.fail; err != nil {
		g.fail = nil
		return nil, err
	}
	g.log = append(g.log, data)
	g.entries++
	var mine []byte
	for _, m := range g.nodes {
		if m.paused {
			continue
		}
		r := g.catchUp(m)
		if m == n {
			mine = r
		}
	}
	return mine, nil
}

func (n *fakeNode) ReadIndex(ctx context.Context) error {
	g := n.g
	g.mu.Lock()
	defer g.mu.Unlock()
	n.readIndex++
	if g.leader < 0 {
		return n.notLeader()
	}
	return nil
}

func (n *fakeNode) Status() ReplicationStatus {
	g := n.g
	g.mu.Lock()
	defer g.mu.Unlock()
	st := ReplicationStatus{Role: RoleFollower, ID: n.id, Term: g.term, Commit: uint64(len(g.log)), Applied: uint64(n.applied)}
	if g.leader >= 0 {
		l := g.nodes[g.leader]
		st.LeaderID, st.LeaderAddr = l.id, l.addr
		if l == n {
			st.Role = RoleLeader
		} else {
			st.LastLeaderContact = time.Now()
		}
	}
	for _, m := range g.nodes {
		st.Members = append(st.Members, Member{ID: m.id, Addr: m.addr, Voter: true, Match: uint64(m.applied),
			Lag: uint64(len(g.log) - m.applied), Active: !m.paused})
	}
	return st
}

func (g *fakeGroup) client(t testing.TB, i int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: g.nodes[i].addr, PoolSize: 1, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

func (g *fakeGroup) raw(t testing.TB, i int) *raw {
	t.Helper()
	return (&testServer{addr: g.nodes[i].addr}).raw(t)
}

// doer is a go-redis client or cluster client.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// mustDo runs a command and fails the test on an error.
func mustDo(t testing.TB, c doer, args ...any) any {
	t.Helper()
	v, err := c.Do(context.Background(), args...).Result()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

func wantErr(t testing.TB, c doer, prefix string, args ...any) {
	t.Helper()
	err := c.Do(context.Background(), args...).Err()
	if err == nil || !strings.HasPrefix(err.Error(), prefix) {
		t.Fatalf("%v: got %v, want an error starting %q", args, err, prefix)
	}
}

func TestEncodeCommandRoundTrip(t *testing.T) {
	cases := [][][][]byte{
		{{[]byte("HINCRBY"), []byte("posts:1"), []byte("likes"), []byte("1")}},
		{{[]byte("PING")}, {[]byte("X"), {}, bytes.Repeat([]byte{0, 0xff, '\r', '\n'}, 300)}},
	}
	for _, cmds := range cases {
		data, err := encodeEntry(cmds)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeCommand(data)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(cmds) {
			t.Fatalf("decoded %d commands, want %d", len(got), len(cmds))
		}
		for i := range cmds {
			for j := range cmds[i] {
				if !bytes.Equal(got[i][j], cmds[i][j]) {
					t.Fatalf("command %d arg %d: %q, want %q", i, j, got[i][j], cmds[i][j])
				}
			}
		}
	}
	one, err := EncodeCommand([][]byte{[]byte("DEL"), []byte("k:1")})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeCommand(one); err != nil || len(got) != 1 || string(got[0][1]) != "k:1" {
		t.Fatalf("DecodeCommand(EncodeCommand) = %q, %v", got, err)
	}
}

func TestEncodeCommandLimits(t *testing.T) {
	for name, argv := range map[string][][]byte{
		"empty":    nil,
		"too many": make([][]byte, MaxEntryArgs+1),
		"too big":  {[]byte("HSET"), make([]byte, MaxEntryBytes)},
	} {
		if _, err := EncodeCommand(argv); !errors.Is(err, ErrEntryTooLarge) {
			t.Errorf("%s: %v, want ErrEntryTooLarge", name, err)
		}
	}
	if _, err := encodeEntry(make([][][]byte, MaxEntryCommands+1)); !errors.Is(err, ErrEntryTooLarge) {
		t.Errorf("too many commands: %v", err)
	}
}

func TestDecodeCommandRefusesGarbage(t *testing.T) {
	good, err := EncodeCommand([][]byte{[]byte("HINCRBY"), []byte("posts:1"), []byte("likes"), []byte("1")})
	if err != nil {
		t.Fatal(err)
	}
	bad := [][]byte{nil, {}, {1}, good[:len(good)-1], append(slices.Clone(good), 0), bytes.Repeat([]byte{0xff}, 64)}
	for i := range good {
		flipped := slices.Clone(good)
		flipped[i] ^= 0x10
		bad = append(bad, flipped, good[:i])
	}
	v2 := slices.Clone(good)
	v2[0] = 2
	bad = append(bad, v2)
	// Counts that claim more than the bytes hold, with a valid checksum.
	for _, body := range [][]byte{
		{1, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 1, 'x'}, // 2^32-1 commands
		{1, 1, 0xff, 0xff, 0x03, 1, 'x'},             // 65535 args
		{1, 1, 1, 0xff, 0xff, 0xff, 0x7f, 'x'},       // a 256 MiB argument
		{1, 1, 0},                                    // no args
		{1, 0, 1, 1, 'x'},                            // no commands
		{1, 1, 1, 1, 'x', 'y'},                       // a trailing byte
	} {
		bad = append(bad, binaryCRC(body))
	}
	for _, data := range bad {
		if cmds, err := DecodeCommand(data); !errors.Is(err, ErrBadEntry) {
			t.Errorf("DecodeCommand(%x) = %q, %v; want ErrBadEntry", data, cmds, err)
		}
	}
}

func binaryCRC(body []byte) []byte {
	out := slices.Clone(body)
	c := crc32.Checksum(out, castagnoli)
	return append(out, byte(c), byte(c>>8), byte(c>>16), byte(c>>24))
}

func FuzzDecodeCommand(f *testing.F) {
	good, _ := EncodeCommand([][]byte{[]byte("HINCRBY"), []byte("posts:1"), []byte("likes"), []byte("1")})
	f.Add(good)
	f.Add([]byte{1, 1, 1, 1, 'x', 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		cmds, err := DecodeCommand(data)
		if err != nil {
			if !errors.Is(err, ErrBadEntry) {
				t.Fatalf("error %v does not wrap ErrBadEntry", err)
			}
			return
		}
		again, err := encodeEntry(cmds)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("decoded entry does not re-encode to itself: %v", err)
		}
	})
}

// TestSlot checks Slot against values Redis's CLUSTER KEYSLOT returns
// and its hash-tag rules (cluster-spec: keys hash tags).
func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		"foo":     12182,
		"somekey": 11058,
		"bar":     5061,
		"":        0,
		// Hash tags: the first {...} with something inside.
		"{user1000}.following": Slot([]byte("user1000")),
		"foo{}{bar}":           Slot([]byte("foo{}{bar}")), // empty tag: the whole key
		"foo{{bar}}zap":        Slot([]byte("{bar")),
		"foo{bar}{zap}":        Slot([]byte("bar")),
		"{foo":                 Slot([]byte("{foo")),
	} {
		if got := Slot([]byte(key)); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	// CRC16/XMODEM's check value.
	if got := crc16([]byte("123456789")); got != 0x31c3 {
		t.Fatalf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	if Slot([]byte("{user1000}.following")) != Slot([]byte("{user1000}.followers")) {
		t.Fatal("keys with the same hash tag in different slots")
	}
}

func TestClusterDisabled(t *testing.T) {
	ts := newTestServer(t, nil)
	c := ts.client(t, nil)
	for _, args := range [][]any{{"CLUSTER", "INFO"}, {"CLUSTER", "SLOTS"}, {"CLUSTER", "KEYSLOT", "x"}, {"READONLY"}, {"READWRITE"}, {"ASKING"}} {
		wantErr(t, c, "ERR This instance has cluster support disabled", args...)
	}
	info := mustDo(t, c, "INFO", "cluster").(string)
	if !strings.Contains(info, "cluster_enabled:0") {
		t.Fatalf("INFO cluster: %q", info)
	}
	if err := ts.s.SetReplication(&fakeNode{}, ClusterOptions{Addr: "127.0.0.1:1"}); !errors.Is(err, ErrServing) {
		t.Fatalf("SetReplication while serving: %v", err)
	}
}

func TestSetReplicationOptions(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "db"), &store.Options{Durability: store.NoSync, DisableBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []ClusterOptions{{}, {Addr: "localhost:6379"}, {Addr: "127.0.0.1"}, {Addr: "127.0.0.1:0"},
		{Addr: "127.0.0.1:70000"}, {Addr: "127.0.0.1:1", Name: "a b"}, {Addr: "127.0.0.1:1", ProposeTimeout: -1}} {
		if err := s.SetReplication(&fakeNode{}, o); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("SetReplication(%+v) = %v, want ErrInvalidOption", o, err)
		}
	}
	if err := s.SetReplication(nil, ClusterOptions{Addr: "127.0.0.1:1"}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("nil Replication: %v", err)
	}
	if err := s.SetReplication(&fakeNode{}, ClusterOptions{Addr: "[::1]:7000"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetReplication(&fakeNode{}, ClusterOptions{Addr: "[::1]:7000"}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("second SetReplication: %v", err)
	}
}

// TestClusterWritesReplicate: writes sent to the leader, counters and
// table commands, reach every replica through Apply, with the leader's
// replies.
func TestClusterWritesReplicate(t *testing.T) {
	g := newFakeCluster(t, 3, ClusterOptions{})
	lc := g.client(t, 0)
	if v := mustDo(t, lc, "HINCRBY", "posts:7", "likes", 5); v != int64(5) {
		t.Fatalf("HINCRBY: %v", v)
	}
	mustDo(t, lc, "HSET", "posts:8", "comments", 3)
	mustDo(t, lc, "TALLY.COUNTER", "ADD", "views")
	mustDo(t, lc, "TALLY.COLUMN", "ADD", "views", "n")
	mustDo(t, lc, "TALLY.INCR", "views", 9, "n", 4)
	mustDo(t, lc, "LIKE.BUSINESS", "ADD", "video")
	mustDo(t, lc, "LIKE.LIKE", "video", 1, 10)
	mustDo(t, lc, "LIKE.LIKE", "video", 1, 11)
	mustDo(t, lc, "TL.FOLLOW", 1, 20)
	mustDo(t, lc, "TL.POST", 20, 1001, "WAIT")
	mustDo(t, lc, "UNREAD.KIND", "ADD", "msg")
	mustDo(t, lc, "UNREAD.INCR", 5, "msg", 2)
	wantErr(t, lc, "ERR no such column", "HINCRBY", "posts:7", "nope", 1)
	mustDo(t, lc, "DEL", "posts:8")

	reads := [][]any{
		{"HGET", "posts:7", "likes"}, {"HGETALL", "posts:8"}, {"TALLY.GET", "views", 9},
		{"LIKE.COUNTS", "video", 1}, {"TL.HOME", 1}, {"TL.FOLLOWEES", 1}, {"UNREAD.GET", 5}, {"TALLY.COUNTER", "LIST"},
	}
	var want []any
	for _, r := range reads {
		want = append(want, mustDo(t, lc, r...))
	}
	for i := 1; i < 3; i++ {
		c := g.client(t, i)
		mustDo(t, c, "READONLY")
		for j, r := range reads {
			if got := mustDo(t, c, r...); !reflect.DeepEqual(got, want[j]) {
				t.Errorf("node %d: %v = %v, want the leader's %v", i, r, got, want[j])
			}
		}
	}
	if want[0] != "5" {
		t.Fatalf("HGET on the leader: %v", want[0])
	}
	// Applied entries are counted on every replica, once.
	for i, n := range g.nodes {
		info := mustDo(t, g.client(t, i), "INFO", "commandstats").(string)
		if !strings.Contains(info, "cmdstat_hincrby:calls=2,") {
			t.Errorf("node %d: hincrby calls: %s", i, grepLine(info, "cmdstat_hincrby"))
		}
		if n.applied != len(g.log) {
			t.Errorf("node %d applied %d of %d", i, n.applied, len(g.log))
		}
	}
}

func grepLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\r\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestClusterRouting: MOVED from followers for writes and for reads
// without READONLY, local commands served anywhere, CLUSTERDOWN with no
// leader, TRYAGAIN and the ambiguous error from Propose.
func TestClusterRouting(t *testing.T) {
	g := newFakeCluster(t, 3, ClusterOptions{})
	leader := g.nodes[0].addr
	fc := g.client(t, 1)
	slot := Slot([]byte("posts:7"))
	wantErr(t, fc, fmt.Sprintf("MOVED %d %s", slot, leader), "HINCRBY", "posts:7", "likes", 1)
	wantErr(t, fc, fmt.Sprintf("MOVED %d %s", slot, leader), "HGET", "posts:7", "likes")
	// Keyless commands name slot 0; a table command its key's slot (the
	// user, the item, the counter row).
	wantErr(t, fc, fmt.Sprintf("MOVED %d %s", Slot([]byte("1")), leader), "TL.FOLLOW", 1, 2)
	wantErr(t, fc, fmt.Sprintf("MOVED %d %s", Slot([]byte("7")), leader), "LIKE.LIKE", "video", 7, 2)
	wantErr(t, fc, fmt.Sprintf("MOVED %d %s", Slot([]byte("posts:9")), leader), "TALLY.INCR", "posts", 9, "likes")
	wantErr(t, fc, "MOVED 0 "+leader, "TALLY.COUNTER", "ADD", "views")
	// Local commands run on the follower.
	mustDo(t, fc, "PING")
	mustDo(t, fc, "CONFIG", "GET", "maxclients")
	mustDo(t, fc, "TALLY.STATS")
	mustDo(t, fc, "TALLY.CHECKPOINT")
	if g.entries != 0 {
		t.Fatalf("%d entries proposed by redirected or local commands", g.entries)
	}
	// READONLY serves reads locally, stale while the follower lags;
	// writes are still redirected. READWRITE ends it.
	mustDo(t, g.client(t, 0), "HINCRBY", "posts:7", "likes", 1)
	g.pause(1, true)
	mustDo(t, g.client(t, 0), "HINCRBY", "posts:7", "likes", 1)
	r := g.raw(t, 1)
	r.send(resp("READONLY") + resp("HGET", "posts:7", "likes") + resp("HINCRBY", "posts:7", "likes", "1") +
		resp("READWRITE") + resp("HGET", "posts:7", "likes"))
	for _, want := range []string{"+OK", "$1", "1", "-MOVED", "+OK", "-MOVED"} {
		if got := r.mustLine(); !strings.HasPrefix(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	g.pause(1, false)
	if v := mustDo(t, fc, "READONLY"); v != "OK" {
		t.Fatal(v)
	}
	if v := mustDo(t, fc, "HGET", "posts:7", "likes"); v != "2" {
		t.Fatalf("caught-up follower: %v", v)
	}

	// No leader: CLUSTERDOWN, for writes and for reads on the old leader.
	g.setLeader(-1)
	lc := g.client(t, 0)
	wantErr(t, lc, "CLUSTERDOWN", "HINCRBY", "posts:7", "likes", 1)
	wantErr(t, lc, "CLUSTERDOWN", "HGET", "posts:7", "likes")
	if info := mustDo(t, lc, "CLUSTER", "INFO").(string); !strings.Contains(info, "cluster_state:fail") {
		t.Fatalf("CLUSTER INFO without a leader: %s", info)
	}
	// A slot map from a replica without a leader would name it master:
	// clients are sent to another node instead.
	wantErr(t, lc, "CLUSTERDOWN", "CLUSTER", "SLOTS")
	wantErr(t, lc, "CLUSTERDOWN", "CLUSTER", "SHARDS")

	// Propose's errors: retryable, or of unknown outcome.
	g.setLeader(0)
	g.mu.Lock()
	g.fail = fmt.Errorf("dropped: %w", ErrTryAgain)
	g.mu.Unlock()
	wantErr(t, lc, "TRYAGAIN", "HINCRBY", "posts:7", "likes", 1)
	g.mu.Lock()
	g.fail = context.DeadlineExceeded
	g.mu.Unlock()
	wantErr(t, lc, "ERR tally: the write may or may not have been applied", "HINCRBY", "posts:7", "likes", 1)
	if v := mustDo(t, lc, "HGET", "posts:7", "likes"); v != "2" {
		t.Fatalf("after failed proposals: %v", v)
	}
}

// TestClusterReadIndex: a read on the leader waits for one barrier per
// batch of commands, none with LeaderReadsLocal; READONLY reads on a
// follower take one with FollowerReadIndex.
func TestClusterReadIndex(t *testing.T) {
	g := newFakeCluster(t, 2, ClusterOptions{FollowerReadIndex: true})
	r := g.raw(t, 0)
	r.send(resp("HGET", "posts:1", "likes") + resp("HGET", "posts:2", "likes") + resp("PING"))
	for range 5 { // two "$1" "0", "+PONG"
		r.mustLine()
	}
	if n := g.nodes[0].readIndex; n != 1 {
		t.Fatalf("%d ReadIndex calls for one batch of reads, want 1", n)
	}
	fc := g.client(t, 1)
	mustDo(t, fc, "READONLY")
	mustDo(t, fc, "HGET", "posts:1", "likes")
	if n := g.nodes[1].readIndex; n != 1 {
		t.Fatalf("a READONLY read on a follower with FollowerReadIndex took %d barriers, want 1", n)
	}

	g2 := newFakeCluster(t, 1, ClusterOptions{LeaderReadsLocal: true})
	mustDo(t, g2.client(t, 0), "HGET", "posts:1", "likes")
	if n := g2.nodes[0].readIndex; n != 0 {
		t.Fatalf("LeaderReadsLocal: %d ReadIndex calls", n)
	}
}

// TestClusterPipelineOneEntry: a pipeline of writes is one entry, its
// replies in order and per command (a failing command does not stop the
// others); a command that is not a write ends the run.
func TestClusterPipelineOneEntry(t *testing.T) {
	g := newFakeCluster(t, 3, ClusterOptions{})
	r := g.raw(t, 0)
	var b strings.Builder
	for range 20 {
		b.WriteString(resp("HINCRBY", "posts:1", "likes", "1"))
	}
	b.WriteString(resp("HINCRBY", "posts:1", "nope", "1"))
	b.WriteString(resp("HINCRBY", "posts:1", "likes", "1"))
	b.WriteString(resp("HINCRBY", "posts:1")) // arity: refused here, ends the run
	b.WriteString(resp("HINCRBY", "posts:1", "likes", "1"))
	b.WriteString(resp("HGET", "posts:1", "likes"))
	b.WriteString(resp("HINCRBY", "posts:1", "likes", "1"))
	r.send(b.String())
	for i := 1; i <= 20; i++ {
		if got := r.mustLine(); got != fmt.Sprintf(":%d", i) {
			t.Fatalf("reply %d: %q", i, got)
		}
	}
	for _, want := range []string{"-ERR no such column", ":21", "-ERR wrong number of arguments", ":22", "$2", "22", ":23"} {
		if got := r.mustLine(); !strings.HasPrefix(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	if g.entries != 3 {
		t.Fatalf("%d entries, want 3 (the run of 22, one, one)", g.entries)
	}
	for i := range g.nodes {
		c := g.client(t, i)
		mustDo(t, c, "READONLY")
		if v := mustDo(t, c, "HGET", "posts:1", "likes"); v != "23" {
			t.Fatalf("node %d: %v", i, v)
		}
	}
}

// TestApplyDeterministic: the same entries applied to two servers over
// equal stores give the same replies and the same state; entries that
// are not replicated writes, or not entries, are refused the same way.
func TestApplyDeterministic(t *testing.T) {
	g := newFakeCluster(t, 2, ClusterOptions{})
	a, b := g.nodes[0].srv, g.nodes[1].srv
	enc := func(args ...string) []byte {
		argv := make([][]byte, len(args))
		for i, s := range args {
			argv[i] = []byte(s)
		}
		data, err := EncodeCommand(argv)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	entries := [][]byte{
		enc("HINCRBY", "posts:1", "likes", "3"),
		enc("INCR", "key:5"),
		enc("HSET", "posts:2", "likes", "9", "comments", "1"),
		enc("DECRBY", "key:5", "10"),
		enc("HINCRBY", "big:1", "n", "9223372036854775807"),
		enc("HINCRBY", "big:1", "n", "1"),
		enc("CONFIG", "SET", "maxclients", "1"),
		enc("HGET", "posts:1", "likes"),
		enc("SAVE"),
		enc("NOSUCH", "x"),
		enc("HINCRBY", "posts:1"),
		enc("\x00\x01"),
		{1, 2, 3},
		enc("LIKE.BUSINESS", "ADD", "v"),
		enc("LIKE.LIKE", "v", "1", "2"),
		enc("TALLY.COMPACT"),
	}
	for _, e := range entries {
		ra, rb := a.Apply(e), b.Apply(e)
		if !bytes.Equal(ra, rb) {
			t.Fatalf("replies differ: %q vs %q", ra, rb)
		}
	}
	replies := string(a.Apply(enc("HGET", "posts:1", "likes"))) + string(a.Apply(enc("CONFIG", "SET", "maxclients", "1"))) +
		string(a.Apply([]byte{1, 2, 3}))
	for _, want := range []string{"not a replicated command: 'hget'", "not a replicated command: 'config|set'", "bad replicated entry"} {
		if !strings.Contains(replies, want) {
			t.Errorf("replies %q lack %q", replies, want)
		}
	}
	if mc := a.opts.MaxClients; mc == 1 {
		t.Fatal("Apply ran CONFIG SET")
	}
	for _, key := range []string{"posts:1", "posts:2", "key:5", "big:1"} {
		va := string(a.Apply(enc("HINCRBY", key, firstColumn4(key), "0")))
		vb := string(b.Apply(enc("HINCRBY", key, firstColumn4(key), "0")))
		if va != vb || strings.HasPrefix(va, "-") {
			t.Fatalf("%s: %q vs %q", key, va, vb)
		}
	}
	if got := string(a.Apply(enc("HINCRBY", "posts:1", "likes", "0"))); got != ":3\r\n" {
		t.Fatalf("posts:1 likes = %q", got)
	}
}

func firstColumn4(key string) string {
	switch {
	case strings.HasPrefix(key, "posts"):
		return "likes"
	case strings.HasPrefix(key, "big"):
		return "n"
	}
	return "value"
}

// TestClusterCommands checks the shapes of CLUSTER's replies as
// go-redis parses them.
func TestClusterCommands(t *testing.T) {
	g := newFakeCluster(t, 3, ClusterOptions{Name: "east"})
	ctx := context.Background()
	c := g.client(t, 1)
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != 1 || slots[0].Start != 0 || slots[0].End != NumSlots-1 || len(slots[0].Nodes) != 3 {
		t.Fatalf("CLUSTER SLOTS: %+v", slots)
	}
	if n := slots[0].Nodes[0]; n.Addr != g.nodes[0].addr || n.ID != NodeID(1) {
		t.Fatalf("master: %+v, want %s %s", n, g.nodes[0].addr, NodeID(1))
	}
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 1 || len(shards[0].Nodes) != 3 || shards[0].Nodes[0].Role != "master" || shards[0].Nodes[1].Role != "replica" ||
		shards[0].Slots[0].Start != 0 || shards[0].Slots[0].End != NumSlots-1 {
		t.Fatalf("CLUSTER SHARDS: %+v", shards)
	}
	nodes := mustDo(t, c, "CLUSTER", "NODES").(string)
	lines := strings.Split(strings.TrimSuffix(nodes, "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], " master - ") || !strings.HasSuffix(lines[0], " 0-16383") ||
		!strings.Contains(nodes, NodeID(2)+" "+g.nodes[1].addr+"@0 myself,slave "+NodeID(1)) {
		t.Fatalf("CLUSTER NODES:\n%s", nodes)
	}
	info := mustDo(t, c, "CLUSTER", "INFO").(string)
	for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:16384", "cluster_known_nodes:3", "cluster_size:1", "tally_cluster_name:east"} {
		if !strings.Contains(info, want+"\r\n") {
			t.Errorf("CLUSTER INFO lacks %s:\n%s", want, info)
		}
	}
	if id := mustDo(t, c, "CLUSTER", "MYID"); id != NodeID(2) || len(NodeID(2)) != 40 || NodeID(2) == NodeID(1) {
		t.Fatalf("MYID %v", id)
	}
	if v := mustDo(t, c, "CLUSTER", "KEYSLOT", "{user1000}.following"); v != int64(Slot([]byte("user1000"))) {
		t.Fatalf("KEYSLOT %v", v)
	}
	wantErr(t, c, "ERR Invalid slot", "CLUSTER", "COUNTKEYSINSLOT", "16384")
	wantErr(t, c, "ERR tally: COUNTKEYSINSLOT is not supported", "CLUSTER", "COUNTKEYSINSLOT", "5")
	wantErr(t, c, "ERR wrong number of arguments for 'cluster|keyslot'", "CLUSTER", "KEYSLOT")
	wantErr(t, c, "ERR unknown subcommand 'FAILOVER'", "CLUSTER", "FAILOVER")
	mustDo(t, c, "ASKING")

	repl := mustDo(t, c, "INFO", "replication").(string)
	for _, want := range []string{"role:slave", "master_host:127.0.0.1", "master_link_status:up", "master_repl_offset:0"} {
		if !strings.Contains(repl, want+"\r\n") {
			t.Errorf("follower INFO replication lacks %s:\n%s", want, repl)
		}
	}
	mustDo(t, g.client(t, 0), "HINCRBY", "posts:1", "likes", 1)
	g.pause(2, true)
	mustDo(t, g.client(t, 0), "HINCRBY", "posts:1", "likes", 1)
	repl = mustDo(t, g.client(t, 0), "INFO").(string)
	for _, want := range []string{"role:master", "connected_slaves:1", "slave0:ip=127.0.0.1,port=", "state=online,offset=2,lag=0",
		"state=offline,offset=1,lag=1", "master_repl_offset:2", "cluster_enabled:1", "redis_mode:cluster"} {
		if !strings.Contains(repl, want) {
			t.Errorf("leader INFO lacks %s:\n%s", want, repl)
		}
	}
}

// TestClusterClient: go-redis's ClusterClient against three replicas:
// writes and table commands go to the leader, ReadOnly reads to
// replicas, and after a leader switch the client follows MOVED.
func TestClusterClient(t *testing.T) {
	g := newFakeCluster(t, 3, ClusterOptions{})
	ctx := context.Background()
	addrs := []string{g.nodes[1].addr, g.nodes[2].addr, g.nodes[0].addr}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 8})
	defer cc.Close()
	for i := range 50 {
		if err := cc.HIncrBy(ctx, fmt.Sprintf("posts:%d", i%5), "likes", 1).Err(); err != nil {
			t.Fatal(err)
		}
	}
	mustDo(t, cc, "LIKE.BUSINESS", "ADD", "video")
	mustDo(t, cc, "LIKE.LIKE", "video", 1, 10)
	mustDo(t, cc, "TL.FOLLOW", 1, 20)
	mustDo(t, cc, "TALLY.INCR", "posts", 3, "comments", 2)
	if v, err := cc.HGet(ctx, "posts:3", "likes").Result(); err != nil || v != "10" {
		t.Fatalf("HGET: %v %v", v, err)
	}

	// Replica reads: go-redis sends commands COMMAND flags readonly to a
	// replica, after READONLY.
	ro := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ReadOnly: true, MaxRedirects: 8})
	defer ro.Close()
	counts := mustDo(t, cc, "LIKE.COUNTS", "video", 1)
	before := g.nodes[0].readIndex
	for range 10 {
		if v, err := ro.HGet(ctx, "posts:3", "likes").Result(); err != nil || v != "10" {
			t.Fatalf("replica HGET: %v %v", v, err)
		}
		if v := mustDo(t, ro, "LIKE.COUNTS", "video", 1); !reflect.DeepEqual(v, counts) {
			t.Fatalf("replica LIKE.COUNTS %v", v)
		}
	}
	served := 0
	for i := 1; i < 3; i++ {
		info := mustDo(t, g.client(t, i), "INFO", "commandstats").(string)
		if strings.Contains(info, "cmdstat_hget:") {
			served++
		}
	}
	if served == 0 {
		t.Fatal("no replica served a ReadOnly client's HGET")
	}
	if g.nodes[0].readIndex != before {
		t.Fatal("replica reads took a barrier on the leader")
	}

	// The leader changes: writes follow MOVED to the new one.
	g.setLeader(2)
	for i := range 10 {
		if err := cc.HIncrBy(ctx, "posts:3", "likes", 1).Err(); err != nil {
			t.Fatalf("write %d after the switch: %v", i, err)
		}
	}
	if v, err := cc.HGet(ctx, "posts:3", "likes").Result(); err != nil || v != "20" {
		t.Fatalf("HGET after the switch: %v %v", v, err)
	}
	mustDo(t, cc, "LIKE.LIKE", "video", 1, 11)
	for i, n := range g.nodes {
		if n.applied != len(g.log) {
			t.Fatalf("node %d applied %d of %d", i, n.applied, len(g.log))
		}
		c := g.client(t, i)
		mustDo(t, c, "READONLY")
		if v := mustDo(t, c, "HGET", "posts:3", "likes"); v != "20" {
			t.Fatalf("node %d: %v", i, v)
		}
	}
}

// TestCommandClusterFlags walks every command tally serve registers: the
// flags say one class, and every command of the one table has the flags,
// class and key positions its Mode, Local and Param.Key say, as COMMAND
// reports them to go-redis.
func TestCommandClusterFlags(t *testing.T) {
	ts, _ := newDBServer(t)
	var all []*Command
	for _, c := range ts.s.cmds.sorted {
		all = append(all, c)
		for i := range c.Subcommands {
			all = append(all, &c.Subcommands[i])
		}
	}
	for _, c := range all {
		if c.Flags&FlagWrite != 0 && c.Flags&FlagReadOnly != 0 {
			t.Errorf("%s is flagged both write and readonly", c.fullName)
		}
		if c.FirstKey < 0 || c.KeyStep < 0 || (c.FirstKey == 0) != (c.LastKey == 0) || (c.FirstKey == 0) != (c.KeyStep == 0) {
			t.Errorf("%s: key positions %d %d %d", c.fullName, c.FirstKey, c.LastKey, c.KeyStep)
		}
		if c.FirstKey > 0 && c.Arity > 0 && c.FirstKey >= c.Arity || c.Arity < 0 && c.FirstKey >= -c.Arity {
			t.Errorf("%s: first key %d beyond arity %d", c.fullName, c.FirstKey, c.Arity)
		}
	}
	type want struct {
		class    Class
		readonly bool
		firstKey int
	}
	expect := map[string]want{}
	for _, tc := range commands.All() {
		w := want{class: ClassRead, readonly: true}
		if tc.Mode != commands.Read {
			w = want{class: ClassWrite}
		}
		if tc.Local {
			w.class = ClassLocal
		}
		for _, name := range []string{tc.RESP, tc.RESPOne} {
			if name == "" {
				continue
			}
			words := len(strings.Fields(name))
			w.firstKey = 0
			for i, p := range tc.Positionals() {
				if p.Key {
					w.firstKey = words + i
					break
				}
			}
			expect[strings.ToLower(strings.Replace(name, " ", "|", 1))] = w
		}
	}
	for _, c := range all {
		w, ok := expect[c.fullName]
		if !ok {
			continue
		}
		delete(expect, c.fullName)
		class, err := c.ClassOf(nil)
		if err != nil || class != w.class || (c.Flags&FlagReadOnly != 0) != w.readonly || c.FirstKey != w.firstKey {
			t.Errorf("%s: class %v (%v), readonly %v, first key %d; want %v, %v, %d", c.fullName, class, err,
				c.Flags&FlagReadOnly != 0, c.FirstKey, w.class, w.readonly, w.firstKey)
		}
	}
	for name := range expect {
		t.Errorf("table command %s is not registered", name)
	}

	// COMMAND as go-redis reads it.
	infos, err := ts.client(t, nil).Command(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ts.s.cmds.sorted {
		ci := infos[c.fullName]
		if ci == nil {
			t.Errorf("COMMAND lacks %s", c.fullName)
			continue
		}
		if ci.ReadOnly != (c.Flags&FlagReadOnly != 0) || ci.FirstKeyPos != int8(c.FirstKey) {
			t.Errorf("COMMAND %s: readonly %v first key %d", c.fullName, ci.ReadOnly, ci.FirstKeyPos)
		}
		if c.Flags&FlagLocal != 0 && !slices.Contains(ci.Flags, "local") {
			t.Errorf("COMMAND %s: flags %v lack local", c.fullName, ci.Flags)
		}
	}
}

// TestClusterHostile: bad input to the cluster commands and to the write
// path is refused with an error and changes nothing; the limits hold.
func TestClusterHostile(t *testing.T) {
	g := newFakeCluster(t, 2, ClusterOptions{})
	c := g.client(t, 0)
	for _, args := range [][]any{
		{"CLUSTER"}, {"CLUSTER", "SLOTS", "x"}, {"CLUSTER", "KEYSLOT"}, {"CLUSTER", "KEYSLOT", "a", "b"},
		{"CLUSTER", "GETKEYSINSLOT", "x", "1"}, {"CLUSTER", "COUNTKEYSINSLOT", "-1"}, {"READONLY", "x"}, {"ASKING", 1},
		{"CLUSTER", strings.Repeat("\x01", 100)},
	} {
		wantErr(t, c, "ERR", args...)
	}
	// A huge key: KEYSLOT reads it, a write with it is refused by the
	// command and proposes one entry that changes nothing.
	big := strings.Repeat("k", 1<<20)
	mustDo(t, c, "CLUSTER", "KEYSLOT", big)
	wantErr(t, c, "ERR", "HINCRBY", big, "likes", 1)
	// A pipeline of writes larger than an entry's run bound splits.
	before := g.entries
	r := g.raw(t, 0)
	var b strings.Builder
	pad := strings.Repeat("x", 100<<10)
	for range 30 {
		b.WriteString(resp("HINCRBY", "posts:1:"+pad, "likes", "1"))
	}
	r.send(b.String())
	for range 30 {
		if l := r.mustLine(); !strings.HasPrefix(l, "-ERR") {
			t.Fatalf("got %q", l)
		}
	}
	if n := g.entries - before; n < 3 || n > 30 {
		t.Fatalf("30 writes of 100 KiB in %d entries", n)
	}
	// Garbage still drops only its own client.
	bad := g.raw(t, 0)
	bad.send("*1\r\n$-5\r\n")
	if l := bad.mustLine(); !strings.HasPrefix(l, "-ERR Protocol error") || !bad.closed() {
		t.Fatalf("garbage: %q", l)
	}
	if v := mustDo(t, c, "HINCRBY", "posts:1", "likes", 1); v != int64(1) {
		t.Fatalf("after hostile input: %v", v)
	}
}

// TestClusterEntryTooLarge: a command over an entry's limit (possible
// when MaxRequestBytes is raised) is refused and the client stays.
func TestClusterEntryTooLarge(t *testing.T) {
	g := newFakeClusterWith(t, 1, ClusterOptions{}, &Options{MaxRequestBytes: 2 * MaxEntryBytes})
	r := g.raw(t, 0)
	r.send(resp("HSET", "posts:1", "likes", strings.Repeat("1", MaxEntryBytes)) + resp("PING"))
	if l := r.mustLine(); !strings.HasPrefix(l, "-ERR tally: replicated entry too large") {
		t.Fatalf("got %q", l)
	}
	if l := r.mustLine(); l != "+PONG" {
		t.Fatalf("got %q", l)
	}
	if g.entries != 0 {
		t.Fatalf("%d entries", g.entries)
	}
}

// BenchmarkCluster is BenchmarkServer's HINCRBY on the leader of a fake
// group of three: each pipeline's run of writes is encoded, "committed"
// at once and applied on all three stores before the replies go out. No
// Raft and no network between replicas: it measures what cluster mode
// adds in this package (encoding, Apply on every replica), against
// BenchmarkServer/HINCRBY's one store.
func BenchmarkCluster(b *testing.B) {
	for _, tc := range []struct {
		name string
		cmd  func(r *rand.Rand) []string
	}{
		{"HINCRBY", func(r *rand.Rand) []string {
			return []string{"HINCRBY", "posts:" + strconv.Itoa(r.IntN(benchKeyspace)), "likes", "1"}
		}},
		{"HGETALL", func(r *rand.Rand) []string {
			return []string{"HGETALL", "posts:" + strconv.Itoa(r.IntN(benchKeyspace))}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			g := newFakeCluster(b, 3, ClusterOptions{})
			r := rand.New(rand.NewPCG(1, 2))
			pipes := make([][]byte, 512)
			for i := range pipes {
				for range benchPipeline {
					pipes[i] = append(pipes[i], resp(tc.cmd(r)...)...)
				}
			}
			runPipelines(b, g.nodes[0].addr, pipes)
		})
	}
}

// BenchmarkApply is one replica applying entries of 16 HINCRBYs; one op
// is one command.
func BenchmarkApply(b *testing.B) {
	g := newFakeCluster(b, 1, ClusterOptions{})
	s := g.nodes[0].srv
	r := rand.New(rand.NewPCG(1, 2))
	entries := make([][]byte, 256)
	for i := range entries {
		var cmds [][][]byte
		for range benchPipeline {
			cmds = append(cmds, [][]byte{[]byte("HINCRBY"), []byte("posts:" + strconv.Itoa(r.IntN(benchKeyspace))), []byte("likes"), []byte("1")})
		}
		var err error
		if entries[i], err = encodeEntry(cmds); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += benchPipeline {
		if out := s.Apply(entries[(i/benchPipeline)%len(entries)]); out[0] != ':' {
			b.Fatalf("reply %q", out)
		}
	}
}

// TestClusterClassify: a command with Classify (as TALLY.EXEC) is routed
// per call: replicated, local, read, or refused with ErrNotReplicable;
// its handler knows whether it runs from the log.
func TestClusterClassify(t *testing.T) {
	var mu sync.Mutex
	ran := map[*Server][]string{}
	x := Command{Name: "X.EXEC", Arity: 2, Flags: FlagWrite | FlagAdmin, Group: "tally", Summary: "test",
		Classify: func(args [][]byte) (Class, error) {
			switch string(args[1]) {
			case "write":
				return ClassWrite, nil
			case "read":
				return ClassRead, nil
			case "local":
				return ClassLocal, nil
			}
			return 0, fmt.Errorf("%w: %q reads a local file", ErrNotReplicable, args[1])
		},
		Handler: func(c *Conn, args [][]byte) {
			mu.Lock()
			ran[c.Server()] = append(ran[c.Server()], string(args[1]))
			mu.Unlock()
			c.WriteBulkString(fmt.Sprint(c.Replicated()))
		}}
	g := newFakeClusterWith(t, 3, ClusterOptions{}, nil, x)
	lc, fc := g.client(t, 0), g.client(t, 1)
	if v := mustDo(t, lc, "X.EXEC", "write"); v != "true" {
		t.Fatalf("write: %v", v)
	}
	if v := mustDo(t, lc, "X.EXEC", "local"); v != "false" {
		t.Fatalf("local: %v", v)
	}
	if v := mustDo(t, lc, "X.EXEC", "read"); v != "false" {
		t.Fatalf("read: %v", v)
	}
	wantErr(t, lc, `ERR tally: not possible in cluster mode: "load" reads a local file`, "X.EXEC", "load")
	wantErr(t, fc, "MOVED 0 "+g.nodes[0].addr, "X.EXEC", "write")
	wantErr(t, fc, "MOVED 0 "+g.nodes[0].addr, "X.EXEC", "read")
	if v := mustDo(t, fc, "X.EXEC", "local"); v != "false" {
		t.Fatalf("local on a follower: %v", v)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, n := range g.nodes {
		want := []string{"write"}
		switch i {
		case 0:
			want = []string{"write", "local", "read"}
		case 1:
			want = []string{"write", "local"}
		}
		if got := ran[n.srv]; !slices.Equal(got, want) {
			t.Errorf("node %d ran %q, want %q", i, got, want)
		}
	}
	if g.entries != 1 {
		t.Fatalf("%d entries, want 1", g.entries)
	}
}
