package shard

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// NumSlots is the number of Redis Cluster slots.
const NumSlots = 16384

// maxAddrLen bounds a replica's addresses.
const maxAddrLen = 255

// Errors of maps and ops, for errors.Is.
var (
	// ErrInvalidMap: a map breaks an invariant of the package doc.
	ErrInvalidMap = errors.New("shard: invalid map")
	// ErrCorrupt: encoded bytes are damaged (bad CRC, truncated, unknown
	// version).
	ErrCorrupt = errors.New("shard: corrupt encoding")
	// ErrInvalidOp: an op is malformed (unknown kind, bad ranges or
	// replicas), or would make the map invalid.
	ErrInvalidOp = errors.New("shard: invalid op")
	// ErrStaleTerm: a leader hint older than the map's (or conflicting
	// with it in the same term).
	ErrStaleTerm = errors.New("shard: stale leader term")
	// ErrUnchanged: the op would change nothing (a hint the map already
	// holds).
	ErrUnchanged = errors.New("shard: op changes nothing")
	// ErrUnknownShard: an op names a shard the map does not have.
	ErrUnknownShard = errors.New("shard: unknown shard")
	// ErrShardExists: AddShard with the id of a shard the map has.
	ErrShardExists = errors.New("shard: shard exists")
	// ErrMapExists: Create on a map that exists.
	ErrMapExists = errors.New("shard: map already created")
	// ErrNoMap: an op other than Create on the empty state (nil map).
	ErrNoMap = errors.New("shard: no map yet")
	// ErrNodeExists: AddNode with the id of a registered node or of a
	// replica of a shard.
	ErrNodeExists = errors.New("shard: node id in use")
	// ErrAddrInUse: AddNode with a Raft or client address that a
	// registered node or a replica already has.
	ErrAddrInUse = errors.New("shard: address in use")
	// ErrBadAddr: an address that is not HOST:PORT (a port 1-65535, a
	// host), or too long.
	ErrBadAddr = errors.New("shard: bad address")
)

// Replica is one replica of a shard: its id (unique in the cluster; the
// Redis node id is server.NodeID(ID)), the address its Raft transport
// listens on, and the address clients reach it at ("ip:port").
type Replica struct {
	ID                   uint64
	RaftAddr, ClientAddr string
}

// Shard is one Raft group of replicas. Leader is a hint (0: unknown), set
// by SetLeader for the Raft term LeaderTerm.
type Shard struct {
	ID         uint32
	Replicas   []Replica
	Leader     uint64
	LeaderTerm uint64
}

// Range assigns the slots From..To (inclusive) to a shard.
type Range struct {
	From, To uint16
	Shard    uint32
}

// Map is the cluster's slot map at one epoch. Shards are sorted by id;
// Ranges are sorted and cover 0..NumSlots-1 exactly once. Nodes are the
// registered spare nodes (AddNode), sorted by id: processes known to the
// cluster by id and addresses that serve no shard yet, the targets of a
// move; a node leaves the list when it becomes a replica of a shard. A
// Map is immutable once shared: Apply returns a new one.
type Map struct {
	Epoch  uint64
	Shards []Shard
	Ranges []Range
	Nodes  []Replica
}

// Node returns the registered spare node with id, or nil.
func (m *Map) Node(id uint64) *Replica {
	if m == nil {
		return nil
	}
	for i := range m.Nodes {
		if m.Nodes[i].ID == id {
			return &m.Nodes[i]
		}
	}
	return nil
}

// Shard returns the shard with id, or nil.
func (m *Map) Shard(id uint32) *Shard {
	if m == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(m.Shards, id, func(s Shard, id uint32) int { return cmp.Compare(s.ID, id) })
	if !ok {
		return nil
	}
	return &m.Shards[i]
}

// ShardOf returns the shard serving slot, or nil if the slot is out of
// range or unassigned (only in a map that does not validate).
func (m *Map) ShardOf(slot int) *Shard {
	if m == nil || slot < 0 || slot >= NumSlots {
		return nil
	}
	i, _ := slices.BinarySearchFunc(m.Ranges, slot, func(r Range, s int) int {
		switch {
		case int(r.To) < s:
			return -1
		case int(r.From) > s:
			return 1
		}
		return 0
	})
	if i == len(m.Ranges) || int(m.Ranges[i].From) > slot || int(m.Ranges[i].To) < slot {
		return nil
	}
	return m.Shard(m.Ranges[i].Shard)
}

// SlotsOf returns the ranges of shard id, in slot order.
func (m *Map) SlotsOf(id uint32) []Range {
	if m == nil {
		return nil
	}
	var out []Range
	for _, r := range m.Ranges {
		if r.Shard == id {
			out = append(out, r)
		}
	}
	return out
}

// Replica returns the replica with id and its shard, or nil.
func (m *Map) Replica(id uint64) (*Replica, *Shard) {
	if m == nil {
		return nil, nil
	}
	for i := range m.Shards {
		s := &m.Shards[i]
		for j := range s.Replicas {
			if s.Replicas[j].ID == id {
				return &s.Replicas[j], s
			}
		}
	}
	return nil, nil
}

// LeaderAddr returns the client address to send a shard's writes to: its
// leader hint's, or its first replica's when the hint is unknown.
func (s *Shard) LeaderAddr() string {
	if s == nil || len(s.Replicas) == 0 {
		return ""
	}
	for _, r := range s.Replicas {
		if r.ID == s.Leader {
			return r.ClientAddr
		}
	}
	return s.Replicas[0].ClientAddr
}

// Validate reports every broken invariant of m in one ErrInvalidMap.
func (m *Map) Validate() error {
	if m == nil {
		return fmt.Errorf("%w: nil map", ErrInvalidMap)
	}
	var errs []error
	bad := func(f string, a ...any) {
		if len(errs) < 8 {
			errs = append(errs, fmt.Errorf(f, a...))
		}
	}
	if len(m.Shards) == 0 {
		bad("no shards")
	}
	seen := map[uint64]uint32{}
	for i, s := range m.Shards {
		if s.ID == 0 {
			bad("shard id 0")
		}
		if i > 0 && s.ID <= m.Shards[i-1].ID {
			bad("shards not sorted by unique id at %d", s.ID)
		}
		if err := validReplicas(s.Replicas); err != nil {
			bad("shard %d: %v", s.ID, err)
		}
		for _, r := range s.Replicas {
			if other, ok := seen[r.ID]; ok && r.ID != 0 {
				bad("replica %d in shards %d and %d", r.ID, other, s.ID)
			}
			seen[r.ID] = s.ID
		}
		if s.Leader != 0 && !hasReplica(s.Replicas, s.Leader) {
			bad("shard %d: leader %d is not a replica", s.ID, s.Leader)
		}
	}
	next := 0
	for _, r := range m.Ranges {
		if r.From > r.To || int(r.To) >= NumSlots {
			bad("range %d-%d", r.From, r.To)
			continue
		}
		if int(r.From) != next {
			bad("slots %d-%d not covered once (range starts at %d)", next, int(r.From)-1, r.From)
		}
		next = int(r.To) + 1
		if m.Shard(r.Shard) == nil {
			bad("range %d-%d: unknown shard %d", r.From, r.To, r.Shard)
		}
	}
	if next != NumSlots {
		bad("slots %d-%d unassigned", next, NumSlots-1)
	}
	for i, nd := range m.Nodes {
		if nd.ID == 0 {
			bad("node id 0")
		}
		if i > 0 && nd.ID <= m.Nodes[i-1].ID {
			bad("nodes not sorted by unique id at %d", nd.ID)
		}
		if s, ok := seen[nd.ID]; ok {
			bad("node %d is a replica of shard %d", nd.ID, s)
		}
		if err := errors.Join(checkAddr(nd.RaftAddr), checkAddr(nd.ClientAddr)); err != nil {
			bad("node %d: %v", nd.ID, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidMap, errors.Join(errs...))
	}
	return nil
}

// validReplicas checks one shard's replica list on its own.
func validReplicas(rs []Replica) error {
	if len(rs) == 0 {
		return errors.New("no replicas")
	}
	for i, r := range rs {
		if r.ID == 0 {
			return errors.New("replica id 0")
		}
		for _, o := range rs[:i] {
			if o.ID == r.ID {
				return fmt.Errorf("replica %d twice", r.ID)
			}
		}
		if r.RaftAddr == "" || len(r.RaftAddr) > maxAddrLen {
			return fmt.Errorf("replica %d: raft address %q", r.ID, r.RaftAddr)
		}
		if len(r.ClientAddr) > maxAddrLen {
			return fmt.Errorf("replica %d: client address too long", r.ID)
		}
		if _, _, err := net.SplitHostPort(r.ClientAddr); err != nil {
			return fmt.Errorf("replica %d: client address %q: %v", r.ID, r.ClientAddr, err)
		}
	}
	return nil
}

// checkAddr refuses an address that is not HOST:PORT with a port 1-65535
// and a host (ErrBadAddr).
func checkAddr(a string) error {
	if len(a) > maxAddrLen {
		return fmt.Errorf("%w: %d bytes", ErrBadAddr, len(a))
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%w: %q is not HOST:PORT", ErrBadAddr, a)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if host == "" || err != nil || p == 0 {
		return fmt.Errorf("%w: %q is not HOST:PORT with a port 1-65535", ErrBadAddr, a)
	}
	return nil
}

func hasReplica(rs []Replica, id uint64) bool {
	return slices.ContainsFunc(rs, func(r Replica) bool { return r.ID == id })
}

// Clone returns a deep copy of m.
func (m *Map) Clone() *Map {
	if m == nil {
		return nil
	}
	c := &Map{Epoch: m.Epoch, Shards: make([]Shard, len(m.Shards)), Ranges: slices.Clone(m.Ranges), Nodes: slices.Clone(m.Nodes)}
	for i, s := range m.Shards {
		s.Replicas = slices.Clone(s.Replicas)
		c.Shards[i] = s
	}
	return c
}

// Equal reports whether m and o are the same map (same epoch, shards,
// replicas in order, hints, ranges and registered nodes).
func (m *Map) Equal(o *Map) bool {
	if m == nil || o == nil {
		return m == o
	}
	return m.Epoch == o.Epoch &&
		slices.EqualFunc(m.Shards, o.Shards, func(a, b Shard) bool {
			return a.ID == b.ID && a.Leader == b.Leader && a.LeaderTerm == b.LeaderTerm && slices.Equal(a.Replicas, b.Replicas)
		}) &&
		slices.Equal(m.Ranges, o.Ranges) && slices.Equal(m.Nodes, o.Nodes)
}

// Even returns a map (epoch 0, for Create) of shards with the slots split
// in contiguous ranges as evenly as redis-cli --cluster create splits them:
// shard i (in the order given) gets the i-th range. Shards are sorted by id
// in the map. Even does not validate (an empty or duplicate list gives a
// map Validate refuses).
func Even(shards []Shard) *Map {
	m := &Map{}
	n := len(shards)
	if n == 0 {
		return m
	}
	for _, s := range shards {
		s.Replicas = slices.Clone(s.Replicas)
		m.Shards = append(m.Shards, s)
	}
	slices.SortStableFunc(m.Shards, func(a, b Shard) int { return cmp.Compare(a.ID, b.ID) })
	// redis-cli's clusterManagerCommandCreate: a float cursor, each last
	// slot rounded, the last range running to the end.
	per := float64(NumSlots) / float64(n)
	cursor, first := 0.0, 0
	for i, s := range shards {
		if first >= NumSlots {
			break
		}
		last := int(roundHalfAway(cursor + per - 1))
		if last > NumSlots-1 || i == n-1 {
			last = NumSlots - 1
		}
		if last < first {
			last = first
		}
		m.Ranges = append(m.Ranges, Range{From: uint16(first), To: uint16(last), Shard: s.ID})
		first = last + 1
		cursor += per
	}
	return m
}

func roundHalfAway(x float64) float64 {
	if x < 0 {
		return -roundHalfAway(-x)
	}
	return float64(int64(x + 0.5))
}

// String is a readable dump of the map, one shard per line, then the
// ranges: for tests and logs.
func (m *Map) String() string {
	if m == nil {
		return "<no map>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d\n", m.Epoch)
	for _, s := range m.Shards {
		fmt.Fprintf(&b, "shard %d leader %d term %d:", s.ID, s.Leader, s.LeaderTerm)
		for _, r := range s.Replicas {
			fmt.Fprintf(&b, " %d@%s/%s", r.ID, r.RaftAddr, r.ClientAddr)
		}
		b.WriteByte('\n')
	}
	for _, r := range m.Ranges {
		fmt.Fprintf(&b, "slots %d-%d: shard %d\n", r.From, r.To, r.Shard)
	}
	for _, n := range m.Nodes {
		fmt.Fprintf(&b, "node %d@%s/%s\n", n.ID, n.RaftAddr, n.ClientAddr)
	}
	return b.String()
}
