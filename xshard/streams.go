package xshard

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tallydb/tally/store"
)

// Errors, for errors.Is.
var (
	// ErrBadMessage: a message or a batch of messages is empty, too large
	// or malformed. Nothing changed.
	ErrBadMessage = errors.New("xshard: bad message")
	// ErrBadShard: a shard id is 0, or a message names its own shard.
	ErrBadShard = errors.New("xshard: bad shard id")
	// ErrOutboxFull: a target already has MaxPending unacknowledged
	// messages. Nothing changed; the command that appended fails.
	ErrOutboxFull = errors.New("xshard: outbox full")
	// ErrBadAck: an acknowledgement names a sequence never appended.
	ErrBadAck = errors.New("xshard: acknowledgement past the last message")
	// ErrGap: a batch starts after the next sequence the receiver expects
	// (first > last+1). Nothing was applied; the sender resends from
	// last+1 (the reply carries last).
	ErrGap = errors.New("xshard: gap in sequence")
	// ErrRepeated: a second TALLY.XRECV from one source in one replicated
	// entry (a client pipelining them). It is refused, deterministically,
	// because a re-apply could not tell the two apart; resend it alone.
	ErrRepeated = errors.New("xshard: second receive from one source in one entry")
	// ErrCorrupt: a stored record fails its checksum or decoding.
	ErrCorrupt = errors.New("xshard: corrupt record")
)

// Limits.
const (
	// MaxArgs is the most arguments of one message (its command name
	// included).
	MaxArgs = 1024
	// MaxMessageBytes is the most argument bytes of one message.
	MaxMessageBytes = 64 << 10
	// MaxBatchMessages is the most messages of one TALLY.XRECV.
	MaxBatchMessages = 1024
	// MaxBatchBytes is the most bytes of one TALLY.XRECV's encoded
	// messages: well inside a replicated entry (server.MaxEntryBytes).
	MaxBatchBytes = 1 << 20
	// DefaultMaxPending is Options.MaxPending's default.
	DefaultMaxPending = 1 << 20
)

// Family prefixes, from the range store leaves to hosts (0x60-0xDF).
const (
	PrefixOut   = 0x68
	PrefixState = 0x69
)

// Families returns the FamilySpecs of the streams' data, for
// store.Options.Families (Open registers them on a store opened without).
func Families() []store.FamilySpec {
	return []store.FamilySpec{
		{Name: "xshard-out", Prefix: PrefixOut, MinKeyLen: 12, MaxKeyLen: 12, MaxValueLen: MaxMessageBytes + MaxArgs*3 + 64},
		{Name: "xshard-state", Prefix: PrefixState, MinKeyLen: 1, MaxKeyLen: 5, MaxValueLen: 64},
	}
}

// Options configure Open. A nil *Options means the defaults.
type Options struct {
	// Now stamps appended messages (for XSTATUS's oldest age). A
	// replicated host passes the replica's clock (cluster.Node.Clock's
	// Now), so every replica stores the same bytes. The default is
	// time.Now.
	Now func() time.Time
	// MaxPending bounds a target's unacknowledged messages: an append past
	// it fails with ErrOutboxFull. The default is DefaultMaxPending.
	MaxPending uint64
}

// Streams is one shard's end of its cross-shard streams: the outbox of
// messages to other shards and the inbox record of what it applied from
// each. See the package doc for who calls what. Its methods are safe for
// concurrent use, but the apply-path methods (Stage's Append, Ack,
// Receive) must be called serially, from the replicated apply.
type Streams struct {
	db    *store.DB
	self  uint32
	opts  Options
	out   *store.Family
	state *store.Family
	wake  chan struct{}

	// mu guards cur: the sources received from in the entry being applied
	// (one TALLY.XRECV per source per entry, see Receive).
	mu  sync.Mutex
	cur struct {
		entry uint64
		seen  map[uint32]bool
	}
}

// Open attaches the streams of shard self to db, registering their
// families if db was opened without them. Make a new Streams when the
// store is reopened (a snapshot install): Receive's per-entry memory
// must start empty on a store that may re-apply an entry.
func Open(db *store.DB, self uint32, o *Options) (*Streams, error) {
	if self == 0 {
		return nil, fmt.Errorf("%w: own shard id 0", ErrBadShard)
	}
	s := &Streams{db: db, self: self, wake: make(chan struct{}, 1)}
	if o != nil {
		s.opts = *o
	}
	if s.opts.Now == nil {
		s.opts.Now = time.Now
	}
	if s.opts.MaxPending == 0 {
		s.opts.MaxPending = DefaultMaxPending
	}
	for _, spec := range Families() {
		f, err := db.Family(spec.Name)
		if err != nil {
			if f, err = db.RegisterFamily(spec); err != nil {
				return nil, fmt.Errorf("xshard: family %s: %w", spec.Name, err)
			}
		}
		if f.Prefix() != spec.Prefix {
			return nil, fmt.Errorf("xshard: family %s has prefix %#x, want %#x", spec.Name, f.Prefix(), spec.Prefix)
		}
		if spec.Prefix == PrefixOut {
			s.out = f
		} else {
			s.state = f
		}
	}
	return s, nil
}

// Self returns the shard id the streams belong to.
func (s *Streams) Self() uint32 { return s.self }

// Wake returns a channel that receives after an append (a hint for the
// sender, never a guarantee: it may also fire when nothing committed).
func (s *Streams) Wake() <-chan struct{} { return s.wake }

func (s *Streams) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Streams) head(target uint32) (head, error) {
	v, ok, err := s.state.Get(appendStateKey(nil, PrefixState, headTag, target), nil)
	if err != nil || !ok {
		return head{}, err
	}
	return decodeHead(v)
}

func (s *Streams) inbox(src uint32) (inboxRecord, error) {
	v, ok, err := s.state.Get(appendStateKey(nil, PrefixState, inboxTag, src), nil)
	if err != nil || !ok {
		return inboxRecord{}, err
	}
	return decodeInboxRecord(v)
}

// Stage is the outbox appends of one store batch. Make one per batch with
// Streams.Stage, append, commit the batch, and drop the Stage. Stages must
// not overlap (stage and commit one batch before staging the next): the
// replicated apply is serial, which gives this.
type Stage struct {
	s     *Streams
	b     *store.Batch
	heads map[uint32]head
}

// Stage starts the outbox appends that ride in b.
func (s *Streams) Stage(b *store.Batch) *Stage {
	return &Stage{s: s, b: b, heads: map[uint32]head{}}
}

// Append adds a message for shard target to the batch: argv is a tally
// command, run on target as if applied from its log. It returns the
// message's sequence number (per target, from 1, consecutive). It must be
// called from a replicated apply, so every replica of this shard gives the
// same numbers. Bad input (ErrBadShard, ErrBadMessage) and a full outbox
// (ErrOutboxFull) return an error and add nothing to the batch.
func (st *Stage) Append(target uint32, argv [][]byte) (uint64, error) {
	s := st.s
	if target == 0 || target == s.self {
		return 0, fmt.Errorf("%w: target %d (own shard %d)", ErrBadShard, target, s.self)
	}
	if err := checkArgv(argv); err != nil {
		return 0, err
	}
	h, ok := st.heads[target]
	if !ok {
		var err error
		if h, err = s.head(target); err != nil {
			return 0, err
		}
	}
	if h.last-h.acked >= s.opts.MaxPending {
		return 0, fmt.Errorf("%w: target %d has %d pending", ErrOutboxFull, target, h.last-h.acked)
	}
	h.last++
	if err := s.out.Put(st.b, appendOutKey(nil, PrefixOut, target, h.last), appendMessage(nil, s.opts.Now().UnixMilli(), argv)); err != nil {
		return 0, err
	}
	if err := s.state.Put(st.b, appendStateKey(nil, PrefixState, headTag, target), appendHead(nil, h)); err != nil {
		return 0, err
	}
	st.heads[target] = h
	// NB: nothing in memory follows the commit (heads are read from the
	// store, a Stage dies with its batch, notify only wakes the sender),
	// so a commit skipped as a re-applied entry's duplicate leaves no
	// drift: the sender finds nothing new.
	s.notify()
	return h.last, nil
}

// Append appends one message for target in a batch of its own and commits
// it (see Stage.Append).
func (s *Streams) Append(target uint32, argv [][]byte) (uint64, error) {
	b := s.db.NewBatch()
	defer b.Close()
	seq, err := s.Stage(b).Append(target, argv)
	if err != nil {
		return 0, err
	}
	return seq, b.Commit()
}

// Ack drops target's messages up to seq: the target applied them. It is
// the apply of TALLY.XACK. It always makes exactly one commit (an ack at
// or below the last one rewrites the head unchanged), so the numbering of
// the entry's commits is the same on a re-apply, whatever the state (see
// the package doc). A seq past the last appended message is ErrBadAck and
// changes nothing.
func (s *Streams) Ack(target uint32, seq uint64) error {
	if target == 0 || target == s.self {
		return fmt.Errorf("%w: target %d (own shard %d)", ErrBadShard, target, s.self)
	}
	h, err := s.head(target)
	if err != nil {
		return err
	}
	if seq > h.last {
		return fmt.Errorf("%w: target %d seq %d, last appended %d", ErrBadAck, target, seq, h.last)
	}
	b := s.db.NewBatch()
	defer b.Close()
	if seq > h.acked {
		lo := appendOutKey(nil, PrefixOut, target, h.acked+1)
		hi := appendOutKey(nil, PrefixOut, target, seq+1)
		if seq == ^uint64(0) {
			hi = appendOutKey(nil, PrefixOut, target+1, 0)
		}
		if err := s.out.DeleteRange(b, lo, hi); err != nil {
			return err
		}
		h.acked = seq
	}
	if err := s.state.Put(b, appendStateKey(nil, PrefixState, headTag, target), appendHead(nil, h)); err != nil {
		return err
	}
	return b.Commit()
}

// Pending returns target's unacknowledged messages in order from the
// oldest: at most max messages and (after the first) about maxBytes of
// arguments, and the sequence of the first. first is acked+1 even when
// nothing is pending (msgs empty).
func (s *Streams) Pending(target uint32, max, maxBytes int) (first uint64, msgs [][][]byte, err error) {
	h, err := s.head(target)
	if err != nil {
		return 0, nil, err
	}
	first = h.acked + 1
	if h.last == h.acked {
		return first, nil, nil
	}
	it, err := s.out.NewIter(&store.IterOptions{
		Lower: appendOutKey(nil, PrefixOut, target, first),
		Upper: appendOutKey(nil, PrefixOut, target, h.last+1),
	})
	if err != nil {
		return 0, nil, err
	}
	defer it.Close()
	size, want := 0, first
	for ok := it.SeekGE(appendOutKey(nil, PrefixOut, target, first)); ok && len(msgs) < max; ok = it.Next() {
		k := it.Key()
		if seq := beUint64(k[5:]); seq != want {
			return 0, nil, fmt.Errorf("%w: target %d: message %d where %d was due", ErrCorrupt, target, seq, want)
		}
		_, argv, err := decodeMessage(it.Value())
		if err != nil {
			return 0, nil, err
		}
		n := 0
		for _, a := range argv {
			n += len(a) + 10
		}
		if len(msgs) > 0 && size+n > maxBytes {
			break
		}
		size += n
		msgs = append(msgs, cloneArgv(argv))
		want++
	}
	if err := it.Err(); err != nil {
		return 0, nil, err
	}
	if len(msgs) == 0 {
		return 0, nil, fmt.Errorf("%w: target %d: pending %d..%d missing", ErrCorrupt, target, first, h.last)
	}
	return first, msgs, nil
}

func beUint64(b []byte) uint64 {
	var v uint64
	for _, x := range b[:8] {
		v = v<<8 | uint64(x)
	}
	return v
}

func cloneArgv(argv [][]byte) [][]byte {
	out := make([][]byte, len(argv))
	for i, a := range argv {
		out[i] = append([]byte(nil), a...)
	}
	return out
}

// Receive applies a batch of messages from shard src whose first has
// sequence first: it is the apply of TALLY.XRECV and must run inside
// store.DB.ApplyEntry (the replicated apply). Messages at or below the
// last sequence applied from src are skipped; the rest run, in order,
// through run (the nested apply of each argv, with i its position in
// msgs; run's error means the store failed, and is returned). It returns the last sequence applied
// from src.
//
// Refused, with nothing applied: bad input (ErrBadShard, ErrBadMessage);
// first past last+1 (ErrGap, with last returned); a second call for src
// in the same entry (ErrRepeated). See the package doc for why a re-apply
// of the entry after a crash applies no message twice and skips none.
func (s *Streams) Receive(src uint32, first uint64, msgs [][][]byte, run func(i int, argv [][]byte) error) (uint64, error) {
	if src == 0 || src == s.self {
		return 0, fmt.Errorf("%w: source %d (own shard %d)", ErrBadShard, src, s.self)
	}
	if first == 0 || len(msgs) == 0 || len(msgs) > MaxBatchMessages || first+uint64(len(msgs)) < first {
		return 0, fmt.Errorf("%w: %d messages from %d", ErrBadMessage, len(msgs), first)
	}
	for _, m := range msgs {
		if err := checkArgv(m); err != nil {
			return 0, err
		}
	}
	// The probe: one commit that every call makes, whatever the state,
	// so this entry's AppliedIndex is known afterwards and whether this
	// point of the entry was applied before (a re-apply).
	b := s.db.NewBatch()
	defer b.Close()
	if err := s.state.Put(b, []byte{PrefixState, probeTag}, probeValue); err != nil {
		return 0, err
	}
	if err := b.Commit(); err != nil {
		return 0, err
	}
	again := b.Duplicate()
	entry := s.db.AppliedIndex()
	if !s.firstInEntry(entry, src) {
		rec, err := s.inbox(src)
		if err != nil {
			return 0, err
		}
		return rec.last, fmt.Errorf("%w: source %d", ErrRepeated, src)
	}
	rec, err := s.inbox(src)
	if err != nil {
		return 0, err
	}
	before := rec.last
	if again && rec.entry == entry {
		// This call's own record is already in the store: decide on the
		// value it replaced, as the first apply did.
		before = rec.prev
	}
	if first > before+1 {
		return before, fmt.Errorf("%w: source %d: batch starts at %d, last applied %d", ErrGap, src, first, before)
	}
	end := first + uint64(len(msgs)) - 1
	if end <= before {
		return before, nil
	}
	b.Reset()
	if err := s.state.Put(b, appendStateKey(nil, PrefixState, inboxTag, src), appendInboxRecord(nil, inboxRecord{last: end, entry: entry, prev: before})); err != nil {
		return 0, err
	}
	if err := b.Commit(); err != nil {
		return 0, err
	}
	for i, m := range msgs {
		if first+uint64(i) <= before {
			continue
		}
		if err := run(i, m); err != nil {
			return 0, err
		}
	}
	return end, nil
}

// firstInEntry records that src is received from in entry, and reports
// whether it is the first time in that entry.
func (s *Streams) firstInEntry(entry uint64, src uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.entry != entry || s.cur.seen == nil {
		s.cur.entry, s.cur.seen = entry, map[uint32]bool{}
	}
	if s.cur.seen[src] {
		return false
	}
	s.cur.seen[src] = true
	return true
}

// LastApplied returns the last sequence applied from src (0 if none).
func (s *Streams) LastApplied(src uint32) (uint64, error) {
	rec, err := s.inbox(src)
	return rec.last, err
}

// TargetStatus is one target's outbox.
type TargetStatus struct {
	Target       uint32
	Pending      uint64        // appended, not acknowledged
	LastAppended uint64        // last sequence appended
	LastAcked    uint64        // last sequence acknowledged
	OldestAge    time.Duration // age of the oldest pending message (0 if none)
}

// SourceStatus is one source's inbox record.
type SourceStatus struct {
	Source      uint32
	LastApplied uint64
}

// Status is the streams' state, for TALLY.XSTATUS.
type Status struct {
	Targets []TargetStatus
	Sources []SourceStatus
}

// Status reads every target's outbox head and every source's record, in
// id order, at one moment (a snapshot: an ack committing meanwhile drops
// the messages the heads read point at). now is the time ages are
// measured at.
func (s *Streams) Status(now time.Time) (Status, error) {
	var st Status
	snap, err := s.db.NewSnapshot()
	if err != nil {
		return st, err
	}
	defer snap.Close()
	it, err := snap.NewIter(s.state, nil)
	if err != nil {
		return st, err
	}
	defer it.Close()
	for ok := it.SeekGE([]byte{PrefixState}); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 6 {
			continue // the probe
		}
		id := uint32(k[2])<<24 | uint32(k[3])<<16 | uint32(k[4])<<8 | uint32(k[5])
		switch k[1] {
		case headTag:
			h, err := decodeHead(it.Value())
			if err != nil {
				return st, err
			}
			st.Targets = append(st.Targets, TargetStatus{Target: id, Pending: h.last - h.acked, LastAppended: h.last, LastAcked: h.acked})
		case inboxTag:
			r, err := decodeInboxRecord(it.Value())
			if err != nil {
				return st, err
			}
			st.Sources = append(st.Sources, SourceStatus{Source: id, LastApplied: r.last})
		}
	}
	if err := it.Err(); err != nil {
		return st, err
	}
	for i := range st.Targets {
		t := &st.Targets[i]
		if t.Pending == 0 {
			continue
		}
		v, ok, err := snap.Get(s.out, appendOutKey(nil, PrefixOut, t.Target, t.LastAcked+1), nil)
		if err != nil {
			return st, err
		}
		if !ok {
			return st, fmt.Errorf("%w: target %d: message %d missing", ErrCorrupt, t.Target, t.LastAcked+1)
		}
		ms, _, err := decodeMessage(v)
		if err != nil {
			return st, err
		}
		if age := now.Sub(time.UnixMilli(ms)); age > 0 {
			t.OldestAge = age
		}
	}
	return st, nil
}
