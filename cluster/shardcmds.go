package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/tallydb/tally/replica"
	"github.com/tallydb/tally/server"
	"github.com/tallydb/tally/shard"
)

// ErrNotSharded is the reply of TALLY.SHARDS on a replica that is not
// part of a multi-shard cluster.
var ErrNotSharded = errors.New("cluster: this node is not part of a multi-shard cluster")

// shardCommands are the multi-shard cluster's RESP commands: TALLY.SHARDS
// STATUS, CREATE, ADDNODE, REBALANCE and JOIN. Like TALLY.CLUSTER they run on the node they
// are sent to; a change is an entry of the metadata group (proposed from
// any member), never a replicated command of a shard.
func (n *Node) shardCommands() []server.Command {
	sub := func(name string, arity int, flags server.Flags, summary string, args []server.Arg, h server.Handler) server.Command {
		return server.Command{Name: name, Arity: arity, Flags: flags | server.FlagLocal, Group: "cluster", Since: "0.1.0",
			Complexity: "O(N) where N is the number of replicas", Summary: summary, Args: args, Handler: h}
	}
	return []server.Command{{
		Name: "TALLY.SHARDS", Arity: -2, Group: "cluster", Since: "0.1.0",
		Summary: "Shows and creates the slot map of a multi-shard cluster.",
		Subcommands: []server.Command{
			sub("STATUS", 2, server.FlagReadOnly, "Returns the slot map as this node holds it: the epoch, this node's "+
				"shard, the metadata group's leader, and per shard its leader hint, replicas and slot ranges.", nil, n.shardsStatusHandler),
			sub("CREATE", -4, server.FlagAdmin, "Creates the cluster's first slot map: SHARD REPLICAS pairs, "+
				"REPLICAS as ID=RAFT_ADDR/CLIENT_ADDR,...; the slots are split evenly in the order given.",
				[]server.Arg{{Name: "data", Type: "block", Multiple: true,
					Args: []server.Arg{{Name: "shard", Type: "integer"}, {Name: "replicas", Type: "string"}}}}, n.shardsCreateHandler),
			sub("ADDNODE", 5, server.FlagAdmin, "Registers a node (id, Raft address, client address) in the slot map "+
				"as a spare node, the target of a later move; refused for an id or address in use or a bad address.",
				[]server.Arg{{Name: "id", Type: "integer"}, {Name: "raft-addr", Type: "string"}, {Name: "client-addr", Type: "string"}},
				n.shardsAddNodeHandler),
			sub("REBALANCE", -2, server.FlagAdmin, "Balances shard leadership across hosts (or nodes) by leadership "+
				"transfers and replies the plan and each move's outcome, one line each; DRYRUN only plans.",
				[]server.Arg{{Name: "by", Type: "oneof", Token: "BY", Optional: true,
					Args: []server.Arg{{Name: "node", Type: "pure-token", Token: "NODE"}, {Name: "host", Type: "pure-token", Token: "HOST"}}},
					{Name: "dryrun", Type: "pure-token", Token: "DRYRUN", Optional: true}}, n.rebalanceHandler),
			sub("JOIN", 5, server.FlagAdmin, "Adds a node to the metadata group as a learner (it then holds the map); "+
				"send to a metadata voter.", []server.Arg{{Name: "id", Type: "integer"}, {Name: "meta-raft-addr", Type: "string"},
				{Name: "client-addr", Type: "string"}}, n.shardsJoinHandler),
		},
	}}
}

func (n *Node) shardsStatusHandler(c *server.Conn, _ [][]byte) {
	if n.meta == nil {
		c.WriteErr(ErrNotSharded)
		return
	}
	m := n.meta.Map()
	mst := n.meta.Replica().Status()
	c.WriteMap(6)
	c.WriteBulkString("epoch")
	if m == nil {
		c.WriteUint(0)
	} else {
		c.WriteUint(m.Epoch)
	}
	c.WriteBulkString("shard")
	c.WriteUint(uint64(n.cfg.Sharding.Shard))
	c.WriteBulkString("meta_role")
	c.WriteBulkString(mst.Role)
	c.WriteBulkString("meta_leader")
	c.WriteBulkString(mst.Leader.ClientAddr)
	c.WriteBulkString("nodes") // registered spare nodes, as replicas are
	if m == nil {
		c.WriteArray(0)
	} else {
		c.WriteArray(len(m.Nodes))
		for _, r := range m.Nodes {
			c.WriteBulkString(fmt.Sprintf("%d=%s/%s", r.ID, r.RaftAddr, r.ClientAddr))
		}
	}
	c.WriteBulkString("shards")
	if m == nil {
		c.WriteArray(0)
		return
	}
	c.WriteArray(len(m.Shards))
	for _, s := range m.Shards {
		c.WriteMap(5)
		c.WriteBulkString("id")
		c.WriteUint(uint64(s.ID))
		c.WriteBulkString("leader")
		c.WriteUint(s.Leader)
		c.WriteBulkString("leader_addr")
		c.WriteBulkString(s.LeaderAddr())
		c.WriteBulkString("replicas")
		c.WriteArray(len(s.Replicas))
		for _, r := range s.Replicas {
			c.WriteBulkString(fmt.Sprintf("%d=%s/%s", r.ID, r.RaftAddr, r.ClientAddr))
		}
		c.WriteBulkString("slots")
		rs := m.SlotsOf(s.ID)
		c.WriteArray(len(rs))
		for _, r := range rs {
			c.WriteBulkString(fmt.Sprintf("%d-%d", r.From, r.To))
		}
	}
}

func (n *Node) shardsCreateHandler(c *server.Conn, args [][]byte) {
	if n.meta == nil {
		c.WriteErr(ErrNotSharded)
		return
	}
	rest := args[2:]
	if len(rest)%2 != 0 {
		c.WriteError("ERR syntax error: want SHARD REPLICAS pairs")
		return
	}
	var shards []shard.Shard
	for i := 0; i < len(rest); i += 2 {
		id, err := strconv.ParseUint(string(rest[i]), 10, 32)
		if err != nil || id == 0 {
			c.WriteError(fmt.Sprintf("ERR bad shard id %q", rest[i]))
			return
		}
		peers, err := ParseReplicas(string(rest[i+1]))
		if err != nil {
			c.WriteErr(err)
			return
		}
		s := shard.Shard{ID: uint32(id)}
		for _, p := range peers {
			s.Replicas = append(s.Replicas, shard.Replica{ID: p.ID, RaftAddr: p.RaftAddr, ClientAddr: p.ClientAddr})
		}
		shards = append(shards, s)
	}
	m := shard.Even(shards)
	if err := m.Validate(); err != nil {
		c.WriteErr(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), membershipTimeout)
	defer cancel()
	got, err := n.meta.Propose(ctx, shard.Create(m))
	if err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteUint(got.Epoch)
}

func (n *Node) shardsJoinHandler(c *server.Conn, args [][]byte) {
	if n.meta == nil {
		c.WriteErr(ErrNotSharded)
		return
	}
	id, err := strconv.ParseUint(string(args[2]), 10, 64)
	if err != nil || id == 0 {
		c.WriteError(fmt.Sprintf("ERR bad id %q", args[2]))
		return
	}
	p := replica.Peer{ID: id, RaftAddr: string(args[3]), ClientAddr: string(args[4])}
	st := n.meta.Replica().Status()
	for _, m := range st.Members {
		if m.ID == id {
			c.WriteOK() // already a member
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), membershipTimeout)
	defer cancel()
	if err := n.meta.Replica().AddLearner(ctx, p); err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteOK()
}

func (n *Node) shardsAddNodeHandler(c *server.Conn, args [][]byte) {
	if n.meta == nil {
		c.WriteErr(ErrNotSharded)
		return
	}
	id, err := strconv.ParseUint(string(args[2]), 10, 64)
	if err != nil || id == 0 {
		c.WriteErr(fmt.Errorf("%w: node id %q (want 1..2^64-1)", shard.ErrInvalidOp, args[2]))
		return
	}
	ctx, cancel := context.WithTimeout(c.Context(), membershipTimeout)
	defer cancel()
	got, err := n.meta.Propose(ctx, shard.AddNode(shard.Replica{ID: id, RaftAddr: string(args[3]), ClientAddr: string(args[4])}))
	if err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteUint(got.Epoch)
}
