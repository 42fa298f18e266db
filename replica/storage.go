package replica

// The Raft log and state in the store's own Pebble.
//
// Two families hold a replica's Raft data (store/doc.go's family table):
//
//	prefix  family      key (after prefix)  value
//	------  ----------  ------------------  ------------------------------------------
//	0x50    raft-log    index u64           entry (appendEntry)
//	0x51    raft-state  "hard"              hard state (appendHardState)
//	                    "snap"              snapshot metadata: the index and term the
//	                                        log starts after, and the ConfState there
//	                                        (protobuf raftpb.SnapshotMetadata)
//	                    "conf"              ConfState after the last applied conf
//	                                        change (protobuf raftpb.ConfState)
//	                    "members"           member table (appendMembers)
//	                    "boot"              starts of the replica, u64 (nextBoot)
//
// logStorage implements raft.Storage over them. It keeps the whole log in
// memory as well (as raft.MemoryStorage does): the log is bounded by
// Config.MaxLogEntries behind the applied index plus what is not applied
// yet, and reading it back from Pebble would only add latency to the Ready
// loop. Writes go to Pebble first, in a store batch the caller commits;
// the memory copy changes only once the batch committed, so a failed write
// changes nothing.
//
// logStorage is used by one goroutine (the node's loop), which is also the
// only caller of the raft.RawNode that reads it.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tallydb/tally/store"
)

// Family prefixes of a replica (store/doc.go).
const (
	PrefixLog   = 0x50
	PrefixState = 0x51
)

// Families returns the FamilySpecs of a replica's Raft data, for
// store.Options.Families (or DB.RegisterFamily, which Start does for a
// store opened without them).
func Families() []store.FamilySpec {
	return []store.FamilySpec{
		{Name: "raft-log", Prefix: PrefixLog, MinKeyLen: 8, MaxKeyLen: 8, MaxValueLen: store.MaxFamilyValueLen},
		{Name: "raft-state", Prefix: PrefixState, MinKeyLen: 1, MaxKeyLen: 16},
	}
}

var (
	keyHard    = []byte{PrefixState, 'h', 'a', 'r', 'd'}
	keySnap    = []byte{PrefixState, 's', 'n', 'a', 'p'}
	keyConf    = []byte{PrefixState, 'c', 'o', 'n', 'f'}
	keyMembers = []byte{PrefixState, 'm', 'e', 'm', 'b', 'e', 'r', 's'}
	keyBoot    = []byte{PrefixState, 'b', 'o', 'o', 't'}
)

// nextBoot counts this start of the replica (u64 big-endian under "boot",
// written synced): proposal ids are boot<<32 | n, so an entry proposed
// before a restart can never be taken for a proposal made after it.
func (s *logStorage) nextBoot() (uint64, error) {
	var boot uint64
	if v, ok, err := s.state.Get(keyBoot, nil); err != nil {
		return 0, err
	} else if ok {
		if len(v) != 8 {
			return 0, fmt.Errorf("%w: boot counter of %d bytes", ErrCorrupt, len(v))
		}
		boot = binary.BigEndian.Uint64(v)
	}
	boot++
	b := s.db.NewBatch()
	defer b.Close()
	b.SetSync(true)
	if err := s.state.Put(b, keyBoot, binary.BigEndian.AppendUint64(nil, boot)); err != nil {
		return 0, err
	}
	return boot, b.Commit()
}

// keepBoot makes the stored boot counter at least boot (after a snapshot
// install brought another replica's counter).
func (s *logStorage) keepBoot(boot uint64) error {
	if v, ok, err := s.state.Get(keyBoot, nil); err != nil {
		return err
	} else if ok && len(v) == 8 && binary.BigEndian.Uint64(v) >= boot {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	b.SetSync(true)
	if err := s.state.Put(b, keyBoot, binary.BigEndian.AppendUint64(nil, boot)); err != nil {
		return err
	}
	return b.Commit()
}

func logKey(index uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{PrefixLog}, index)
}

// entryVersion is the version byte of a stored entry.
const entryVersion = 1

// appendEntry encodes a log entry, the value under its index key.
//
//	field    width  meaning
//	-------  -----  ---------------------------------
//	version  1      entryVersion
//	term     8      the entry's term, big-endian
//	type     1      raftpb.EntryType
//	data     rest   the entry's data
func appendEntry(dst []byte, e *pb.Entry) []byte {
	dst = append(dst, entryVersion)
	dst = binary.BigEndian.AppendUint64(dst, e.GetTerm())
	dst = append(dst, byte(e.GetType()))
	return append(dst, e.GetData()...)
}

func decodeEntry(index uint64, b []byte) (*pb.Entry, error) {
	if len(b) < 10 || b[0] != entryVersion {
		return nil, fmt.Errorf("%w: raft log entry %d of %d bytes", ErrCorrupt, index, len(b))
	}
	e := &pb.Entry{
		Index: new(index),
		Term:  new(binary.BigEndian.Uint64(b[1:9])),
		Type:  new(pb.EntryType(b[9])),
	}
	if len(b) > 10 {
		e.Data = append([]byte(nil), b[10:]...)
	}
	return e, nil
}

// appendHardState encodes the hard state.
//
//	field   width  meaning
//	------  -----  -------------------------
//	term    8      current term, big-endian
//	vote    8      vote in term (0: none)
//	commit  8      commit index
func appendHardState(dst []byte, hs *pb.HardState) []byte {
	dst = binary.BigEndian.AppendUint64(dst, hs.GetTerm())
	dst = binary.BigEndian.AppendUint64(dst, hs.GetVote())
	return binary.BigEndian.AppendUint64(dst, hs.GetCommit())
}

func decodeHardState(b []byte) (*pb.HardState, error) {
	if len(b) != 24 {
		return nil, fmt.Errorf("%w: hard state of %d bytes", ErrCorrupt, len(b))
	}
	return &pb.HardState{
		Term:   new(binary.BigEndian.Uint64(b)),
		Vote:   new(binary.BigEndian.Uint64(b[8:])),
		Commit: new(binary.BigEndian.Uint64(b[16:])),
	}, nil
}

// logStorage is raft.Storage over the raft-log and raft-state families.
type logStorage struct {
	db    *store.DB
	log   *store.Family
	state *store.Family
	hard  *pb.HardState
	conf  *pb.ConfState // after the last applied conf change
	snap  *pb.SnapshotMetadata
	ents  []*pb.Entry // snap.Index+1 ... last
	// bytes is the memory ents holds, by entrySize: what a leader keeping
	// the log for a snapshot in flight bounds (Config.MaxHeldLogBytes).
	bytes     uint64
	snapshots func() (*pb.Snapshot, error)
}

// entryOverhead is what an in-memory entry costs beyond its data (the
// pb.Entry and its fields), for logStorage.bytes.
const entryOverhead = 64

func entrySize(e *pb.Entry) uint64 { return uint64(len(e.GetData())) + entryOverhead }

func entriesSize(ents []*pb.Entry) uint64 {
	var n uint64
	for _, e := range ents {
		n += entrySize(e)
	}
	return n
}

var _ raft.Storage = (*logStorage)(nil)

// openStorage loads the Raft data of db, registering its families if the
// store was opened without them.
func openStorage(db *store.DB) (*logStorage, error) {
	s := &logStorage{db: db}
	for _, spec := range Families() {
		f, err := db.Family(spec.Name)
		if err != nil {
			if f, err = db.RegisterFamily(spec); err != nil {
				return nil, fmt.Errorf("replica: family %s: %w", spec.Name, err)
			}
		}
		if spec.Prefix == PrefixLog {
			s.log = f
		} else {
			s.state = f
		}
	}
	s.hard = &pb.HardState{}
	if v, ok, err := s.state.Get(keyHard, nil); err != nil {
		return nil, err
	} else if ok {
		if s.hard, err = decodeHardState(v); err != nil {
			return nil, err
		}
	}
	s.snap = &pb.SnapshotMetadata{ConfState: &pb.ConfState{}}
	if v, ok, err := s.state.Get(keySnap, nil); err != nil {
		return nil, err
	} else if ok {
		if err := proto.Unmarshal(v, s.snap); err != nil {
			return nil, fmt.Errorf("%w: snapshot metadata: %w", ErrCorrupt, err)
		}
		s.snap.ConfState = pb.EnsureConfState(s.snap.ConfState)
	}
	s.conf = proto.Clone(s.snap.ConfState).(*pb.ConfState)
	if v, ok, err := s.state.Get(keyConf, nil); err != nil {
		return nil, err
	} else if ok {
		s.conf = &pb.ConfState{}
		if err := proto.Unmarshal(v, s.conf); err != nil {
			return nil, fmt.Errorf("%w: conf state: %w", ErrCorrupt, err)
		}
	}
	it, err := s.log.NewIter(&store.IterOptions{})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	next := s.snap.GetIndex() + 1
	for ok := it.SeekGE(logKey(next)); ok; ok = it.Next() {
		index := binary.BigEndian.Uint64(it.Key()[1:])
		if index != next {
			return nil, fmt.Errorf("%w: raft log has entry %d after %d", ErrCorrupt, index, next-1)
		}
		e, err := decodeEntry(index, it.Value())
		if err != nil {
			return nil, err
		}
		s.ents = append(s.ents, e)
		s.bytes += entrySize(e)
		next++
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// InitialState implements raft.Storage. The ConfState is the one of the
// last applied conf change: raft re-applies the ones after Config.Applied.
func (s *logStorage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	return proto.Clone(s.hard).(*pb.HardState), proto.Clone(s.conf).(*pb.ConfState), nil
}

func (s *logStorage) firstIndex() uint64 { return s.snap.GetIndex() + 1 }
func (s *logStorage) lastIndex() uint64  { return s.snap.GetIndex() + uint64(len(s.ents)) }

// Entries implements raft.Storage.
func (s *logStorage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	if lo <= s.snap.GetIndex() {
		return nil, raft.ErrCompacted
	}
	if hi > s.lastIndex()+1 || lo > hi {
		return nil, raft.ErrUnavailable
	}
	off := s.firstIndex()
	ents := s.ents[lo-off : hi-off]
	var size uint64
	for i, e := range ents {
		size += uint64(proto.Size(e))
		if i > 0 && size > maxSize {
			ents = ents[:i]
			break
		}
	}
	return ents[:len(ents):len(ents)], nil
}

// Term implements raft.Storage.
func (s *logStorage) Term(i uint64) (uint64, error) {
	switch {
	case i == s.snap.GetIndex():
		return s.snap.GetTerm(), nil
	case i < s.snap.GetIndex():
		return 0, raft.ErrCompacted
	case i > s.lastIndex():
		return 0, raft.ErrUnavailable
	}
	return s.ents[i-s.firstIndex()].GetTerm(), nil
}

// LastIndex implements raft.Storage.
func (s *logStorage) LastIndex() (uint64, error) { return s.lastIndex(), nil }

// FirstIndex implements raft.Storage.
func (s *logStorage) FirstIndex() (uint64, error) { return s.firstIndex(), nil }

// Snapshot implements raft.Storage: a snapshot of the state machine at the
// applied index, made on demand by the node (snapshot.go).
func (s *logStorage) Snapshot() (*pb.Snapshot, error) {
	if s.snapshots == nil {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return s.snapshots()
}

// stage adds a Ready's entries and hard state to b. commit makes them the
// in-memory state once b committed.
func (s *logStorage) stage(b *store.Batch, ents []*pb.Entry, hs *pb.HardState) (commit func(), err error) {
	var buf []byte
	ents = append([]*pb.Entry(nil), ents...)
	if len(ents) > 0 {
		first := ents[0].GetIndex()
		if first <= s.snap.GetIndex() {
			// Entries raft already has in the snapshot: drop them.
			skip := min(s.snap.GetIndex()+1-first, uint64(len(ents)))
			ents = ents[skip:]
		}
	}
	if len(ents) > 0 {
		first := ents[0].GetIndex()
		if first > s.lastIndex()+1 {
			return nil, fmt.Errorf("replica: append at %d leaves a gap after %d", first, s.lastIndex())
		}
		if last := ents[len(ents)-1].GetIndex(); last < s.lastIndex() {
			// A conflicting suffix is replaced: remove what follows.
			if err := s.log.DeleteRange(b, logKey(last+1), logKey(s.lastIndex()+1)); err != nil {
				return nil, err
			}
		}
		for _, e := range ents {
			buf = appendEntry(buf[:0], e)
			if err := s.log.Put(b, logKey(e.GetIndex()), buf); err != nil {
				return nil, err
			}
		}
	}
	var newHard *pb.HardState
	if hs != nil && !raft.IsEmptyHardState(hs) {
		newHard = proto.Clone(hs).(*pb.HardState)
		if err := s.state.Put(b, keyHard, appendHardState(nil, newHard)); err != nil {
			return nil, err
		}
	}
	return func() {
		if len(ents) > 0 {
			first := ents[0].GetIndex()
			kept := s.ents[:first-s.firstIndex()]
			s.bytes = s.bytes - entriesSize(s.ents[len(kept):]) + entriesSize(ents)
			s.ents = append(kept[:len(kept):len(kept)], ents...)
		}
		if newHard != nil {
			s.hard = newHard
		}
	}, nil
}

// stageConf adds the ConfState after a conf change, and the member table,
// to b.
func (s *logStorage) stageConf(b *store.Batch, cs *pb.ConfState, members []byte) (commit func(), err error) {
	v, err := proto.Marshal(cs)
	if err != nil {
		return nil, err
	}
	if err := s.state.Put(b, keyConf, v); err != nil {
		return nil, err
	}
	if err := s.state.Put(b, keyMembers, members); err != nil {
		return nil, err
	}
	cs = proto.Clone(cs).(*pb.ConfState)
	return func() { s.conf = cs }, nil
}

// members returns the stored member table, or nil.
func (s *logStorage) members() ([]byte, error) {
	v, ok, err := s.state.Get(keyMembers, nil)
	if err != nil || !ok {
		return nil, err
	}
	return v, nil
}

// compact removes the entries up to and including index, which the caller
// has applied and recorded as applied (store.DB.SetAppliedIndex), keeping
// its term for the log matching check.
func (s *logStorage) compact(index uint64) error {
	if index <= s.snap.GetIndex() {
		return nil
	}
	if index > s.lastIndex() {
		return fmt.Errorf("replica: compact at %d beyond the log's end %d", index, s.lastIndex())
	}
	term, _ := s.Term(index)
	meta := &pb.SnapshotMetadata{Index: new(index), Term: new(term), ConfState: s.conf}
	v, err := proto.Marshal(meta)
	if err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := s.log.DeleteRange(b, logKey(s.firstIndex()), logKey(index+1)); err != nil {
		return err
	}
	if err := s.state.Put(b, keySnap, v); err != nil {
		return err
	}
	if err := b.Commit(); err != nil {
		return err
	}
	cut := index + 1 - s.firstIndex()
	s.bytes -= entriesSize(s.ents[:cut])
	s.ents = append([]*pb.Entry(nil), s.ents[cut:]...)
	s.snap = proto.Clone(meta).(*pb.SnapshotMetadata)
	return nil
}

// resetTo makes the log empty after a snapshot at meta (installed by the
// Snapshotter), with hard state hs, in one synced batch.
func (s *logStorage) resetTo(meta *pb.SnapshotMetadata, hs *pb.HardState, members []byte) error {
	v, err := proto.Marshal(meta)
	if err != nil {
		return err
	}
	cv, err := proto.Marshal(meta.GetConfState())
	if err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	b.SetSync(true)
	if err := s.log.DeleteRange(b, []byte{PrefixLog}, s.log.FamilyEnd()); err != nil {
		return err
	}
	for _, kv := range [][2][]byte{{keySnap, v}, {keyConf, cv}, {keyHard, appendHardState(nil, hs)}, {keyMembers, members}} {
		if err := s.state.Put(b, kv[0], kv[1]); err != nil {
			return err
		}
	}
	if err := b.Commit(); err != nil {
		return err
	}
	s.snap = proto.Clone(meta).(*pb.SnapshotMetadata)
	s.conf = proto.Clone(meta.GetConfState()).(*pb.ConfState)
	s.hard = proto.Clone(hs).(*pb.HardState)
	s.ents, s.bytes = nil, 0
	return nil
}

// ErrCorrupt marks Raft data in the store that does not decode.
var ErrCorrupt = errors.New("replica: corrupt raft data")
