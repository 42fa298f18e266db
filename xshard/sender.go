package xshard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Leadership tells the sender whether this replica leads its shard now.
// cluster.Node: Replica().Status().Role == "leader".
type Leadership interface {
	IsLeader() bool
}

// Peers resolves a shard id to the client address ("ip:port") of its
// current leader, or of any replica when the leader is not known (a
// follower answers MOVED with the leader, which the sender follows). The
// cluster layer answers from the shard map's leader hint.
type Peers interface {
	LeaderAddr(ctx context.Context, shard uint32) (string, error)
}

// Proposer proposes a command (argv) to this shard's Raft group and
// returns once it applied, or with an error (an error reply included).
// cluster.Node: Replica().Propose(ctx, server.EncodeCommand(argv)), the
// reply checked for a leading '-'.
type Proposer interface {
	Propose(ctx context.Context, argv [][]byte) error
}

// Client sends one command to one server and returns its reply: an int64
// for an integer reply, an error (its message the reply's text) for an
// error reply.
type Client interface {
	Do(ctx context.Context, argv [][]byte) (any, error)
	Close() error
}

// SenderConfig configures a Sender. Streams, Leader, Peers and Proposer
// are required.
type SenderConfig struct {
	// Streams returns the shard's current Streams (a new one after a
	// snapshot install reopens the store).
	Streams func() *Streams
	Leader  Leadership
	Peers   Peers
	// Proposer proposes TALLY.XACK on this shard.
	Proposer Proposer
	// Dial makes a client for an address. The default is a go-redis
	// client with Password.
	Dial     func(addr string) Client
	Password string
	// MaxBatch and MaxBatchBytes bound one TALLY.XRECV. The defaults are
	// 256 messages and 256 KiB (at most MaxBatchMessages, MaxBatchBytes).
	MaxBatch, MaxBatchBytes int
	// Poll is how often an idle or non-leading sender looks again. The
	// default is 50ms.
	Poll time.Duration
	// MinBackoff and MaxBackoff bound the wait after a failed send to a
	// target (doubling from min). The defaults are 10ms and 1s.
	MinBackoff, MaxBackoff time.Duration
	// Timeout bounds one send or proposal. The default is 5s.
	Timeout time.Duration
	// Logger receives failures at debug level. The default discards.
	Logger *slog.Logger
	// Now is the clock of the backoffs and of the outboxes' ages. The
	// default is time.Now; a deterministic simulation that calls Pass
	// itself gives its own.
	Now func() time.Time
}

// SenderStats are a sender's counters since it was made.
type SenderStats struct {
	Batches   uint64 // XRECVs answered with a sequence
	Messages  uint64 // messages acknowledged
	Acks      uint64 // XACKs proposed and applied
	Redirects uint64 // MOVED replies followed
	Retries   uint64 // failed sends or proposals, retried after a backoff
	Gaps      uint64 // XGAP replies
}

// Sender delivers this shard's outboxes while this replica leads: for
// each target in turn, the oldest pending messages go to the target's
// leader as one TALLY.XRECV; the reply (the last sequence the target
// applied from us) is acknowledged through a proposed TALLY.XACK, which
// drops the prefix on every replica. A send that fails, or whose outcome
// is unknown, is repeated: the target applies each sequence once.
type Sender struct {
	cfg SenderConfig

	// mu guards the clients and per-target state; the loop is the only
	// writer, Close the only other user.
	mu      sync.Mutex
	clients map[string]Client
	targets map[uint32]*targetState

	batches, messages, acks, redirects, retries, gaps atomic.Uint64
}

type targetState struct {
	addr    string
	backoff time.Duration
	next    time.Time
}

// NewSender checks cfg and fills its defaults.
func NewSender(cfg SenderConfig) (*Sender, error) {
	if cfg.Streams == nil || cfg.Leader == nil || cfg.Peers == nil || cfg.Proposer == nil {
		return nil, errors.New("xshard: SenderConfig needs Streams, Leader, Peers and Proposer")
	}
	if cfg.Dial == nil {
		pw := cfg.Password
		cfg.Dial = func(addr string) Client {
			return redisClient{redis.NewClient(&redis.Options{Addr: addr, Password: pw, MaxRetries: -1,
				DialTimeout: time.Second, PoolSize: 2, Protocol: 2})}
		}
	}
	if cfg.MaxBatch <= 0 || cfg.MaxBatch > MaxBatchMessages {
		cfg.MaxBatch = 256
	}
	if cfg.MaxBatchBytes <= 0 || cfg.MaxBatchBytes > MaxBatchBytes/2 {
		cfg.MaxBatchBytes = 256 << 10
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 10 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(time.Second, cfg.MinBackoff)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Sender{cfg: cfg, clients: map[string]Client{}, targets: map[uint32]*targetState{}}, nil
}

type redisClient struct{ c *redis.Client }

func (r redisClient) Do(ctx context.Context, argv [][]byte) (any, error) {
	args := make([]any, len(argv))
	for i, a := range argv {
		args[i] = a
	}
	return r.c.Do(ctx, args...).Result()
}

func (r redisClient) Close() error { return r.c.Close() }

// Stats returns the sender's counters.
func (s *Sender) Stats() SenderStats {
	return SenderStats{Batches: s.batches.Load(), Messages: s.messages.Load(), Acks: s.acks.Load(),
		Redirects: s.redirects.Load(), Retries: s.retries.Load(), Gaps: s.gaps.Load()}
}

// Run delivers until ctx ends, then closes its clients and returns nil.
// Only a leader sends; on any other replica Run waits.
func (s *Sender) Run(ctx context.Context) error {
	defer s.closeClients()
	for ctx.Err() == nil {
		st := s.cfg.Streams()
		if !s.cfg.Leader.IsLeader() || st == nil {
			s.wait(ctx, nil)
			continue
		}
		if !s.pass(ctx, st) {
			s.wait(ctx, st.Wake())
		}
	}
	return nil
}

// Pass makes one pass of Run's loop without waiting: while this replica
// leads, one batch to every target with pending messages whose backoff is
// over. It reports whether any message was delivered. A host that drives
// the sender itself (a deterministic simulation, whose Client and
// Proposer answer from its own loop) calls it instead of Run; Close
// closes the clients then.
func (s *Sender) Pass(ctx context.Context) bool {
	st := s.cfg.Streams()
	if !s.cfg.Leader.IsLeader() || st == nil {
		return false
	}
	return s.pass(ctx, st)
}

// Close closes the clients Pass dialed (Run closes its own).
func (s *Sender) Close() { s.closeClients() }

func (s *Sender) wait(ctx context.Context, wake <-chan struct{}) {
	t := time.NewTimer(s.cfg.Poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-wake:
	}
}

// pass sends one batch to every target with pending messages whose
// backoff is over, and reports whether any was delivered.
func (s *Sender) pass(ctx context.Context, st *Streams) bool {
	status, err := st.Status(s.cfg.Now())
	if err != nil {
		s.cfg.Logger.Debug("xshard: reading the outboxes", "err", err)
		return false
	}
	progressed := false
	for _, t := range status.Targets {
		if t.Pending == 0 || ctx.Err() != nil {
			continue
		}
		ts := s.target(t.Target)
		if s.cfg.Now().Before(ts.next) {
			continue
		}
		n, err := s.send(ctx, st, t.Target, ts)
		if err != nil {
			if ctx.Err() != nil {
				return progressed
			}
			s.retries.Add(1)
			ts.backoff = min(max(2*ts.backoff, s.cfg.MinBackoff), s.cfg.MaxBackoff)
			ts.next = s.cfg.Now().Add(ts.backoff)
			s.cfg.Logger.Debug("xshard: send", "target", t.Target, "err", err, "backoff", ts.backoff)
			continue
		}
		ts.backoff, ts.next = 0, time.Time{}
		progressed = progressed || n > 0
	}
	return progressed
}

func (s *Sender) target(id uint32) *targetState {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.targets[id]
	if ts == nil {
		ts = &targetState{}
		s.targets[id] = ts
	}
	return ts
}

func (s *Sender) client(addr string) Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clients[addr]
	if c == nil {
		c = s.cfg.Dial(addr)
		s.clients[addr] = c
	}
	return c
}

func (s *Sender) dropClient(addr string) {
	s.mu.Lock()
	c := s.clients[addr]
	delete(s.clients, addr)
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

func (s *Sender) closeClients() {
	s.mu.Lock()
	cs := s.clients
	s.clients = map[string]Client{}
	s.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}

// maxRedirects bounds the MOVED replies one send follows.
const maxRedirects = 5

// send delivers one batch to target and acknowledges it; it returns the
// number of messages acknowledged.
func (s *Sender) send(ctx context.Context, st *Streams, target uint32, ts *targetState) (int, error) {
	first, msgs, err := st.Pending(target, s.cfg.MaxBatch, s.cfg.MaxBatchBytes)
	if err != nil || len(msgs) == 0 {
		return 0, err
	}
	argv := [][]byte{[]byte(CmdRecv), strconv.AppendUint(nil, uint64(st.Self()), 10),
		strconv.AppendUint(nil, first, 10), AppendBatch(nil, msgs)}
	var last uint64
	for redirects := 0; ; redirects++ {
		if ts.addr == "" {
			if ts.addr, err = s.cfg.Peers.LeaderAddr(ctx, target); err != nil {
				return 0, fmt.Errorf("resolving shard %d: %w", target, err)
			}
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		res, err := s.client(ts.addr).Do(cctx, argv)
		cancel()
		if err == nil {
			v, ok := res.(int64)
			if !ok || v < 0 {
				return 0, fmt.Errorf("shard %d: unexpected reply %v", target, res)
			}
			last = uint64(v)
			s.batches.Add(1)
			break
		}
		msg := err.Error()
		if addr, ok := movedAddr(msg); ok && redirects < maxRedirects {
			s.redirects.Add(1)
			ts.addr = addr
			continue
		}
		if v, ok := gapLast(msg); ok {
			// The target is behind what it acknowledged to us: it lost
			// state, or we read a stale head. Nothing to send can fill it.
			s.gaps.Add(1)
			return 0, fmt.Errorf("%w: shard %d applied up to %d, we hold %d on", ErrGap, target, v, first)
		}
		var rerr redis.Error
		if !errors.As(err, &rerr) {
			s.dropClient(ts.addr) // a connection error: dial again
		}
		ts.addr = "" // resolve the leader again (TRYAGAIN, CLUSTERDOWN, down)
		return 0, fmt.Errorf("shard %d: %w", target, err)
	}
	if last < first {
		return 0, nil // nothing new applied: a later pass sends again
	}
	upto := min(last, first+uint64(len(msgs))-1)
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if err := s.cfg.Proposer.Propose(cctx, [][]byte{[]byte(CmdAck), strconv.AppendUint(nil, uint64(target), 10),
		strconv.AppendUint(nil, upto, 10)}); err != nil {
		return 0, fmt.Errorf("acknowledging %d to shard %d: %w", upto, target, err)
	}
	s.acks.Add(1)
	n := int(upto - first + 1)
	s.messages.Add(uint64(n))
	return n, nil
}

// movedAddr parses "MOVED slot addr".
func movedAddr(msg string) (string, bool) {
	f := strings.Fields(msg)
	if len(f) >= 3 && f[0] == "MOVED" {
		return f[2], true
	}
	return "", false
}

// gapLast parses "XGAP last ...".
func gapLast(msg string) (uint64, bool) {
	f := strings.Fields(msg)
	if len(f) >= 2 && f[0] == GapReplyPrefix {
		v, err := strconv.ParseUint(f[1], 10, 64)
		return v, err == nil
	}
	return 0, false
}
