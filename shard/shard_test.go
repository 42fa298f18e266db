package shard

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func rep(id uint64) Replica {
	return Replica{ID: id, RaftAddr: fmt.Sprintf("10.0.0.%d:7000", id), ClientAddr: fmt.Sprintf("10.0.0.%d:6379", id)}
}

func sh(id uint32, reps ...uint64) Shard {
	s := Shard{ID: id}
	for _, r := range reps {
		s.Replicas = append(s.Replicas, rep(r))
	}
	return s
}

// three returns the created map of three shards of three replicas.
func three(t testing.TB) *Map {
	t.Helper()
	m, err := (*Map)(nil).Apply(Create(Even([]Shard{sh(1, 1, 2, 3), sh(2, 4, 5, 6), sh(3, 7, 8, 9)})))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestEvenLikeRedisCli(t *testing.T) {
	// redis-cli --cluster create with 3 masters prints these ranges.
	m := Even([]Shard{sh(3, 7), sh(1, 1), sh(2, 4)})
	want := []Range{{0, 5460, 3}, {5461, 10922, 1}, {10923, 16383, 2}}
	if !reflect.DeepEqual(m.Ranges, want) {
		t.Fatalf("ranges %v, want %v", m.Ranges, want)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if m.Shards[0].ID != 1 || m.Shards[2].ID != 3 {
		t.Fatalf("shards not sorted: %v", m)
	}
	for _, n := range []int{1, 2, 4, 5, 7, 16, 100, 1000} {
		var ss []Shard
		for i := range n {
			ss = append(ss, sh(uint32(i+1), uint64(i+1)))
		}
		m := Even(ss)
		if err := m.Validate(); err != nil {
			t.Fatalf("%d shards: %v", n, err)
		}
		lo, hi := NumSlots, 0
		for _, r := range m.Ranges {
			size := int(r.To-r.From) + 1
			lo, hi = min(lo, size), max(hi, size)
		}
		if len(m.Ranges) != n || hi-lo > 1 {
			t.Fatalf("%d shards: %d ranges, sizes %d..%d", n, len(m.Ranges), lo, hi)
		}
	}
	if err := Even(nil).Validate(); !errors.Is(err, ErrInvalidMap) {
		t.Fatalf("Even(nil): %v", err)
	}
}

func TestShardOf(t *testing.T) {
	m := three(t)
	for _, c := range []struct {
		slot int
		want uint32
	}{{0, 1}, {5460, 1}, {5461, 2}, {10922, 2}, {10923, 3}, {16383, 3}, {-1, 0}, {16384, 0}} {
		got := m.ShardOf(c.slot)
		if (got == nil) != (c.want == 0) || got != nil && got.ID != c.want {
			t.Errorf("ShardOf(%d) = %v, want %d", c.slot, got, c.want)
		}
	}
	if m.Shard(4) != nil || m.Shard(2).ID != 2 {
		t.Fatal("Shard")
	}
	var nilMap *Map
	if nilMap.ShardOf(0) != nil || nilMap.Shard(1) != nil {
		t.Fatal("nil map")
	}
	if got := m.Shard(1).LeaderAddr(); got != "10.0.0.1:6379" {
		t.Fatalf("LeaderAddr without hint: %s", got)
	}
}

func TestValidate(t *testing.T) {
	ok := three(t)
	cases := map[string]func(m *Map){
		"no shards":        func(m *Map) { m.Shards = nil },
		"shard 0":          func(m *Map) { m.Shards[0].ID = 0 },
		"unsorted shards":  func(m *Map) { m.Shards[0], m.Shards[1] = m.Shards[1], m.Shards[0] },
		"no replicas":      func(m *Map) { m.Shards[1].Replicas = nil },
		"replica 0":        func(m *Map) { m.Shards[1].Replicas[0].ID = 0 },
		"dup in shard":     func(m *Map) { m.Shards[1].Replicas[1].ID = 4 },
		"dup across":       func(m *Map) { m.Shards[1].Replicas[0].ID = 1 },
		"bad client addr":  func(m *Map) { m.Shards[1].Replicas[0].ClientAddr = "nope" },
		"no raft addr":     func(m *Map) { m.Shards[1].Replicas[0].RaftAddr = "" },
		"foreign leader":   func(m *Map) { m.Shards[0].Leader = 4 },
		"gap":              func(m *Map) { m.Ranges[1].From++ },
		"overlap":          func(m *Map) { m.Ranges[1].From-- },
		"short":            func(m *Map) { m.Ranges[2].To-- },
		"past the end":     func(m *Map) { m.Ranges[2].To = NumSlots },
		"reversed":         func(m *Map) { m.Ranges = append(m.Ranges, Range{From: 5, To: 4, Shard: 1}) },
		"unknown shard":    func(m *Map) { m.Ranges[0].Shard = 9 },
		"no ranges":        func(m *Map) { m.Ranges = nil },
		"unsorted ranges":  func(m *Map) { m.Ranges[0], m.Ranges[1] = m.Ranges[1], m.Ranges[0] },
		"long client addr": func(m *Map) { m.Shards[0].Replicas[0].ClientAddr = strings.Repeat("a", 300) + ":1" },
	}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, breakIt := range cases {
		m := ok.Clone()
		breakIt(m)
		if err := m.Validate(); !errors.Is(err, ErrInvalidMap) {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := m.Apply(SetLeader(1, 1, 1)); !errors.Is(err, ErrInvalidMap) {
			t.Errorf("%s: Apply on it: %v", name, err)
		}
		if _, err := Decode(m.Encode()); !errors.Is(err, ErrInvalidMap) {
			t.Errorf("%s: Decode: %v", name, err)
		}
	}
	var nilMap *Map
	if err := nilMap.Validate(); !errors.Is(err, ErrInvalidMap) {
		t.Fatal(err)
	}
}

func TestApply(t *testing.T) {
	base := three(t)
	withHint, err := base.Apply(SetLeader(2, 5, 7))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		m     *Map
		op    Op
		err   error
		check func(t *testing.T, n *Map)
	}{
		{name: "create twice", m: base, op: Create(base), err: ErrMapExists},
		{name: "create nil", m: nil, op: Create(nil), err: ErrInvalidOp},
		{name: "create invalid", m: nil, op: Create(&Map{}), err: ErrInvalidMap},
		{name: "op before create", m: nil, op: SetLeader(1, 1, 1), err: ErrNoMap},
		{name: "unknown kind", m: base, op: Op{Kind: 99}, err: ErrInvalidOp},
		{name: "set leader", m: base, op: SetLeader(2, 5, 7), check: func(t *testing.T, n *Map) {
			if s := n.Shard(2); s.Leader != 5 || s.LeaderTerm != 7 || s.LeaderAddr() != "10.0.0.5:6379" {
				t.Fatalf("%v", n)
			}
		}},
		{name: "newer term", m: withHint, op: SetLeader(2, 6, 8), check: func(t *testing.T, n *Map) {
			if s := n.Shard(2); s.Leader != 6 || s.LeaderTerm != 8 {
				t.Fatalf("%v", n)
			}
		}},
		{name: "unknown leader, newer term", m: withHint, op: SetLeader(2, 0, 8), check: func(t *testing.T, n *Map) {
			if s := n.Shard(2); s.Leader != 0 || s.LeaderTerm != 8 {
				t.Fatalf("%v", n)
			}
		}},
		{name: "stale term", m: withHint, op: SetLeader(2, 6, 6), err: ErrStaleTerm},
		{name: "other leader same term", m: withHint, op: SetLeader(2, 6, 7), err: ErrStaleTerm},
		{name: "unknown leader same term", m: withHint, op: SetLeader(2, 0, 7), err: ErrStaleTerm},
		{name: "same hint", m: withHint, op: SetLeader(2, 5, 7), err: ErrUnchanged},
		{name: "leader not in shard", m: base, op: SetLeader(2, 1, 9), err: ErrInvalidOp},
		{name: "leader of unknown shard", m: base, op: SetLeader(9, 1, 9), err: ErrUnknownShard},
		{name: "set replicas", m: withHint, op: SetReplicas(2, []Replica{rep(4), rep(6), rep(10)}), check: func(t *testing.T, n *Map) {
			s := n.Shard(2)
			if len(s.Replicas) != 3 || s.Replicas[2].ID != 10 || s.Leader != 0 || s.LeaderTerm != 7 {
				t.Fatalf("%v", n)
			}
		}},
		{name: "set replicas keeps a leader still in", m: withHint, op: SetReplicas(2, []Replica{rep(5)}), check: func(t *testing.T, n *Map) {
			if s := n.Shard(2); s.Leader != 5 {
				t.Fatalf("%v", n)
			}
		}},
		{name: "set replicas of another shard's", m: base, op: SetReplicas(2, []Replica{rep(1)}), err: ErrInvalidOp},
		{name: "set no replicas", m: base, op: SetReplicas(2, nil), err: ErrInvalidOp},
		{name: "set same replicas", m: base, op: SetReplicas(2, base.Shard(2).Replicas), err: ErrUnchanged},
		{name: "set replicas unknown shard", m: base, op: SetReplicas(9, []Replica{rep(20)}), err: ErrUnknownShard},
		{name: "add shard", m: base, op: AddShard(sh(5, 20, 21)), check: func(t *testing.T, n *Map) {
			if len(n.Shards) != 4 || n.Shards[3].ID != 5 || len(n.SlotsOf(5)) != 0 {
				t.Fatalf("%v", n)
			}
		}},
		{name: "add shard between", m: base, op: AddShard(Shard{ID: 5, Replicas: []Replica{rep(20)}}), check: func(t *testing.T, n *Map) {
			n2, err := n.Apply(AddShard(sh(4, 30)))
			if err != nil || n2.Shards[3].ID != 4 || n2.Shards[4].ID != 5 || n2.Epoch != n.Epoch+1 {
				t.Fatalf("%v %v", n2, err)
			}
		}},
		{name: "add existing shard", m: base, op: AddShard(sh(2, 20)), err: ErrShardExists},
		{name: "add shard 0", m: base, op: AddShard(sh(0, 20)), err: ErrInvalidOp},
		{name: "add shard with taken replica", m: base, op: AddShard(sh(4, 1)), err: ErrInvalidOp},
		{name: "add shard without replicas", m: base, op: AddShard(Shard{ID: 4}), err: ErrInvalidOp},
		{name: "add shard foreign leader", m: base, op: AddShard(Shard{ID: 4, Replicas: []Replica{rep(20)}, Leader: 21}), err: ErrInvalidOp},
		{name: "assign slots", m: base, op: AssignSlots([]Range{{From: 100, To: 199, Shard: 3}, {From: 5461, To: 5461, Shard: 1}}), check: func(t *testing.T, n *Map) {
			want := []Range{{0, 99, 1}, {100, 199, 3}, {200, 5461, 1}, {5462, 10922, 2}, {10923, 16383, 3}}
			if !reflect.DeepEqual(n.Ranges, want) {
				t.Fatalf("%v", n)
			}
			if n.ShardOf(150).ID != 3 || n.ShardOf(5461).ID != 1 {
				t.Fatal("ShardOf after assign")
			}
		}},
		{name: "assign merges", m: base, op: AssignSlots([]Range{{From: 5461, To: 10922, Shard: 1}}), check: func(t *testing.T, n *Map) {
			want := []Range{{0, 10922, 1}, {10923, 16383, 3}}
			if !reflect.DeepEqual(n.Ranges, want) {
				t.Fatalf("%v", n)
			}
		}},
		{name: "assign unchanged", m: base, op: AssignSlots([]Range{{From: 0, To: 10, Shard: 1}}), err: ErrUnchanged},
		{name: "assign overlap", m: base, op: AssignSlots([]Range{{0, 10, 2}, {10, 20, 3}}), err: ErrInvalidOp},
		{name: "assign reversed", m: base, op: AssignSlots([]Range{{10, 0, 2}}), err: ErrInvalidOp},
		{name: "assign past the end", m: base, op: AssignSlots([]Range{{10, NumSlots, 2}}), err: ErrInvalidOp},
		{name: "assign unknown shard", m: base, op: AssignSlots([]Range{{0, 10, 9}}), err: ErrUnknownShard},
		{name: "assign nothing", m: base, op: AssignSlots(nil), err: ErrInvalidOp},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before []byte
			if c.m != nil {
				before = c.m.Encode()
			}
			n, err := c.m.Apply(c.op)
			if c.m != nil && !bytes.Equal(before, c.m.Encode()) {
				t.Fatal("Apply changed its receiver")
			}
			if c.err != nil {
				if !errors.Is(err, c.err) || n != nil {
					t.Fatalf("got %v, %v; want %v", n, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n.Epoch != c.m.Epoch+1 {
				t.Fatalf("epoch %d after %d", n.Epoch, c.m.Epoch)
			}
			if err := n.Validate(); err != nil {
				t.Fatal(err)
			}
			again, _ := c.m.Apply(c.op)
			if !bytes.Equal(again.Encode(), n.Encode()) {
				t.Fatal("Apply is not deterministic")
			}
			// The op survives its encoding.
			op, err := DecodeOp(c.op.Encode())
			if err != nil {
				t.Fatal(err)
			}
			n2, err := c.m.Apply(op)
			if err != nil || !n2.Equal(n) {
				t.Fatalf("decoded op: %v %v", n2, err)
			}
			c.check(t, n)
		})
	}
}

func TestCreateEpochAndMerge(t *testing.T) {
	in := Even([]Shard{sh(1, 1), sh(2, 2)})
	in.Epoch = 40
	in.Ranges = []Range{{0, 99, 1}, {100, 8191, 1}, {8192, 16383, 2}}
	m, err := (*Map)(nil).Apply(Create(in))
	if err != nil {
		t.Fatal(err)
	}
	if m.Epoch != 1 || len(m.Ranges) != 2 || in.Epoch != 40 || len(in.Ranges) != 3 {
		t.Fatalf("created %v from %v", m, in)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	m := three(t)
	m, _ = m.Apply(SetLeader(3, 8, 12))
	m, _ = m.Apply(AssignSlots([]Range{{1, 1, 3}, {7, 9, 2}}))
	b := m.Encode()
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) || !got.Equal(m) {
		t.Fatalf("round trip:\n%v\n%v", got, m)
	}
	// Appending after other bytes leaves them alone.
	pre := []byte("prefix")
	enc := m.AppendEncoded(pre)
	if !bytes.Equal(enc[:6], pre) || !bytes.Equal(enc[6:], b) {
		t.Fatal("AppendEncoded")
	}
	// Every truncation and every flipped byte is corruption, never a panic.
	for i := range b {
		if _, err := Decode(b[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", i, err)
		}
		c := bytes.Clone(b)
		c[i] ^= 0x40
		if _, err := Decode(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	if _, err := Decode(append(bytes.Clone(b), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatal("trailing byte")
	}
}

// TestEncodeGolden fails when the map's or an op's encoding changes by
// accident: a change must bump its version.
func TestEncodeGolden(t *testing.T) {
	m := &Map{Epoch: 3, Shards: []Shard{{ID: 1, Replicas: []Replica{{ID: 1, RaftAddr: "r1", ClientAddr: "h:1"}}, Leader: 1, LeaderTerm: 2}},
		Ranges: []Range{{0, NumSlots - 1, 1}}}
	const wantMap = "534d01030101010201010272310368" + "3a31" + "01" + "00003fff01" + "700eba66"
	if got := hex.EncodeToString(m.Encode()); got != wantMap {
		t.Errorf("map encoding %s, want %s", got, wantMap)
	}
	const wantOp = "534f0102" + "020307" + "25a88fe2"
	if got := hex.EncodeToString(SetLeader(2, 3, 7).Encode()); got != wantOp {
		t.Errorf("op encoding %s, want %s", got, wantOp)
	}
}

func TestString(t *testing.T) {
	s := three(t).String()
	for _, want := range []string{"epoch 1", "shard 2 leader 0 term 0: 4@10.0.0.4:7000/10.0.0.4:6379", "slots 10923-16383: shard 3"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
	var nilMap *Map
	if nilMap.String() != "<no map>" {
		t.Error("nil String")
	}
	for _, op := range []Op{Create(nil), Create(three(t)), SetLeader(1, 2, 3), SetReplicas(1, nil), AddShard(sh(4, 1)), AssignSlots(nil), {Kind: 77}} {
		if op.String() == "" {
			t.Errorf("empty String for %d", op.Kind)
		}
	}
}

func FuzzDecode(f *testing.F) {
	m := three(f)
	f.Add(m.Encode())
	m2, _ := m.Apply(AssignSlots([]Range{{3, 3, 2}}))
	f.Add(m2.Encode())
	f.Add([]byte("SM\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalidMap) {
				t.Fatalf("unnamed error %v", err)
			}
			return
		}
		got, err := Decode(m.Encode())
		if err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("re-decode: %v\n%v\n%v", err, got, m)
		}
	})
}

// FuzzApply applies decoded ops to a map: a refused op names its error
// and changes nothing; an accepted one gives a valid map one epoch later
// that survives its encoding.
func FuzzApply(f *testing.F) {
	for _, op := range []Op{SetLeader(2, 5, 7), SetReplicas(2, []Replica{rep(4), rep(10)}), AddShard(sh(4, 20)),
		AssignSlots([]Range{{0, 5, 3}}), Create(Even([]Shard{sh(1, 1)})), AddNode(rep(10)), {Kind: 9}} {
		f.Add(op.Encode(), false)
		f.Add(op.Encode(), true)
	}
	base := three(f)
	f.Fuzz(func(t *testing.T, b []byte, empty bool) {
		op, err := DecodeOp(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalidMap) {
				t.Fatalf("unnamed error %v", err)
			}
			return
		}
		m := base
		if empty {
			m = nil
		}
		before := encodeOrNil(m)
		n, err := m.Apply(op)
		if !bytes.Equal(before, encodeOrNil(m)) {
			t.Fatal("Apply changed its receiver")
		}
		if err != nil {
			for _, e := range []error{ErrInvalidMap, ErrInvalidOp, ErrStaleTerm, ErrUnchanged, ErrUnknownShard, ErrShardExists, ErrMapExists, ErrNoMap,
				ErrNodeExists, ErrAddrInUse, ErrBadAddr} {
				if errors.Is(err, e) {
					return
				}
			}
			t.Fatalf("unnamed error %v", err)
		}
		if n.Epoch != epochOrZero(m)+1 {
			t.Fatalf("epoch %d", n.Epoch)
		}
		got, err := Decode(n.Encode())
		if err != nil || !reflect.DeepEqual(got, n) {
			t.Fatalf("result does not round-trip: %v", err)
		}
	})
}

// encodeOrNil is Encode that takes a nil map (the fuzz test's empty state).
func encodeOrNil(m *Map) []byte {
	if m == nil {
		return nil
	}
	return m.Encode()
}

func epochOrZero(m *Map) uint64 {
	if m == nil {
		return 0
	}
	return m.Epoch
}
