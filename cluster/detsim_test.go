package cluster

// TestDeterministicShards: issue 23's deterministic simulation of a
// sharded cluster. One seeded loop, with no goroutines of the test's own,
// drives three data shards of three replicas each (plus a spare node per
// shard for a move) and the metadata group of three:
//
//   - every replica is a replica.Stepped (the replica's core without its
//     loop goroutine) on a crash-simulating memory filesystem; the loop
//     ticks it, delivers its messages through one faulty in-memory
//     network per group (memtransport: random order, drops, duplicates,
//     partitions, down nodes) and runs its Ready handling;
//   - a data replica is a cluster Node built by the production wiring
//     (newNode, open, registerSharding, apply/applyRun, the timeline's
//     remote, the keyless broadcast), only without Start's goroutines;
//     its store runs no background work and no job workers: the loop runs
//     each replica's queued jobs (fan-outs, backfills) at random steps;
//   - a metadata replica is meta.Machine (the group's state machine) under
//     a Stepped replica; the loop publishes shard leaders and replica
//     lists to it as the shard loop does, and each data replica's
//     topology follows a random metadata replica's map;
//   - each data replica runs the production xshard.Sender, one Pass at a
//     time, as a coroutine (iter.Pull): its Client and Proposer yield each
//     call to the loop, which proposes it on the target (or answers MOVED,
//     CLUSTERDOWN, a refused connection, or, after the proposal, a lost
//     reply) and resumes the pass once the proposal settled. Only one of
//     the loop and a pass runs at a time, so the run stays deterministic;
//   - faults: leader kills and crashes of random replicas (losing a random
//     share of unsynced writes), restarts, elections (called by the loop:
//     the election timeout is out of the ticks' reach, as in the replica
//     package's simulation), leadership transfers, partitions, and one
//     shard move per run (add a learner on the spare node, promote it,
//     remove an old voter, publish the new replica list).
//
// The workload goes in as client writes do: each command is routed by
// its key's slot in the map, encoded with server.EncodeCommand and
// proposed on the shard's leader, and the reply is what server.Apply
// produced there (the RESP connection layer above it, with its MOVED
// routing, is TestShardedCluster's). Posts (fanned out across shards),
// follows and unfollows, likes and unlikes, TL.ACTIVE and UNREAD.FEEDRESET
// marks; an acknowledged write goes into the model, a proposal whose fate
// is unknown is proposed again (every command here is idempotent) until it
// is acknowledged, one in flight per key.
//
// After healing and quiescence: every replica of a shard holds the same
// logical state (graph, posts, counts, inbox sizes, likes, the streams'
// heads); follow edges agree in both directions with the model; counts
// equal set sizes; every user's home holds each followed post exactly
// once (active users' inboxes first, which are pushed to); like counts
// and likers equal the model; after a FEEDRESET of everyone and a round
// of posts, feed unread equals the pull-everything model. Check runs on
// every replica every checkEvery steps and at the end (every step would
// cost about 15 full store checks per step: minutes per seed).
//
// Same seed, same run: the trace hash (every action, every reply) of a
// seed run twice is compared. Pebble's own goroutines are outside the
// seed, but every commit here is synced (SyncAlways), so a crash loses the
// same thing whatever they did.
//
// The test lives in package cluster because it reuses the Node's
// unexported wiring; a package of its own would need it exported.
//
// TALLY_DETSIM_SEEDS=N runs N seeds (default 12), TALLY_DETSIM_SEED=S
// starts at seed S, TALLY_DETSIM_STEPS=N sets the steps per seed,
// TALLY_DETSIM_TRACE=1 logs the trace.
//
// TALLY_DETSIM_LOSSY=1 makes crashes lossier: by default a data
// replica's crash first syncs its store's WAL (a process kill), so it
// loses only its unsynced Raft log tail; lossy, the store also loses a
// random share of its unsynced apply commits (store/apply.go rule 3
// allows it) and the replica re-applies the entry at its AppliedIndex.
// That found a rule-2 break: timeline.RemoteFollower returned without a
// commit when the edge was in the set already, so a re-applied TALLY.XRECV
// of several TL.XFOLLOWER messages made fewer commits than the first
// apply, and a later message's commit took a surviving number and was
// skipped (seed 16 at the time; timeline.TestReappliedRemoteFollowers).
// It stays opt-in: what Pebble's own goroutines wrote is outside the
// seed, and with unsynced store commits it could change what a crash
// keeps, hence the trace. Lossy seed 107 found the break once more: a
// re-applied TALLY.XRECV's TL.XPUBLISH found its post published and
// committed nothing, so the next message, TL.XFOLLOWER 4 7, took its
// number and was skipped on shard 3's restarted leader. Each nested
// message is now numbered as a command of its own
// (server.Conn.NestCommands, server.TestNestedReapplyNumbersMessages);
// lossy seeds 0-799 pass (2026-11-28).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"iter"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/replica"
	"github.com/tallydb/tally/replica/memtransport"
	"github.com/tallydb/tally/server"
	"github.com/tallydb/tally/shard"
	"github.com/tallydb/tally/shard/meta"
	"github.com/tallydb/tally/store"
	"github.com/tallydb/tally/timeline"
	"github.com/tallydb/tally/xshard"
)

const (
	dsShards   = 3
	dsUsers    = 18
	dsItems    = 10
	checkEvery = 100
	metaGroup  = 0 // the metadata group's network
)

type dsNode struct {
	id    uint64
	group uint32 // 0: the metadata group
	addr  string
	fs    *vfs.MemFS
	rep   *replica.Stepped // nil while down
	n     *Node            // a data replica, while up
	mdb   *store.DB        // a metadata replica, while up
	mach  *meta.Machine
	boot  bool // has a store
	join  bool // added by a move
	gone  bool // removed by a move
	snd   *dsSender
	epoch uint64 // highest map epoch seen on this metadata replica since it started
	// xfer counts the ticks this leader's leadership transfer has been
	// in progress (see tick).
	xfer int
}

type dsOp struct {
	verb    string
	key     string // one op in flight per key
	slotKey string
	argv    [][]byte
	u, a    int // user, followee or author
	item    int
	post    int
	on      bool
	node    uint64
	pend    *replica.Pending
	unknown bool // an earlier attempt's fate is unknown
}

type dsMetaOp struct {
	shard uint32
	data  []byte
	node  uint64
	pend  *replica.Pending
}

type dsModel struct {
	follow map[[2]int]bool
	posts  map[int][]int
	like   map[[2]int]bool // (item, user)
	active map[int]bool
}

type dsim struct {
	t       *testing.T
	verbose bool // TALLY_DETSIM_TRACE=1: log the trace
	// lossy (TALLY_DETSIM_LOSSY=1): a data replica's crash loses a random
	// share of its store's unsynced apply commits, not only its log's
	// unsynced tail (see TestDeterministicShards).
	lossy  bool
	rng    *rand.Rand
	now    time.Time
	steps  int
	trace  hash.Hash64
	nets   map[uint32]*memtransport.Network
	nodes  map[uint64]*dsNode
	ids    []uint64
	byAddr map[string]*dsNode
	voters map[uint32][]replica.Peer // each group's first voters

	leaders map[[2]uint64]uint64 // (group, term) -> leader
	ops     []*dsOp
	retry   []*dsOp
	busy    map[string]bool
	metaOps map[uint32]*dsMetaOp
	metaSeq uint64
	m       dsModel
	post    int

	move struct {
		shard         uint32
		from, to      uint64
		next          int // step of the next attempt
		done, started bool
		err           error // the last refused step, for a failure message
	}

	stats struct {
		acked, dropped, unknown, crashes, kills, elections, transfers, partitions, passes, calls, lost, jobs, metaOps int
	}
}

func dsAddr(id uint64) string     { return fmt.Sprintf("10.0.%d.%d:6379", id/256, id%256) }
func dsRaftAddr(id uint64) string { return fmt.Sprintf("mem-%d:1", id) }

func newDsim(t *testing.T, seed uint64) *dsim {
	s := &dsim{t: t, rng: rand.New(rand.NewPCG(seed, 23)), now: time.UnixMilli(1_750_000_000_000),
		trace: fnv.New64a(), nets: map[uint32]*memtransport.Network{}, nodes: map[uint64]*dsNode{},
		byAddr: map[string]*dsNode{}, voters: map[uint32][]replica.Peer{}, leaders: map[[2]uint64]uint64{},
		busy: map[string]bool{}, metaOps: map[uint32]*dsMetaOp{}, post: 1000,
		verbose: os.Getenv("TALLY_DETSIM_TRACE") == "1", lossy: os.Getenv("TALLY_DETSIM_LOSSY") == "1",
		m: dsModel{follow: map[[2]int]bool{}, posts: map[int][]int{}, like: map[[2]int]bool{}, active: map[int]bool{}}}
	add := func(id uint64, group uint32, voter bool) {
		d := &dsNode{id: id, group: group, addr: dsAddr(id), fs: vfs.NewCrashableMem()}
		s.nodes[id] = d
		s.ids = append(s.ids, id)
		s.byAddr[d.addr] = d
		if voter {
			s.voters[group] = append(s.voters[group], replica.Peer{ID: id, RaftAddr: dsRaftAddr(id), ClientAddr: d.addr})
		}
	}
	s.nets[metaGroup] = memtransport.New()
	for i := uint64(1); i <= 3; i++ {
		add(i, metaGroup, true)
	}
	for sh := uint32(1); sh <= dsShards; sh++ {
		s.nets[sh] = memtransport.New()
		for i := uint64(1); i <= 4; i++ {
			add(uint64(sh)*10+i, sh, i <= 3)
		}
	}
	slices.Sort(s.ids)
	for _, id := range s.ids {
		if d := s.nodes[id]; d.group == metaGroup {
			s.startMeta(d)
		}
	}
	s.processAll() // the bootstrap configuration applies before a campaign
	s.elect(metaGroup, 1)
	s.settle(20)
	// The map: every shard's first voters, the slots split evenly.
	var shards []shard.Shard
	for sh := uint32(1); sh <= dsShards; sh++ {
		var rs []shard.Replica
		for _, p := range s.voters[sh] {
			rs = append(rs, shard.Replica{ID: p.ID, RaftAddr: p.RaftAddr, ClientAddr: p.ClientAddr})
		}
		shards = append(shards, shard.Shard{ID: sh, Replicas: rs})
	}
	s.proposeMeta(0, shard.Create(shard.Even(shards)))
	for range 50 {
		if s.latestMap() != nil && len(s.metaOps) == 0 {
			break
		}
		s.settle(1)
	}
	if s.latestMap() == nil {
		for _, o := range s.metaOps {
			if o.pend != nil {
				r, err := o.pend.Result()
				t.Logf("meta op on %d: done %v %q %v", o.node, o.pend.Done(), r, err)
			}
		}
		t.Fatalf("no map after creating it: %s", s.describe())
	}
	for _, id := range s.ids {
		if d := s.nodes[id]; d.group != metaGroup && id%10 != 4 {
			s.startData(d)
		}
	}
	s.processAll()
	for sh := uint32(1); sh <= dsShards; sh++ {
		s.elect(sh, uint64(sh)*10+1)
	}
	s.settle(20)
	// A keyless write: broadcast to the other shards by the streams.
	s.submit(&dsOp{verb: "LIKE.BUSINESS", key: "schema", slotKey: "x", argv: argv("LIKE.BUSINESS", "ADD", "video")})
	for i := 0; ; i++ {
		s.settle(1)
		have := 0
		for sh := uint32(1); sh <= dsShards; sh++ {
			if l := s.leader(sh); l != nil && slices.Contains(l.n.DB().Likes().Businesses(), "video") {
				have++
			}
		}
		if have == dsShards && len(s.ops) == 0 {
			break
		}
		if i == 500 {
			t.Fatalf("the schema did not reach every shard (%d of %d)", have, dsShards)
		}
	}
	// The move: a random shard's spare node replaces a non-leader voter.
	s.move.shard = uint32(1 + s.rng.IntN(dsShards))
	s.move.to = uint64(s.move.shard)*10 + 4
	s.move.next = 200 + s.rng.IntN(400)
	return s
}

func argv(args ...any) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = []byte(fmt.Sprint(a))
	}
	return out
}

// note adds an event to the trace.
func (s *dsim) note(format string, args ...any) {
	fmt.Fprintf(s.trace, format, args...)
	s.trace.Write([]byte{'\n'})
	if s.verbose {
		s.t.Logf(format, args...)
	}
}

func (s *dsim) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("step %d: "+format, append([]any{s.steps}, args...)...)
}

// latestMap returns the newest map of any up metadata replica.
func (s *dsim) latestMap() *shard.Map {
	var best *shard.Map
	for _, id := range s.ids {
		d := s.nodes[id]
		if d.group == metaGroup && d.mach != nil {
			if m := d.mach.Map(); m != nil && (best == nil || m.Epoch > best.Epoch) {
				best = m
			}
		}
	}
	return best
}

func (s *dsim) startMeta(d *dsNode) {
	db, err := store.Open("m", &store.Options{FS: d.fs, DisableBackground: true, CacheSize: 1 << 20, MemTableSize: 1 << 20,
		Families: append(replica.Families(), meta.Families()...)})
	if err != nil {
		s.fatalf("metadata replica %d: open: %v", d.id, err)
	}
	mach, err := meta.OpenMachine(db)
	if err != nil {
		s.fatalf("metadata replica %d: %v", d.id, err)
	}
	rep, err := replica.NewStepped(replica.Config{
		ID: d.id, DB: db, Peers: s.voters[metaGroup], Transport: s.nets[metaGroup].Endpoint(d.id),
		Apply: mach.Apply, Snapshots: mach.Snapshots(), Now: func() time.Time { return s.now },
		Sync: true, TickInterval: time.Millisecond, ElectionTicks: 1 << 30, HeartbeatTicks: 1,
		// Short: restarted replicas catch up by the group's snapshots.
		MaxLogEntries: 24, ForwardProposals: true,
	})
	if err != nil {
		s.fatalf("metadata replica %d: start: %v", d.id, err)
	}
	d.mdb, d.mach, d.rep, d.boot = db, mach, rep, true
	// A restarted replica may hold an older map than before its crash
	// (its state's last commits were not synced; the synced log applies
	// them again): its epoch only never goes back while it runs.
	d.epoch = 0
	s.nets[metaGroup].SetDown(d.id, false)
}

// dsRepl is a data replica's server.Replication: only Status is used
// (Apply never proposes).
type dsRepl struct{ d *dsNode }

func (r dsRepl) Propose(context.Context, []byte) ([]byte, error) {
	return nil, errors.New("dsim: no client connections")
}
func (r dsRepl) ReadIndex(context.Context) error { return errors.New("dsim: no client connections") }
func (r dsRepl) Status() server.ReplicationStatus {
	if r.d.rep == nil {
		return server.ReplicationStatus{ID: r.d.id, Role: server.RoleFollower}
	}
	st := r.d.rep.Status()
	return server.ReplicationStatus{Role: roleOf(st.Role), ID: st.ID, LeaderID: st.Leader.ID, LeaderAddr: st.Leader.ClientAddr,
		Term: st.Term, Commit: st.Commit, Applied: st.Applied}
}

func (s *dsim) startData(d *dsNode) {
	n := newNode(Config{ID: d.id, ClientAddr: d.addr, Durability: store.SyncAlways,
		Store: &store.Options{FS: d.fs, DisableBackground: true, JobWorkers: -1, JobBytesPerSec: -1,
			CacheSize: 1 << 20, MemTableSize: 1 << 20},
		Timeline: &timeline.Options{ExpireInterval: -1},
		Sharding: &Sharding{Shard: d.group}})
	n.topo = &topology{self: d.group}
	n.topo.update(s.latestMap())
	n.co.Topology = n.topo
	n.co.Broadcast = n.broadcast
	if err := n.open("n"); err != nil {
		s.fatalf("replica %d: open: %v", d.id, err)
	}
	if err := n.Server().SetReplication(dsRepl{d}, n.co); err != nil {
		s.fatalf("replica %d: %v", d.id, err)
	}
	cfg := replica.Config{
		ID: d.id, DB: n.DB().Store(), Join: d.join, Transport: s.nets[d.group].Endpoint(d.id),
		Apply: n.apply, ApplyRun: n.applyRun, Clock: n.clock, Now: func() time.Time { return s.now },
		Sync: true, TickInterval: time.Millisecond, ElectionTicks: 1 << 30, HeartbeatTicks: 1,
		// No snapshots: the cluster's checkpoint snapshotter fetches over
		// TCP; the log reaches every restarted and added replica.
		MaxLogEntries: 1 << 40,
	}
	if !d.join {
		cfg.Peers = s.voters[d.group]
	}
	rep, err := replica.NewStepped(cfg)
	if err != nil {
		s.fatalf("replica %d: start: %v", d.id, err)
	}
	d.n, d.rep, d.boot = n, rep, true
	d.snd = s.newSender(d)
	s.nets[d.group].SetDown(d.id, false)
}

// crash stops node d as a power loss would: the filesystem keeps its
// synced writes and a random share of the rest.
func (s *dsim) crash(d *dsNode) {
	s.stats.crashes++
	s.note("crash %d", d.id)
	if d.snd != nil {
		d.snd.abort()
		d.snd.snd.Close()
		d.snd = nil
	}
	if d.n != nil && !s.lossy {
		// A process kill after the store's WAL reached the disk: the
		// store keeps every commit (see lossy).
		if err := d.n.DB().Store().SyncWAL(); err != nil {
			s.fatalf("replica %d: sync: %v", d.id, err)
		}
	}
	// The clone draws from a generator of its own: it visits the files in
	// map order, which would make the loop's draws differ between runs.
	crng := rand.New(rand.NewPCG(s.rng.Uint64(), 0))
	crashed := d.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: s.rng.IntN(101), RNG: crng})
	d.rep.Stop()
	d.rep = nil
	s.nets[d.group].SetDown(d.id, true)
	if d.n != nil {
		d.n.Server().Close()
		db := d.n.DB()
		for _, p := range db.Packages() {
			p.Close()
		}
		_ = db.Close() // writes to the discarded filesystem
		d.n = nil
	}
	if d.mdb != nil {
		_ = d.mdb.Close()
		d.mdb, d.mach = nil, nil
	}
	d.fs = crashed
}

func (s *dsim) restart(d *dsNode) {
	s.note("restart %d", d.id)
	if d.group == metaGroup {
		s.startMeta(d)
	} else {
		s.startData(d)
	}
}

// up returns the up replicas of group (every group: all), in id order.
func (s *dsim) up(group int) []*dsNode {
	var out []*dsNode
	for _, id := range s.ids {
		if d := s.nodes[id]; d.rep != nil && (group < 0 || d.group == uint32(group)) {
			out = append(out, d)
		}
	}
	return out
}

// leader returns group's leader of the highest term among the up
// replicas, or nil.
func (s *dsim) leader(group uint32) *dsNode {
	var best *dsNode
	var bestTerm uint64
	for _, d := range s.up(int(group)) {
		if d.rep.IsLeader() {
			if t := d.rep.Status().Term; best == nil || t > bestTerm {
				best, bestTerm = d, t
			}
		}
	}
	return best
}

// elect makes every up replica of group forget its leader and id (or a
// random up replica, if id is 0) campaign.
func (s *dsim) elect(group uint32, id uint64) {
	up := s.up(int(group))
	if len(up) == 0 {
		return
	}
	s.stats.elections++
	for _, d := range up {
		_ = d.rep.ForgetLeader()
	}
	c := up[s.rng.IntN(len(up))]
	if id != 0 && s.nodes[id].rep != nil {
		c = s.nodes[id]
	}
	s.note("elect %d in %d", c.id, group)
	_ = c.rep.Campaign()
}

// processAll runs every up replica's Ready handling, then settles what
// finished: client ops, metadata ops, the senders' calls.
func (s *dsim) processAll() {
	for _, d := range s.up(-1) {
		if err := d.rep.Process(); err != nil {
			s.fatalf("replica %d failed: %v", d.id, err)
		}
	}
	s.collect()
}

func (s *dsim) deliver(group uint32, i int) {
	m := s.nets[group].Take(i)
	if m == nil {
		return
	}
	if d := s.nodes[m.GetTo()]; d != nil && d.rep != nil && d.group == group {
		d.rep.Step(m)
	}
}

// dsTransferTicks is how long a leadership transfer may stall before its
// leader abandons it: raft's own limit is the election timeout, which the
// loop's ticks never reach (elections are the loop's), so without this a
// transfer whose MsgTimeoutNow was lost, or whose transferee was down
// when it came, made its leader drop every proposal for the rest of the
// run (seeds 29 and 46: a shard move that never finished; 57, 115, 123,
// 125, 147, 184: no quiescence).
const dsTransferTicks = 10

// tick ticks every up replica once, and makes a leader whose leadership
// transfer has stalled for dsTransferTicks ticks abandon it.
func (s *dsim) tick() {
	for _, d := range s.up(-1) {
		d.rep.Tick()
		if d.rep.Transferee() == 0 {
			d.xfer = 0
			continue
		}
		if d.xfer++; d.xfer > dsTransferTicks {
			s.note("abort transfer of %d to %d", d.id, d.rep.Transferee())
			d.rep.AbortTransfer()
			d.xfer = 0
		}
	}
}

// settle delivers every message in order, ticks once, runs every
// sender's pass and every replica's jobs, rounds times.
func (s *dsim) settle(rounds int) {
	for range rounds {
		for _, g := range s.groups() {
			for s.nets[g].Len() > 0 {
				s.deliver(g, 0)
				s.processAll()
			}
		}
		s.tick()
		s.now = s.now.Add(time.Millisecond)
		s.processAll()
		for _, d := range s.up(-1) {
			if d.snd != nil {
				d.snd.start()
			}
		}
		s.processAll()
		for _, d := range s.up(-1) {
			if d.n != nil {
				s.runJobs(d)
			}
		}
		s.publish()
		s.refreshTopology()
		s.check()
	}
}

func (s *dsim) groups() []uint32 {
	out := []uint32{metaGroup}
	for sh := uint32(1); sh <= dsShards; sh++ {
		out = append(out, sh)
	}
	return out
}

func (s *dsim) runJobs(d *dsNode) {
	s.stats.jobs++
	if err := d.n.DB().Store().RunJobs(context.Background(), nil); err != nil {
		s.fatalf("replica %d: jobs: %v", d.id, err)
	}
}

// refreshTopology points each up data replica's topology at the map of a
// random up metadata replica (a newer epoch replaces an older one only).
func (s *dsim) refreshTopology() {
	var metas []*dsNode
	for _, d := range s.up(metaGroup) {
		if d.mach.Map() != nil {
			metas = append(metas, d)
		}
	}
	if len(metas) == 0 {
		return
	}
	for _, d := range s.up(-1) {
		if d.n != nil {
			d.n.topo.update(metas[s.rng.IntN(len(metas))].mach.Map())
		}
	}
}

// proposeMeta proposes op to the metadata group's leader (retried with
// the same request id until it applied), one op in flight per shard.
func (s *dsim) proposeMeta(sh uint32, op shard.Op) {
	if s.metaOps[sh] != nil {
		return
	}
	s.metaSeq++
	s.metaOps[sh] = &dsMetaOp{shard: sh, data: meta.Command(1<<40, s.metaSeq, op)}
	s.stats.metaOps++
	s.note("meta op %v", op)
	s.submitMeta(s.metaOps[sh])
}

func (s *dsim) submitMeta(o *dsMetaOp) {
	l := s.leader(metaGroup)
	if l == nil {
		return
	}
	o.node, o.pend = l.id, l.rep.Propose(o.data)
}

// publish does the shard loop's work for every shard with a leader: the
// map's replica list and leader hint follow the group's.
func (s *dsim) publish() {
	m := s.latestMap()
	if m == nil {
		return
	}
	for sh := uint32(1); sh <= dsShards; sh++ {
		l := s.leader(sh)
		if l == nil || s.metaOps[sh] != nil {
			continue
		}
		st := l.rep.Status()
		ms := m.Shard(sh)
		if want := replicasOf(st.Members); !slices.Equal(want, ms.Replicas) && len(want) > 0 {
			s.proposeMeta(sh, shard.SetReplicas(sh, want))
		} else if ms.Leader != st.ID || ms.LeaderTerm < st.Term {
			s.proposeMeta(sh, shard.SetLeader(sh, st.ID, st.Term))
		}
	}
}

// submit proposes op on its shard's leader.
func (s *dsim) submit(op *dsOp) {
	s.busy[op.key] = true
	m := s.latestMap()
	sh := m.ShardOf(server.Slot([]byte(op.slotKey)))
	l := s.leader(sh.ID)
	if l == nil {
		s.retry = append(s.retry, op)
		return
	}
	data, err := server.EncodeCommand(op.argv)
	if err != nil {
		s.fatalf("encode %q: %v", op.argv, err)
	}
	op.node, op.pend = l.id, l.rep.Propose(data)
	s.ops = append(s.ops, op)
}

// collect settles finished client ops, metadata ops and senders' calls.
func (s *dsim) collect() {
	kept := s.ops[:0]
	for _, op := range s.ops {
		if !op.pend.Done() {
			kept = append(kept, op)
			continue
		}
		reply, err := op.pend.Result()
		switch {
		case err == nil && len(reply) > 0 && reply[0] == '-':
			s.fatalf("%q on %d: refused: %s", op.argv, op.node, strings.TrimSpace(string(reply)))
		case err == nil:
			s.stats.acked++
			s.note("ack %q = %q", op.argv, reply)
			s.ack(op)
			delete(s.busy, op.key)
		case !op.unknown && (errors.Is(err, replica.ErrProposalDropped) || errors.Is(err, replica.ErrNotLeader)):
			s.stats.dropped++
			s.note("dropped %q", op.argv)
			delete(s.busy, op.key)
		default: // unknown (or an unknown earlier attempt): propose again
			if !errors.Is(err, replica.ErrProposalDropped) && !errors.Is(err, replica.ErrNotLeader) {
				s.stats.unknown++
				op.unknown = true
			}
			s.note("retry %q", op.argv)
			s.retry = append(s.retry, op)
		}
	}
	s.ops = kept
	for _, sh := range slices.Sorted(mapKeys(s.metaOps)) {
		o := s.metaOps[sh]
		if o.pend == nil || !o.pend.Done() {
			continue
		}
		reply, err := o.pend.Result()
		if err != nil {
			o.pend = nil // proposed again by the next step
			continue
		}
		d := s.nodes[o.node]
		if d.mach == nil {
			o.pend = nil
			continue
		}
		m, err := d.mach.Reply(reply)
		switch {
		case err == nil:
			s.note("meta epoch %d", m.Epoch)
		case errors.Is(err, shard.ErrUnchanged), errors.Is(err, shard.ErrStaleTerm):
		default:
			s.fatalf("metadata op refused: %v", err)
		}
		delete(s.metaOps, sh)
	}
	for _, d := range s.up(-1) {
		if d.snd != nil {
			d.snd.poll()
		}
	}
}

func mapKeys[K comparable, V any](m map[K]V) iter.Seq[K] {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// ack records an acknowledged op in the model.
func (s *dsim) ack(op *dsOp) {
	switch op.verb {
	case "TL.FOLLOW", "TL.UNFOLLOW":
		s.m.follow[[2]int{op.u, op.a}] = op.on
	case "TL.POST":
		if !slices.Contains(s.m.posts[op.a], op.post) {
			s.m.posts[op.a] = append(s.m.posts[op.a], op.post)
		}
	case "LIKE.LIKE", "LIKE.UNLIKE":
		s.m.like[[2]int{op.item, op.u}] = op.on
	case "TL.ACTIVE":
		s.m.active[op.u] = true
	}
}

// workload issues one random client op whose key is free.
func (s *dsim) workload() {
	u, a := 1+s.rng.IntN(dsUsers), 1+s.rng.IntN(dsUsers-1)
	if a >= u {
		a++
	}
	var op *dsOp
	switch r := s.rng.IntN(100); {
	case r < 35:
		on := s.rng.IntN(3) > 0
		verb := map[bool]string{true: "TL.FOLLOW", false: "TL.UNFOLLOW"}[on]
		op = &dsOp{verb: verb, key: fmt.Sprint("f", u, ":", a), slotKey: fmt.Sprint(u), argv: argv(verb, u, a), u: u, a: a, on: on}
	case r < 65:
		s.post++
		op = &dsOp{verb: "TL.POST", key: fmt.Sprint("p", s.post), slotKey: fmt.Sprint(a), argv: argv("TL.POST", a, s.post), a: a, post: s.post}
	case r < 85:
		it := s.rng.IntN(dsItems)
		on := s.rng.IntN(3) > 0
		verb := map[bool]string{true: "LIKE.LIKE", false: "LIKE.UNLIKE"}[on]
		op = &dsOp{verb: verb, key: fmt.Sprint("l", it, ":", u), slotKey: fmt.Sprint(it), argv: argv(verb, "video", it, u), u: u, item: it, on: on}
	case r < 92:
		op = &dsOp{verb: "TL.ACTIVE", key: fmt.Sprint("a", u), slotKey: fmt.Sprint(u), argv: argv("TL.ACTIVE", u), u: u}
	default:
		op = &dsOp{verb: "UNREAD.FEEDRESET", key: fmt.Sprint("r", u), slotKey: fmt.Sprint(u), argv: argv("UNREAD.FEEDRESET", u), u: u}
	}
	if s.busy[op.key] {
		return
	}
	s.note("op %q", op.argv)
	s.submit(op)
}

// step does one random action, then lets every replica process.
func (s *dsim) step() {
	s.steps++
	r := s.rng.IntN(1000)
	s.note("step %d: %d", s.steps, r)
	g := s.groups()[s.rng.IntN(dsShards+1)]
	nw := s.nets[g]
	switch {
	case r < 300 && nw.Len() > 0: // deliver random messages (reorders)
		for k := s.rng.IntN(24); k >= 0 && nw.Len() > 0; k-- {
			s.deliver(g, s.rng.IntN(nw.Len()))
			s.processAll()
		}
	case r < 315 && nw.Len() > 0:
		nw.Drop(s.rng.IntN(nw.Len()))
	case r < 330 && nw.Len() > 0:
		nw.Duplicate(s.rng.IntN(nw.Len()))
	case r < 430:
		s.tick()
		s.now = s.now.Add(time.Duration(s.rng.IntN(20)) * time.Millisecond)
	case r < 620:
		s.workload()
	case r < 660 && len(s.retry) > 0:
		op := s.retry[0]
		s.retry = s.retry[1:]
		s.submit(op)
	case r < 740: // a sender's pass
		up := s.up(int(g))
		if d := pick(s.rng, up); d != nil && d.snd != nil {
			s.stats.passes++
			d.snd.start()
		}
	case r < 790: // a replica runs its queued jobs
		if d := pick(s.rng, s.up(int(g))); d != nil && d.n != nil {
			s.runJobs(d)
		}
	case r < 805: // an election
		s.elect(g, 0)
	case r < 815:
		if l := s.leader(g); l != nil && l.rep.TransferLeadership() {
			s.stats.transfers++
			s.note("transfer in %d", g)
		}
	case r < 823: // a leader dies
		if l := s.leader(g); l != nil && len(s.up(int(g))) == s.members(g) {
			s.stats.kills++
			s.crash(l)
		}
	case r < 830: // any member dies
		if d := pick(s.rng, s.up(int(g))); d != nil && len(s.up(int(g))) == s.members(g) {
			s.crash(d)
		}
	case r < 870: // a crashed replica restarts
		for _, id := range s.ids {
			if d := s.nodes[id]; d.rep == nil && d.boot && !d.gone {
				s.restart(d)
				break
			}
		}
	case r < 878:
		ids := s.groupIDs(g)
		a, b := ids[s.rng.IntN(len(ids))], ids[s.rng.IntN(len(ids))]
		if a != b {
			s.stats.partitions++
			s.note("partition %d %d", a, b)
			nw.Partition(a, b)
		}
	case r < 900:
		nw.Heal()
	case r < 925:
		s.moveStep()
	}
	// A group without a leader calls an election now and then (the
	// election timeout is out of the ticks' reach).
	for _, g := range s.groups() {
		if s.leader(g) == nil && s.rng.IntN(40) == 0 {
			s.elect(g, 0)
		}
	}
	for _, o := range s.metaOpsSorted() {
		if o.pend == nil {
			s.submitMeta(o)
		}
	}
	s.processAll()
	if s.steps%5 == 0 {
		s.publish()
	}
	s.refreshTopology()
	s.check()
	if s.steps%checkEvery == 0 {
		s.checkStores()
	}
}

func (s *dsim) metaOpsSorted() []*dsMetaOp {
	var out []*dsMetaOp
	for _, sh := range slices.Sorted(mapKeys(s.metaOps)) {
		out = append(out, s.metaOps[sh])
	}
	return out
}

func pick[T any](rng *rand.Rand, xs []T) T {
	var zero T
	if len(xs) == 0 {
		return zero
	}
	return xs[rng.IntN(len(xs))]
}

// groupIDs returns the ids of group's nodes that ever started.
func (s *dsim) groupIDs(g uint32) []uint64 {
	var out []uint64
	for _, id := range s.ids {
		if d := s.nodes[id]; d.group == g && d.boot && !d.gone {
			out = append(out, id)
		}
	}
	return out
}

// members is the number of replicas group has now (as its leader, or
// the first voters, say).
func (s *dsim) members(g uint32) int {
	if l := s.leader(g); l != nil {
		return len(l.rep.Status().Members)
	}
	return len(s.voters[g])
}

// moveStep advances the shard move by one step: add the spare node as a
// learner, promote it once caught up, remove an old voter (not the
// leader), and stop the removed node once it is out.
func (s *dsim) moveStep() {
	mv := &s.move
	if mv.done || s.steps < mv.next {
		return
	}
	mv.next = s.steps + 10
	l := s.leader(mv.shard)
	if l == nil {
		return
	}
	st := l.rep.Status()
	member := func(id uint64) (bool, bool) {
		for _, m := range st.Members {
			if m.ID == id {
				return true, m.Voter
			}
		}
		return false, false
	}
	to := s.nodes[mv.to]
	isMember, voter := member(mv.to)
	switch {
	case !isMember:
		_, err := l.rep.AddLearner(replica.Peer{ID: mv.to, RaftAddr: dsRaftAddr(mv.to), ClientAddr: to.addr})
		mv.err = err
		if err == nil {
			s.note("move: add learner %d", mv.to)
			if !to.boot {
				to.join = true
				mv.started = true
				s.startData(to)
			}
		}
	case !voter:
		_, err := l.rep.Promote(mv.to)
		mv.err = err
		if err == nil {
			s.note("move: promote %d", mv.to)
		}
	case mv.from == 0:
		for _, m := range st.Members {
			if m.Voter && m.ID != l.id && m.ID != mv.to {
				mv.from = m.ID
				break
			}
		}
	default:
		if in, _ := member(mv.from); in {
			if mv.from == l.id {
				l.rep.TransferLeadership()
				return
			}
			_, err := l.rep.Remove(mv.from)
			mv.err = err
			if err == nil {
				s.note("move: remove %d", mv.from)
			}
			return
		}
		// Out of the group: the node goes away for good.
		d := s.nodes[mv.from]
		s.note("move: %d gone", mv.from)
		if d.rep != nil {
			s.crash(d)
		}
		d.gone = true
		mv.done = true
	}
}

// check verifies the invariants cheap enough for every step: one leader
// per group and term; a metadata replica's epoch never goes back, and
// two replicas at one epoch hold the same map.
func (s *dsim) check() {
	s.t.Helper()
	byEpoch := map[uint64]*shard.Map{}
	for _, d := range s.up(-1) {
		st := d.rep.Status()
		if st.Role == "leader" {
			k := [2]uint64{uint64(d.group), st.Term}
			if l, ok := s.leaders[k]; ok && l != d.id {
				s.fatalf("two leaders of group %d in term %d: %d and %d", d.group, st.Term, l, d.id)
			}
			s.leaders[k] = d.id
		}
		if d.mach == nil {
			continue
		}
		m := d.mach.Map()
		if m == nil {
			continue
		}
		if m.Epoch < d.epoch {
			s.fatalf("metadata replica %d went back from epoch %d to %d", d.id, d.epoch, m.Epoch)
		}
		d.epoch = m.Epoch
		if o := byEpoch[m.Epoch]; o != nil && !o.Equal(m) {
			s.fatalf("two maps at epoch %d:\n%v\n%v", m.Epoch, o, m)
		}
		byEpoch[m.Epoch] = m
	}
}

// checkStores runs Check on every up replica's store.
func (s *dsim) checkStores() {
	s.t.Helper()
	for _, d := range s.up(-1) {
		var err error
		if d.n != nil {
			err = d.n.DB().Check()
		} else {
			err = d.mdb.Check()
		}
		if err != nil {
			s.fatalf("replica %d: Check: %v", d.id, err)
		}
	}
}

// quiesce heals everything, restarts every crashed replica, and runs the
// loop until every write is settled, every outbox is empty on every
// shard's leader, every replica of a group applied the same log and every
// job ran.
func (s *dsim) quiesce() {
	s.t.Helper()
	for _, g := range s.groups() {
		s.nets[g].Heal()
	}
	for _, id := range s.ids {
		if d := s.nodes[id]; d.rep == nil && d.boot && !d.gone {
			s.restart(d)
		}
	}
	for i := 0; ; i++ {
		for k := 0; s.move.started && !s.move.done; k++ {
			if k == 1000 {
				s.fatalf("the move of %d to %d does not finish (last refusal: %v): %s", s.move.from, s.move.to, s.move.err, s.describe())
			}
			s.steps++
			s.move.next = 0
			s.moveStep()
			s.settle(2)
			if s.leader(s.move.shard) == nil && k%10 == 9 {
				s.elect(s.move.shard, 0)
			}
		}
		for _, g := range s.groups() {
			if s.leader(g) == nil {
				s.elect(g, 0)
			}
		}
		retry := s.retry
		s.retry = nil // submit puts back what finds no leader
		for _, op := range retry {
			s.submit(op)
		}
		for _, o := range s.metaOpsSorted() {
			if o.pend == nil {
				s.submitMeta(o)
			}
		}
		s.settle(5)
		if s.quiet() {
			break
		}
		if i == 400 {
			s.fatalf("no quiescence (%s): %d ops, %d retries, %d metadata ops in flight; %s", s.unsettled(), len(s.ops), len(s.retry), len(s.metaOps), s.describe())
		}
	}
}

// quiet reports whether everything settled (see quiesce).
func (s *dsim) quiet() bool { return s.unsettled() == "" }

// unsettled names the first thing quiet waits for, "" for none.
func (s *dsim) unsettled() string {
	if len(s.ops) > 0 || len(s.retry) > 0 || len(s.metaOps) > 0 {
		return "client or metadata operations in flight"
	}
	m := s.latestMap()
	for _, g := range s.groups() {
		l := s.leader(g)
		if l == nil {
			return fmt.Sprintf("group %d has no leader", g)
		}
		st := l.rep.Status()
		if st.Applied != st.Commit {
			return fmt.Sprintf("group %d: leader %d applied %d of %d", g, l.id, st.Applied, st.Commit)
		}
		for _, mb := range st.Members {
			d := s.nodes[mb.ID]
			if d.rep == nil {
				return fmt.Sprintf("group %d: member %d is down", g, mb.ID)
			}
			if d.rep.Applied() != st.Applied {
				return fmt.Sprintf("group %d: member %d applied %d, leader %d", g, mb.ID, d.rep.Applied(), st.Applied)
			}
		}
		for _, d := range s.up(int(g)) {
			if d.snd != nil && d.snd.next != nil {
				return fmt.Sprintf("replica %d: a sender pass runs", d.id)
			}
			if d.mach != nil && !d.mach.Map().Equal(m) {
				return fmt.Sprintf("metadata replica %d: map epoch %d, newest %d", d.id, d.mach.Map().Epoch, m.Epoch)
			}
			if d.n != nil && d.n.topo.View().Epoch != m.Epoch {
				return fmt.Sprintf("replica %d: topology epoch %d, map %d", d.id, d.n.topo.View().Epoch, m.Epoch)
			}
		}
		if g == metaGroup {
			continue
		}
		if ms := m.Shard(g); ms.Leader != l.id || !slices.Equal(ms.Replicas, replicasOf(st.Members)) {
			return fmt.Sprintf("shard %d: map says leader %d replicas %v, group has leader %d members %v", g, ms.Leader, ms.Replicas, l.id, replicasOf(st.Members))
		}
		xs, err := l.n.streams.Load().Status(s.now)
		if err != nil {
			s.fatalf("replica %d: streams: %v", l.id, err)
		}
		for _, tg := range xs.Targets {
			if tg.Pending > 0 {
				return fmt.Sprintf("shard %d: %d messages pending to shard %d", g, tg.Pending, tg.Target)
			}
		}
	}
	return ""
}

func (s *dsim) describe() string {
	var b strings.Builder
	for _, g := range s.groups() {
		fmt.Fprintf(&b, "group %d:", g)
		for _, d := range s.up(int(g)) {
			st := d.rep.Status()
			fmt.Fprintf(&b, " %d %s t%d c%d a%d;", d.id, st.Role, st.Term, st.Commit, st.Applied)
		}
	}
	return b.String()
}

// dsSender runs a data replica's xshard.Sender one Pass at a time, as a
// coroutine of the loop (see the file comment).
type dsSender struct {
	s      *dsim
	d      *dsNode
	snd    *xshard.Sender
	yield  func(*dsCall) bool
	next   func() (*dsCall, bool)
	stop   func()
	cancel context.CancelFunc
	call   *dsCall
}

// dsCall is a call of a pass waiting for the loop: a TALLY.XRECV to addr,
// or (ack) a TALLY.XACK proposed on the sender's own shard.
type dsCall struct {
	ack   bool
	addr  string
	argv  [][]byte
	to    *dsNode
	pend  *replica.Pending
	res   any
	err   error
	ready bool
}

// dsRedisError is an error reply, as go-redis returns it.
type dsRedisError string

func (e dsRedisError) Error() string { return string(e) }
func (e dsRedisError) RedisError()   {}

type dsClient struct {
	x    *dsSender
	addr string
}

func (c dsClient) Do(ctx context.Context, args [][]byte) (any, error) {
	return c.x.wait(ctx, &dsCall{addr: c.addr, argv: args})
}

func (c dsClient) Close() error { return nil }

type dsProposer struct{ x *dsSender }

func (p dsProposer) Propose(ctx context.Context, args [][]byte) error {
	_, err := p.x.wait(ctx, &dsCall{ack: true, argv: args})
	return err
}

type dsLeader struct{ d *dsNode }

func (l dsLeader) IsLeader() bool { return l.d.rep != nil && l.d.rep.IsLeader() }

func (s *dsim) newSender(d *dsNode) *dsSender {
	x := &dsSender{s: s, d: d}
	n := d.n
	snd, err := xshard.NewSender(xshard.SenderConfig{
		Streams: n.streams.Load, Leader: dsLeader{d}, Peers: shardPeers{n}, Proposer: dsProposer{x},
		Dial: func(addr string) xshard.Client { return dsClient{x, addr} },
		Now:  func() time.Time { return s.now },
		// Small batches: more calls, more interleavings.
		MaxBatch: 4, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond,
	})
	if err != nil {
		s.fatalf("sender of %d: %v", d.id, err)
	}
	x.snd = snd
	return x
}

// wait hands c to the loop and returns its answer (on the pass's
// coroutine).
func (x *dsSender) wait(ctx context.Context, c *dsCall) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !x.yield(c) {
		return nil, context.Canceled
	}
	return c.res, c.err
}

// start starts a pass unless one is under way.
func (x *dsSender) start() {
	if x.next != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	x.cancel = cancel
	x.next, x.stop = iter.Pull(func(yield func(*dsCall) bool) {
		x.yield = yield
		x.snd.Pass(ctx)
	})
	x.resume()
}

// resume runs the pass until it waits for a call that is not answered,
// or ends.
func (x *dsSender) resume() {
	for {
		c, ok := x.next()
		if !ok {
			x.end()
			return
		}
		x.s.stats.calls++
		x.s.dispatch(x.d, c)
		if !c.ready {
			x.call = c
			return
		}
	}
}

func (x *dsSender) end() {
	x.stop()
	x.cancel()
	x.next, x.stop, x.call = nil, nil, nil
}

// poll resumes the pass once its call settled.
func (x *dsSender) poll() {
	if c := x.call; c != nil && c.pend.Done() {
		x.s.answer(c)
		x.call = nil
		x.resume()
	}
}

// abort ends a pass under way (its node crashed): its calls fail.
func (x *dsSender) abort() {
	if x.next != nil {
		x.cancel()
		x.end()
	}
}

// dispatch starts call c of d's sender: an immediate answer, or a
// proposal the loop waits for.
func (s *dsim) dispatch(d *dsNode, c *dsCall) {
	s.note("call %d %v %s %q", d.id, c.ack, c.addr, c.argv)
	to := d
	if !c.ack {
		to = s.byAddr[c.addr]
		switch {
		case to == nil || to.rep == nil || to.gone:
			c.err, c.ready = fmt.Errorf("dial tcp %s: connection refused", c.addr), true
			return
		case !to.rep.IsLeader():
			if l := to.rep.Status().Leader; l.ID != 0 {
				c.err = dsRedisError("MOVED 0 " + l.ClientAddr)
			} else {
				c.err = dsRedisError("CLUSTERDOWN no leader")
			}
			c.ready = true
			return
		}
	} else if to.rep == nil || !to.rep.IsLeader() {
		c.err, c.ready = replica.ErrNotLeader, true
		return
	}
	data, err := server.EncodeCommand(c.argv)
	if err != nil {
		s.fatalf("encode %q: %v", c.argv, err)
	}
	c.to, c.pend = to, to.rep.Propose(data)
	if c.pend.Done() {
		s.answer(c)
	}
}

// answer turns a call's settled proposal into the reply the sender sees.
// Now and then a reply is lost after the proposal applied: the sender
// must send again, and the target apply it once.
func (s *dsim) answer(c *dsCall) {
	c.ready = true
	reply, err := c.pend.Result()
	switch {
	case err != nil && !c.ack && errors.Is(err, replica.ErrNotLeader):
		c.err = dsRedisError("TRYAGAIN not the leader")
	case err != nil && !c.ack && errors.Is(err, replica.ErrProposalDropped):
		c.err = dsRedisError("TRYAGAIN dropped")
	case err != nil:
		c.err = err
	case len(reply) > 0 && reply[0] == '-':
		c.err = dsRedisError(strings.TrimSpace(string(reply[1:])))
		if c.ack {
			c.err = errors.New(string(c.err.(dsRedisError)))
		}
	case !c.ack && len(reply) > 0 && reply[0] == ':':
		v, perr := strconv.ParseInt(strings.TrimSpace(string(reply[1:])), 10, 64)
		if perr != nil {
			s.fatalf("XRECV reply %q", reply)
		}
		c.res = v
	case !c.ack:
		s.fatalf("XRECV reply %q", reply)
	}
	if !c.ack && s.rng.IntN(8) == 0 {
		s.stats.lost++
		c.res, c.err = nil, errors.New("read tcp: i/o timeout")
	}
	s.note("answer %v %v", c.res, c.err)
}

// Final checks.

// shardOf returns the shard of a key (user or item id).
func (s *dsim) shardOf(key int) *dsNode {
	sh := s.latestMap().ShardOf(server.Slot([]byte(strconv.Itoa(key))))
	return s.leader(sh.ID)
}

func readIDs(t *testing.T, what string, page func(cursor string) ([]uint64, string, bool, error)) []uint64 {
	t.Helper()
	var out []uint64
	cursor := ""
	for {
		ids, next, more, err := page(cursor)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		out = append(out, ids...)
		if !more {
			return out
		}
		cursor = next
	}
}

func followees(t *testing.T, tl *timeline.Timeline, u int) []uint64 {
	return readIDs(t, "followees", func(c string) ([]uint64, string, bool, error) {
		p, err := tl.FolloweesPage(uint64(u), c, timeline.MaxLimit)
		return p.IDs, p.Cursor, !p.NoMore, err
	})
}

func followers(t *testing.T, tl *timeline.Timeline, u int) []uint64 {
	ids := readIDs(t, "followers", func(c string) ([]uint64, string, bool, error) {
		p, err := tl.FollowersPage(uint64(u), c, timeline.MaxLimit)
		return p.IDs, p.Cursor, !p.NoMore, err
	})
	slices.Sort(ids)
	return ids
}

func home(t *testing.T, tl *timeline.Timeline, u int) []uint64 {
	var out []uint64
	cursor := ""
	for {
		p, err := tl.Home(uint64(u), cursor, timeline.MaxLimit)
		if err != nil {
			t.Fatalf("home %d: %v", u, err)
		}
		for _, e := range p.Entries {
			out = append(out, e.Post)
		}
		if p.NoMore {
			return out
		}
		cursor = p.Cursor
	}
}

func likers(t *testing.T, d *dsNode, item int) []uint64 {
	ids := readIDs(t, "likers", func(c string) ([]uint64, string, bool, error) {
		p, err := d.n.DB().Likes().Likers("video", uint64(item), c, 1000)
		return p.IDs, p.Next, p.Next != "", err
	})
	slices.Sort(ids)
	return ids
}

// dump is a replica's logical state of the keys its shard holds (reads
// that write nothing: no home reads).
func (s *dsim) dump(d *dsNode) string {
	t := s.t
	var b strings.Builder
	tl := d.n.DB().Timeline()
	m := s.latestMap()
	mine := func(key int) bool { return m.ShardOf(server.Slot([]byte(strconv.Itoa(key)))).ID == d.group }
	for u := 1; u <= dsUsers; u++ {
		if !mine(u) {
			continue
		}
		info, err := tl.User(uint64(u))
		if err != nil {
			t.Fatal(err)
		}
		n, err := tl.InboxLen(uint64(u))
		if err != nil {
			t.Fatal(err)
		}
		posts := readIDs(t, "posts", func(c string) ([]uint64, string, bool, error) {
			p, err := tl.PostsPage(uint64(u), c, timeline.MaxLimit)
			return p.IDs, p.Cursor, !p.NoMore, err
		})
		fmt.Fprintf(&b, "user %d: %+v inbox %d followees %v followers %v posts %v\n", u, info, n,
			followees(t, tl, u), followers(t, tl, u), posts)
	}
	for it := range dsItems {
		if !mine(it) {
			continue
		}
		c, err := d.n.DB().Likes().Counts("video", []uint64{uint64(it)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "item %d: %+v %v\n", it, c, likers(t, d, it))
	}
	xs, err := d.n.streams.Load().Status(s.now)
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range xs.Targets {
		fmt.Fprintf(&b, "out %d: %d %d\n", tg.Target, tg.LastAppended, tg.LastAcked)
	}
	for _, src := range xs.Sources {
		fmt.Fprintf(&b, "in %d: %d\n", src.Source, src.LastApplied)
	}
	return b.String()
}

// verify checks the quiet cluster against the model.
func (s *dsim) verify() {
	t := s.t
	t.Helper()
	// Replicas of each shard agree.
	for sh := uint32(1); sh <= dsShards; sh++ {
		l := s.leader(sh)
		want := s.dump(l)
		for _, mb := range l.rep.Status().Members {
			if mb.ID == l.id {
				continue
			}
			if got := s.dump(s.nodes[mb.ID]); got != want {
				t.Fatalf("shard %d: replica %d differs from the leader %d:\n%s\nleader:\n%s", sh, mb.ID, l.id, got, want)
			}
		}
	}
	s.checkStores()
	// The graph both ways, counts equal set sizes.
	fe, fr := map[int][]uint64{}, map[int][]uint64{}
	for p, on := range s.m.follow {
		if on {
			fe[p[0]] = append(fe[p[0]], uint64(p[1]))
			fr[p[1]] = append(fr[p[1]], uint64(p[0]))
		}
	}
	for u := 1; u <= dsUsers; u++ {
		slices.Sort(fe[u])
		slices.Sort(fr[u])
		tl := s.shardOf(u).n.DB().Timeline()
		if got := followees(t, tl, u); !slices.Equal(got, fe[u]) {
			t.Errorf("followees of %d = %v, model %v", u, got, fe[u])
		}
		if got := followers(t, tl, u); !slices.Equal(got, fr[u]) {
			t.Errorf("followers of %d = %v, model %v", u, got, fr[u])
		}
		for _, a := range fe[u] { // the edge as the followee's shard sees it
			if !slices.Contains(followers(t, s.shardOf(int(a)).n.DB().Timeline(), int(a)), uint64(u)) {
				t.Errorf("%d follows %d: not among %d's followers", u, a, a)
			}
		}
		info, err := tl.User(uint64(u))
		if err != nil {
			t.Fatal(err)
		}
		if info.Followers != uint64(len(fr[u])) || info.Followees != uint64(len(fe[u])) || info.Posts != uint64(len(s.m.posts[u])) {
			t.Errorf("user %d: %+v, model followers %d followees %d posts %d", u, info, len(fr[u]), len(fe[u]), len(s.m.posts[u]))
		}
	}
	// Homes: every followed post exactly once, active users (pushed
	// inboxes) first.
	want := func(u int) []uint64 {
		var out []uint64
		for _, a := range fe[u] {
			for _, p := range s.m.posts[int(a)] {
				out = append(out, uint64(p))
			}
		}
		slices.SortFunc(out, func(x, y uint64) int { return -cmp.Compare(x, y) })
		return out
	}
	homes := 0
	for _, pass := range []bool{true, false} {
		for u := 1; u <= dsUsers; u++ {
			if s.m.active[u] != pass {
				continue
			}
			got := home(t, s.shardOf(u).n.DB().Timeline(), u)
			homes += len(got)
			if w := want(u); !slices.Equal(got, w) {
				t.Errorf("home of %d (active %v) = %v, model %v", u, pass, got, w)
			}
		}
	}
	// Likes: counts equal the likers, both the model.
	likes := 0
	for it := range dsItems {
		var w []uint64
		for u := 1; u <= dsUsers; u++ {
			if s.m.like[[2]int{it, u}] {
				w = append(w, uint64(u))
			}
		}
		likes += len(w)
		d := s.shardOf(it)
		c, err := d.n.DB().Likes().Counts("video", []uint64{uint64(it)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := likers(t, d, it); !slices.Equal(got, w) || c[0].Likes != uint64(len(w)) || c[0].Dislikes != 0 {
			t.Errorf("item %d: counts %+v likers %v, model %v", it, c[0], got, w)
		}
	}
	if t.Failed() {
		return
	}
	// Feed unread against the pull-everything model: everyone's feed
	// read, then each author posts 0..2 times.
	for u := 1; u <= dsUsers; u++ {
		s.submit(&dsOp{verb: "UNREAD.FEEDRESET", key: fmt.Sprint("r", u), slotKey: fmt.Sprint(u), argv: argv("UNREAD.FEEDRESET", u), u: u})
	}
	s.quiesce()
	newPosts := map[int]int{}
	for a := 1; a <= dsUsers; a++ {
		newPosts[a] = s.rng.IntN(3)
		for range newPosts[a] {
			s.post++
			s.submit(&dsOp{verb: "TL.POST", key: fmt.Sprint("p", s.post), slotKey: fmt.Sprint(a), argv: argv("TL.POST", a, s.post), a: a, post: s.post})
		}
	}
	s.quiesce()
	for u := 1; u <= dsUsers; u++ {
		w := 0
		for _, a := range fe[u] {
			w += newPosts[int(a)]
		}
		got, err := s.shardOf(u).n.DB().Unread().Feed(uint64(u))
		if err != nil {
			t.Fatal(err)
		}
		if got != uint64(w) {
			t.Errorf("feed unread of %d = %d, model %d (followees %v)", u, got, w, fe[u])
		}
		if g, w := home(t, s.shardOf(u).n.DB().Timeline(), u), want(u); !slices.Equal(g, w) {
			t.Errorf("after the last posts: home of %d = %v, model %v", u, g, w)
		}
	}
	s.checkStores()
	s.note("verified: %d homes, %d likes", homes, likes)
}

// close closes every up replica's store.
func (s *dsim) close() {
	for _, d := range s.up(-1) {
		if d.snd != nil {
			d.snd.abort()
		}
		d.rep.Stop()
		if d.n != nil {
			d.n.Server().Close()
			for _, p := range d.n.DB().Packages() {
				p.Close()
			}
			_ = d.n.DB().Close()
		}
		if d.mdb != nil {
			_ = d.mdb.Close()
		}
	}
}

// runDsim runs one seed and returns its trace hash.
func runDsim(t *testing.T, seed uint64, steps int) uint64 {
	s := newDsim(t, seed)
	defer s.close()
	for range steps {
		s.step()
	}
	s.quiesce()
	s.verify()
	sent := int64(0)
	for _, g := range s.groups() {
		n, _ := s.nets[g].Stats()
		sent += n
	}
	t.Logf("seed %d: %d steps; %d acked (%d dropped, %d unknown), %d posts, %d follow edges; %d crashes (%d leader kills), %d elections, "+
		"%d transfers, %d partitions, move %d->%d on shard %d done %v; %d sender passes, %d calls (%d replies lost), %d metadata ops, %d messages; trace %x",
		seed, s.steps, s.stats.acked, s.stats.dropped, s.stats.unknown, s.post-1000, countTrue(s.m.follow), s.stats.crashes, s.stats.kills,
		s.stats.elections, s.stats.transfers, s.stats.partitions, s.move.from, s.move.to, s.move.shard, s.move.done,
		s.stats.passes, s.stats.calls, s.stats.lost, s.stats.metaOps, sent, s.trace.Sum64())
	return s.trace.Sum64()
}

// dsKnownBad are the default run's seeds that fail on an open bug; the
// default run skips them (naming the bug), TALLY_DETSIM_SEEDS runs them.
var dsKnownBad = map[uint64]string{
	// None now. Seed 8 (a post in a replica's in-memory removed set but
	// not in its store, after re-applied TL.XBACKFILL and TL.XPUBLISH
	// entries) passes since a duplicate commit changes no mirror
	// (timeline.TestReappliedPipelineEntry and
	// TestReappliedInstallKeepsPendingMarks).
}

func TestDeterministicShards(t *testing.T) {
	_, explicit := os.LookupEnv("TALLY_DETSIM_SEEDS")
	seeds := envInt(t, "TALLY_DETSIM_SEEDS", 12)
	first := uint64(envInt(t, "TALLY_DETSIM_SEED", 0))
	steps := envInt(t, "TALLY_DETSIM_STEPS", 1000)
	var hashes []uint64
	for seed := first; seed < first+uint64(seeds); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			if bug, ok := dsKnownBad[seed]; ok && !explicit && steps == 1000 {
				t.Skipf("known bug (TALLY_DETSIM_SEEDS=1 TALLY_DETSIM_SEED=%d runs it): %s", seed, bug)
			}
			hashes = append(hashes, runDsim(t, seed, steps))
		})
	}
	t.Run(fmt.Sprintf("seed=%d/again", first), func(t *testing.T) {
		if len(hashes) == 0 {
			t.Skip("no seed ran")
		}
		if h := runDsim(t, first, steps); h != hashes[0] {
			t.Fatalf("seed %d ran twice: trace %x, then %x", first, hashes[0], h)
		}
	})
}
