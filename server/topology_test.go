package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally/internal/commands"
)

// fakeTopology is a Topology whose view a test sets.
type fakeTopology struct{ v atomic.Pointer[TopologyView] }

func (f *fakeTopology) View() *TopologyView { return f.v.Load() }

// sharded is a cluster of one-replica shards in one process: shard i+1 is
// groups[i] (a fakeGroup of one node, its leader, replica id 10(i+1)+1),
// each server with its own topology naming itself as Self.
type sharded struct {
	groups []*fakeGroup
	topos  []*fakeTopology
	shards []TopologyShard
}

func newSharded(t testing.TB, n int) *sharded {
	t.Helper()
	sc := &sharded{}
	for i := range n {
		topo := &fakeTopology{}
		g := newFakeClusterWith(t, 1, ClusterOptions{Topology: topo}, nil)
		g.nodes[0].id = uint64(10*(i+1) + 1) // before any client: unique across shards
		sc.groups = append(sc.groups, g)
		sc.topos = append(sc.topos, topo)
		sc.shards = append(sc.shards, TopologyShard{ID: uint32(i + 1), Leader: g.nodes[0].id,
			Nodes: []TopologyNode{{ID: g.nodes[0].id, Addr: g.nodes[0].addr}}})
	}
	return sc
}

// set publishes a view of sc.shards with ranges to every server.
func (sc *sharded) set(t testing.TB, epoch uint64, ranges []SlotRange) {
	t.Helper()
	for i, topo := range sc.topos {
		v := &TopologyView{Epoch: epoch, Self: uint32(i + 1), Shards: slices.Clone(sc.shards), Ranges: ranges}
		if err := v.Validate(); err != nil {
			t.Fatal(err)
		}
		topo.v.Store(v)
	}
}

// even is the slots split evenly over n shards.
func even(n int) []SlotRange {
	var rs []SlotRange
	for i := range n {
		rs = append(rs, SlotRange{From: i * NumSlots / n, To: (i+1)*NumSlots/n - 1, Shard: uint32(i + 1)})
	}
	return rs
}

// shardOf is the index in sc.groups of the shard serving key under
// ranges, -1 for an unassigned slot.
func shardOf(ranges []SlotRange, key string) int {
	s := Slot([]byte(key))
	for _, r := range ranges {
		if s >= r.From && s <= r.To {
			return int(r.Shard) - 1
		}
	}
	return -1
}

// keyOn returns the first key format(i), i = 1, 2, ..., served by shard
// index want (-1: unassigned) whose slot is not in avoid.
func keyOn(ranges []SlotRange, want int, format string, avoid ...string) string {
	for i := 1; ; i++ {
		k := fmt.Sprintf(format, i)
		if shardOf(ranges, k) != want {
			continue
		}
		clash := false
		for _, a := range avoid {
			clash = clash || Slot([]byte(a)) == Slot([]byte(k))
		}
		if !clash {
			return k
		}
	}
}

func TestRouteSlot(t *testing.T) {
	for key, canon := range map[string]string{
		"posts:017": "posts:17", "posts:0": "posts:0", "posts:000": "posts:0", "017": "17", "0": "0", "00": "0",
		"posts:17": "posts:17", "a0:07": "a0:7", "x07": "x07", "{u}posts:07": "{u}posts:07", "posts:": "posts:", "": "",
	} {
		if got, want := routeSlot([]byte(key)), Slot([]byte(canon)); got != want {
			t.Errorf("routeSlot(%q) = %d, want %d (%q)", key, got, want, canon)
		}
	}
}

func TestTopologyValidate(t *testing.T) {
	node := func(id uint64) TopologyNode {
		return TopologyNode{ID: id, Addr: "127.0.0.1:" + strconv.FormatUint(7000+id, 10)}
	}
	good := func() *TopologyView {
		return &TopologyView{Epoch: 3, Self: 1,
			Shards: []TopologyShard{{ID: 1, Nodes: []TopologyNode{node(1), node(2)}, Leader: 2}, {ID: 2, Nodes: []TopologyNode{node(3)}}},
			Ranges: []SlotRange{{0, 99, 1}, {100, 16383, 2}}}
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, spoil := range map[string]func(v *TopologyView){
		"zero shard":         func(v *TopologyView) { v.Shards[1].ID = 0 },
		"repeated shard":     func(v *TopologyView) { v.Shards[1].ID = 1 },
		"repeated node":      func(v *TopologyView) { v.Shards[1].Nodes[0].ID = 1 },
		"zero node":          func(v *TopologyView) { v.Shards[1].Nodes[0].ID = 0 },
		"bad address":        func(v *TopologyView) { v.Shards[1].Nodes[0].Addr = "localhost:1" },
		"leader not a node":  func(v *TopologyView) { v.Shards[0].Leader = 3 },
		"self not listed":    func(v *TopologyView) { v.Self = 9 },
		"overlap":            func(v *TopologyView) { v.Ranges[1].From = 99 },
		"unsorted":           func(v *TopologyView) { v.Ranges[0], v.Ranges[1] = v.Ranges[1], v.Ranges[0] },
		"past the last slot": func(v *TopologyView) { v.Ranges[1].To = NumSlots },
		"empty range":        func(v *TopologyView) { v.Ranges[0].To = -1 },
		"unknown shard":      func(v *TopologyView) { v.Ranges[1].Shard = 5 },
	} {
		v := good()
		spoil(v)
		if err := v.Validate(); !errors.Is(err, ErrInvalidTopology) {
			t.Errorf("%s: %v", name, err)
		}
	}
	v := good()
	v.Ranges = v.Ranges[1:] // slots 0-99 unassigned: valid
	if err := v.Validate(); err != nil {
		t.Fatal(err)
	}
	if v.ShardOf(50) != nil || v.ShardOf(100).ID != 2 || v.ShardOf(NumSlots-1).ID != 2 || good().ShardOf(99).ID != 1 {
		t.Fatal("ShardOf")
	}
	if m := good().Shards[0].master(); m.ID != 2 {
		t.Fatalf("master with a hint: %d", m.ID)
	}
	if m := good().Shards[1].master(); m.ID != 3 {
		t.Fatalf("master without a hint: %d", m.ID)
	}
	if ShardID("tally", 1) == ShardID("tally", 2) || ShardID("a", 1) == ShardID("b", 1) || len(ShardID("a", 1)) != 40 {
		t.Fatal("ShardID")
	}
}

// tableKeys is, per table command, the argument its key is (COMMAND's
// first key position; "N-" when every argument from N on is one, "row"
// for COUNTER:ID rows) or why it has none. A new command must be added
// here with its reason.
var tableKeys = map[string]string{
	// Counters: the row COUNTER:ID (HINCRBY's key for the same row).
	"tally.incr": "row", "tally.set": "row", "tally.get": "row", "tally.delete": "row",
	// Schema is every shard's: no key (it runs where it is sent, and the
	// cluster broadcasts it to every other shard).
	"tally.counter|add": "schema", "tally.counter|list": "schema", "tally.column|add": "schema",
	"like.business|add": "schema", "like.business|list": "schema", "unread.kind|add": "schema",
	"unread.kind|list": "schema", "tl.config": "schema", "tl.expire": "maintenance of every shard",
	// Timelines: the user the command is about (its following list,
	// mutes, hidden followers, inbox, outbox); several users: each.
	"tl.follow": "1", "tl.unfollow": "1", "tl.mute": "1", "tl.unmute": "1", "tl.hide": "1", "tl.unhide": "1",
	"tl.misfollowing": "1", "tl.isfollowing": "1", "tl.active": "1-", "tl.post": "1", "tl.repost": "1",
	"tl.unpost": "1", "tl.home": "1", "tl.muser": "1-", "tl.user": "1-", "tl.followers": "1", "tl.followees": "1",
	"tl.muted": "1", "tl.hidden": "1", "tl.posts": "1",
	// Likes: the item (its counts, likers, owner, each user's state).
	"like.like": "2", "like.unlike": "2", "like.dislike": "2", "like.undislike": "2", "like.setowner": "2",
	"like.counts": "2-", "like.states": "3-", "like.likers": "2",
	// A user's likes, the boards and ranks, an owner's received likes sum
	// every shard's part: no key.
	"like.userlikes": "scatter", "like.top": "scatter", "like.mrank": "scatter", "like.rank": "scatter",
	"like.mreceived": "scatter", "like.received": "scatter",
	// Their per-shard parts answer for the shard they are sent to.
	"like.part|top": "shard part", "like.part|above": "shard part", "like.part|scores": "shard part",
	"like.part|userlikes": "shard part", "like.part|received": "shard part",
	// Unread: the user.
	"unread.incr": "1", "unread.reset": "1", "unread.mget": "1-", "unread.get": "1-", "unread.mfeed": "1-",
	"unread.feed": "1-", "unread.feedreset": "1", "unread.forget": "1-",
	"dot.clear": "1", "dot.has": "1", "notice.read": "1", "notice.unread": "1",
	// A channel's mark or notice is every user's: broadcast, no key.
	"dot.mark": "broadcast", "notice.post": "broadcast",
	// Messages between shards (FlagInternal): delivered by the streams,
	// never routed; their key is the user they are about.
	"tl.xfollower": "1", "tl.xbackfill": "1", "tl.xpublish": "1", "tl.xunpublish": "1",
	"tl.xhide": "1", "tl.xsubscribe": "1", "tl.xgone": "1",
	// This node's own state and maintenance.
	"tally.jobs|list": "local", "tally.jobs|wait": "local", "tally.compact": "local", "tally.verify": "local",
	"tally.replay": "local", "tally.stats": "local", "tally.checkpoint": "local",
}

// TestTableKeys: every data command of the one table has the key
// tableKeys gives, a command without one has a reason there, and COMMAND
// reports them as go-redis reads them.
func TestTableKeys(t *testing.T) {
	ts, _ := newDBServer(t)
	byName := map[string]*commands.Command{}
	for _, tc := range commands.All() {
		for _, name := range []string{tc.RESP, tc.RESPOne} {
			if name != "" {
				byName[strings.ToLower(strings.Replace(name, " ", "|", 1))] = tc
			}
		}
	}
	infos, err := ts.client(t, nil).Command(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range byName {
		want, ok := tableKeys[name]
		if !ok {
			t.Errorf("%s: not in tableKeys (give its key, or why it has none)", name)
			continue
		}
		cmd := ts.s.lookupFull([]byte(name))
		got := "none"
		switch {
		case cmd.Keys != nil:
			got = "row"
		case cmd.FirstKey > 0 && cmd.LastKey < 0:
			got = strconv.Itoa(cmd.FirstKey-len(strings.Fields(tc.RESP))+1) + "-"
		case cmd.FirstKey > 0:
			got = strconv.Itoa(cmd.FirstKey - len(strings.Fields(tc.RESP)) + 1)
		}
		if (want == "local") != tc.Local {
			t.Errorf("%s: Local %v, listed as %q", name, tc.Local, want)
		}
		if _, err := strconv.Atoi(strings.TrimSuffix(want, "-")); err != nil && want != "row" {
			want = "none" // a reason
		}
		if got != want {
			t.Errorf("%s: key %s, want %s", name, got, want)
		}
		// A key that repeats to the end leaves no room for options.
		if cmd.LastKey < 0 {
			for _, p := range tc.Params {
				if p.Option {
					t.Errorf("%s: every argument from %d on is a key, but it has option %s", name, cmd.FirstKey, p.Name)
				}
			}
		}
		if ci := infos[name]; cmd.parent == nil && (ci == nil || ci.FirstKeyPos != int8(cmd.FirstKey) ||
			ci.LastKeyPos != int8(cmd.LastKey) || slices.Contains(ci.Flags, "movablekeys") != (cmd.Keys != nil)) {
			t.Errorf("COMMAND %s: %+v", name, ci)
		}
	}
	for name := range tableKeys {
		if byName[name] == nil {
			t.Errorf("tableKeys lists %s, not a table command", name)
		}
	}
}

// rawShard is a raw connection to shard i's server.
func (sc *sharded) raw(t testing.TB, i int) *raw { return sc.groups[i].raw(t, 0) }

// expect reads one reply line per want, each starting with its want.
func (r *raw) expect(wants ...string) {
	r.t.Helper()
	for _, w := range wants {
		if got := r.mustLine(); !strings.HasPrefix(got, w) {
			var more []string
			for range 12 {
				l, err := r.line()
				if err != nil {
					break
				}
				more = append(more, l)
			}
			r.t.Fatalf("got %q, want %q (then %q)", got, w, more)
		}
	}
}

// TestShardRouting: commands with keys of another shard get MOVED to its
// leader hint, keys of different slots CROSSSLOT, an unassigned slot
// CLUSTERDOWN, per command inside a pipeline too; keyless commands run
// where they are sent.
func TestShardRouting(t *testing.T) {
	sc := newSharded(t, 3)
	// Slots 16001-16383 unassigned.
	ranges := []SlotRange{{0, 5000, 1}, {5001, 10000, 2}, {10001, 16000, 3}}
	sc.set(t, 7, ranges)
	addr := func(i int) string { return sc.groups[i].nodes[0].addr }
	own := keyOn(ranges, 0, "posts:%d")
	own2 := keyOn(ranges, 0, "posts:%d", own)
	on2, on3, none := keyOn(ranges, 1, "posts:%d"), keyOn(ranges, 2, "posts:%d"), keyOn(ranges, -1, "posts:%d")
	moved := func(key string, i int) string { return fmt.Sprintf("-MOVED %d %s", Slot([]byte(key)), addr(i)) }

	r := sc.raw(t, 0)
	r.send(resp("HINCRBY", own, "likes", "1") + resp("HINCRBY", on2, "likes", "1") + resp("HGET", on3, "likes") +
		resp("HGET", none, "likes") + resp("DEL", own, own2) + resp("DEL", own, on2) + resp("PING") + resp("HGET", own, "likes"))
	r.expect(":1", moved(on2, 1), moved(on3, 2), "-CLUSTERDOWN Hash slot not served",
		"-CROSSSLOT Keys in request don't hash to the same slot", "-CROSSSLOT", "+PONG", "$1", "1")

	// A pipeline of writes is proposed as entries of this shard's
	// commands only; the other shard's gets MOVED in its place.
	g := sc.groups[0]
	before := g.entries
	r.send(resp("HINCRBY", own, "likes", "1") + resp("HINCRBY", on2, "likes", "1") + resp("HINCRBY", own, "likes", "1"))
	r.expect(":2", moved(on2, 1), ":3")
	if g.entries-before != 2 {
		t.Fatalf("%d entries for a pipeline around another shard's write", g.entries-before)
	}
	for i := 1; i < 3; i++ {
		if sc.groups[i].entries != 0 {
			t.Fatalf("shard %d applied %d entries", i+1, sc.groups[i].entries)
		}
	}

	// Table commands: by user, item, counter row.
	u2, u3 := keyOn(ranges, 1, "%d"), keyOn(ranges, 2, "%d")
	u1 := keyOn(ranges, 0, "%d")
	u1b := keyOn(ranges, 0, "%d", u1)
	r.send(resp("TL.FOLLOW", u2, u1) + resp("LIKE.LIKE", "video", u3, u1) + resp("UNREAD.MGET", u1, u2) +
		resp("UNREAD.MGET", u1, u1b) + resp("TL.FOLLOW", u1, u2, u3) + resp("TALLY.INCR", "posts", strings.TrimPrefix(on3, "posts:"), "likes") +
		resp("TALLY.GET", "posts", strings.TrimPrefix(own, "posts:"), strings.TrimPrefix(on2, "posts:")) +
		resp("TALLY.MGET", "posts", strings.TrimPrefix(own, "posts:")) + resp("PING"))
	r.expect(moved(u2, 1), moved(u3, 2), "-CROSSSLOT", "-CROSSSLOT", ":2", moved(on3, 2), "-CROSSSLOT", "*1", "*3", ":0", ":0", ":3", "+PONG")

	// An id with leading zeros names the same row: routed by its
	// canonical key, whatever its literal slot.
	padded := "posts:000" + strings.TrimPrefix(on2, "posts:")
	r.send(resp("HGET", padded, "likes") + resp("HGET", "posts:0"+strings.TrimPrefix(own, "posts:"), "likes"))
	r.expect(moved(on2, 1), "$1", "3")

	// MOVED names the leader hint, or a node of a shard without one.
	shards := slices.Clone(sc.shards)
	shards[1].Nodes = append([]TopologyNode{{ID: 99, Addr: "127.0.0.1:1"}}, shards[1].Nodes...)
	v := &TopologyView{Epoch: 8, Self: 1, Shards: shards, Ranges: ranges}
	sc.topos[0].v.Store(v)
	r.send(resp("HGET", on2, "likes"))
	r.expect(moved(on2, 1))
	v2 := *v
	v2.Shards = slices.Clone(shards)
	v2.Shards[1].Leader = 99
	sc.topos[0].v.Store(&v2)
	r.send(resp("HGET", on2, "likes"))
	r.expect(fmt.Sprintf("-MOVED %d 127.0.0.1:1", Slot([]byte(on2))))
	v3 := v2
	v3.Shards = slices.Clone(v2.Shards)
	v3.Shards[1].Leader = 0
	sc.topos[0].v.Store(&v3)
	r.send(resp("HGET", on2, "likes"))
	r.expect(fmt.Sprintf("-MOVED %d 127.0.0.1:1", Slot([]byte(on2))))

	// No map yet: keyed commands are refused, keyless ones run.
	sc.topos[0].v.Store(nil)
	r.send(resp("HGET", own, "likes") + resp("PING") + resp("CLUSTER", "SLOTS"))
	r.expect("-CLUSTERDOWN The cluster is down: this node has no slot map yet", "+PONG", "-CLUSTERDOWN")
}

// TestShardClusterCommands: CLUSTER SLOTS, SHARDS, NODES, INFO and
// MYSHARDID list every shard of the view, as go-redis parses them.
func TestShardClusterCommands(t *testing.T) {
	sc := newSharded(t, 3)
	ranges := []SlotRange{{0, 99, 2}, {100, 5000, 1}, {5001, 10000, 2}, {10001, 10001, 3}, {10002, 16000, 3}}
	// Shard 3 has a second node, the leader hint.
	sc.shards[2].Nodes = append(sc.shards[2].Nodes, TopologyNode{ID: 77, Addr: "127.0.0.1:2"})
	sc.shards[2].Leader = 77
	sc.set(t, 9, ranges)
	ctx := context.Background()
	c := sc.groups[0].client(t, 0)
	addr := func(i int) string { return sc.groups[i].nodes[0].addr }
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	type sl struct {
		from, to int64
		addrs    []string
	}
	var got []sl
	for _, s := range slots {
		x := sl{from: int64(s.Start), to: int64(s.End)}
		for _, n := range s.Nodes {
			x.addrs = append(x.addrs, n.Addr)
		}
		got = append(got, x)
	}
	want := []sl{{0, 99, []string{addr(1)}}, {100, 5000, []string{addr(0)}}, {5001, 10000, []string{addr(1)}},
		{10001, 16000, []string{"127.0.0.1:2", addr(2)}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("CLUSTER SLOTS %v, want %v", got, want)
	}
	if slots[0].Nodes[0].ID != NodeID(21) || slots[3].Nodes[0].ID != NodeID(77) {
		t.Fatalf("CLUSTER SLOTS ids: %+v", slots)
	}
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 3 || len(shards[1].Slots) != 2 || shards[1].Slots[0].Start != 0 || shards[1].Slots[1].End != 10000 ||
		len(shards[2].Nodes) != 2 || shards[2].Nodes[0].Role != "master" || shards[2].Nodes[0].Port != 2 ||
		shards[2].Nodes[1].Role != "replica" || shards[0].Nodes[0].ID != NodeID(11) {
		t.Fatalf("CLUSTER SHARDS: %+v", shards)
	}
	nodes := mustDo(t, c, "CLUSTER", "NODES").(string)
	for _, line := range []string{
		NodeID(11) + " " + addr(0) + "@0 myself,master - 0 0 9 connected 100-5000",
		NodeID(21) + " " + addr(1) + "@0 master - 0 0 9 connected 0-99 5001-10000",
		NodeID(77) + " 127.0.0.1:2@0 master - 0 0 9 connected 10001-16000",
		NodeID(31) + " " + addr(2) + "@0 slave " + NodeID(77) + " 0 0 9 connected",
	} {
		if !strings.Contains(nodes, line+"\n") {
			t.Errorf("CLUSTER NODES lacks %q:\n%s", line, nodes)
		}
	}
	if n := strings.Count(nodes, "\n"); n != 4 {
		t.Errorf("CLUSTER NODES has %d lines", n)
	}
	info := mustDo(t, c, "CLUSTER", "INFO").(string)
	for _, want := range []string{"cluster_state:fail", "cluster_slots_assigned:16001", "cluster_slots_ok:16001",
		"cluster_slots_fail:0", "cluster_known_nodes:4", "cluster_size:3", "cluster_current_epoch:9", "cluster_my_epoch:9", "tally_shard:1"} {
		if !strings.Contains(info, want+"\r\n") {
			t.Errorf("CLUSTER INFO lacks %s:\n%s", want, info)
		}
	}
	if id := mustDo(t, c, "CLUSTER", "MYSHARDID"); id != ShardID("tally", 1) {
		t.Fatalf("MYSHARDID %v", id)
	}
	if repl := mustDo(t, c, "INFO", "replication").(string); !strings.Contains(repl, "master_replid:"+ShardID("tally", 1)) {
		t.Fatalf("INFO replication:\n%s", repl)
	}
	// Every slot served and this shard's leader known: ok.
	sc.set(t, 10, even(3))
	info = mustDo(t, c, "CLUSTER", "INFO").(string)
	if !strings.Contains(info, "cluster_state:ok\r\n") || !strings.Contains(info, "cluster_slots_ok:16384\r\n") {
		t.Fatalf("CLUSTER INFO:\n%s", info)
	}
}

// TestShardClusterClient: go-redis's ClusterClient against three shards
// sends every command to the shard owning its key's slot, as each
// server's own store shows. LIKE.* needs SetFirstKeyPos(2) to go there
// directly (go-redis routes by the first argument unless told); without
// it the client follows MOVED.
func TestShardClusterClient(t *testing.T) {
	sc := newSharded(t, 3)
	ranges := even(3)
	sc.set(t, 1, ranges)
	ctx := context.Background()
	var addrs []string
	for _, g := range sc.groups {
		addrs = append(addrs, g.nodes[0].addr)
		mustDo(t, g.client(t, 0), "LIKE.BUSINESS", "ADD", "video") // schema: on every shard
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 8})
	defer cc.Close()
	rng := rand.New(rand.NewPCG(23, 1))
	counts := map[uint64]uint64{}
	for range 60 {
		id := rng.Uint64N(1 << 20)
		if err := cc.HIncrBy(ctx, "posts:"+strconv.FormatUint(id, 10), "likes", 1).Err(); err != nil {
			t.Fatal(err)
		}
		counts[id]++
	}
	for id, n := range counts {
		key := "posts:" + strconv.FormatUint(id, 10)
		if v, err := cc.HGet(ctx, key, "likes").Uint64(); err != nil || v != n {
			t.Fatalf("HGET %s: %v %v, want %d", key, v, err, n)
		}
		for i, g := range sc.groups {
			c, err := g.nodes[0].db.Store().UserCounter("posts")
			if err != nil {
				t.Fatal(err)
			}
			v, err := c.GetColumn(id, "likes")
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]uint64{true: n}[shardOf(ranges, key) == i]; v != want {
				t.Fatalf("%s on shard %d: %d, want %d", key, i+1, v, want)
			}
		}
	}
	// A follower and its author on one shard (follows across shards are
	// the cross-shard streams' work): the post reaches the home.
	author := keyOn(ranges, 1, "%d")
	follower := keyOn(ranges, 1, "%d", author)
	mustDo(t, cc, "TL.FOLLOW", follower, author)
	mustDo(t, cc, "TL.POST", author, 500)
	home := fmt.Sprint(mustDo(t, cc, "TL.HOME", follower))
	if !strings.Contains(home, "500") {
		t.Fatalf("TL.HOME %s", home)
	}
	aid, _ := strconv.ParseUint(author, 10, 64)
	for i, g := range sc.groups {
		var posts []uint64
		if tl := g.nodes[0].db.Timeline(); tl != nil {
			if err := tl.Posts(aid, 0, func(p uint64) bool { posts = append(posts, p); return true }); err != nil {
				t.Fatal(err)
			}
		}
		if want := i == 1; (len(posts) == 1 && posts[0] == 500) != want || len(posts) > 1 {
			t.Fatalf("shard %d holds posts %v of author %s", i+1, posts, author)
		}
	}
	// Likes, keyed by item.
	liked := map[uint64]bool{}
	for n := range 30 {
		item := rng.Uint64N(1 << 30)
		args := []any{"LIKE.LIKE", "video", item, 1000 + n}
		cmd := redis.NewCmd(ctx, args...)
		if n%2 == 0 {
			cmd.SetFirstKeyPos(2) // straight to the item's shard
		} // else: routed by "video", then MOVED
		if err := cc.Process(ctx, cmd); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		liked[item] = true
	}
	for item := range liked {
		for i, g := range sc.groups {
			cs, err := g.nodes[0].db.Likes().Counts("video", []uint64{item}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]uint64{true: 1}[shardOf(ranges, strconv.FormatUint(item, 10)) == i]; cs[0].Likes != want {
				t.Fatalf("item %d on shard %d: %d likes, want %d", item, i+1, cs[0].Likes, want)
			}
		}
	}
}

// TestClusterRoutingLeaderHint: a replica that knows no leader (a
// partitioned ex-leader, or a follower during an election) sends clients
// to its own shard's leader hint in the slot map, which the metadata group
// may know already, instead of failing them with CLUSTERDOWN; without a
// hint, or with a hint naming the replica itself (a stale map), it still
// answers CLUSTERDOWN.
func TestClusterRoutingLeaderHint(t *testing.T) {
	topo := &fakeTopology{}
	g := newFakeClusterWith(t, 3, ClusterOptions{Topology: topo}, nil)
	var nodes []TopologyNode
	for _, n := range g.nodes {
		nodes = append(nodes, TopologyNode{ID: n.id, Addr: n.addr})
	}
	hint := func(leader uint64) {
		v := &TopologyView{Epoch: 1, Self: 1, Shards: []TopologyShard{{ID: 1, Leader: leader, Nodes: nodes}},
			Ranges: []SlotRange{{From: 0, To: NumSlots - 1, Shard: 1}}}
		if err := v.Validate(); err != nil {
			t.Fatal(err)
		}
		topo.v.Store(v)
	}
	hint(g.nodes[0].id)
	c := g.client(t, 0)
	mustDo(t, c, "HINCRBY", "posts:7", "likes", 1)

	// Node 0 lost the leadership and knows no leader; the map names 3.
	g.setLeader(-1)
	hint(g.nodes[2].id)
	moved := fmt.Sprintf("MOVED %d %s", Slot([]byte("posts:7")), g.nodes[2].addr)
	wantErr(t, c, moved, "HINCRBY", "posts:7", "likes", 1)
	wantErr(t, c, moved, "HGET", "posts:7", "likes")
	wantErr(t, c, fmt.Sprintf("MOVED %d %s", Slot([]byte("1")), g.nodes[2].addr), "TL.FOLLOW", 1, 2)

	// The map still names node 0, or no leader: CLUSTERDOWN.
	hint(g.nodes[0].id)
	wantErr(t, c, "CLUSTERDOWN", "HINCRBY", "posts:7", "likes", 1)
	wantErr(t, c, "CLUSTERDOWN", "HGET", "posts:7", "likes")
	hint(0)
	wantErr(t, c, "CLUSTERDOWN", "HINCRBY", "posts:7", "likes", 1)

	// A leader known to the replica wins over the map.
	g.setLeader(1)
	hint(g.nodes[2].id)
	wantErr(t, c, fmt.Sprintf("MOVED %d %s", Slot([]byte("posts:7")), g.nodes[1].addr), "HINCRBY", "posts:7", "likes", 1)
}
