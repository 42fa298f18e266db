package replica

import (
	"encoding/binary"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/tallydb/tally/store"
)

// LogEntry is one entry of a replica's Raft log, as ReadLog gives it.
type LogEntry struct {
	Index, Term uint64
	// Conf is set for a membership change (Command is then nil).
	Conf bool
	// Node and Proposal name the proposing replica and its proposal id,
	// Millis the leader's clock at proposal (Unix ms); all 0 for a new
	// leader's empty entry.
	Node, Proposal uint64
	Millis         int64
	// Command is the command as proposed (what Config.Apply is given);
	// nil for an empty entry or a conf change.
	Command []byte
}

// ReadLog calls fn for every entry of the Raft log stored in db with an
// index of from or above, in index order, until fn returns false. It is
// for tools and tests reading a replica's store that no Node runs on (a
// running Node appends and truncates meanwhile): a store opened
// read-only must list the replica's families (store.Options.Families:
// Families()), as ReadLog registers none. A damaged entry stops it with
// an error that wraps ErrCorrupt. The Command slice is valid only during
// the call of fn.
func ReadLog(db *store.DB, from uint64, fn func(LogEntry) bool) error {
	f, err := db.Family("raft-log")
	if err != nil {
		return fmt.Errorf("replica: read log: %w", err)
	}
	it, err := f.NewIter(&store.IterOptions{})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.SeekGE(logKey(from)); ok; ok = it.Next() {
		index := binary.BigEndian.Uint64(it.Key()[1:])
		e, err := decodeEntry(index, it.Value())
		if err != nil {
			return err
		}
		le := LogEntry{Index: index, Term: e.GetTerm()}
		switch e.GetType() {
		case pb.EntryNormal:
			if len(e.GetData()) > 0 {
				h, cmd, err := decodeHeader(e.GetData())
				if err != nil {
					return fmt.Errorf("entry %d: %w", index, err)
				}
				le.Node, le.Proposal, le.Millis, le.Command = h.node, h.proposal, h.millis, cmd
			}
		default:
			le.Conf = true
		}
		if !fn(le) {
			return nil
		}
	}
	return it.Err()
}

// ReadHardState returns the term, vote and commit index stored in db (all
// 0 for a store that never ran a replica), for the same readers as
// ReadLog.
func ReadHardState(db *store.DB) (term, vote, commit uint64, err error) {
	f, err := db.Family("raft-state")
	if err != nil {
		return 0, 0, 0, fmt.Errorf("replica: read hard state: %w", err)
	}
	v, ok, err := f.Get(keyHard, nil)
	if err != nil || !ok {
		return 0, 0, 0, err
	}
	hs, err := decodeHardState(v)
	if err != nil {
		return 0, 0, 0, err
	}
	return hs.GetTerm(), hs.GetVote(), hs.GetCommit(), nil
}
