package shard

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Kind is the kind of an Op.
type Kind uint8

// Kinds of ops.
const (
	// KindCreate creates the first map (Op.Map) from the empty state.
	KindCreate Kind = 1 + iota
	// KindSetLeader sets shard Op.Shard's leader hint to Op.Replica for
	// Raft term Op.Term.
	KindSetLeader
	// KindSetReplicas replaces shard Op.Shard's replicas by Op.Replicas
	// (after a membership change).
	KindSetReplicas
	// KindAddShard adds shard Op.Add (with no slots).
	KindAddShard
	// KindAssignSlots assigns each of Op.Ranges to its Shard.
	KindAssignSlots
	// KindAddNode registers Op.Node as a spare node (Map.Nodes).
	KindAddNode
)

func (k Kind) String() string {
	switch k {
	case KindCreate:
		return "create"
	case KindSetLeader:
		return "set-leader"
	case KindSetReplicas:
		return "set-replicas"
	case KindAddShard:
		return "add-shard"
	case KindAssignSlots:
		return "assign-slots"
	case KindAddNode:
		return "add-node"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Op is one deterministic change of the map. Build it with Create,
// SetLeader, SetReplicas, AddShard, AssignSlots or AddNode; only the
// fields of its Kind are encoded.
type Op struct {
	Kind     Kind
	Map      *Map      // Create
	Shard    uint32    // SetLeader, SetReplicas
	Replica  uint64    // SetLeader: the leader (0: unknown)
	Term     uint64    // SetLeader: its Raft term
	Replicas []Replica // SetReplicas
	Add      Shard     // AddShard
	Ranges   []Range   // AssignSlots
	Node     Replica   // AddNode
}

// Create is the op that creates the first map, m (its epoch is ignored:
// the created map is epoch 1).
func Create(m *Map) Op { return Op{Kind: KindCreate, Map: m} }

// SetLeader is the op that sets shard's leader hint to replica (0:
// unknown) for Raft term.
func SetLeader(shard uint32, replica, term uint64) Op {
	return Op{Kind: KindSetLeader, Shard: shard, Replica: replica, Term: term}
}

// SetReplicas is the op that replaces shard's replicas.
func SetReplicas(shard uint32, replicas []Replica) Op {
	return Op{Kind: KindSetReplicas, Shard: shard, Replicas: replicas}
}

// AddShard is the op that adds shard s, owning no slots yet.
func AddShard(s Shard) Op { return Op{Kind: KindAddShard, Add: s} }

// AssignSlots is the op that assigns each range to its Shard.
func AssignSlots(ranges []Range) Op { return Op{Kind: KindAssignSlots, Ranges: ranges} }

// AddNode is the op that registers node n (id, Raft and client address)
// as a spare node of the cluster, the target of a later move. It is
// refused with ErrNodeExists for an id in use (a registered node or a
// replica), ErrAddrInUse for an address in use (either address of a
// registered node or a replica, in either role), ErrBadAddr for an
// address that is not HOST:PORT, and ErrInvalidOp for id 0.
func AddNode(n Replica) Op { return Op{Kind: KindAddNode, Node: n} }

func (o Op) String() string {
	switch o.Kind {
	case KindCreate:
		if o.Map == nil {
			return "create <nil>"
		}
		return fmt.Sprintf("create (%d shards, %d ranges)", len(o.Map.Shards), len(o.Map.Ranges))
	case KindSetLeader:
		return fmt.Sprintf("set-leader shard %d replica %d term %d", o.Shard, o.Replica, o.Term)
	case KindSetReplicas:
		return fmt.Sprintf("set-replicas shard %d %v", o.Shard, o.Replicas)
	case KindAddShard:
		return fmt.Sprintf("add-shard %d %v", o.Add.ID, o.Add.Replicas)
	case KindAssignSlots:
		return fmt.Sprintf("assign-slots %v", o.Ranges)
	case KindAddNode:
		return fmt.Sprintf("add-node %d@%s/%s", o.Node.ID, o.Node.RaftAddr, o.Node.ClientAddr)
	}
	return o.Kind.String()
}

// Apply returns the map op makes of m, with Epoch m.Epoch+1; m is not
// changed. m may be nil (the empty state) only for Create. A refused op
// returns a named error (ErrNoMap, ErrMapExists, ErrUnknownShard,
// ErrShardExists, ErrStaleTerm, ErrUnchanged, ErrInvalidOp,
// ErrInvalidMap, ErrNodeExists, ErrAddrInUse, ErrBadAddr) and no map.
func (m *Map) Apply(op Op) (*Map, error) {
	if op.Kind == KindCreate {
		if m != nil {
			return nil, ErrMapExists
		}
		if op.Map == nil {
			return nil, fmt.Errorf("%w: create without a map", ErrInvalidOp)
		}
		if err := op.Map.Validate(); err != nil {
			return nil, err
		}
		n := op.Map.Clone()
		n.Epoch = 1
		n.Ranges = mergeRanges(n.Ranges)
		return n, nil
	}
	if m == nil {
		return nil, ErrNoMap
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	var n *Map
	var err error
	switch op.Kind {
	case KindSetLeader:
		n, err = m.setLeader(op)
	case KindSetReplicas:
		n, err = m.setReplicas(op)
	case KindAddShard:
		n, err = m.addShard(op)
	case KindAssignSlots:
		n, err = m.assignSlots(op)
	case KindAddNode:
		n, err = m.addNode(op)
	default:
		return nil, fmt.Errorf("%w: unknown kind %d", ErrInvalidOp, op.Kind)
	}
	if err != nil {
		return nil, err
	}
	n.Epoch = m.Epoch + 1
	if err := n.Validate(); err != nil { // a bug of the ops above, or an overflow
		return nil, fmt.Errorf("%w: %w", ErrInvalidOp, err)
	}
	return n, nil
}

func (m *Map) setLeader(op Op) (*Map, error) {
	s := m.Shard(op.Shard)
	if s == nil {
		return nil, fmt.Errorf("%w: %d", ErrUnknownShard, op.Shard)
	}
	if op.Replica != 0 && !hasReplica(s.Replicas, op.Replica) {
		return nil, fmt.Errorf("%w: replica %d is not in shard %d", ErrInvalidOp, op.Replica, op.Shard)
	}
	switch {
	case op.Term < s.LeaderTerm:
		return nil, fmt.Errorf("%w: term %d below shard %d's %d", ErrStaleTerm, op.Term, s.ID, s.LeaderTerm)
	case op.Term == s.LeaderTerm && op.Replica == s.Leader:
		return nil, fmt.Errorf("%w: shard %d has leader %d in term %d", ErrUnchanged, s.ID, s.Leader, s.LeaderTerm)
	case op.Term == s.LeaderTerm && s.Leader != 0:
		// One leader per term: a different one in the same term is a
		// confused hint.
		return nil, fmt.Errorf("%w: shard %d has leader %d in term %d, not %d", ErrStaleTerm, s.ID, s.Leader, s.LeaderTerm, op.Replica)
	}
	n := m.Clone()
	t := n.Shard(op.Shard)
	t.Leader, t.LeaderTerm = op.Replica, op.Term
	return n, nil
}

func (m *Map) setReplicas(op Op) (*Map, error) {
	s := m.Shard(op.Shard)
	if s == nil {
		return nil, fmt.Errorf("%w: %d", ErrUnknownShard, op.Shard)
	}
	if err := validReplicas(op.Replicas); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOp, err)
	}
	if slices.Equal(op.Replicas, s.Replicas) {
		return nil, fmt.Errorf("%w: shard %d has these replicas", ErrUnchanged, s.ID)
	}
	if err := m.replicasFree(op.Replicas, s.ID); err != nil {
		return nil, err
	}
	n := m.Clone()
	t := n.Shard(op.Shard)
	t.Replicas = slices.Clone(op.Replicas)
	n.Nodes = withoutReplicas(n.Nodes, t.Replicas)
	if !hasReplica(t.Replicas, t.Leader) {
		t.Leader = 0 // the hint left the shard; its term stays as the floor
	}
	return n, nil
}

// replicasFree checks that no replica of rs belongs to a shard other than
// own.
func (m *Map) replicasFree(rs []Replica, own uint32) error {
	for _, r := range rs {
		if _, s := m.Replica(r.ID); s != nil && s.ID != own {
			return fmt.Errorf("%w: replica %d belongs to shard %d", ErrInvalidOp, r.ID, s.ID)
		}
	}
	return nil
}

func (m *Map) addShard(op Op) (*Map, error) {
	s := op.Add
	if s.ID == 0 {
		return nil, fmt.Errorf("%w: shard id 0", ErrInvalidOp)
	}
	if m.Shard(s.ID) != nil {
		return nil, fmt.Errorf("%w: %d", ErrShardExists, s.ID)
	}
	if err := validReplicas(s.Replicas); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOp, err)
	}
	if s.Leader != 0 && !hasReplica(s.Replicas, s.Leader) {
		return nil, fmt.Errorf("%w: leader %d is not a replica", ErrInvalidOp, s.Leader)
	}
	if err := m.replicasFree(s.Replicas, s.ID); err != nil {
		return nil, err
	}
	n := m.Clone()
	s.Replicas = slices.Clone(s.Replicas)
	n.Nodes = withoutReplicas(n.Nodes, s.Replicas)
	i, _ := slices.BinarySearchFunc(n.Shards, s.ID, func(x Shard, id uint32) int { return cmp.Compare(x.ID, id) })
	n.Shards = slices.Insert(n.Shards, i, s)
	return n, nil
}

func (m *Map) assignSlots(op Op) (*Map, error) {
	if len(op.Ranges) == 0 {
		return nil, fmt.Errorf("%w: no ranges", ErrInvalidOp)
	}
	rs := slices.Clone(op.Ranges)
	slices.SortFunc(rs, func(a, b Range) int { return int(a.From) - int(b.From) })
	var errs []error
	for i, r := range rs {
		if r.From > r.To || int(r.To) >= NumSlots {
			errs = append(errs, fmt.Errorf("%w: range %d-%d", ErrInvalidOp, r.From, r.To))
		} else if i > 0 && r.From <= rs[i-1].To {
			errs = append(errs, fmt.Errorf("%w: ranges %d-%d and %d-%d overlap", ErrInvalidOp, rs[i-1].From, rs[i-1].To, r.From, r.To))
		}
		if m.Shard(r.Shard) == nil {
			errs = append(errs, fmt.Errorf("%w: %d", ErrUnknownShard, r.Shard))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Expand to one owner per slot, overwrite, and cut into ranges again.
	owner := make([]uint32, NumSlots)
	for _, r := range m.Ranges {
		for s := int(r.From); s <= int(r.To); s++ {
			owner[s] = r.Shard
		}
	}
	changed := false
	for _, r := range rs {
		for s := int(r.From); s <= int(r.To); s++ {
			changed = changed || owner[s] != r.Shard
			owner[s] = r.Shard
		}
	}
	if !changed {
		return nil, fmt.Errorf("%w: the slots are assigned so already", ErrUnchanged)
	}
	n := m.Clone()
	n.Ranges = n.Ranges[:0]
	for s := 0; s < NumSlots; {
		e := s
		for e+1 < NumSlots && owner[e+1] == owner[s] {
			e++
		}
		n.Ranges = append(n.Ranges, Range{From: uint16(s), To: uint16(e), Shard: owner[s]})
		s = e + 1
	}
	return n, nil
}

// mergeRanges joins adjacent ranges of one shard (rs sorted, contiguous).
func mergeRanges(rs []Range) []Range {
	out := rs[:0]
	for _, r := range rs {
		if k := len(out); k > 0 && out[k-1].Shard == r.Shard && int(out[k-1].To)+1 == int(r.From) {
			out[k-1].To = r.To
			continue
		}
		out = append(out, r)
	}
	return out
}

// addNode registers op.Node as a spare node; every check runs before
// anything changes, so a refused node leaves the map as it was.
func (m *Map) addNode(op Op) (*Map, error) {
	nd := op.Node
	if nd.ID == 0 {
		return nil, fmt.Errorf("%w: node id 0", ErrInvalidOp)
	}
	if err := errors.Join(checkAddr(nd.RaftAddr), checkAddr(nd.ClientAddr)); err != nil {
		return nil, fmt.Errorf("node %d: %w", nd.ID, err)
	}
	if m.Node(nd.ID) != nil {
		return nil, fmt.Errorf("%w: %d is a registered node", ErrNodeExists, nd.ID)
	}
	if _, s := m.Replica(nd.ID); s != nil {
		return nil, fmt.Errorf("%w: %d is a replica of shard %d", ErrNodeExists, nd.ID, s.ID)
	}
	inUse := func(o Replica, where string) error {
		for _, a := range []string{nd.RaftAddr, nd.ClientAddr} {
			if a == o.RaftAddr || a == o.ClientAddr {
				return fmt.Errorf("%w: %s is %s's", ErrAddrInUse, a, where)
			}
		}
		return nil
	}
	for _, o := range m.Nodes {
		if err := inUse(o, fmt.Sprintf("registered node %d", o.ID)); err != nil {
			return nil, err
		}
	}
	for _, s := range m.Shards {
		for _, r := range s.Replicas {
			if err := inUse(r, fmt.Sprintf("replica %d of shard %d", r.ID, s.ID)); err != nil {
				return nil, err
			}
		}
	}
	n := m.Clone()
	i, _ := slices.BinarySearchFunc(n.Nodes, nd.ID, func(x Replica, id uint64) int {
		switch {
		case x.ID < id:
			return -1
		case x.ID > id:
			return 1
		}
		return 0
	})
	n.Nodes = slices.Insert(n.Nodes, i, nd)
	return n, nil
}

// withoutReplicas drops from nodes those that are now replicas of a shard
// (a registered node that a move made a replica is no longer spare).
func withoutReplicas(nodes, replicas []Replica) []Replica {
	return slices.DeleteFunc(nodes, func(n Replica) bool { return hasReplica(replicas, n.ID) })
}
