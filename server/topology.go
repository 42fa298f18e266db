package server

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// Sharding: routing by a slot map (issue 23).
//
// A tally cluster is many shards; a shard is one Raft group (Replication).
// With ClusterOptions.Topology set, a server in cluster mode routes each
// command by the slot of its keys, as a Redis Cluster node does
// (getNodeByQuery in Redis's cluster.c): a command whose keys hash to
// different slots gets CROSSSLOT; a slot no shard serves, CLUSTERDOWN; a
// slot of another shard, MOVED to that shard's leader (its hint in the
// map); a slot of this node's shard runs the one-shard path (writes
// proposed, reads after a barrier or READONLY, MOVED to this shard's
// leader from the live Raft status). A command without keys runs on the
// node it is sent to. The check is per command, pipelines included; a
// run of pipelined writes proposed as one entry stops before a command
// that is not this shard's. (tally has no MULTI/EXEC, so there is no
// transaction to refuse as a whole.)

// Topology is the slot map of a multi-shard cluster, as cluster mode
// routes by it. The cluster package adapts its map (package shard) to it.
type Topology interface {
	// View returns the current map, nil while none is known (commands
	// with keys then get CLUSTERDOWN). It is called once per batch of a
	// connection's commands and by every CLUSTER reply, so it must be
	// cheap; the view it returns is never modified afterwards.
	View() *TopologyView
}

// TopologyView is one version of the slot map. It is immutable once
// returned by Topology.View.
type TopologyView struct {
	// Epoch is the map's version (CLUSTER INFO's current epoch, CLUSTER
	// NODES's config epoch).
	Epoch uint64
	// Self is the id of this node's shard.
	Self uint32
	// Shards are the cluster's shards, each once.
	Shards []TopologyShard
	// Ranges are sorted by From and do not overlap; a slot in no range is
	// unassigned (CLUSTERDOWN Hash slot not served).
	Ranges []SlotRange
}

// TopologyShard is one shard: a Raft group of replicas.
type TopologyShard struct {
	ID    uint32
	Nodes []TopologyNode
	// Leader is the id of the node last known to lead the shard (a hint:
	// MOVED and the CLUSTER replies name it as the master), 0 when
	// unknown.
	Leader uint64
}

// TopologyNode is one replica of a shard.
type TopologyNode struct {
	// ID is the replica id, unique in the cluster (its Redis node id is
	// NodeID(ID)).
	ID uint64
	// Addr is its client address, "ip:port".
	Addr string
}

// SlotRange assigns the slots From..To (inclusive) to a shard.
type SlotRange struct {
	From, To int
	Shard    uint32
}

// ErrInvalidTopology is wrapped by TopologyView.Validate's errors.
var ErrInvalidTopology = errors.New("tally: invalid topology")

// Validate checks the view's shape: shard ids non-zero and distinct, node
// ids non-zero and distinct across the cluster, addresses "ip:port",
// ranges within 0..NumSlots-1, sorted, not overlapping, each naming a
// listed shard, and Self listed. The server routes by any view (a slot in
// no range is unassigned); Validate is for the map's producer and tests.
func (v *TopologyView) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidTopology}, args...)...)
	}
	shards := map[uint32]bool{}
	nodes := map[uint64]bool{}
	for _, sh := range v.Shards {
		if sh.ID == 0 || shards[sh.ID] {
			return bad("shard id %d is zero or repeated", sh.ID)
		}
		shards[sh.ID] = true
		leaderListed := sh.Leader == 0
		for _, n := range sh.Nodes {
			if n.ID == 0 || nodes[n.ID] {
				return bad("node id %d of shard %d is zero or repeated", n.ID, sh.ID)
			}
			nodes[n.ID] = true
			if _, _, err := splitAddr(n.Addr); err != nil {
				return bad("node %d of shard %d: address %q: %v", n.ID, sh.ID, n.Addr, err)
			}
			leaderListed = leaderListed || n.ID == sh.Leader
		}
		if !leaderListed {
			return bad("shard %d's leader %d is not one of its nodes", sh.ID, sh.Leader)
		}
	}
	if !shards[v.Self] {
		return bad("this node's shard %d is not listed", v.Self)
	}
	next := 0
	for _, r := range v.Ranges {
		if r.From < next || r.To < r.From || r.To >= NumSlots {
			return bad("slot range %d-%d is out of order, empty or out of 0-%d", r.From, r.To, NumSlots-1)
		}
		if !shards[r.Shard] {
			return bad("slot range %d-%d names shard %d, which is not listed", r.From, r.To, r.Shard)
		}
		next = r.To + 1
	}
	return nil
}

// ShardOf returns the shard serving slot, nil when the slot is unassigned
// (or its range names a shard the view does not list).
func (v *TopologyView) ShardOf(slot int) *TopologyShard {
	i := sort.Search(len(v.Ranges), func(i int) bool { return v.Ranges[i].To >= slot })
	if i == len(v.Ranges) || v.Ranges[i].From > slot {
		return nil
	}
	return v.Shard(v.Ranges[i].Shard)
}

// Shard returns the shard with id, nil when the view does not list it.
func (v *TopologyView) Shard(id uint32) *TopologyShard {
	for i := range v.Shards {
		if v.Shards[i].ID == id {
			return &v.Shards[i]
		}
	}
	return nil
}

// master is the node MOVED and the CLUSTER replies name for the shard:
// the leader hint when it is a node with a usable address, else the
// first such node; nil when no node has one.
func (sh *TopologyShard) master() *TopologyNode {
	var first *TopologyNode
	for i := range sh.Nodes {
		n := &sh.Nodes[i]
		if _, _, err := splitAddr(n.Addr); err != nil {
			continue
		}
		if n.ID == sh.Leader {
			return n
		}
		if first == nil {
			first = n
		}
	}
	return first
}

// ShardID is the Redis Cluster shard id (CLUSTER MYSHARDID, INFO's
// master_replid) of shard id in the cluster named name: 40 hex digits,
// the same on every node.
func ShardID(name string, id uint32) string {
	sum := sha1.Sum([]byte("tally-shard:" + name + ":" + strconv.FormatUint(uint64(id), 10)))
	return hex.EncodeToString(sum[:])
}

// Slots of a call.
const (
	noKeys    = -1 // the call has no key
	crossSlot = -2 // its keys hash to different slots
)

// callSlot returns the slot of a call's keys (COMMAND's key positions, or
// the command's Keys), noKeys or crossSlot.
func callSlot(cmd *Command, args [][]byte) int {
	slot := noKeys
	add := func(key []byte) {
		switch s := routeSlot(key); {
		case slot == noKeys:
			slot = s
		case slot != s:
			slot = crossSlot
		}
	}
	if cmd.Keys != nil {
		cmd.Keys(args, add)
		return slot
	}
	if cmd.FirstKey <= 0 || cmd.FirstKey >= len(args) {
		return noKeys
	}
	last := cmd.LastKey
	if last < 0 || last >= len(args) {
		last = len(args) - 1
	}
	step := max(cmd.KeyStep, 1)
	for i := cmd.FirstKey; i <= last && slot != crossSlot; i += step {
		add(args[i])
	}
	return slot
}

// routeSlot is the slot a key is routed by: Slot of the key with its
// decimal id written without leading zeros. tally parses ids with leading
// zeros ("posts:017" and TL.HOME 017 name row 17 and user 17), so their
// slots must be the canonical form's, or one row would live on two
// shards. A key with a {hash tag} is hashed as it is. A Redis Cluster
// client hashes the literal key and follows the MOVED this gives.
func routeSlot(key []byte) int {
	if indexByte(key, '{') >= 0 {
		return Slot(key)
	}
	i := len(key)
	for i > 0 && key[i-1] >= '0' && key[i-1] <= '9' {
		i--
	}
	if i > 0 && key[i-1] != ':' || len(key)-i < 2 || key[i] != '0' {
		return Slot(key) // no id, or one without a leading zero
	}
	j := i
	for j < len(key)-1 && key[j] == '0' {
		j++
	}
	var buf [128]byte
	return Slot(append(append(buf[:0], key[:i]...), key[j:]...))
}

// Routing replies, in Redis's words.
const (
	msgCrossSlot     = "CROSSSLOT Keys in request don't hash to the same slot"
	msgSlotNotServed = "CLUSTERDOWN Hash slot not served"
	msgNoMap         = "CLUSTERDOWN The cluster is down: this node has no slot map yet"
)

// view returns the topology's view, read once per batch of commands; nil
// when cluster mode has no topology or no map is known.
func (c *Conn) view() *TopologyView {
	cl := c.s.cluster
	if cl.topo == nil {
		return nil
	}
	if !c.cst.viewOK {
		c.cst.view = cl.topo.View()
		c.cst.viewOK = true
	}
	return c.cst.view
}

// routeShard checks a call's keys against the slot map (cluster mode with
// a topology). It returns "" when the call is this shard's (or has no
// keys), else the error reply: CROSSSLOT, CLUSTERDOWN or MOVED.
func (c *Conn) routeShard(cmd *Command, args [][]byte) string {
	slot := callSlot(cmd, args)
	switch slot {
	case noKeys:
		return ""
	case crossSlot:
		return msgCrossSlot
	}
	v := c.view()
	if v == nil {
		return msgNoMap
	}
	sh := v.ShardOf(slot)
	if sh == nil {
		return msgSlotNotServed
	}
	if sh.ID == v.Self {
		return ""
	}
	m := sh.master()
	if m == nil {
		return msgSlotNotServed
	}
	return fmt.Sprintf("MOVED %d %s", slot, m.Addr)
}
