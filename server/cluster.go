package server

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Cluster mode: the Redis Cluster protocol over one Raft group.
//
// A replicated tally shard is one Raft group of replicas (package
// replica). To Redis Cluster clients (go-redis's ClusterClient, redis-cli
// -c, Jedis, redis-py's RedisCluster) it is a cluster of one shard: every
// slot 0-16383 is served by the group's leader, shown as the master, and
// the other replicas are its replicas. Clients learn that from CLUSTER
// SLOTS (or SHARDS, NODES), send writes to the master, and follow MOVED
// when the leader changes; with READONLY a connection reads from a
// replica, stale by its lag, as from a Redis replica.

// NumSlots is the number of Redis Cluster hash slots.
const NumSlots = 16384

// ClusterOptions configure cluster mode (SetReplication).
type ClusterOptions struct {
	// Addr is this node's client address as clients reach it
	// ("host:port"), announced in CLUSTER SLOTS, SHARDS and NODES and in
	// other nodes' MOVED replies. Required; the host must be an IP
	// address (Redis Cluster clients dial what they are given).
	Addr string
	// Name names the cluster: CLUSTER MYSHARDID and INFO's master_replid
	// derive from it. The default is "tally".
	Name string
	// LeaderReadsLocal serves reads on the leader without a ReadIndex
	// barrier: faster, but a leader deposed by a partition it has not
	// noticed yet may serve a stale read. The default (false) runs one
	// ReadIndex per batch of a connection's commands that holds a read,
	// so reads on the leader are linearizable.
	LeaderReadsLocal bool
	// FollowerReadIndex makes a READONLY connection's reads on a follower
	// wait for a ReadIndex barrier (linearizable, one round trip to the
	// leader per batch) instead of reading the follower's state as it is
	// (stale by its lag, Redis's replica semantics; the default).
	FollowerReadIndex bool
	// ProposeTimeout bounds how long a write waits to be committed and
	// applied, and a read for its barrier. The default is 10s.
	ProposeTimeout time.Duration
	// Topology, if set, is the slot map of a cluster of many shards, this
	// node's group being one (topology.go): commands are routed by their
	// keys' slots (MOVED to another shard, CROSSSLOT, CLUSTERDOWN for an
	// unassigned slot) and the CLUSTER replies list every shard. Nil: one
	// shard serving every slot.
	Topology Topology
	// Broadcast, if set, runs in Apply before each command of a
	// replicated entry that has no keys (a schema change such as
	// TALLY.COUNTER ADD, a broadcast such as NOTICE.POST): it is how a
	// sharded cluster sends such a command on to its other shards, in the
	// same entry as its local effect. It runs before the command (so a
	// re-applied entry numbers its commits the same whatever the command
	// decides), must be deterministic, and an error refuses the command
	// with that error as its reply. It does not run for the commands a
	// command runs nested (Conn.RunNested: a message from another shard).
	Broadcast func(cmd *Command, args [][]byte) error
	// Gather, if set with a Topology, answers the reads whose data is
	// spread over every shard (LIKE.TOP, LIKE.RANK, LIKE.USERLIKES,
	// LIKE.RECEIVED, ...) on the node a client asks, by sending their
	// per-shard parts to every shard through it and merging the replies
	// (gather.go). Nil: they answer from this node's store alone.
	Gather ShardCaller
}

// DefaultProposeTimeout is ClusterOptions.ProposeTimeout's default.
const DefaultProposeTimeout = 10 * time.Second

// cluster is a server's cluster mode: set once, before Serve.
type cluster struct {
	r     Replication
	opts  ClusterOptions
	host  string
	port  int
	shard string   // CLUSTER MYSHARDID without a topology
	topo  Topology // opts.Topology
}

// SetReplication turns on cluster mode: writes are proposed to r and
// applied through Apply, reads routed as ClassOf says, and CLUSTER,
// READONLY, READWRITE and ASKING served. It must be called before Serve
// (ErrServing after) and once; bad options are ErrInvalidOption.
func (s *Server) SetReplication(r Replication, c ClusterOptions) error {
	if r == nil {
		return fmt.Errorf("%w: nil Replication", ErrInvalidOption)
	}
	host, port, err := splitAddr(c.Addr)
	if err != nil {
		return fmt.Errorf("%w: cluster address %q: %v", ErrInvalidOption, c.Addr, err)
	}
	if c.Name == "" {
		c.Name = "tally"
	}
	if strings.ContainsAny(c.Name, " \r\n") || len(c.Name) > 128 {
		return fmt.Errorf("%w: cluster name %q: at most 128 bytes without blanks", ErrInvalidOption, c.Name)
	}
	if c.ProposeTimeout < 0 {
		return fmt.Errorf("%w: ProposeTimeout %v is negative", ErrInvalidOption, c.ProposeTimeout)
	}
	if c.ProposeTimeout == 0 {
		c.ProposeTimeout = DefaultProposeTimeout
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.serving {
		return ErrServing
	}
	if s.cluster != nil {
		return fmt.Errorf("%w: SetReplication called twice", ErrInvalidOption)
	}
	sum := sha1.Sum([]byte("tally-shard:" + c.Name))
	s.cluster = &cluster{r: r, opts: c, host: host, port: port, shard: hex.EncodeToString(sum[:]), topo: c.Topology}
	return nil
}

// splitAddr splits "ip:port" with a numeric port.
func splitAddr(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	if net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("host %q is not an IP address", host)
	}
	return host, port, nil
}

// NodeID is the Redis Cluster node id of the replica with id: 40 hex
// digits, the same on every node and across restarts.
func NodeID(id uint64) string {
	sum := sha1.Sum([]byte("tally-replica:" + strconv.FormatUint(id, 10)))
	return hex.EncodeToString(sum[:])
}

// Slot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of the key,
// or of its hash tag (the bytes between the first '{' and the next '}',
// when not empty), modulo 16384, exactly as Redis's keyHashSlot.
func Slot(key []byte) int {
	if i := indexByte(key, '{'); i >= 0 {
		if j := indexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) & (NumSlots - 1))
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), Redis's crc16.c.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, x := range b {
		crc = crc16Table[byte(crc>>8)^x] ^ crc<<8
	}
	return crc
}

var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// cmdSlot is the slot a MOVED reply names for a call: its keys' (their
// first key's when they hash to different slots), 0 for a command
// without keys.
func cmdSlot(cmd *Command, args [][]byte) int {
	switch s := callSlot(cmd, args); s {
	case noKeys:
		return 0
	case crossSlot:
		if cmd.FirstKey > 0 && cmd.FirstKey < len(args) {
			return Slot(args[cmd.FirstKey])
		}
		return 0
	default:
		return s
	}
}

// Routing of a client's commands (Conn.execute calls route for each).

// status returns the group's status, read once per batch of commands.
func (c *Conn) status() *ReplicationStatus {
	if !c.cst.ok {
		c.cst.st = c.s.cluster.r.Status()
		c.cst.ok = true
	}
	return &c.cst.st
}

// route handles cmd (the first of cmds, resolved) in cluster mode. It
// returns 0 when the command is to run here as usual, or how many
// commands of cmds it answered (proposed, redirected or refused).
func (c *Conn) route(cmd *Command, cmds []request) int {
	cl := c.s.cluster
	args := cmds[0].Args
	if cl.topo != nil {
		if msg := c.routeShard(cmd, args); msg != "" {
			c.reject(cmd, msg)
			return 1
		}
		if cl.gathers(cmd) {
			return 0 // it asks every shard's leader itself
		}
	}
	class, err := cmd.ClassOf(args)
	if err != nil {
		if !errors.Is(err, ErrNotReplicable) {
			err = fmt.Errorf("%w: %v", ErrNotReplicable, err)
		}
		c.reject(cmd, "ERR "+err.Error())
		return 1
	}
	switch class {
	case ClassLocal:
		return 0
	case ClassWrite:
		return c.propose(cmd, cmds)
	}
	st := c.status()
	if st.Role == RoleLeader {
		if cl.opts.LeaderReadsLocal || c.cst.fenced {
			return 0
		}
	} else if !c.readonly {
		c.reject(cmd, c.redirect(&NotLeaderError{LeaderID: st.LeaderID, Addr: st.LeaderAddr}, cmd, args, true))
		return 1
	} else if !cl.opts.FollowerReadIndex || c.cst.fenced {
		return 0
	}
	// One barrier covers every read of this batch: they were all received
	// before it was taken.
	ctx, cancel := context.WithTimeout(c.s.ctx, cl.opts.ProposeTimeout)
	err = cl.r.ReadIndex(ctx)
	cancel()
	if err != nil {
		c.cst.ok = false // the leader may have changed
		c.reject(cmd, c.redirect(err, cmd, args, true))
		return 1
	}
	c.cst.fenced = true
	return 0
}

// propose replicates the run of writes at the start of cmds (the first
// resolved already) as one entry and writes their replies. It returns how
// many commands it consumed.
func (c *Conn) propose(first *Command, cmds []request) int {
	cl := c.s.cluster
	if st := c.status(); st.Role != RoleLeader {
		// Not proposed at all: Raft would forward a follower's proposal
		// to the leader, but a Redis Cluster client expects MOVED.
		c.reject(first, c.redirect(&NotLeaderError{LeaderID: st.LeaderID, Addr: st.LeaderAddr}, first, cmds[0].Args, false))
		return 1
	}
	t0 := time.Now()
	argvs := [][][]byte{cmds[0].Args}
	size := argsSize(cmds[0].Args)
	for i := 1; i < len(cmds) && len(argvs) < maxBatch; i++ {
		args := cmds[i].Args
		cmd, msg, _ := c.find(args)
		if msg != "" {
			break
		}
		if class, err := cmd.ClassOf(args); err != nil || class != ClassWrite {
			break
		}
		if cl.topo != nil && c.routeShard(cmd, args) != "" {
			break // another shard's, or refused: route answers it
		}
		if size += argsSize(args); size > batchEntryBytes {
			break
		}
		argvs = append(argvs, args)
	}
	data, err := encodeEntry(argvs)
	var reply []byte
	if err == nil {
		ctx, cancel := context.WithTimeout(c.s.ctx, cl.opts.ProposeTimeout)
		reply, err = cl.r.Propose(ctx, data)
		cancel()
	}
	if err != nil {
		c.cst.ok = false
		for _, args := range argvs {
			cmd, _, _ := c.find(args)
			c.reject(cmd, c.redirect(err, cmd, args, false))
		}
		return len(argvs)
	}
	c.out = append(c.out, reply...)
	c.more()
	// The commands were counted where they were applied (Apply); the
	// slow log records the run once, with the time its client waited.
	c.s.slow.record(c, argvs[0], time.Since(t0))
	return len(argvs)
}

// argsSize is the bytes of a command in an entry, about.
func argsSize(args [][]byte) int {
	n := 4
	for _, a := range args {
		n += 4 + len(a)
	}
	return n
}

// leaderHint is the address of this shard's leader as the slot map
// (Topology) names it, for a replica that knows no leader itself: a
// partitioned ex-leader, or a follower while its group elects. The map is
// the metadata group's, which may have heard of the new leader already;
// a hint naming this node (a map older than its loss of leadership), or
// none, gives "".
func (c *Conn) leaderHint() string {
	cl := c.s.cluster
	if cl.topo == nil {
		return ""
	}
	v := c.view()
	if v == nil {
		return ""
	}
	sh := v.Shard(v.Self)
	if sh == nil || sh.Leader == 0 {
		return ""
	}
	for _, n := range sh.Nodes {
		if n.ID != sh.Leader {
			continue
		}
		if _, _, err := splitAddr(n.Addr); err != nil || n.Addr == cl.opts.Addr {
			return ""
		}
		return n.Addr
	}
	return ""
}

// redirect is the error reply for a call that failed with err (from
// Propose, or ReadIndex when read): MOVED to the leader (when this
// replica knows none, to the slot map's leader hint: leaderHint),
// CLUSTERDOWN while none is known, TRYAGAIN for a retryable failure; for a write
// whose outcome is unknown (its context ended, the node shut down) an
// error that says so, which a client must not blindly retry.
func (c *Conn) redirect(err error, cmd *Command, args [][]byte, read bool) string {
	var nl *NotLeaderError
	switch {
	case errors.As(err, &nl) && nl.Addr != "" && nl.Addr != c.s.cluster.opts.Addr:
		return fmt.Sprintf("MOVED %d %s", cmdSlot(cmd, args), nl.Addr)
	case errors.Is(err, ErrNotLeader):
		if addr := c.leaderHint(); addr != "" {
			return fmt.Sprintf("MOVED %d %s", cmdSlot(cmd, args), addr)
		}
		return "CLUSTERDOWN The cluster is down: no leader is known (an election is under way)"
	case errors.Is(err, ErrTryAgain), read:
		return "TRYAGAIN " + oneLine(err.Error())
	case errors.Is(err, ErrEntryTooLarge):
		return "ERR " + oneLine(err.Error())
	}
	return "ERR tally: the write may or may not have been applied: " + oneLine(err.Error())
}

// oneLine replaces line breaks, which would end an error reply early.
func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// reject writes an error reply for a call that did not run here, counted
// as a rejected call (as Redis counts a redirection).
func (c *Conn) reject(cmd *Command, msg string) {
	c.writeError(msg)
	if cmd != nil && cmd.metrics != nil {
		cs := cmd.metrics.get()
		cs.failed.Inc()
		cs.latency.observeN(0, 1)
		cmd.metrics.rejected.Add(1)
	}
	c.s.stats.commands.Add(1)
	c.s.stats.errorReplies.Add(1)
}

// The commands of cluster mode.

func clusterCommands() []Command {
	sub := func(name string, arity int, flags Flags, summary string, h func(*Conn, [][]byte, *cluster), args ...Arg) Command {
		return Command{Name: name, Arity: arity, Flags: flags, Group: "cluster", Since: "3.0.0", Complexity: "O(N) where N is the number of replicas",
			Summary: summary, Args: args, Handler: clusterOnly(h)}
	}
	return []Command{
		{Name: "CLUSTER", Arity: -2, Group: "cluster", Since: "3.0.0", Summary: "Cluster commands (tally serve --cluster).",
			Subcommands: []Command{
				sub("SLOTS", 2, 0, "Returns the mapping of slots to shards' replicas, the leader of each first (one shard: every slot to the group's leader).", clusterSlotsHandler),
				sub("SHARDS", 2, 0, "Returns every shard: its slots, and its replicas.", clusterShardsHandler),
				sub("NODES", 2, 0, "Returns the replicas in Redis's nodes.conf format.", clusterNodesHandler),
				sub("INFO", 2, 0, "Returns the cluster's state (cluster_state:ok while a leader is known) and Raft's figures.", clusterInfoHandler),
				sub("MYID", 2, FlagFast, "Returns this replica's node id.", func(c *Conn, _ [][]byte, cl *cluster) {
					c.WriteBulkString(NodeID(cl.r.Status().ID))
				}),
				sub("MYSHARDID", 2, FlagFast, "Returns the id of this node's shard.", func(c *Conn, _ [][]byte, cl *cluster) {
					c.WriteBulkString(cl.myShardID())
				}),
				sub("KEYSLOT", 3, FlagFast, "Returns the hash slot of a key (CRC16 of the key or its {hash tag}, mod 16384).",
					func(c *Conn, args [][]byte, _ *cluster) { c.WriteInt(int64(Slot(args[2]))) },
					Arg{Name: "key", Type: "string"}),
				sub("COUNTKEYSINSLOT", 3, 0, "Not supported: tally's keys are counter rows, not stored keys.",
					slotKeysHandler, Arg{Name: "slot", Type: "integer"}),
				sub("GETKEYSINSLOT", 4, 0, "Not supported: tally's keys are counter rows, not stored keys.",
					slotKeysHandler, Arg{Name: "slot", Type: "integer"}, Arg{Name: "count", Type: "integer"}),
			}},
		{Name: "READONLY", Arity: 1, Flags: FlagFast, Group: "cluster", Since: "3.0.0", Complexity: "O(1)",
			Summary: "Lets the connection read from a replica (stale by the replica's lag).",
			Handler: clusterOnly(func(c *Conn, _ [][]byte, _ *cluster) { c.readonly = true; c.WriteOK() })},
		{Name: "READWRITE", Arity: 1, Flags: FlagFast, Group: "cluster", Since: "3.0.0", Complexity: "O(1)",
			Summary: "Ends READONLY: reads on a replica are redirected to the leader again.",
			Handler: clusterOnly(func(c *Conn, _ [][]byte, _ *cluster) { c.readonly = false; c.WriteOK() })},
		{Name: "ASKING", Arity: 1, Flags: FlagFast, Group: "cluster", Since: "3.0.0", Complexity: "O(1)",
			Summary: "Accepted and ignored: one shard never migrates slots.",
			Handler: clusterOnly(func(c *Conn, _ [][]byte, _ *cluster) { c.WriteOK() })},
	}
}

// clusterOnly refuses h outside cluster mode, in Redis's words.
func clusterOnly(h func(*Conn, [][]byte, *cluster)) Handler {
	return func(c *Conn, args [][]byte) {
		if c.s.cluster == nil {
			c.writeError("ERR " + ErrClusterDisabled.Error())
			return
		}
		h(c, args, c.s.cluster)
	}
}

func slotKeysHandler(c *Conn, args [][]byte, _ *cluster) {
	if v, ok := parseInt(args[2]); !ok || v < 0 || v >= NumSlots {
		c.writeError("ERR Invalid slot")
		return
	}
	c.writeError("ERR tally: " + strings.ToUpper(string(args[1])) + " is not supported: keys are counter rows, " +
		"not stored keys (CLUSTER SLOTS says which shard serves a slot; DBSIZE counts rows)")
}

// clusterNode is one replica as the CLUSTER replies show it.
type clusterNode struct {
	id       string
	host     string
	port     int
	master   bool
	self     bool
	offset   uint64
	active   bool
	masterID string // a replica's master
}

// nodes lists the replicas: the leader first (or, with no leader known,
// this node, so that a client has somewhere to send commands and learn
// CLUSTERDOWN), then the others in id order. Members without a usable
// address are left out.
func (cl *cluster) nodes(st *ReplicationStatus) []clusterNode {
	masterID := st.LeaderID
	if masterID == 0 {
		masterID = st.ID
	}
	var out []clusterNode
	seenSelf := false
	add := func(m Member) {
		n := clusterNode{id: NodeID(m.ID), master: m.ID == masterID, self: m.ID == st.ID, offset: m.Match, active: m.Active}
		if n.self {
			seenSelf = true
			n.host, n.port = cl.host, cl.port
			n.offset, n.active = st.Applied, true
		} else {
			h, p, err := splitAddr(m.Addr)
			if err != nil {
				return
			}
			n.host, n.port = h, p
		}
		if !n.master {
			n.masterID = NodeID(masterID)
		}
		if n.master {
			out = append([]clusterNode{n}, out...)
		} else {
			out = append(out, n)
		}
	}
	for _, m := range st.Members {
		add(m)
	}
	if !seenSelf {
		add(Member{ID: st.ID, Addr: cl.opts.Addr, Voter: st.Role != RoleLearner})
	}
	if len(out) > 0 && !out[0].master {
		// The leader has no usable address: this node stands in.
		for i := range out {
			if out[i].self {
				out[0], out[i] = out[i], out[0]
				out[0].master, out[0].masterID = true, ""
				break
			}
		}
		for i := 1; i < len(out); i++ {
			out[i].masterID = out[0].id
		}
	}
	return out
}

// errNoLeaderSlots answers CLUSTER SLOTS and SHARDS on a replica that
// knows no leader: a client that loads its slot map from it (go-redis
// asks the nodes it knows in turn) goes on to the next node instead of
// taking this one for the master, which a replica cut off from the group
// would otherwise stay in its map until the client reloads it.
const errNoLeaderSlots = "CLUSTERDOWN this replica knows no leader; ask another node"

// clusterShard is one shard as the CLUSTER replies show it.
type clusterShard struct {
	id     uint32
	self   bool
	ranges []SlotRange   // in slot order, adjacent ranges merged
	nodes  []clusterNode // the master first
}

// shards lists the shards the CLUSTER replies show. Without a topology:
// this group, serving every slot. With one: every shard of the view, this
// node's from the live Raft status st (as without a topology), the others
// from the view (the leader hint as master, the other nodes as its
// replicas; nodes without a usable address left out); v is the view, nil
// when none is known yet (then only this group is listed, without
// slots).
func (cl *cluster) shards(st *ReplicationStatus) (out []clusterShard, v *TopologyView) {
	if cl.topo == nil {
		return []clusterShard{{self: true, ranges: []SlotRange{{From: 0, To: NumSlots - 1}}, nodes: cl.nodes(st)}}, nil
	}
	v = cl.topo.View()
	if v == nil {
		return []clusterShard{{self: true, nodes: cl.nodes(st)}}, nil
	}
	index := map[uint32]int{}
	for i := range v.Shards {
		sh := &v.Shards[i]
		if _, dup := index[sh.ID]; dup {
			continue
		}
		cs := clusterShard{id: sh.ID, self: sh.ID == v.Self}
		if cs.self {
			cs.nodes = cl.nodes(st)
		} else {
			cs.nodes = viewNodes(sh)
		}
		index[sh.ID] = len(out)
		out = append(out, cs)
	}
	if _, ok := index[v.Self]; !ok {
		index[v.Self] = len(out)
		out = append(out, clusterShard{id: v.Self, self: true, nodes: cl.nodes(st)})
	}
	for _, r := range v.Ranges {
		i, ok := index[r.Shard]
		if !ok || r.From < 0 || r.To >= NumSlots || r.To < r.From {
			continue
		}
		rs := out[i].ranges
		if n := len(rs); n > 0 && rs[n-1].To+1 == r.From {
			rs[n-1].To = r.To
			continue
		}
		out[i].ranges = append(rs, r)
	}
	return out, v
}

// viewNodes lists a shard of the view as the CLUSTER replies show it.
func viewNodes(sh *TopologyShard) []clusterNode {
	m := sh.master()
	if m == nil {
		return nil
	}
	var out []clusterNode
	add := func(n *TopologyNode, master bool) {
		host, port, err := splitAddr(n.Addr)
		if err != nil {
			return
		}
		cn := clusterNode{id: NodeID(n.ID), host: host, port: port, master: master, active: true}
		if !master {
			cn.masterID = NodeID(m.ID)
		}
		out = append(out, cn)
	}
	add(m, true)
	for i := range sh.Nodes {
		if sh.Nodes[i].ID != m.ID {
			add(&sh.Nodes[i], false)
		}
	}
	return out
}

// myShardID is CLUSTER MYSHARDID's reply.
func (cl *cluster) myShardID() string {
	if cl.topo != nil {
		if v := cl.topo.View(); v != nil {
			return ShardID(cl.opts.Name, v.Self)
		}
	}
	return cl.shard
}

// slotRanges lists every served slot range in slot order with its shard.
func slotRanges(shards []clusterShard) []struct {
	r  SlotRange
	sh *clusterShard
} {
	var out []struct {
		r  SlotRange
		sh *clusterShard
	}
	for i := range shards {
		if len(shards[i].nodes) == 0 {
			continue
		}
		for _, r := range shards[i].ranges {
			out = append(out, struct {
				r  SlotRange
				sh *clusterShard
			}{r, &shards[i]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].r.From < out[j].r.From })
	return out
}

func clusterSlotsHandler(c *Conn, _ [][]byte, cl *cluster) {
	st := cl.r.Status()
	if st.LeaderID == 0 {
		c.writeError(errNoLeaderSlots)
		return
	}
	shards, v := cl.shards(&st)
	if cl.topo != nil && v == nil {
		c.writeError(msgNoMap)
		return
	}
	ranges := slotRanges(shards)
	c.WriteArray(len(ranges))
	for _, sr := range ranges {
		c.WriteArray(2 + len(sr.sh.nodes))
		c.WriteInt(int64(sr.r.From))
		c.WriteInt(int64(sr.r.To))
		for _, n := range sr.sh.nodes {
			c.WriteArray(4)
			c.WriteBulkString(n.host)
			c.WriteInt(int64(n.port))
			c.WriteBulkString(n.id)
			c.WriteMap(0) // networking metadata (hostname): none
		}
	}
}

func clusterShardsHandler(c *Conn, _ [][]byte, cl *cluster) {
	st := cl.r.Status()
	if st.LeaderID == 0 {
		c.writeError(errNoLeaderSlots)
		return
	}
	shards, v := cl.shards(&st)
	if cl.topo != nil && v == nil {
		c.writeError(msgNoMap)
		return
	}
	n := 0
	for i := range shards {
		if len(shards[i].nodes) > 0 {
			n++
		}
	}
	c.WriteArray(n)
	for _, sh := range shards {
		if len(sh.nodes) == 0 {
			continue
		}
		c.WriteMap(2)
		c.WriteBulkString("slots")
		c.WriteArray(2 * len(sh.ranges))
		for _, r := range sh.ranges {
			c.WriteInt(int64(r.From))
			c.WriteInt(int64(r.To))
		}
		c.WriteBulkString("nodes")
		c.WriteArray(len(sh.nodes))
		for _, n := range sh.nodes {
			c.WriteMap(7)
			c.WriteBulkString("id")
			c.WriteBulkString(n.id)
			c.WriteBulkString("port")
			c.WriteInt(int64(n.port))
			c.WriteBulkString("ip")
			c.WriteBulkString(n.host)
			c.WriteBulkString("endpoint")
			c.WriteBulkString(n.host)
			c.WriteBulkString("role")
			c.WriteBulkString(map[bool]string{true: "master", false: "replica"}[n.master])
			c.WriteBulkString("replication-offset")
			c.WriteUint(n.offset)
			c.WriteBulkString("health")
			c.WriteBulkString(map[bool]string{true: "online", false: "failed"}[n.active])
		}
	}
}

func clusterNodesHandler(c *Conn, _ [][]byte, cl *cluster) {
	st := cl.r.Status()
	shards, v := cl.shards(&st)
	epoch := st.Term
	if v != nil {
		epoch = v.Epoch
	}
	var b strings.Builder
	for _, sh := range shards {
		for _, n := range sh.nodes {
			flags := "slave"
			if n.master {
				flags = "master"
			}
			if n.self {
				flags = "myself," + flags
			}
			if !n.active {
				flags += ",fail?"
			}
			master := "-"
			if !n.master {
				master = n.masterID
			}
			link := "connected"
			if !n.active {
				link = "disconnected"
			}
			fmt.Fprintf(&b, "%s %s@0 %s %s 0 0 %d %s", n.id, net.JoinHostPort(n.host, strconv.Itoa(n.port)), flags, master, epoch, link)
			if n.master {
				for _, r := range sh.ranges {
					if r.From == r.To {
						fmt.Fprintf(&b, " %d", r.From)
					} else {
						fmt.Fprintf(&b, " %d-%d", r.From, r.To)
					}
				}
			}
			b.WriteByte('\n')
		}
	}
	c.WriteBulkString(b.String())
}

func clusterInfoHandler(c *Conn, _ [][]byte, cl *cluster) {
	st := cl.r.Status()
	shards, v := cl.shards(&st)
	var b strings.Builder
	line := func(k string, v any) { fmt.Fprintf(&b, "%s:%v\r\n", k, v) }
	// A slot is ok when its shard has a node to send it to; this node's
	// own slots only while its group has a leader.
	assigned, okSlots, known, size := 0, 0, 0, 0
	for _, sh := range shards {
		known += len(sh.nodes)
		n := 0
		for _, r := range sh.ranges {
			n += r.To - r.From + 1
		}
		if n > 0 {
			size++
		}
		assigned += n
		if len(sh.nodes) > 0 && (!sh.self || st.LeaderID != 0) {
			okSlots += n
		}
	}
	state := "fail"
	if okSlots == NumSlots {
		state = "ok"
	}
	epoch := st.Term
	if v != nil {
		epoch = v.Epoch
	}
	line("cluster_state", state)
	line("cluster_slots_assigned", assigned)
	line("cluster_slots_ok", okSlots)
	line("cluster_slots_pfail", 0)
	line("cluster_slots_fail", assigned-okSlots)
	line("cluster_known_nodes", known)
	line("cluster_size", size)
	line("cluster_current_epoch", epoch)
	line("cluster_my_epoch", epoch)
	line("cluster_stats_messages_sent", 0)
	line("cluster_stats_messages_received", 0)
	line("total_cluster_links_buffer_limit_exceeded", 0)
	line("tally_cluster_name", cl.opts.Name)
	if v != nil {
		line("tally_shard", v.Self)
		line("tally_shards", len(shards))
	}
	line("tally_role", st.Role)
	line("tally_replica_id", st.ID)
	line("tally_leader_id", st.LeaderID)
	line("tally_raft_term", st.Term)
	line("tally_raft_commit", st.Commit)
	line("tally_raft_applied", st.Applied)
	c.WriteBulkString(b.String())
}

// replicationInfo writes INFO's Replication section in cluster mode, in
// Redis's fields: on the leader role:master and a slaveN line per other
// replica (offset: its match index; lag: entries behind, where Redis
// gives seconds since its last ack); on a follower role:slave with the
// leader as master_host/master_port.
func (s *Server) replicationInfo(line func(string, any)) {
	cl := s.cluster
	st := cl.r.Status()
	now := time.Now()
	if st.Role == RoleLeader {
		line("role", "master")
		var others []Member
		for _, m := range st.Members {
			if m.ID != st.ID {
				others = append(others, m)
			}
		}
		connected := 0
		for _, m := range others {
			if m.Active {
				connected++
			}
		}
		line("connected_slaves", connected)
		for i, m := range others {
			host, port, err := splitAddr(m.Addr)
			if err != nil {
				host, port = m.Addr, 0
			}
			state := "online"
			if !m.Active {
				state = "offline"
			}
			line("slave"+strconv.Itoa(i), fmt.Sprintf("ip=%s,port=%d,state=%s,offset=%d,lag=%d,id=%d,voter=%d",
				host, port, state, m.Match, m.Lag, m.ID, b2i(m.Voter)))
		}
	} else {
		line("role", "slave")
		host, port, err := splitAddr(st.LeaderAddr)
		if err != nil {
			host, port = "", 0
		}
		line("master_host", host)
		line("master_port", port)
		up := st.LeaderID != 0 && !st.LastLeaderContact.IsZero()
		line("master_link_status", map[bool]string{true: "up", false: "down"}[up])
		ago := int64(-1)
		if !st.LastLeaderContact.IsZero() {
			ago = int64(now.Sub(st.LastLeaderContact).Seconds())
		}
		line("master_last_io_seconds_ago", ago)
		line("master_sync_in_progress", 0)
		line("slave_read_repl_offset", st.Applied)
		line("slave_repl_offset", st.Applied)
		line("slave_priority", 100)
		line("slave_read_only", 1)
		line("replica_announced", 1)
		line("connected_slaves", 0)
	}
	line("master_failover_state", "no-failover")
	line("master_replid", cl.myShardID())
	line("master_replid2", strings.Repeat("0", 40))
	line("master_repl_offset", st.Applied)
	line("second_repl_offset", -1)
	line("tally_replica_id", st.ID)
	line("tally_raft_role", st.Role)
	line("tally_raft_term", st.Term)
	line("tally_raft_commit", st.Commit)
	line("tally_raft_applied", st.Applied)
	line("tally_leader_id", st.LeaderID)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
