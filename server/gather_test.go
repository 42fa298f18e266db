package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/store"
)

// redisCaller is a ShardCaller over go-redis clients, one per address (the
// cluster package has the real one; this one does not follow MOVED).
type redisCaller struct {
	mu      sync.Mutex
	clients map[string]*redis.Client
}

func (rc *redisCaller) CallShard(ctx context.Context, sh *TopologyShard, argv []string) (any, error) {
	addr := sh.master().Addr
	rc.mu.Lock()
	c := rc.clients[addr]
	if c == nil {
		c = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
		rc.clients[addr] = c
	}
	rc.mu.Unlock()
	args := make([]any, len(argv))
	for i, a := range argv {
		args[i] = a
	}
	r, err := c.Do(ctx, args...).Result()
	var re redis.Error
	if errors.As(err, &re) && !errors.Is(err, redis.Nil) {
		return nil, &ShardReplyError{Shard: sh.ID, Msg: re.Error()}
	}
	return r, err
}

func (rc *redisCaller) close() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, c := range rc.clients {
		c.Close()
	}
}

// gatherNode starts one server in cluster mode as the only node of its
// group, on a database whose likes use now as their clock.
func gatherNode(t *testing.T, co ClusterOptions, now func() time.Time) *fakeNode {
	t.Helper()
	g := &fakeGroup{leader: 0, term: 1}
	db, err := tallydb.Open(filepath.Join(t.TempDir(), "db"), &tallydb.Options{
		Store: &store.Options{Durability: store.NoSync, DisableBackground: true},
		Likes: &likes.Options{Now: now},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(db.Store(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterDB(db); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	node := &fakeNode{g: g, id: 1, addr: ln.Addr().String(), srv: s, db: db}
	g.nodes = append(g.nodes, node)
	co.Addr = node.addr
	if err := s.SetReplication(node, co); err != nil {
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
	return node
}

// gathering is a sharded cluster of one-node shards that gather, and a
// reference node (no topology) that holds every like.
type gathering struct {
	nodes   []*fakeNode
	topos   []*fakeTopology
	shards  []TopologyShard
	clients []*redis.Client // one per shard node
	ref     *redis.Client
}

func newGathering(t *testing.T, n int, now func() time.Time) *gathering {
	t.Helper()
	gc := &gathering{}
	caller := &redisCaller{clients: map[string]*redis.Client{}}
	t.Cleanup(caller.close)
	for i := range n {
		topo := &fakeTopology{}
		node := gatherNode(t, ClusterOptions{Topology: topo, Gather: caller}, now)
		node.id = uint64(10*(i+1) + 1)
		gc.nodes = append(gc.nodes, node)
		gc.topos = append(gc.topos, topo)
		gc.shards = append(gc.shards, TopologyShard{ID: uint32(i + 1), Leader: node.id,
			Nodes: []TopologyNode{{ID: node.id, Addr: node.addr}}})
		c := redis.NewClient(&redis.Options{Addr: node.addr, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		gc.clients = append(gc.clients, c)
	}
	gc.set(t, 1, gc.shards, even(n))
	ref := gatherNode(t, ClusterOptions{}, now)
	gc.ref = redis.NewClient(&redis.Options{Addr: ref.addr, MaxRetries: -1})
	t.Cleanup(func() { gc.ref.Close() })
	return gc
}

// set publishes a view of shards with ranges to every node.
func (gc *gathering) set(t *testing.T, epoch uint64, shards []TopologyShard, ranges []SlotRange) {
	t.Helper()
	for i, topo := range gc.topos {
		v := &TopologyView{Epoch: epoch, Self: uint32(i + 1), Shards: shards, Ranges: ranges}
		if v.Shard(v.Self) == nil {
			v.Self = shards[0].ID
		}
		if err := v.Validate(); err != nil {
			t.Fatal(err)
		}
		topo.v.Store(v)
	}
}

// owner is the client of the shard holding item's likes.
func (gc *gathering) owner(item uint64) *redis.Client {
	return gc.clients[shardOf(even(len(gc.clients)), strconv.FormatUint(item, 10))]
}

// both runs a write on item's shard and on the reference; the replies
// must agree.
func (gc *gathering) both(t *testing.T, item uint64, args ...any) {
	t.Helper()
	ctx := context.Background()
	got, err1 := gc.owner(item).Do(ctx, args...).Result()
	want, err2 := gc.ref.Do(ctx, args...).Result()
	if fmt.Sprint(err1) != fmt.Sprint(err2) || !reflect.DeepEqual(got, want) {
		t.Fatalf("%v: shard %v, %v; reference %v, %v", args, got, err1, want, err2)
	}
}

// same runs a read on node i of the cluster and on the reference; the
// replies must be equal.
func (gc *gathering) same(t *testing.T, i int, args ...any) any {
	t.Helper()
	ctx := context.Background()
	got, err1 := gc.clients[i%len(gc.clients)].Do(ctx, args...).Result()
	want, err2 := gc.ref.Do(ctx, args...).Result()
	if err1 != nil && !errors.Is(err1, redis.Nil) || fmt.Sprint(err1) != fmt.Sprint(err2) || !reflect.DeepEqual(got, want) {
		t.Fatalf("%v on node %d: gathered %v, %v; reference %v, %v", args, i%len(gc.clients), got, err1, want, err2)
	}
	return got
}

// TestGatherLikes spreads random likes, unlikes, dislikes and owner
// changes of many items over three shards and checks every gathered read
// against a node holding everything, asked of every node in turn.
func TestGatherLikes(t *testing.T) {
	var ms atomic.Int64
	day := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	ms.Store(day.UnixMilli())
	now := func() time.Time { return time.UnixMilli(ms.Load()) }
	gc := newGathering(t, 3, now)
	ctx := context.Background()
	for _, c := range append([]*redis.Client{gc.ref}, gc.clients...) {
		for _, biz := range []string{"videos", "posts"} {
			if err := c.Do(ctx, "LIKE.BUSINESS", "ADD", biz).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	const items, users, owners = 150, 120, 9
	for op := range 3000 {
		biz := []string{"videos", "posts"}[r.IntN(4)/3]
		item := uint64(r.IntN(items))
		if op%3 == 0 {
			item = uint64(r.IntN(3)) // hot items: past the board's exact buckets
		}
		user := uint64(r.IntN(users))
		if r.IntN(4) == 0 {
			ms.Add(int64(r.IntN(3))) // many likes share a millisecond
		}
		switch k := r.IntN(20); {
		case k < 14:
			gc.both(t, item, "LIKE.LIKE", biz, item, user, item%owners+1)
		case k < 16:
			gc.both(t, item, "LIKE.UNLIKE", biz, item, user)
		case k < 19:
			gc.both(t, item, "LIKE.DISLIKE", biz, item, user)
		default:
			gc.both(t, item, "LIKE.SETOWNER", biz, item, uint64(r.IntN(owners))+1)
		}
	}
	d := day.Format(time.DateOnly)
	q := 0
	for _, biz := range []string{"videos", "posts", "nosuch"} {
		for _, n := range []int{1, 2, 5, 17, 1000} {
			gc.same(t, q, "LIKE.TOP", biz, n)
			gc.same(t, q+1, "LIKE.TOP", biz, n, "DAY", d)
			q++
		}
		all := []any{"LIKE.MRANK", biz}
		for item := range items + 3 {
			all = append(all, item)
			gc.same(t, q, "LIKE.RANK", biz, item)
			q++
		}
		gc.same(t, q, all...)
		gc.same(t, q+1, append(all, "DAY", d)...)
		for user := range users + 1 {
			for _, limit := range []int{3, 100} {
				var got, want []any
				var cur, rcur any
				for pages := 0; ; pages++ {
					args := []any{"LIKE.USERLIKES", biz, user, "LIMIT", limit}
					g, err := gc.clients[(user+pages)%3].Do(ctx, append(args, cursorArgs(cur)...)...).Slice()
					if err != nil {
						t.Fatalf("user %d page %d: %v", user, pages, err)
					}
					w, err := gc.ref.Do(ctx, append(args, cursorArgs(rcur)...)...).Slice()
					if err != nil {
						t.Fatal(err)
					}
					got, want = append(got, g[1].([]any)...), append(want, w[1].([]any)...)
					if (g[0] == nil) != (w[0] == nil) {
						t.Fatalf("user %d %s page %d: gathered next %v, reference next %v", user, biz, pages, g[0], w[0])
					}
					if g[0] == nil {
						break
					}
					cur, rcur = g[0], w[0]
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("user %d %s by %d: gathered %v, reference %v", user, biz, limit, got, want)
				}
			}
		}
	}
	mrec := []any{"LIKE.MRECEIVED"}
	for o := range owners + 2 {
		mrec = append(mrec, o)
		gc.same(t, o, "LIKE.RECEIVED", o)
	}
	gc.same(t, 0, mrec...)
}

func cursorArgs(cur any) []any {
	if cur == nil {
		return nil
	}
	return []any{"CURSOR", cur}
}

// TestGatherFailures: a shard that does not answer fails the read with
// TRYAGAIN, a shard's refusal is the reply, and bad cursors are refused
// by name.
func TestGatherFailures(t *testing.T) {
	day := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	gc := newGathering(t, 3, func() time.Time { return day })
	ctx := context.Background()
	for _, c := range gc.clients {
		if err := c.Do(ctx, "LIKE.BUSINESS", "ADD", "videos").Err(); err != nil {
			t.Fatal(err)
		}
	}
	for item := range 20 {
		for user := range 3 {
			if err := gc.owner(uint64(item)).Do(ctx, "LIKE.LIKE", "videos", item, user).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := gc.clients[0]
	wantErr := func(prefix string, args ...any) {
		t.Helper()
		err := c.Do(ctx, args...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), prefix) {
			t.Fatalf("%v: %v, want an error starting %q", args, err, prefix)
		}
	}
	wantErr("ERR likes: day board not kept", "LIKE.TOP", "videos", 3, "DAY", "2025-01-01")
	pg, err := c.Do(ctx, "LIKE.USERLIKES", "videos", 1, "LIMIT", 2).Slice()
	if err != nil || pg[0] == nil {
		t.Fatalf("first page: %v, %v", pg, err)
	}
	cur := pg[0].(string)
	wantErr("ERR likes: bad cursor", "LIKE.USERLIKES", "videos", 2, "LIMIT", 2, "CURSOR", cur)
	wantErr("ERR likes: bad cursor", "LIKE.USERLIKES", "videos", 1, "LIMIT", 2, "CURSOR", cur[:len(cur)-2]+"AA")
	// A single node's cursor is not a gathered list's.
	for _, args := range [][]any{{"LIKE.BUSINESS", "ADD", "videos"}, {"LIKE.LIKE", "videos", 1, 1}, {"LIKE.LIKE", "videos", 2, 1}} {
		if err := gc.ref.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	solo, err := gc.ref.Do(ctx, "LIKE.USERLIKES", "videos", 1, "LIMIT", 1).Slice()
	if err != nil || solo[0] == nil {
		t.Fatalf("reference page: %v, %v", solo, err)
	}
	wantErr("ERR likes: bad cursor", "LIKE.USERLIKES", "videos", 1, "LIMIT", 2, "CURSOR", solo[0])
	// A part answers its shard's share only, in its flat shape.
	part, err := gc.clients[0].Do(ctx, "LIKE.PART", "USERLIKES", "videos", 1, "LIMIT", 1).Slice()
	if err != nil || len(part) != 2 || part[0] != int64(1) || len(part[1].([]any)) != 2 {
		t.Fatalf("part: %v, %v", part, err)
	}
	// The same cursor under a map of other shards.
	two := []TopologyShard{gc.shards[0], gc.shards[1]}
	gc.set(t, 2, two, even(2))
	wantErr("ERR likes: cursor made for another set of shards", "LIKE.USERLIKES", "videos", 1, "LIMIT", 2, "CURSOR", cur)
	gc.set(t, 3, gc.shards, even(3))
	if err := c.Do(ctx, "LIKE.USERLIKES", "videos", 1, "LIMIT", 2, "CURSOR", cur).Err(); err != nil {
		t.Fatalf("the cursor under its own shards again: %v", err)
	}
	// A shard nobody answers for: TRYAGAIN, whichever read.
	dead := append([]TopologyShard(nil), gc.shards...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	ln.Close()
	dead[2] = TopologyShard{ID: 3, Leader: 99, Nodes: []TopologyNode{{ID: 99, Addr: deadAddr}}}
	gc.set(t, 4, dead, even(3))
	for _, args := range [][]any{
		{"LIKE.TOP", "videos", 3}, {"LIKE.RANK", "videos", 1}, {"LIKE.MRANK", "videos", 1, 2},
		{"LIKE.USERLIKES", "videos", 1}, {"LIKE.RECEIVED", 1}, {"LIKE.MRECEIVED", 1, 2},
	} {
		wantErr("TRYAGAIN shard 3 did not answer", args...)
	}
	gc.set(t, 5, gc.shards, even(3))
	if err := c.Do(ctx, "LIKE.TOP", "videos", 3).Err(); err != nil {
		t.Fatalf("after the shard is back: %v", err)
	}
}

// fakeCaller replies err to every call.
type fakeCaller struct{ err error }

func (f fakeCaller) CallShard(context.Context, *TopologyShard, []string) (any, error) {
	return nil, f.err
}

// TestGatherClassify: how a part's failure becomes the client's reply.
func TestGatherClassify(t *testing.T) {
	sh := &TopologyShard{ID: 4, Leader: 1, Nodes: []TopologyNode{{ID: 1, Addr: "127.0.0.1:7000"}}}
	for _, tc := range []struct {
		err   error
		reply string
		retry bool
	}{
		{&ShardReplyError{Shard: 4, Msg: "MOVED 0 127.0.0.1:7001"}, "TRYAGAIN shard 4 is not ready", true},
		{&ShardReplyError{Shard: 4, Msg: "CLUSTERDOWN no leader"}, "TRYAGAIN shard 4 is not ready", true},
		{&ShardReplyError{Shard: 4, Msg: "TRYAGAIN barrier"}, "TRYAGAIN shard 4 is not ready", true},
		{&ShardReplyError{Shard: 4, Msg: "ERR likes: day board not kept: 2020-01-01"}, "ERR likes: day board not kept", false},
		{context.DeadlineExceeded, "TRYAGAIN shard 4 did not answer", true},
		{errors.New("connection refused\r\nx"), "TRYAGAIN shard 4 did not answer: connection refused  x", true},
	} {
		g := &gatherer{caller: fakeCaller{tc.err}, ids: []uint32{4}, shards: []*TopologyShard{sh},
			timeout: func(ctx context.Context) (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }}
		_, err := g.Call(context.Background(), [][]string{{"LIKE.PART", "RECEIVED", "1"}})
		var ge *gatherError
		if !errors.As(err, &ge) || !strings.HasPrefix(ge.reply, tc.reply) || errors.Is(err, ErrTryAgain) != tc.retry || !errors.Is(err, ErrGather) {
			t.Errorf("%v: %v, want a reply starting %q (retry %v)", tc.err, err, tc.reply, tc.retry)
		}
	}
	g := &gatherer{caller: fakeCaller{}, ids: []uint32{4}, shards: []*TopologyShard{{ID: 4}},
		timeout: func(ctx context.Context) (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }}
	if _, err := g.Call(context.Background(), [][]string{{"X"}}); err == nil || !strings.HasPrefix(err.Error(), "CLUSTERDOWN") {
		t.Errorf("a shard without replicas: %v", err)
	}
	if _, err := g.Call(context.Background(), nil); !errors.Is(err, ErrGather) {
		t.Errorf("calls for no shard: %v", err)
	}
}
