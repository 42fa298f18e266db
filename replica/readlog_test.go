package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/replica/memtransport"
	"github.com/tallydb/tally/store"
)

// TestReadLog reads back the entries a one-replica group committed: every
// proposed command once, in order, with its proposer; from an index on;
// stopped early; the hard state's commit covering them; and a damaged
// entry reported as corruption.
func TestReadLog(t *testing.T) {
	db, err := store.Open("n", &store.Options{FS: vfs.NewMem(), DisableBackground: true, CacheSize: 1 << 20, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n, err := Start(Config{
		ID: 1, DB: db, Peers: []Peer{{ID: 1, RaftAddr: "r1", ClientAddr: "c1"}}, Transport: memtransport.New().Endpoint(1),
		TickInterval: 5 * time.Millisecond,
		Apply:        func(uint64, []byte) ([]byte, error) { return nil, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for n.Status().Role != "leader" {
		if ctx.Err() != nil {
			t.Fatal("no leader")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmds := []string{"one", "two", "three"}
	for _, c := range cmds {
		if _, err := n.Propose(ctx, []byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}

	var got []LogEntry
	if err := ReadLog(db, 1, func(e LogEntry) bool {
		e.Command = append([]byte(nil), e.Command...)
		got = append(got, e)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	var at []uint64
	for i, e := range got {
		if e.Index != uint64(i+1) {
			t.Fatalf("entry %d has index %d", i, e.Index)
		}
		if len(e.Command) > 0 {
			if e.Node != 1 || e.Proposal == 0 || e.Millis == 0 || e.Conf {
				t.Errorf("entry %d: %+v", e.Index, e)
			}
			seen = append(seen, string(e.Command))
			at = append(at, e.Index)
		}
	}
	if len(seen) != 3 || seen[0] != "one" || seen[1] != "two" || seen[2] != "three" {
		t.Fatalf("commands %q, want %q", seen, cmds)
	}
	var from []string
	if err := ReadLog(db, at[1], func(e LogEntry) bool {
		from = append(from, string(e.Command))
		return len(from) < 1
	}); err != nil {
		t.Fatal(err)
	}
	if len(from) != 1 || from[0] != "two" {
		t.Fatalf("from entry %d, stopped after one: %q", at[1], from)
	}
	_, _, commit, err := ReadHardState(db)
	if err != nil || commit < at[2] {
		t.Fatalf("hard state commit %d (%v), want at least %d", commit, err, at[2])
	}

	f, err := db.Family("raft-log")
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	defer b.Close()
	if err := f.Put(b, logKey(at[1]), []byte{9}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := ReadLog(db, 1, func(LogEntry) bool { return true }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged entry: %v, want ErrCorrupt", err)
	}
}
