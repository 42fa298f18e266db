package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// freeAddrOn is freeAddr on a loopback address of its own (127.0.0.0/8 is
// all loopback on Linux), so a test has several "hosts".
func freeAddrOn(t *testing.T, host string) string {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skipf("no loopback address %s here: %v", host, err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// strs reads an array reply of strings.
func strs(t *testing.T, v any) []string {
	t.Helper()
	a, ok := v.([]any)
	if !ok {
		t.Fatalf("reply %T %v", v, v)
	}
	out := make([]string, len(a))
	for i, e := range a {
		out[i] = fmt.Sprint(e)
	}
	return out
}

func hasLine(lines []string, prefix string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
}

// TestRebalanceLeadership runs TALLY.SHARDS REBALANCE on the in-process
// cluster, whose replica i of every shard is on host 127.0.0.i: with
// every leader moved to host 1 (TALLY.CLUSTER TRANSFER id), a dry run
// plans two moves and moves nothing, the run moves them and each host
// then leads one shard, a second run plans nothing, and with a voter of
// shard 3 dead that shard is skipped while the others are balanced.
// Writes acknowledged before are read back after every run.
func TestRebalanceLeadership(t *testing.T) {
	s := newShardSimAt(t, func(id uint64) string { return freeAddrOn(t, fmt.Sprintf("127.0.0.%d", id%10)) })
	s.createMap()
	ctx := context.Background()
	host := func(id uint64) string { return fmt.Sprintf("127.0.0.%d", id%10) }

	// toHost1 moves every shard's leadership to its replica on host 1.
	toHost1 := func() {
		t.Helper()
		for sh := uint32(1); sh <= simShards; sh++ {
			want := uint64(sh)*10 + 1
			for l := s.leader(sh); l != want; l = s.leader(sh) {
				s.adminDo(func() string { return s.addr[l] }, "TALLY.CLUSTER", "TRANSFER", want)
			}
		}
	}
	leaders := func() map[uint32]uint64 {
		out := map[uint32]uint64{}
		for sh := uint32(1); sh <= simShards; sh++ {
			out[sh] = s.leader(sh)
		}
		return out
	}
	var addrs []string
	for _, id := range s.running() {
		addrs = append(addrs, s.addr[id])
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 8, DialTimeout: time.Second, ReadTimeout: 5 * time.Second})
	defer c.Close()
	write := func(round int) {
		t.Helper()
		t0 := time.Now()
		for k := range 30 {
			key := fmt.Sprintf("posts:%d", k)
			for {
				err := c.HIncrBy(ctx, key, "likes", 1).Err()
				if err == nil {
					break
				}
				// A refused dial (the killed node, until the client's
				// slot map drops it) sent nothing: retried like a redirect.
				refused := strings.Contains(err.Error(), "connection refused")
				if simOutcome(err) != errRetry && !refused || time.Since(t0) > 30*time.Second {
					t.Fatalf("HINCRBY %s: %v", key, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		for k := range 30 {
			key := fmt.Sprintf("posts:%d", k)
			if got, err := c.HGet(ctx, key, "likes").Int(); err != nil || got != round {
				t.Fatalf("round %d: %s likes %d, %v", round, key, got, err)
			}
		}
	}
	// Schema: keyless writes, sent to a leader, broadcast to every shard.
	s.adminDo(func() string { return s.addr[s.leader(1)] }, "TALLY.COUNTER", "ADD", "posts")
	s.adminDo(func() string { return s.addr[s.leader(1)] }, "TALLY.COLUMN", "ADD", "posts", "likes")
	s.quiesce()

	toHost1()
	write(1)
	before := leaders()
	admin := func() string { return s.addr[22] }
	dry := strs(t, s.adminDo(admin, "TALLY.SHARDS", "REBALANCE", "DRYRUN"))
	want := []string{"by host", "before 127.0.0.1=3 127.0.0.2=0 127.0.0.3=0", "after 127.0.0.1=1 127.0.0.2=1 127.0.0.3=1",
		"move shard 1 11@127.0.0.1 -> 12@127.0.0.2 planned", "move shard 2 21@127.0.0.1 -> 23@127.0.0.3 planned"}
	if !slices.Equal(dry, want) {
		t.Fatalf("dry run:\n%s\nwant\n%s", strings.Join(dry, "\n"), strings.Join(want, "\n"))
	}
	if got := leaders(); !maps(got, before) {
		t.Fatalf("a dry run moved leaders: %v, was %v", got, before)
	}

	t0 := time.Now()
	done := strs(t, s.adminDo(admin, "TALLY.SHARDS", "REBALANCE", "BY", "host"))
	t.Logf("rebalance of 2 moves: %v", time.Since(t0))
	if RebalanceFailed(done) != nil || !hasLine(done, "move shard 1 11@127.0.0.1 -> 12@127.0.0.2 ok") ||
		!hasLine(done, "move shard 2 21@127.0.0.1 -> 23@127.0.0.3 ok") {
		t.Fatalf("rebalance:\n%s", strings.Join(done, "\n"))
	}
	led := map[string]int{}
	for _, l := range leaders() {
		led[host(l)]++
	}
	if len(led) != 3 {
		t.Fatalf("after the rebalance the hosts lead %v", led)
	}
	write(2)
	again := strs(t, s.adminDo(admin, "TALLY.SHARDS", "REBALANCE"))
	if hasLine(again, "move ") || !hasLine(again, "after 127.0.0.1=1 127.0.0.2=1 127.0.0.3=1") {
		t.Fatalf("a balanced cluster planned:\n%s", strings.Join(again, "\n"))
	}
	// Per node every node leads at most one shard: nothing to do.
	if byNode := strs(t, s.adminDo(admin, "TALLY.SHARDS", "REBALANCE", "BY", "node", "DRYRUN")); hasLine(byNode, "move ") {
		t.Fatalf("by node:\n%s", strings.Join(byNode, "\n"))
	}

	// A dead voter: its shard stays as it is.
	toHost1()
	s.kill(33)
	withDead := strs(t, s.adminDo(admin, "TALLY.SHARDS", "REBALANCE"))
	if !hasLine(withDead, "skip shard 3: voter 33 ("+s.addr[33]+") does not answer") ||
		!hasLine(withDead, "move shard 1 11@127.0.0.1 -> 12@127.0.0.2 ok") ||
		!hasLine(withDead, "move shard 2 21@127.0.0.1 -> 23@127.0.0.3 ok") || hasLine(withDead, "move shard 3") {
		t.Fatalf("with node 33 dead:\n%s", strings.Join(withDead, "\n"))
	}
	if l := s.leader(3); l != 31 {
		t.Fatalf("shard 3 is led by %d", l)
	}
	write(3)

	// Bad requests.
	rc := redis.NewClient(&redis.Options{Addr: s.addr[21]})
	defer rc.Close()
	for _, bad := range [][]any{
		{"TALLY.SHARDS", "REBALANCE", "BY", "rack"},
		{"TALLY.SHARDS", "REBALANCE", "BY"},
		{"TALLY.SHARDS", "REBALANCE", "NOW"},
		{"TALLY.CLUSTER", "TRANSFER", "x"},
		{"TALLY.CLUSTER", "TRANSFER", 22, 23},
	} {
		if err := rc.Do(ctx, bad...).Err(); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
	// Node 21 no longer leads shard 2 (the rebalance moved it to 23): a
	// named transfer sent to it is refused with the leader's address.
	if err := rc.Do(ctx, "TALLY.CLUSTER", "TRANSFER", 22).Err(); err == nil || !strings.Contains(err.Error(), "not the leader: send membership changes to "+s.addr[23]) {
		t.Errorf("TRANSFER on a follower: %v", err)
	}
}

func maps(a, b map[uint32]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestAddNode registers a spare node in the map (TALLY.SHARDS ADDNODE):
// it is listed by every node's TALLY.SHARDS STATUS; a duplicate id, an
// address in use and a bad address are refused and change nothing; once
// the node joins shard 1 (learner, then voter) the shard's leader
// publishes it as a replica and it leaves the spare list.
func TestAddNode(t *testing.T) {
	s := newShardSim(t)
	s.createMap()
	ctx := context.Background()
	const id = 14
	s.addr[id] = freeAddr(t)
	s.shardOf[id] = 1
	s.joined[id] = true
	epoch := s.adminDo(func() string { return s.addr[31] }, "TALLY.SHARDS", "ADDNODE", id, simRaftAddr(id), s.addr[id])
	if e, ok := epoch.(int64); !ok || e < 2 {
		t.Fatalf("ADDNODE replied %v", epoch)
	}
	spare := func(n uint64) string {
		v := s.adminDo(func() string { return s.addr[n] }, "TALLY.SHARDS", "STATUS").([]any)
		for i := 0; i+1 < len(v); i += 2 {
			if v[i] == "nodes" {
				return strings.Join(strs(t, v[i+1]), ",")
			}
		}
		t.Fatal("no nodes in TALLY.SHARDS STATUS")
		return ""
	}
	registered := fmt.Sprintf("%d=%s/%s", id, simRaftAddr(id), s.addr[id])
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range s.running() {
		for spare(n) != registered {
			if time.Now().After(deadline) {
				t.Fatalf("node %d lists %q", n, spare(n))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	layout := func() string {
		m := s.node(21).meta.Map()
		out := fmt.Sprint(m.Ranges, m.Nodes)
		for _, sh := range m.Shards {
			out += fmt.Sprint(sh.ID, sh.Replicas)
		}
		return out
	}
	before := layout()
	rc := redis.NewClient(&redis.Options{Addr: s.addr[22]})
	defer rc.Close()
	for _, c := range []struct {
		args []any
		want string
	}{
		{[]any{id, "mem-99:1", "127.0.0.1:1"}, "node id in use"},
		{[]any{12, "mem-99:1", "127.0.0.1:1"}, "node id in use"},
		{[]any{99, simRaftAddr(id), "127.0.0.1:1"}, "address in use"},
		{[]any{99, "mem-99:1", s.addr[33]}, "address in use"},
		{[]any{99, "mem-99", "127.0.0.1:1"}, "bad address"},
		{[]any{99, "mem-99:1", "127.0.0.1:99999"}, "bad address"},
		{[]any{0, "mem-99:1", "127.0.0.1:1"}, "invalid op"},
		{[]any{"x", "mem-99:1", "127.0.0.1:1"}, "invalid op"},
	} {
		err := rc.Do(ctx, append([]any{"TALLY.SHARDS", "ADDNODE"}, c.args...)...).Err()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ADDNODE %v: %v, want %q", c.args, err, c.want)
		}
	}
	if got := layout(); got != before {
		t.Fatalf("refused ADDNODEs changed the map:\n%s\nwas\n%s", got, before)
	}

	// The node joins shard 1: no longer spare.
	s.start(id)
	leaderAddr := func() string { return s.addr[s.leader(1)] }
	s.adminDo(leaderAddr, "TALLY.CLUSTER", "ADDLEARNER", id, simRaftAddr(id), s.addr[id])
	for deadline := time.Now().Add(30 * time.Second); s.node(id).Replica().Status().Applied < s.node(s.leader(1)).Replica().Status().Commit; {
		if time.Now().After(deadline) {
			t.Fatal("the new node did not catch up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.adminDo(leaderAddr, "TALLY.CLUSTER", "PROMOTE", id)
	for deadline := time.Now().Add(30 * time.Second); ; {
		m := s.node(21).meta.Map()
		if r, sh := m.Replica(id); r != nil && sh.ID == 1 && m.Node(id) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the map after the join:\n%v", m)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
