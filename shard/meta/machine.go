package meta

import (
	"log/slog"

	"github.com/tallydb/tally/replica"
	"github.com/tallydb/tally/shard"
	"github.com/tallydb/tally/store"
)

// Families returns the store families a store needs to hold the group's
// state (OpenMachine's store also needs replica.Families()).
func Families() []store.FamilySpec { return []store.FamilySpec{familySpec} }

// Machine is the group's state machine on a store, without a replica of
// its own: a host that drives its replica itself (cluster's deterministic
// simulation, with replica.Stepped) applies committed entries with Apply,
// snapshots with Snapshots, and proposes Command's data. Group is this
// machine under a replica.Node.
type Machine struct{ g *Group }

// OpenMachine loads the group's state from db (opened with Families and
// replica.Families).
func OpenMachine(db *store.DB) (*Machine, error) {
	g := &Group{db: db, log: slog.New(slog.DiscardHandler), changed: make(chan struct{}), stop: make(chan struct{})}
	var err error
	if g.fam, err = db.Family(familySpec.Name); err != nil {
		return nil, err
	}
	if g.st, err = g.load(); err != nil {
		return nil, err
	}
	g.cur.Store(g.st.m)
	return &Machine{g}, nil
}

// Apply is the replica's Config.Apply.
func (m *Machine) Apply(index uint64, data []byte) ([]byte, error) { return m.g.apply(index, data) }

// Snapshots is the replica's Config.Snapshots.
func (m *Machine) Snapshots() replica.Snapshotter { return (*snapshots)(m.g) }

// Map returns the current map (nil before Create), shared and immutable.
func (m *Machine) Map() *shard.Map { return m.g.Map() }

// Command encodes op as the data of a proposal, with the request id
// (node, seq): a retry of the same op carries the same id and applies at
// most once.
func Command(node, seq uint64, op shard.Op) []byte {
	return appendCommand(nil, reqID{node: node, seq: seq}, op)
}

// Reply decodes the reply of an applied proposal: the map it made, or
// the refusal's named error (shard.ErrStaleTerm, ...).
func (m *Machine) Reply(b []byte) (*shard.Map, error) { return m.g.decodeReply(b) }
