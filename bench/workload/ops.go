package workload

import (
	"math/rand/v2"
)

// OpKind tells a read from a write.
type OpKind uint8

const (
	// OpRead reads every column of Op.IDs at once (a feed page).
	OpRead OpKind = iota
	// OpWrite adds Op.Delta to column Op.Col of Op.ID.
	OpWrite
)

// String returns "read" or "write".
func (k OpKind) String() string {
	if k == OpWrite {
		return "write"
	}
	return "read"
}

// Op is one operation of the mix.
type Op struct {
	Kind OpKind
	// IDs are the ids of a read, BatchSize of them, in no particular order
	// and possibly repeated. NB: the slice belongs to the OpStream and is
	// overwritten by its next call to Next.
	IDs []uint64
	// ID, Col and Delta describe a write.
	ID    uint64
	Col   int
	Delta int64
}

// OpStream generates one client's operations. It is deterministic from the
// workload's seed and the client number, and not safe for concurrent use:
// give each client goroutine its own.
//
// The mix: an op is a write with probability p = r·B/(1+r·B) (r =
// WritesPerRead, B = BatchSize), so writes are r per id read. Every id is
// picked independently: with probability GraveDigFraction uniformly among all
// items, otherwise at an exponentially distributed age (mean RecentFraction
// of all items) counted back from the newest item; ages past the oldest
// item fall back to uniform. A write adds 1 to a uniformly chosen column.
type OpStream struct {
	w          *Workload
	rng        *rand.Rand
	ids        []uint64
	writeBelow uint64 // on 53-bit uniform integers
	graveBelow uint64
	meanAge    float64
}

// Ops returns the operation stream of the given client.
func (w *Workload) Ops(client int) *OpStream {
	c := w.cfg
	rb := c.WritesPerRead * float64(c.BatchSize)
	return &OpStream{
		w:          w,
		rng:        rand.New(rand.NewPCG(splitmix(c.Seed^0x6f70), uint64(client))),
		ids:        make([]uint64, c.BatchSize),
		writeBelow: uint64(rb / (1 + rb) * (1 << 53)),
		graveBelow: uint64(c.GraveDigFraction * (1 << 53)),
		meanAge:    c.RecentFraction * float64(c.Items),
	}
}

// Next fills op with the next operation. It does not allocate.
func (s *OpStream) Next(op *Op) {
	if s.rng.Uint64()>>11 < s.writeBelow {
		*op = Op{Kind: OpWrite, ID: s.w.ID(s.Index()), Col: s.rng.IntN(s.w.cfg.Columns), Delta: 1}
		return
	}
	for j := range s.ids {
		s.ids[j] = s.w.ID(s.Index())
	}
	*op = Op{Kind: OpRead, IDs: s.ids}
}

// Index draws one item index from the recency-skewed distribution that Next
// uses.
func (s *OpStream) Index() uint64 {
	n := s.w.cfg.Items
	if s.rng.Uint64()>>11 < s.graveBelow {
		return s.rng.Uint64N(n)
	}
	age := uint64(s.rng.ExpFloat64() * s.meanAge)
	if age >= n {
		return s.rng.Uint64N(n)
	}
	return n - 1 - age
}
