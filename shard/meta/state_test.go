package meta

import (
	"bytes"
	"errors"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/tallydb/tally/shard"
)

func created(t *testing.T) *shard.Map {
	t.Helper()
	m, err := (*shard.Map)(nil).Apply(shard.Create(shard.Even([]shard.Shard{dataShard(1, 11), dataShard(2, 21)})))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStateApply: the state machine applies, refuses and recognises a
// repeated request, the same way from the same bytes.
func TestStateApply(t *testing.T) {
	s := newState()
	a := reqID{1, 1}
	reply := s.apply(5, appendCommand(nil, a, shard.Create(created(t))))
	if reply[0] != replyApplied || s.m == nil || s.m.Epoch != 1 || s.index != 5 {
		t.Fatalf("create: reply %v, state %v", reply[:1], s.m)
	}
	// The same request again (a retry, or a duplicated entry) is answered
	// from memory and changes nothing.
	reply = s.apply(6, appendCommand(nil, a, shard.Create(created(t))))
	if reply[0] != replyRepeated || reply[1] != 0 || s.m.Epoch != 1 {
		t.Fatalf("repeat: reply %v, epoch %d", reply, s.m.Epoch)
	}
	// A refusal is remembered with its error.
	b := reqID{2, 1}
	reply = s.apply(7, appendCommand(nil, b, shard.SetLeader(9, 1, 1)))
	if reply[0] != replyRefused || !errors.Is(errOf(reply[1], string(reply[2:])), shard.ErrUnknownShard) {
		t.Fatalf("refusal: %q", reply)
	}
	reply = s.apply(8, appendCommand(nil, b, shard.SetLeader(9, 1, 1)))
	if reply[0] != replyRepeated || !errors.Is(errOf(reply[1], ""), shard.ErrUnknownShard) {
		t.Fatalf("repeated refusal: %q", reply)
	}
	// A damaged command is refused and remembered nowhere.
	if reply = s.apply(9, []byte{9, 9}); reply[0] != replyRefused {
		t.Fatalf("damaged: %q", reply)
	}
	// The state survives its encoding, and the copy acts the same.
	enc := appendState(nil, s)
	d, err := decodeState(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(appendState(nil, d), enc) || d.index != 9 || !d.m.Equal(s.m) || len(d.byID) != 2 {
		t.Fatal("state round trip")
	}
	c := reqID{3, 1}
	r1 := s.clone().apply(10, appendCommand(nil, c, shard.SetLeader(1, 11, 2)))
	r2 := d.apply(10, appendCommand(nil, c, shard.SetLeader(1, 11, 2)))
	if !bytes.Equal(r1, r2) || d.m.Epoch != 2 {
		t.Fatal("decoded state applies differently")
	}
	for i := range enc {
		if _, err := decodeState(enc[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", i, err)
		}
		x := bytes.Clone(enc)
		x[i] ^= 1
		if _, err := decodeState(x); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
}

// TestStateForgets: only the last recentKept requests are remembered.
func TestStateForgets(t *testing.T) {
	s := newState()
	s.apply(1, appendCommand(nil, reqID{1, 0}, shard.Create(created(t))))
	for i := uint64(1); i <= recentKept+10; i++ {
		s.apply(1+i, appendCommand(nil, reqID{1, i}, shard.SetLeader(1, 11, i)))
	}
	if len(s.recent) != recentKept || len(s.byID) != recentKept {
		t.Fatalf("%d remembered", len(s.recent))
	}
	if _, ok := s.byID[reqID{1, 5}]; ok {
		t.Fatal("an old request is still remembered")
	}
	d, err := decodeState(appendState(nil, s))
	if err != nil || len(d.byID) != recentKept {
		t.Fatalf("%v", err)
	}
}

func FuzzDecodeState(f *testing.F) {
	s := newState()
	s.apply(1, appendCommand(nil, reqID{1, 1}, shard.Create(shard.Even([]shard.Shard{dataShard(1, 11)}))))
	f.Add(appendState(nil, s))
	f.Add(appendState(nil, newState()))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := decodeState(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("unnamed error %v", err)
			}
			return
		}
		if _, err := decodeState(appendState(nil, d)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestStartInvalidConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no id":        {Dir: t.TempDir(), Join: true, Transport: nopTransport{}},
		"no dir":       {ID: 1, Join: true, Transport: nopTransport{}},
		"no transport": {ID: 1, Dir: t.TempDir(), Join: true},
		"no peers":     {ID: 1, Dir: t.TempDir(), Transport: nopTransport{}},
	} {
		if _, err := Start(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

type nopTransport struct{}

func (nopTransport) Send([]*pb.Message) {}
func (nopTransport) Close() error       { return nil }
