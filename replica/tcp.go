package replica

// TCPTransport: Raft messages and snapshot files between replicas over TCP,
// authenticated with the cluster's shared secret.
//
// # Connections
//
// Every connection is dialled by the replica that sends on it and starts
// with the handshake below. Its kind (the hello's kind byte) says what
// follows:
//
//   - kindRaft: one per ordered pair of replicas, from the sender, which
//     writes frames of Raft messages and reads nothing back. Send queues a
//     message (marshalled at once) on the peer's bounded queue; a goroutine
//     per peer dials (with backoff from 50ms to 2s), handshakes and writes
//     the queue out. A full queue drops the message (raft retries), a
//     failed connection drops what was being written; both report the
//     peer unreachable (and a dropped snapshot message as a failed
//     snapshot) through TCPConfig.Unreachable and SnapshotStatus.
//   - kindFetch: a snapshot receiver's requests for checkpoint files
//     (checkpoint.go), answered one chunk per request.
//
// # Handshake
//
//	client -> server  hello   magic "TLYR", version 1, kind (1), client id (8),
//	                          server id (8), client nonce (32)     = 54 bytes
//	server -> client  answer  magic, version, server id (8), server nonce (32),
//	                          server MAC (32)                      = 77 bytes
//	client -> server  proof   client MAC (32)
//	server -> client  ok      0x01
//
// MACs are HMAC-SHA256 under the shared secret over a role label
// ("tally-raft server" or "tally-raft client"), the kind, both ids and both
// nonces. Each side checks the other's MAC before it trusts anything: a
// server refuses a client whose proof is wrong, and delivers nothing it
// sends; a client refuses a server whose answer is wrong. Fresh random
// nonces on both sides make a recorded handshake worthless for another
// connection. A refused peer is logged and counted (Stats.AuthFailures);
// the error is ErrAuth. The handshake must finish within DialTimeout. The
// secret authenticates; nothing is encrypted (run the raft port on a
// private network, or behind TLS).
//
// # Frames
//
// After the handshake a raft connection carries frames: a 4-byte
// big-endian length, then that many bytes of a protobuf raftpb.Message.
// A frame longer than MaxFrame, a message that does not decode, or one
// whose From is not the authenticated peer or whose To is not this
// replica closes that connection only (Stats.BadFrames); the sender
// reconnects.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Errors of the TCP transport, for errors.Is.
var (
	// ErrAuth: a peer failed the handshake (wrong secret, wrong id, not a
	// tally replica).
	ErrAuth = errors.New("replica: peer authentication failed")
	// ErrFrame: a peer sent a frame that is too large or does not decode.
	ErrFrame = errors.New("replica: bad frame")
	// ErrTransportClosed: the transport is closed.
	ErrTransportClosed = errors.New("replica: transport closed")
)

// MinSecretLen is the shortest shared secret NewTCPTransport accepts.
const MinSecretLen = 16

// Defaults of TCPConfig.
const (
	DefaultMaxFrame    = 64 << 20
	DefaultQueueLen    = 4096
	DefaultDialTimeout = 5 * time.Second
)

// TCPConfig configures a TCPTransport.
type TCPConfig struct {
	// ID is this replica's Raft id (not 0).
	ID uint64
	// Listen is the raft address to listen on, "host:port"; port 0 picks
	// one (Addr reports it).
	Listen string
	// Secret is the cluster's shared secret, at least MinSecretLen bytes.
	Secret []byte
	// Peers are the replicas to send to at first; UpdatePeers replaces
	// them (the node calls it when the member table changes).
	Peers []Peer
	// Handler receives each authenticated message for this replica; the
	// host passes the node's Step. It is called from the connection's
	// goroutine, so a slow handler slows that peer only.
	Handler func(*pb.Message)
	// Unreachable, if set, is told of a peer a message could not be sent
	// to (the host passes Node.ReportUnreachable).
	Unreachable func(id uint64)
	// SnapshotStatus, if set, is told of a snapshot message that could not
	// be sent (ok false; the host passes Node.ReportSnapshot).
	SnapshotStatus func(id uint64, ok bool)
	// Logger receives the transport's messages; the default discards them.
	Logger *slog.Logger
	// MaxFrame bounds a frame, both ways. The default is DefaultMaxFrame.
	MaxFrame int
	// QueueLen is the number of messages queued per peer before Send
	// drops. The default is DefaultQueueLen.
	QueueLen int
	// DialTimeout bounds a dial and a handshake. The default is
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// SnapshotRate limits the snapshot bytes this replica serves and
	// fetches, each, in bytes per second; 0 is unlimited.
	SnapshotRate int64
}

// TransportStats counts what a TCPTransport did.
type TransportStats struct {
	Sent, Received int64 // raft messages
	Dropped        int64 // messages not sent: queue full, unknown peer, connection lost
	AuthFailures   int64 // handshakes refused, either side
	BadFrames      int64 // connections closed for a bad frame
	Dials          int64 // outgoing raft connections established
}

// TCPTransport is a Transport over TCP (see the file comment). It is safe
// for concurrent use.
type TCPTransport struct {
	cfg     TCPConfig
	log     *slog.Logger
	ln      net.Listener
	limiter *tokenBucket

	mu       sync.Mutex
	peers    map[uint64]*peerSender
	accepted map[net.Conn]struct{}
	started  bool
	closed   bool
	src      snapshotSource

	closing chan struct{}
	wg      sync.WaitGroup

	sent, received, dropped, authFailures, badFrames, dials atomic.Int64
}

// NewTCPTransport listens on cfg.Listen. Connections are accepted once
// Start is called (so the host can start its node first).
func NewTCPTransport(cfg TCPConfig) (*TCPTransport, error) {
	var errs []error
	if cfg.ID == 0 {
		errs = append(errs, errors.New("ID 0"))
	}
	if len(cfg.Secret) < MinSecretLen {
		errs = append(errs, fmt.Errorf("secret of %d bytes, want at least %d", len(cfg.Secret), MinSecretLen))
	}
	if cfg.Handler == nil {
		errs = append(errs, errors.New("no Handler"))
	}
	if cfg.MaxFrame < 0 || cfg.QueueLen < 0 || cfg.DialTimeout < 0 || cfg.SnapshotRate < 0 {
		errs = append(errs, errors.New("negative MaxFrame, QueueLen, DialTimeout or SnapshotRate"))
	}
	for _, p := range cfg.Peers {
		if err := validPeer(p); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if cfg.MaxFrame == 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	if cfg.QueueLen == 0 {
		cfg.QueueLen = DefaultQueueLen
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Secret = bytes.Clone(cfg.Secret)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("replica: listen on %s: %w", cfg.Listen, err)
	}
	t := &TCPTransport{
		cfg: cfg, log: cfg.Logger, ln: ln,
		limiter:  newTokenBucket(cfg.SnapshotRate, 0, time.Now),
		peers:    map[uint64]*peerSender{},
		accepted: map[net.Conn]struct{}{},
		closing:  make(chan struct{}),
	}
	t.UpdatePeers(cfg.Peers)
	return t, nil
}

// Addr returns the address the transport listens on.
func (t *TCPTransport) Addr() string { return t.ln.Addr().String() }

// Start accepts connections (once; later calls do nothing).
func (t *TCPTransport) Start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started || t.closed {
		return
	}
	t.started = true
	t.wg.Add(1)
	go t.acceptLoop()
}

// Stats returns the transport's counters.
func (t *TCPTransport) Stats() TransportStats {
	return TransportStats{
		Sent: t.sent.Load(), Received: t.received.Load(), Dropped: t.dropped.Load(),
		AuthFailures: t.authFailures.Load(), BadFrames: t.badFrames.Load(), Dials: t.dials.Load(),
	}
}

// Close stops listening, closes every connection and waits for the
// transport's goroutines.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.closing)
	err := t.ln.Close()
	for c := range t.accepted {
		c.Close()
	}
	for _, p := range t.peers {
		p.stop()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return err
}

// UpdatePeers implements PeerUpdater: peers not in the list are dropped,
// new ones are dialled on the first message, and a changed address is
// used from the next connection on (the current one is closed).
func (t *TCPTransport) UpdatePeers(peers []Peer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	keep := map[uint64]bool{}
	for _, p := range peers {
		if p.ID == t.cfg.ID || p.ID == 0 {
			continue
		}
		keep[p.ID] = true
		if s := t.peers[p.ID]; s != nil {
			s.setAddr(p.RaftAddr)
			continue
		}
		s := &peerSender{t: t, id: p.ID, addr: p.RaftAddr, queue: make(chan queued, t.cfg.QueueLen), stopc: make(chan struct{})}
		t.peers[p.ID] = s
		t.wg.Add(1)
		go s.run()
	}
	for id, s := range t.peers {
		if !keep[id] {
			s.stop()
			delete(t.peers, id)
		}
	}
}

// Send implements Transport: each message is marshalled and queued for its
// peer; a message that cannot be queued is dropped and counted.
func (t *TCPTransport) Send(msgs []*pb.Message) {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	for _, m := range msgs {
		if closed {
			t.dropped.Add(1)
			continue
		}
		t.mu.Lock()
		p := t.peers[m.GetTo()]
		t.mu.Unlock()
		b, err := proto.Marshal(m)
		if p == nil || err != nil || len(b) > t.cfg.MaxFrame {
			if err != nil || len(b) > t.cfg.MaxFrame {
				t.log.Warn("replica: message not sent", "to", m.GetTo(), "type", m.GetType().String(), "bytes", len(b), "err", err)
			}
			t.drop(m.GetTo(), m.GetType() == pb.MessageType_MsgSnap)
			continue
		}
		select {
		case p.queue <- queued{b: b, snap: m.GetType() == pb.MessageType_MsgSnap}:
		default:
			t.drop(m.GetTo(), m.GetType() == pb.MessageType_MsgSnap)
		}
	}
}

// drop counts an unsent message and reports it.
func (t *TCPTransport) drop(to uint64, snap bool) {
	t.dropped.Add(1)
	if t.cfg.Unreachable != nil {
		t.cfg.Unreachable(to)
	}
	if snap && t.cfg.SnapshotStatus != nil {
		t.cfg.SnapshotStatus(to, false)
	}
}

type queued struct {
	b    []byte
	snap bool
}

// peerSender owns the outgoing raft connection to one peer.
type peerSender struct {
	t     *TCPTransport
	id    uint64
	queue chan queued
	stopc chan struct{}
	once  sync.Once

	mu   sync.Mutex
	addr string
	conn net.Conn
}

func (p *peerSender) stop() {
	p.once.Do(func() {
		close(p.stopc)
		p.mu.Lock()
		if p.conn != nil {
			p.conn.Close()
		}
		p.mu.Unlock()
	})
}

func (p *peerSender) setAddr(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if addr == p.addr {
		return
	}
	p.addr = addr
	if p.conn != nil {
		p.conn.Close() // reconnect to the new address
	}
}

func (p *peerSender) stopped() bool {
	select {
	case <-p.stopc:
		return true
	default:
		return false
	}
}

// run dials, handshakes and writes the queue out, reconnecting with
// backoff.
func (p *peerSender) run() {
	defer p.t.wg.Done()
	backoff := 50 * time.Millisecond
	for !p.stopped() {
		// Wait for something to send before dialling.
		var first queued
		select {
		case first = <-p.queue:
		case <-p.stopc:
			return
		}
		p.mu.Lock()
		addr := p.addr
		p.mu.Unlock()
		conn, err := p.t.dial(context.Background(), p.id, addr, kindRaft)
		if err != nil {
			p.t.log.Debug("replica: dial", "peer", p.id, "addr", addr, "err", err)
			p.t.drop(p.id, first.snap)
			p.drain()
			select {
			case <-time.After(backoff):
			case <-p.stopc:
				return
			}
			backoff = min(backoff*2, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		p.t.dials.Add(1)
		p.mu.Lock()
		if p.stopped() {
			p.mu.Unlock()
			conn.Close()
			return
		}
		p.conn = conn
		p.mu.Unlock()
		// The peer never writes on this connection: a read returns when
		// it closed it (a restart), and closing our side makes the next
		// write fail at once instead of into a dead socket.
		dead := make(chan struct{})
		go func() {
			var b [1]byte
			_, _ = conn.Read(b[:])
			close(dead)
		}()
		err = p.write(conn, dead, first)
		p.mu.Lock()
		p.conn = nil
		p.mu.Unlock()
		conn.Close()
		if err != nil && !p.stopped() {
			p.t.log.Debug("replica: send", "peer", p.id, "err", err)
		}
	}
}

// drain drops what is queued (the peer is unreachable; raft sends again).
func (p *peerSender) drain() {
	for {
		select {
		case q := <-p.queue:
			p.t.drop(p.id, q.snap)
		default:
			return
		}
	}
}

// write writes first and then the queue to conn until an error or stop.
//
// A write error loses what w still buffered: the snapshot messages among
// it are reported failed (SnapshotStatus), as a dropped one is, so the
// leader sends the snapshot again at once instead of waiting
// SnapshotTimeout for a message that never left.
func (p *peerSender) write(conn net.Conn, dead <-chan struct{}, first queued) error {
	w := bufio.NewWriterSize(conn, 64<<10)
	unflushed := 0 // snapshot messages in w since its last flush
	lost := func(err error) error {
		for ; unflushed > 0; unflushed-- {
			p.t.drop(p.id, true)
		}
		return err
	}
	put := func(q queued) error {
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(len(q.b)))
		if _, err := w.Write(hdr[:]); err != nil {
			p.t.drop(p.id, q.snap)
			return lost(err)
		}
		if _, err := w.Write(q.b); err != nil {
			p.t.drop(p.id, q.snap)
			return lost(err)
		}
		if q.snap {
			unflushed++
		}
		p.t.sent.Add(1)
		return nil
	}
	if err := put(first); err != nil {
		return err
	}
	for {
		select {
		case q := <-p.queue:
			if err := put(q); err != nil {
				return err
			}
			continue
		default:
		}
		if err := w.Flush(); err != nil {
			return lost(err)
		}
		unflushed = 0
		select {
		case q := <-p.queue:
			if err := put(q); err != nil {
				return err
			}
		case <-dead:
			return errors.New("replica: peer closed the connection")
		case <-p.stopc:
			return nil
		}
	}
}

// Connection kinds (the hello's kind byte).
const (
	kindRaft  = 1
	kindFetch = 2
)

const (
	helloLen  = 4 + 1 + 1 + 8 + 8 + 32
	answerLen = 4 + 1 + 8 + 32 + 32
	macLen    = sha256.Size
	nonceLen  = 32
	version   = 1
)

var magic = [4]byte{'T', 'L', 'Y', 'R'}

func (t *TCPTransport) mac(role string, kind byte, client, server uint64, nc, ns []byte) []byte {
	h := hmac.New(sha256.New, t.cfg.Secret)
	h.Write([]byte(role))
	h.Write([]byte{0, kind})
	var ids [16]byte
	binary.BigEndian.PutUint64(ids[:], client)
	binary.BigEndian.PutUint64(ids[8:], server)
	h.Write(ids[:])
	h.Write(nc)
	h.Write(ns)
	return h.Sum(nil)
}

// dial connects to replica id at addr and runs the client side of the
// handshake.
func (t *TCPTransport) dial(ctx context.Context, id uint64, addr string, kind byte) (net.Conn, error) {
	select {
	case <-t.closing:
		return nil, ErrTransportClosed
	default:
	}
	if addr == "" {
		return nil, fmt.Errorf("replica: no raft address for peer %d", id)
	}
	d := net.Dialer{Timeout: t.cfg.DialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if err := t.clientHandshake(conn, id, kind); err != nil {
		conn.Close()
		if errors.Is(err, ErrAuth) {
			t.authFailures.Add(1)
			t.log.Warn("replica: peer refused", "peer", id, "addr", addr, "err", err)
		}
		return nil, err
	}
	return conn, nil
}

func (t *TCPTransport) clientHandshake(conn net.Conn, id uint64, kind byte) error {
	conn.SetDeadline(time.Now().Add(t.cfg.DialTimeout))
	defer conn.SetDeadline(time.Time{})
	hello := make([]byte, 0, helloLen)
	hello = append(hello, magic[:]...)
	hello = append(hello, version, kind)
	hello = binary.BigEndian.AppendUint64(hello, t.cfg.ID)
	hello = binary.BigEndian.AppendUint64(hello, id)
	nc := make([]byte, nonceLen)
	rand.Read(nc)
	hello = append(hello, nc...)
	if _, err := conn.Write(hello); err != nil {
		return err
	}
	ans := make([]byte, answerLen)
	if _, err := io.ReadFull(conn, ans); err != nil {
		return fmt.Errorf("%w: no answer from peer %d: %w", ErrAuth, id, err)
	}
	if !bytes.Equal(ans[:4], magic[:]) || ans[4] != version {
		return fmt.Errorf("%w: peer %d is not a tally replica of this version", ErrAuth, id)
	}
	if got := binary.BigEndian.Uint64(ans[5:]); got != id {
		return fmt.Errorf("%w: dialled peer %d, answered by %d", ErrAuth, id, got)
	}
	ns := ans[13 : 13+nonceLen]
	if !hmac.Equal(ans[13+nonceLen:], t.mac("tally-raft server", kind, t.cfg.ID, id, nc, ns)) {
		return fmt.Errorf("%w: peer %d does not know the secret", ErrAuth, id)
	}
	if _, err := conn.Write(t.mac("tally-raft client", kind, t.cfg.ID, id, nc, ns)); err != nil {
		return err
	}
	var ok [1]byte
	if _, err := io.ReadFull(conn, ok[:]); err != nil || ok[0] != 1 {
		return fmt.Errorf("%w: peer %d refused this replica", ErrAuth, id)
	}
	return nil
}

// serverHandshake runs the server side and returns the client's id and the
// connection's kind.
func (t *TCPTransport) serverHandshake(conn net.Conn) (uint64, byte, error) {
	conn.SetDeadline(time.Now().Add(t.cfg.DialTimeout))
	defer conn.SetDeadline(time.Time{})
	hello := make([]byte, helloLen)
	if _, err := io.ReadFull(conn, hello); err != nil {
		return 0, 0, fmt.Errorf("%w: short hello: %w", ErrAuth, err)
	}
	if !bytes.Equal(hello[:4], magic[:]) || hello[4] != version {
		return 0, 0, fmt.Errorf("%w: not a tally replica of this version", ErrAuth)
	}
	kind := hello[5]
	if kind != kindRaft && kind != kindFetch {
		return 0, 0, fmt.Errorf("%w: connection kind %d", ErrAuth, kind)
	}
	client := binary.BigEndian.Uint64(hello[6:])
	if to := binary.BigEndian.Uint64(hello[14:]); to != t.cfg.ID {
		return 0, 0, fmt.Errorf("%w: client %d dialled replica %d, this is %d", ErrAuth, client, to, t.cfg.ID)
	}
	if client == 0 || client == t.cfg.ID {
		return 0, 0, fmt.Errorf("%w: client id %d", ErrAuth, client)
	}
	nc := hello[22 : 22+nonceLen]
	ns := make([]byte, nonceLen)
	rand.Read(ns)
	ans := make([]byte, 0, answerLen)
	ans = append(ans, magic[:]...)
	ans = append(ans, version)
	ans = binary.BigEndian.AppendUint64(ans, t.cfg.ID)
	ans = append(ans, ns...)
	ans = append(ans, t.mac("tally-raft server", kind, client, t.cfg.ID, nc, ns)...)
	if _, err := conn.Write(ans); err != nil {
		return 0, 0, err
	}
	proof := make([]byte, macLen)
	if _, err := io.ReadFull(conn, proof); err != nil {
		return 0, 0, fmt.Errorf("%w: client %d sent no proof: %w", ErrAuth, client, err)
	}
	if !hmac.Equal(proof, t.mac("tally-raft client", kind, client, t.cfg.ID, nc, ns)) {
		return 0, 0, fmt.Errorf("%w: client %d does not know the secret", ErrAuth, client)
	}
	if _, err := conn.Write([]byte{1}); err != nil {
		return 0, 0, err
	}
	return client, kind, nil
}

func (t *TCPTransport) acceptLoop() {
	defer t.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		conn, err := t.ln.Accept()
		if err != nil {
			select {
			case <-t.closing:
				return
			default:
			}
			// A temporary failure (out of descriptors): wait a little.
			t.log.Warn("replica: accept", "err", err)
			select {
			case <-time.After(backoff):
			case <-t.closing:
				return
			}
			backoff = min(backoff*2, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			conn.Close()
			return
		}
		t.accepted[conn] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go t.serve(conn)
	}
}

func (t *TCPTransport) serve(conn net.Conn) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		delete(t.accepted, conn)
		t.mu.Unlock()
		conn.Close()
	}()
	client, kind, err := t.serverHandshake(conn)
	if err != nil {
		if errors.Is(err, ErrAuth) {
			t.authFailures.Add(1)
			t.log.Warn("replica: peer refused", "remote", conn.RemoteAddr().String(), "err", err)
		}
		return
	}
	switch kind {
	case kindRaft:
		err = t.receive(conn, client)
	case kindFetch:
		err = t.serveFetch(conn)
	}
	if errors.Is(err, ErrFrame) {
		t.badFrames.Add(1)
		t.log.Warn("replica: connection dropped", "peer", client, "err", err)
	}
}

// receive reads raft frames from an authenticated peer and delivers them.
func (t *TCPTransport) receive(conn net.Conn, client uint64) error {
	r := bufio.NewReaderSize(conn, 64<<10)
	var buf []byte
	for {
		b, err := readFrame(r, t.cfg.MaxFrame, &buf)
		if err != nil {
			return err
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(b, m); err != nil {
			return fmt.Errorf("%w: message from %d does not decode: %w", ErrFrame, client, err)
		}
		if m.GetFrom() != client || m.GetTo() != t.cfg.ID {
			return fmt.Errorf("%w: message %d->%d on the connection of %d", ErrFrame, m.GetFrom(), m.GetTo(), client)
		}
		t.received.Add(1)
		t.cfg.Handler(m)
	}
}

// readFrame reads one length-prefixed frame of at most max bytes into
// *buf.
func readFrame(r io.Reader, max int, buf *[]byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(max) {
		return nil, fmt.Errorf("%w: frame of %d bytes, limit %d", ErrFrame, n, max)
	}
	if cap(*buf) < int(n) {
		*buf = make([]byte, n)
	}
	b := (*buf)[:n]
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// tokenBucket limits a byte rate. Waiters take tokens ahead (the count
// goes negative) and sleep until it is paid back, so a chunk larger than
// the burst still passes at the rate.
type tokenBucket struct {
	rate  float64 // bytes per second; 0: unlimited
	burst float64
	now   func() time.Time

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newTokenBucket(rate int64, burst int, now func() time.Time) *tokenBucket {
	b := max(float64(burst), float64(rate))
	return &tokenBucket{rate: float64(rate), burst: b, now: now, tokens: b, last: now()}
}

// reserve takes n tokens and returns how long to wait before using them.
func (b *tokenBucket) reserve(n int) time.Duration {
	if b.rate <= 0 {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(b.burst, b.tokens+el*b.rate)
	}
	b.last = now
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// wait takes n tokens, sleeping as the rate requires.
func (b *tokenBucket) wait(ctx context.Context, n int) error {
	d := b.reserve(n)
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
