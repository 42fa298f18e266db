package shard

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"
)

// TestAddNode: a registered node is listed in id order, survives the
// encoding, and leaves the list when it becomes a replica; every refused
// registration names its error and changes nothing.
func TestAddNode(t *testing.T) {
	m := three(t)
	m1, err := m.Apply(AddNode(rep(12)))
	if err != nil {
		t.Fatal(err)
	}
	m2, err := m1.Apply(AddNode(Replica{ID: 10, RaftAddr: "db7.example:17000", ClientAddr: "[::1]:7000"}))
	if err != nil {
		t.Fatal(err)
	}
	if m2.Epoch != m.Epoch+2 || len(m2.Nodes) != 2 || m2.Nodes[0].ID != 10 || m2.Nodes[1].ID != 12 {
		t.Fatalf("nodes %v at epoch %d", m2.Nodes, m2.Epoch)
	}
	if m2.Node(12) == nil || m2.Node(11) != nil || len(m1.Nodes) != 1 {
		t.Fatal("Node lookup, or Apply changed its receiver")
	}
	got, err := Decode(m2.Encode())
	if err != nil || !reflect.DeepEqual(got, m2) {
		t.Fatalf("round trip: %v\n%v", err, got)
	}
	// A map without nodes keeps the version-1 bytes.
	if m.Encode()[2] != mapVersion || m2.Encode()[2] != mapVersion2 {
		t.Fatal("versions")
	}

	cases := []struct {
		node Replica
		want error
	}{
		{Replica{ID: 0, RaftAddr: "a:1", ClientAddr: "a:2"}, ErrInvalidOp},
		{rep(12), ErrNodeExists}, // registered
		{Replica{ID: 5, RaftAddr: "x:1", ClientAddr: "x:2"}, ErrNodeExists},            // a replica
		{Replica{ID: 20, RaftAddr: rep(12).RaftAddr, ClientAddr: "x:2"}, ErrAddrInUse}, // a node's raft
		{Replica{ID: 20, RaftAddr: "x:1", ClientAddr: rep(4).ClientAddr}, ErrAddrInUse},
		{Replica{ID: 20, RaftAddr: rep(4).ClientAddr, ClientAddr: "x:2"}, ErrAddrInUse}, // another role
		{Replica{ID: 20, RaftAddr: "x:1", ClientAddr: "[::1]:7000"}, ErrAddrInUse},
		{Replica{ID: 20, RaftAddr: "nonsense", ClientAddr: "x:2"}, ErrBadAddr},
		{Replica{ID: 20, RaftAddr: "x:1", ClientAddr: "x:0"}, ErrBadAddr},
		{Replica{ID: 20, RaftAddr: "x:1", ClientAddr: "x:65536"}, ErrBadAddr},
		{Replica{ID: 20, RaftAddr: ":1", ClientAddr: "x:2"}, ErrBadAddr},
		{Replica{ID: 20, RaftAddr: "x:1", ClientAddr: "x:port"}, ErrBadAddr},
		{Replica{ID: 20, RaftAddr: string(bytes.Repeat([]byte("h"), 300)) + ":1", ClientAddr: "x:2"}, ErrBadAddr},
	}
	before := m2.Encode()
	for _, c := range cases {
		n, err := m2.Apply(AddNode(c.node))
		if !errors.Is(err, c.want) || n != nil {
			t.Errorf("%v: got %v, want %v", c.node, err, c.want)
		}
		if !bytes.Equal(m2.Encode(), before) {
			t.Fatalf("%v changed the map", c.node)
		}
	}

	// Made a replica (a move's SetReplicas, or AddShard), a node is no
	// longer spare.
	m3, err := m2.Apply(SetReplicas(2, []Replica{rep(4), rep(5), rep(12)}))
	if err != nil {
		t.Fatal(err)
	}
	if m3.Node(12) != nil || m3.Node(10) == nil {
		t.Fatalf("nodes after the move: %v", m3.Nodes)
	}
	m4, err := m3.Apply(AddShard(Shard{ID: 4, Replicas: []Replica{{ID: 10, RaftAddr: "db7.example:17000", ClientAddr: "[::1]:7000"}}}))
	if err != nil {
		t.Fatal(err)
	}
	if len(m4.Nodes) != 0 || m4.Encode()[2] != mapVersion {
		t.Fatalf("nodes after AddShard: %v", m4.Nodes)
	}
}

// TestValidateNodes: Validate refuses a node that is a replica, unsorted
// or duplicate nodes, and bad addresses; Decode refuses a version-2 map
// that lists no node.
func TestValidateNodes(t *testing.T) {
	base := three(t)
	for name, nodes := range map[string][]Replica{
		"replica":  {rep(4)},
		"unsorted": {rep(12), rep(11)},
		"twice":    {rep(11), rep(11)},
		"id 0":     {{ID: 0, RaftAddr: "a:1", ClientAddr: "a:2"}},
		"bad addr": {{ID: 11, RaftAddr: "a", ClientAddr: "a:2"}},
	} {
		m := base.Clone()
		m.Nodes = nodes
		if err := m.Validate(); !errors.Is(err, ErrInvalidMap) {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := Decode(m.Encode()); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	// Hand-made: version 2 with an empty node list.
	b := base.Encode()
	body := append([]byte{'S', 'M', mapVersion2}, b[3:len(b)-4]...)
	body = append(body, 0)
	if _, err := Decode(appendCRC(body)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("empty version-2 node list: %v", err)
	}
}

// TestEncodeGoldenNodes fails when a map with nodes, or the AddNode op,
// encodes differently.
func TestEncodeGoldenNodes(t *testing.T) {
	m := &Map{Epoch: 3, Shards: []Shard{{ID: 1, Replicas: []Replica{{ID: 1, RaftAddr: "r1", ClientAddr: "h:1"}}, Leader: 1, LeaderTerm: 2}},
		Ranges: []Range{{0, NumSlots - 1, 1}}, Nodes: []Replica{{ID: 2, RaftAddr: "r:2", ClientAddr: "h:2"}}}
	got := hex.EncodeToString(m.Encode())
	const wantMap = "534d02030101010201010272310368" + "3a31" + "01" + "00003fff01" + "010203723a3203683a32"
	if got[:len(got)-8] != wantMap {
		t.Errorf("map encoding %s, want %s+crc", got, wantMap)
	}
	gotOp := hex.EncodeToString(AddNode(Replica{ID: 2, RaftAddr: "r:2", ClientAddr: "h:2"}).Encode())
	const wantOp = "534f0106" + "0203723a3203683a32"
	if gotOp[:len(gotOp)-8] != wantOp {
		t.Errorf("op encoding %s, want %s+crc", gotOp, wantOp)
	}
	op, err := DecodeOp(AddNode(rep(7)).Encode())
	if err != nil || op.Node != rep(7) || op.Kind != KindAddNode || op.String() == "" {
		t.Fatalf("op round trip: %v %v", op, err)
	}
}

// appendCRC frames a hand-made encoding's body with its CRC.
func appendCRC(body []byte) []byte {
	return binary.BigEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
}
