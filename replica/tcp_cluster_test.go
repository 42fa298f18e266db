package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/tallydb/tally/store"
)

// The loopback cluster: real Nodes on real stores in t.TempDir(), over
// TCPTransport, with CheckpointSnapshotter snapshots.

type tcpNode struct {
	id    uint64
	dir   string
	addr  string
	db    atomic.Pointer[store.DB]
	node  atomic.Pointer[Node]
	tr    *TCPTransport
	snap  *CheckpointSnapshotter
	alive bool
}

type tcpCluster struct {
	t        testing.TB
	sync     bool // Config.Sync of the nodes
	nodes    map[uint64]*tcpNode
	peers    []Peer
	maxLog   uint64
	acked    int64 // writes acknowledged
	attempts int64 // writes tried
}

// testLogger logs to stderr when TALLY_TEST_LOG is set.
func testLogger(id uint64) *slog.Logger {
	if os.Getenv("TALLY_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", id)
}

func tcpStoreOptions() *store.Options {
	return &store.Options{DisableBackground: true, CacheSize: 1 << 20, MemTableSize: 1 << 20, Families: Families()}
}

// testKey is the counter row every write increments.
const testKey = 7

func (c *tcpCluster) openStore(n *tcpNode) *store.DB {
	c.t.Helper()
	db, err := store.Open(n.dir, tcpStoreOptions())
	if err != nil {
		c.t.Fatal(err)
	}
	if err := db.CreateCounter("c", store.CounterOptions{}); err != nil && !errors.Is(err, store.ErrExists) {
		c.t.Fatal(err)
	}
	if err := db.AddColumn("c", "v", store.ColumnOptions{MaxBits: 64}); err != nil && !errors.Is(err, store.ErrExists) {
		c.t.Fatal(err)
	}
	return db
}

type startOpts struct {
	join      bool
	rate      int64
	chunkSize int
}

// start starts node id (its store, transport, snapshotter and Node).
func (c *tcpCluster) start(id uint64, o startOpts) *tcpNode {
	c.t.Helper()
	n := c.nodes[id]
	if n == nil {
		n = &tcpNode{id: id, dir: filepath.Join(c.t.TempDir(), fmt.Sprint(id)), addr: "127.0.0.1:0"}
		c.nodes[id] = n
	}
	db := c.openStore(n)
	n.db.Store(db)
	tr, err := NewTCPTransport(TCPConfig{
		ID: id, Listen: n.addr, Secret: testSecret, Peers: c.peers,
		Handler: func(m *pb.Message) {
			if nd := n.node.Load(); nd != nil {
				_ = nd.Step(context.Background(), m)
			}
		},
		Unreachable: func(to uint64) {
			if nd := n.node.Load(); nd != nil {
				nd.ReportUnreachable(to)
			}
		},
		SnapshotStatus: func(to uint64, ok bool) {
			if nd := n.node.Load(); nd != nil {
				nd.ReportSnapshot(to, ok)
			}
		},
		SnapshotRate: o.rate, Logger: testLogger(id),
		DialTimeout: 2 * time.Second,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	n.tr, n.addr = tr, tr.Addr()
	snap, err := NewCheckpointSnapshotter(CheckpointConfig{
		ID: id, Dir: n.dir, DB: db, Transport: tr, ChunkSize: o.chunkSize, Logger: testLogger(id),
		Reopen: func(dir string) (*store.DB, error) {
			if err := n.db.Load().Close(); err != nil {
				return nil, err
			}
			if err := store.InstallStaged(dir); err != nil {
				return nil, err
			}
			db := c.openStore(n)
			n.db.Store(db)
			return db, nil
		},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	n.snap = snap
	cfg := Config{
		ID: id, DB: db, Transport: tr, Snapshots: snap, Join: o.join,
		TickInterval: 10 * time.Millisecond, MaxLogEntries: c.maxLog, Logger: testLogger(id), Sync: c.sync,
		Apply: func(_ uint64, data []byte) ([]byte, error) {
			cnt, err := n.db.Load().Counter("c")
			if err != nil {
				return nil, nil
			}
			v, _ := cnt.Incr(binary.BigEndian.Uint64(data), "v", 1)
			return binary.BigEndian.AppendUint64(nil, v), nil
		},
	}
	if !o.join {
		cfg.Peers = c.peers
	}
	nd, err := Start(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	n.node.Store(nd)
	n.alive = true
	tr.Start()
	return n
}

// stop kills node id: its Node (which closes the transport), then its
// store.
func (c *tcpCluster) stop(id uint64) {
	n := c.nodes[id]
	if !n.alive {
		return
	}
	n.alive = false
	if err := n.node.Load().Stop(); err != nil {
		c.t.Errorf("stop %d: %v", id, err)
	}
	if err := n.db.Load().Close(); err != nil {
		c.t.Errorf("close store %d: %v", id, err)
	}
}

func (c *tcpCluster) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c.t.Cleanup(cancel)
	return ctx
}

func (c *tcpCluster) leader() *tcpNode {
	c.t.Helper()
	var l *tcpNode
	eventually(c.t, "a leader", func() bool {
		for _, n := range c.nodes {
			if n.alive && n.node.Load().Status().Role == "leader" {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

// write makes count acknowledged writes through the leader.
func (c *tcpCluster) write(count int) {
	c.t.Helper()
	ctx := c.ctx()
	for range count {
		for {
			l := c.leader()
			c.attempts++
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, err := l.node.Load().Propose(cctx, binary.BigEndian.AppendUint64(nil, testKey))
			cancel()
			if err == nil {
				c.acked++
				break
			}
			if ctx.Err() != nil {
				c.t.Fatalf("writes stuck: %v", err)
			}
			if errors.Is(err, ErrProposalDropped) || errors.Is(err, ErrNotLeader) {
				c.attempts-- // certainly not applied
			}
		}
	}
}

// value reads node n's counter after a ReadIndex.
func (c *tcpCluster) value(n *tcpNode) uint64 {
	c.t.Helper()
	if err := n.node.Load().ReadIndex(c.ctx()); err != nil {
		c.t.Fatalf("read index on %d: %v", n.id, err)
	}
	cnt, err := n.db.Load().Counter("c")
	if err != nil {
		c.t.Fatal(err)
	}
	v, err := cnt.GetColumn(testKey, "v")
	if err != nil {
		c.t.Fatal(err)
	}
	return v
}

// converged waits until every live node holds the same value, within what
// was acknowledged and tried.
func (c *tcpCluster) converged() uint64 {
	c.t.Helper()
	var v uint64
	eventually(c.t, "replicas converge", func() bool {
		var vals []uint64
		for _, n := range c.nodes {
			if n.alive {
				vals = append(vals, c.value(n))
			}
		}
		for _, x := range vals[1:] {
			if x != vals[0] {
				return false
			}
		}
		v = vals[0]
		return true
	})
	if int64(v) < c.acked || int64(v) > c.attempts {
		c.t.Fatalf("value %d, acknowledged %d, tried %d", v, c.acked, c.attempts)
	}
	return v
}

func newTCPCluster(t testing.TB, maxLog uint64) *tcpCluster {
	return newTCPClusterSync(t, maxLog, false)
}

// newTCPClusterSync starts three replicas, fsyncing their logs if sync.
func newTCPClusterSync(t testing.TB, maxLog uint64, sync bool) *tcpCluster {
	c := &tcpCluster{t: t, nodes: map[uint64]*tcpNode{}, maxLog: maxLog, sync: sync}
	// Listeners first, so every replica knows every address.
	for id := uint64(1); id <= 3; id++ {
		ln, err := NewTCPTransport(TCPConfig{ID: id, Listen: "127.0.0.1:0", Secret: testSecret, Handler: func(*pb.Message) {}})
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr()
		ln.Close()
		c.nodes[id] = &tcpNode{id: id, dir: filepath.Join(t.TempDir(), fmt.Sprint(id)), addr: addr}
		c.peers = append(c.peers, Peer{ID: id, RaftAddr: addr, ClientAddr: fmt.Sprintf("client-%d", id)})
	}
	for id := uint64(1); id <= 3; id++ {
		c.start(id, startOpts{})
	}
	t.Cleanup(func() {
		for id := range c.nodes {
			c.stop(id)
		}
	})
	return c
}

// TestTCPCluster: three replicas over TCP on real stores: writes, the
// leader killed and a new one elected, writes go on, the old leader
// restarted catches up; then a learner added after the log was truncated
// gets a streamed checkpoint, is promoted; and a learner killed in the
// middle of its fetch resumes it after a restart.
func TestTCPCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real replicas")
	}
	writes := 150
	if os.Getenv("TALLY_REPLICA_HEAVY") != "" {
		writes = 3000
	}
	c := newTCPCluster(t, 32)
	c.write(writes / 3)
	c.converged()

	// Kill the leader.
	old := c.leader()
	c.stop(old.id)
	c.write(writes / 3)
	if l := c.leader(); l.id == old.id {
		t.Fatal("dead leader still leader")
	}
	// It comes back and catches up.
	c.start(old.id, startOpts{})
	c.write(writes / 3)
	c.converged()

	// A learner added after many writes: the log it needs is truncated,
	// so it gets a checkpoint.
	l := c.leader()
	if st := l.node.Load().Status(); st.LogFirst <= 1 {
		t.Fatalf("log not truncated: first %d", st.LogFirst)
	}
	n4 := c.start(4, startOpts{join: true})
	p4 := Peer{ID: 4, RaftAddr: n4.addr, ClientAddr: "client-4"}
	if err := l.node.Load().AddLearner(c.ctx(), p4); err != nil {
		t.Fatal(err)
	}
	eventually(t, "learner 4 installs a snapshot", func() bool { return n4.snap.Stats().Installed == 1 })
	st4 := n4.snap.Stats()
	if st4.FilesFetched == 0 || st4.BytesFetched == 0 {
		t.Fatalf("install without fetching: %+v", st4)
	}
	if l.snap.Stats().Created == 0 || l.snap.Stats().BytesServed < st4.BytesFetched {
		t.Fatalf("leader %+v, learner %+v", l.snap.Stats(), st4)
	}
	c.write(10)
	v := c.converged()
	if got := c.value(n4); got != v {
		t.Fatalf("learner has %d, group %d", got, v)
	}
	eventually(t, "learner 4 promoted", func() bool {
		err := c.leader().node.Load().Promote(c.ctx(), 4)
		return err == nil
	})
	c.write(10)
	c.converged()

	// Learner 5 fetches slowly and is killed during the fetch.
	l = c.leader()
	n5 := c.start(5, startOpts{join: true, rate: 8 << 10, chunkSize: 4 << 10})
	if err := l.node.Load().AddLearner(c.ctx(), Peer{ID: 5, RaftAddr: n5.addr, ClientAddr: "client-5"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "learner 5 fetching", func() bool { return n5.snap.Stats().BytesFetched >= 16<<10 })
	c.stop(5)
	first := n5.snap.Stats()
	if first.Installed != 0 {
		t.Fatalf("learner 5 finished before it was killed: %+v", first)
	}
	n5 = c.start(5, startOpts{join: true})
	eventually(t, "learner 5 installs after the restart", func() bool { return n5.snap.Stats().Installed == 1 })
	second := n5.snap.Stats()
	// Every byte of the checkpoint was either kept from the first fetch
	// or fetched by the second.
	total := second.BytesResumed + second.BytesFetched
	if second.BytesResumed == 0 || second.BytesResumed > first.BytesFetched || second.BytesFetched >= total {
		t.Fatalf("resume: first %+v, second %+v", first, second)
	}
	t.Logf("learner 5: fetched %d before the kill, %d after (kept %d)", first.BytesFetched, second.BytesFetched, second.BytesResumed)
	c.write(10)
	c.converged()
	for _, n := range c.nodes {
		if err := n.db.Load().Check(); err != nil {
			t.Errorf("check %d: %v", n.id, err)
		}
	}
}

// BenchmarkTCPGroupPropose drives three replicas over TCP on loopback, on
// real stores with fsynced logs (durability sync), with many concurrent
// proposals through the leader, as a server's connections make them: the
// leader's and the group's cost per replicated write. It reports the
// process's CPU time (all three replicas) per proposal as cpu-ns/op.
// Profile the replica path with -cpuprofile.
func BenchmarkTCPGroupPropose(b *testing.B) {
	c := newTCPClusterSync(b, 10000, true)
	l := c.leader().node.Load()
	ctx := context.Background()
	if _, err := l.Propose(ctx, binary.BigEndian.AppendUint64(nil, 0)); err != nil {
		b.Fatal(err)
	}
	var key atomic.Uint64
	cpu0 := processCPU(b)
	b.ResetTimer()
	b.SetParallelism(32) // 64 callers on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := key.Add(1) % 1024
			if _, err := l.Propose(ctx, binary.BigEndian.AppendUint64(nil, k)); err != nil {
				b.Error(err) // no fault is injected: every proposal applies
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU returns the process's user and system CPU time in ns.
func processCPU(tb testing.TB) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
