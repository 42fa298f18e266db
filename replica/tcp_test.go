package replica

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

var testSecret = []byte("0123456789abcdef-test-secret")

// inbox collects the messages a transport delivers.
type inbox struct {
	mu   sync.Mutex
	msgs []*pb.Message
	ch   chan struct{}
}

func newInbox() *inbox { return &inbox{ch: make(chan struct{}, 1)} }

func (b *inbox) handle(m *pb.Message) {
	b.mu.Lock()
	b.msgs = append(b.msgs, m)
	b.mu.Unlock()
	select {
	case b.ch <- struct{}{}:
	default:
	}
}

func (b *inbox) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.msgs)
}

func (b *inbox) froms() map[uint64]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[uint64]int{}
	for _, m := range b.msgs {
		out[m.GetFrom()]++
	}
	return out
}

func newTestTransport(t *testing.T, id uint64, listen string, secret []byte, peers []Peer, box *inbox) *TCPTransport {
	t.Helper()
	tr, err := NewTCPTransport(TCPConfig{ID: id, Listen: listen, Secret: secret, Peers: peers, Handler: box.handle, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tr.Start()
	t.Cleanup(func() { tr.Close() })
	return tr
}

// eventually polls cond until it holds; a test fails only if it never
// does within a generous bound (no timing is asserted).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func heartbeat(from, to uint64) *pb.Message {
	return &pb.Message{Type: new(pb.MessageType_MsgHeartbeat), From: new(from), To: new(to), Term: new(uint64(1))}
}

func TestTCPConfig(t *testing.T) {
	for _, cfg := range []TCPConfig{
		{ID: 1, Listen: "127.0.0.1:0", Secret: []byte("short"), Handler: func(*pb.Message) {}},
		{ID: 0, Listen: "127.0.0.1:0", Secret: testSecret, Handler: func(*pb.Message) {}},
		{ID: 1, Listen: "127.0.0.1:0", Secret: testSecret},
		{ID: 1, Listen: "127.0.0.1:0", Secret: testSecret, Handler: func(*pb.Message) {}, MaxFrame: -1},
	} {
		if tr, err := NewTCPTransport(cfg); !errors.Is(err, ErrInvalidConfig) {
			if tr != nil {
				tr.Close()
			}
			t.Errorf("config %+v: %v", cfg, err)
		}
	}
}

// TestTCPAuth: replicas with the secret talk; one with another secret is
// refused by both sides and nothing it sends is delivered.
func TestTCPAuth(t *testing.T) {
	box2 := newInbox()
	t2 := newTestTransport(t, 2, "127.0.0.1:0", testSecret, nil, box2)
	t1 := newTestTransport(t, 1, "127.0.0.1:0", testSecret, []Peer{{ID: 2, RaftAddr: t2.Addr()}}, newInbox())
	t1.Send([]*pb.Message{heartbeat(1, 2), heartbeat(1, 2)})
	eventually(t, "delivery 1->2", func() bool { return box2.count() == 2 })

	bad := newTestTransport(t, 3, "127.0.0.1:0", []byte("another-secret-of-enough-length"), []Peer{{ID: 2, RaftAddr: t2.Addr()}}, newInbox())
	for range 3 {
		bad.Send([]*pb.Message{heartbeat(3, 2)})
		time.Sleep(20 * time.Millisecond)
	}
	eventually(t, "refusals counted", func() bool {
		return t2.Stats().AuthFailures > 0 && bad.Stats().AuthFailures > 0
	})
	if n := box2.froms()[3]; n != 0 {
		t.Fatalf("%d messages of the refused replica delivered", n)
	}
	if bad.Stats().Dropped == 0 {
		t.Fatal("refused sends not counted as dropped")
	}
	// A replica dialled under the wrong id is refused too.
	t4 := newTestTransport(t, 4, "127.0.0.1:0", testSecret, []Peer{{ID: 5, RaftAddr: t2.Addr()}}, newInbox())
	before := t2.Stats().AuthFailures
	t4.Send([]*pb.Message{heartbeat(4, 5)})
	eventually(t, "wrong id refused", func() bool { return t2.Stats().AuthFailures > before })
	if box2.froms()[4] != 0 {
		t.Fatal("message to another id delivered")
	}
}

// TestTCPBadFrames: garbage before the handshake, an oversized frame, a
// frame that does not decode and a spoofed sender each drop their own
// connection only; the good peer's messages keep flowing.
func TestTCPBadFrames(t *testing.T) {
	box2 := newInbox()
	t2, err := NewTCPTransport(TCPConfig{ID: 2, Listen: "127.0.0.1:0", Secret: testSecret, Handler: box2.handle, MaxFrame: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t2.Start()
	defer t2.Close()
	t1 := newTestTransport(t, 1, "127.0.0.1:0", testSecret, []Peer{{ID: 2, RaftAddr: t2.Addr()}}, newInbox())

	// Garbage instead of a hello.
	c, err := net.Dial("tcp", t2.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"))
	eventually(t, "garbage refused", func() bool { return t2.Stats().AuthFailures == 1 })
	c.Close()

	frames := [][]byte{
		binary.BigEndian.AppendUint32(nil, 1<<20),                                   // over MaxFrame
		append(binary.BigEndian.AppendUint32(nil, 5), 0xff, 0xff, 0xff, 0xff, 0xff), // not protobuf
	}
	spoof, _ := proto.Marshal(heartbeat(7, 2))
	frames = append(frames, append(binary.BigEndian.AppendUint32(nil, uint32(len(spoof))), spoof...))
	for i, f := range frames {
		conn, err := t1.dial(context.Background(), 2, t2.Addr(), kindRaft)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write(f)
		eventually(t, "bad frame counted", func() bool { return t2.Stats().BadFrames == int64(i+1) })
		// The server closed this connection.
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := bufio.NewReader(conn).ReadByte(); err == nil {
			t.Fatal("connection with a bad frame left open")
		}
		conn.Close()
	}
	if n := box2.count(); n != 0 {
		t.Fatalf("%d bad messages delivered", n)
	}
	t1.Send([]*pb.Message{heartbeat(1, 2)})
	eventually(t, "good peer still delivered", func() bool { return box2.count() == 1 })
	// An oversized message is not sent at all.
	t1.Send([]*pb.Message{{Type: new(pb.MessageType_MsgApp), From: new(uint64(1)), To: new(uint64(2)),
		Entries: []*pb.Entry{{Data: make([]byte, 2<<10)}}}})
	if t1.Stats().Dropped != 0 {
		// t1's MaxFrame is the default: it sends, and t2 drops the
		// connection.
		t.Fatalf("dropped %d", t1.Stats().Dropped)
	}
	eventually(t, "oversized frame dropped by the receiver", func() bool { return t2.Stats().BadFrames == 4 })
	// A message written before the sender saw the close is lost (raft
	// sends again): retry until one arrives.
	eventually(t, "delivery after reconnect", func() bool {
		t1.Send([]*pb.Message{heartbeat(1, 2)})
		return box2.count() >= 2
	})
}

// TestTCPReconnect: a peer that restarts on the same address is reached
// again.
func TestTCPReconnect(t *testing.T) {
	box2 := newInbox()
	t2 := newTestTransport(t, 2, "127.0.0.1:0", testSecret, nil, box2)
	addr := t2.Addr()
	t1 := newTestTransport(t, 1, "127.0.0.1:0", testSecret, []Peer{{ID: 2, RaftAddr: addr}}, newInbox())
	t1.Send([]*pb.Message{heartbeat(1, 2)})
	eventually(t, "first delivery", func() bool { return box2.count() == 1 })
	t2.Close()
	t1.Send([]*pb.Message{heartbeat(1, 2)}) // into the closed peer: lost
	box3 := newInbox()
	t2b := newTestTransport(t, 2, addr, testSecret, nil, box3)
	_ = t2b
	eventually(t, "delivery after the restart", func() bool {
		t1.Send([]*pb.Message{heartbeat(1, 2)})
		return box3.count() > 0
	})
	if t1.Stats().Dials < 2 {
		t.Fatalf("dials %d", t1.Stats().Dials)
	}
}

// TestTCPPeerUpdate: a peer's address changes; unknown peers are dropped.
func TestTCPPeerUpdate(t *testing.T) {
	box2 := newInbox()
	t2 := newTestTransport(t, 2, "127.0.0.1:0", testSecret, nil, box2)
	t1 := newTestTransport(t, 1, "127.0.0.1:0", testSecret, []Peer{{ID: 2, RaftAddr: "127.0.0.1:1"}}, newInbox())
	t1.Send([]*pb.Message{heartbeat(1, 2)})
	eventually(t, "dial failure dropped", func() bool { return t1.Stats().Dropped == 1 })
	t1.UpdatePeers([]Peer{{ID: 1, RaftAddr: t1.Addr()}, {ID: 2, RaftAddr: t2.Addr()}})
	eventually(t, "delivery at the new address", func() bool {
		t1.Send([]*pb.Message{heartbeat(1, 2)})
		return box2.count() > 0
	})
	t1.UpdatePeers(nil)
	d := t1.Stats().Dropped
	t1.Send([]*pb.Message{heartbeat(1, 2)})
	if t1.Stats().Dropped != d+1 {
		t.Fatal("message to a removed peer not dropped")
	}
}

// TestTokenBucket checks the waits the limiter computes, on a fake clock.
func TestTokenBucket(t *testing.T) {
	now := time.Unix(0, 0)
	b := newTokenBucket(1000, 500, func() time.Time { return now })
	if b.burst != 1000 {
		t.Fatalf("burst %v", b.burst)
	}
	if d := b.reserve(1000); d != 0 {
		t.Fatalf("first burst waits %v", d)
	}
	if d := b.reserve(500); d != 500*time.Millisecond {
		t.Fatalf("over the burst waits %v, want 500ms", d)
	}
	now = now.Add(2 * time.Second) // pays back 500, refills to the burst
	if d := b.reserve(1000); d != 0 {
		t.Fatalf("after refill waits %v", d)
	}
	if d := newTokenBucket(0, 10, time.Now).reserve(1 << 30); d != 0 {
		t.Fatalf("unlimited waits %v", d)
	}
}

// TestTCPWriteErrorReportsSnapshot: a connection that fails while a
// snapshot message is still in the sender's buffer reports the snapshot
// failed (raft sends it again at once), as a dropped one is; before, the
// message was counted sent and lost without a word, and the leader waited
// SnapshotTimeout for it.
func TestTCPWriteErrorReportsSnapshot(t *testing.T) {
	var failed []uint64
	tr := &TCPTransport{cfg: TCPConfig{SnapshotStatus: func(id uint64, ok bool) {
		if !ok {
			failed = append(failed, id)
		}
	}}}
	p := &peerSender{t: tr, id: 2, queue: make(chan queued, 4), stopc: make(chan struct{})}
	conn, other := net.Pipe()
	other.Close() // every write fails
	defer conn.Close()
	p.queue <- queued{b: []byte("an append")}
	if err := p.write(conn, make(chan struct{}), queued{b: []byte("a snapshot"), snap: true}); err == nil {
		t.Fatal("write to a closed pipe succeeded")
	}
	if len(failed) != 1 || failed[0] != 2 {
		t.Fatalf("snapshot failures reported: %v, want [2]", failed)
	}
	if got := tr.Stats().Dropped; got != 1 {
		t.Fatalf("%d messages counted dropped, want 1 (the snapshot)", got)
	}
}
