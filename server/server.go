package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tallydb/tally"
	"github.com/tallydb/tally/store"
)

// Options configure a Server. A nil *Options means all defaults; New copies
// the options and fills the zero fields with defaults.
type Options struct {
	// Password, when not empty, must be given with AUTH (or HELLO ... AUTH)
	// before any other command; until then every command but AUTH, HELLO
	// and QUIT is answered "-NOAUTH Authentication required." The default
	// is no password.
	Password string
	// AllowRemote serves clients from non-loopback addresses although no
	// Password is set. Without it (and without a Password) a client whose
	// address is not loopback is answered "-DENIED ..." and closed, as
	// Redis's protected mode does, and ListenAndServe and CheckAddr refuse
	// a non-loopback address. The default is false.
	AllowRemote bool
	// MaxClients is the most connections served at once; one more is
	// answered "-ERR max number of clients reached" and closed. The
	// default is 10000.
	MaxClients int
	// MaxRequestBytes is the most bytes the server reads while waiting for
	// one complete command (name, arguments and their RESP framing); a
	// client that sends more is answered with an error and dropped. Redis
	// allows 512 MB per argument; tally's keys and numbers are short, so the
	// default is 4 MiB.
	MaxRequestBytes int
	// MaxArgs is the most arguments of one command, its name included; a
	// client that sends more is answered with an error and dropped (at the
	// *N header, before the arguments are read). The default is 65536
	// (Redis allows 1M).
	MaxArgs int
	// WriteTimeout bounds each write of replies; a client that reads none of
	// them for this long is dropped. The default is 10s.
	WriteTimeout time.Duration
	// IdleTimeout closes a connection that sends nothing for this long
	// (Redis's "timeout"). Zero means never. The default is 0.
	IdleTimeout time.Duration
	// SlowlogThreshold is the least run time of a command that the slow
	// log (SLOWLOG GET) records; negative turns the log off. CONFIG SET
	// slowlog-log-slower-than changes it at run time (in µs, as Redis;
	// 0 there records every command). The default is 10ms, Redis's.
	SlowlogThreshold time.Duration
	// SlowlogMaxLen is how many entries the slow log keeps (CONFIG SET
	// slowlog-max-len). The default is 128, Redis's.
	SlowlogMaxLen int
	// Logger receives a line for each client dropped for breaking a limit
	// or for a protocol error, a warning for each HTTP request
	// ("Possible SECURITY ATTACK detected"), and accept errors. The
	// default discards them.
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultMaxClients       = 10000
	DefaultMaxRequestBytes  = 4 << 20
	DefaultMaxArgs          = 1 << 16
	DefaultWriteTimeout     = 10 * time.Second
	DefaultSlowlogThreshold = 10 * time.Millisecond
	DefaultSlowlogMaxLen    = 128
)

// EnsureDefaults returns a copy of o (which may be nil) with every zero
// field set to its default.
func (o *Options) EnsureDefaults() *Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.MaxClients == 0 {
		c.MaxClients = DefaultMaxClients
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxArgs == 0 {
		c.MaxArgs = DefaultMaxArgs
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.SlowlogThreshold == 0 {
		c.SlowlogThreshold = DefaultSlowlogThreshold
	}
	if c.SlowlogMaxLen == 0 {
		c.SlowlogMaxLen = DefaultSlowlogMaxLen
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &c
}

// Validate reports every problem with the options in one error wrapping
// ErrInvalidOption.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
	}
	if o.MaxClients < 0 {
		bad("MaxClients %d is negative", o.MaxClients)
	}
	if o.MaxRequestBytes < 0 || o.MaxRequestBytes > 0 && o.MaxRequestBytes < 1024 {
		bad("MaxRequestBytes %d: want at least 1024", o.MaxRequestBytes)
	}
	if o.MaxArgs < 0 || o.MaxArgs > 0 && o.MaxArgs < 3 {
		bad("MaxArgs %d: want at least 3", o.MaxArgs)
	}
	if o.WriteTimeout < 0 {
		bad("WriteTimeout %v is negative", o.WriteTimeout)
	}
	if o.SlowlogMaxLen < 0 {
		bad("SlowlogMaxLen %d is negative", o.SlowlogMaxLen)
	}
	if o.IdleTimeout < 0 {
		bad("IdleTimeout %v is negative", o.IdleTimeout)
	}
	for i := 0; i < len(o.Password); i++ {
		if ch := o.Password[i]; ch < 0x20 || ch > 0x7e {
			bad("Password has a control or non-ASCII byte")
			break
		}
	}
	return errors.Join(errs...)
}

// Server is a Redis-protocol server over one tally store. Its methods are
// safe for concurrent use.
//
// Lock order: Server.mu, then a connection's row locks (never held
// together in practice: mu guards only the listener and connection sets).
type Server struct {
	db         *store.DB
	opts       Options
	cmds       table
	counters   counterCache
	rows       rowLocks
	metrics    *metrics
	durability store.Durability
	version    string
	runID      string
	started    time.Time
	nextID     atomic.Uint64
	closing    atomic.Bool
	errorStats errorStats  // INFO errorstats
	opsRate    opsRate     // INFO instantaneous_ops_per_sec
	slow       slowlog     // SLOWLOG
	scans      scanCursors // SCAN's cursors
	latency    latencyMonitor
	conns      sync.WaitGroup
	// cluster is set by SetReplication before Serve, then only read.
	cluster *cluster
	// apply serializes Apply, which runs entries on its own Conn.
	apply struct {
		sync.Mutex
		conn *Conn
	}
	// ctx is what long commands wait under (Conn.Context); it ends when
	// the connections are closed (Close, or Shutdown out of time), so
	// Shutdown never waits for a command past its context.
	ctx    context.Context
	cancel context.CancelFunc
	stats  struct {
		clients, accepted, rejected, dropped atomic.Int64
		commands, errorReplies               atomic.Int64
		keyspaceHits, keyspaceMisses         atomic.Int64 // reads of rows that exist / do not
		netIn, netOut                        atomic.Uint64
	}

	mu struct {
		sync.Mutex
		serving   bool // Serve was called: the command table is frozen
		closed    bool
		listeners map[net.Listener]struct{}
		conns     map[*Conn]struct{}
	}
}

// New returns a server over db. The server does not own db: after
// Shutdown or Close, the caller closes it (Close checkpoints).
func New(db *store.DB, opts *Options) (*Server, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidOption)
	}
	if err := opts.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	s := &Server{db: db, opts: *opts.EnsureDefaults(), started: time.Now(), version: tally.Version()}
	s.durability = db.Stats().Durability
	if t := s.opts.SlowlogThreshold; t < 0 {
		s.slow.threshold.Store(-1)
	} else {
		s.slow.threshold.Store(t.Microseconds())
	}
	s.slow.maxLen.Store(int64(s.opts.SlowlogMaxLen))
	var id [20]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	s.runID = hex.EncodeToString(id[:])
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.listeners = map[net.Listener]struct{}{}
	s.mu.conns = map[*Conn]struct{}{}
	s.cmds.byName = map[string]*Command{}
	s.metrics = newMetrics(s)
	for _, group := range [][]Command{connectionCommands(), counterCommands(), keyCommands(), clusterCommands()} {
		if err := s.Register(group...); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Register adds commands to the table. Names are matched without regard to
// case and must be new. Register must be called before Serve: the table is
// frozen once the server serves, and Register then returns ErrServing.
func (s *Server) Register(cmds ...Command) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.serving {
		return ErrServing
	}
	return s.cmds.register(s.metrics, cmds)
}

// CheckAddr reports whether the server may listen on addr with opts: a
// non-loopback address (including an empty host, which is every
// interface) needs a Password or AllowRemote; the error wraps
// ErrRemoteNotAllowed. "localhost" counts as loopback.
func CheckAddr(addr string, opts *Options) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOption, err)
	}
	if opts != nil && (opts.Password != "" || opts.AllowRemote) {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: %s is not a loopback address", ErrRemoteNotAllowed, addr)
}

// ListenAndServe checks addr with CheckAddr, listens on it (TCP) and
// serves. It returns ErrServerClosed after Shutdown or Close.
func (s *Server) ListenAndServe(addr string) error {
	if err := CheckAddr(addr, &s.opts); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return s.Serve(ln)
}

// Serve accepts connections on ln and serves each on its own goroutine. It
// may be called for several listeners. It closes ln and returns
// ErrServerClosed after Shutdown or Close, or the listener's error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.mu.serving = true
	s.mu.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.mu.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()

	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			// Out of file descriptors and the like pass: wait and retry, as
			// net/http does.
			if te, ok := err.(interface{ Temporary() bool }); ok && te.Temporary() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.opts.Logger.Warn("accept failed; retrying", "err", err, "delay", delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		s.accept(nc)
	}
}

// accept admits or refuses one connection.
func (s *Server) accept(nc net.Conn) {
	if s.opts.Password == "" && !s.opts.AllowRemote && !loopback(nc.RemoteAddr()) {
		s.refuse(nc, "protected", "DENIED tally is running in protected mode: without a password only loopback "+
			"clients may connect. Start tally serve with --requirepass, or with --allow-remote to serve remote "+
			"clients without one.")
		return
	}
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if len(s.mu.conns) >= s.opts.MaxClients {
		s.mu.Unlock()
		s.refuse(nc, "maxclients", "ERR max number of clients reached")
		return
	}
	c := newConn(s, nc, s.nextID.Add(1))
	s.mu.conns[c] = struct{}{}
	s.conns.Add(1)
	s.mu.Unlock()
	s.stats.clients.Add(1)
	s.stats.accepted.Add(1)
	go c.serve()
}

// refuse answers a connection that will not be served, then closes it.
// The write has a short deadline: a fresh socket's buffer takes the line
// at once, and the accept loop must never wait on a client.
func (s *Server) refuse(nc net.Conn, reason, msg string) {
	s.stats.rejected.Add(1)
	s.metrics.rejected.WithLabelValues(reason).Inc()
	nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	nc.Write([]byte("-" + msg + "\r\n"))
	nc.Close()
}

func loopback(a net.Addr) bool {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}

// connDone removes a finished connection.
func (s *Server) connDone(c *Conn) {
	if c.batch != nil {
		c.batch.Close()
	}
	if c.one != nil {
		c.one.Close()
	}
	// The client stops counting (MaxClients, connected_clients) before the
	// close lingers; Shutdown still waits for the close.
	s.mu.Lock()
	delete(s.mu.conns, c)
	s.mu.Unlock()
	s.stats.clients.Add(-1)
	closeConn(c.nc)
	s.conns.Done()
}

// lingerTimeout bounds how long closeConn drains a client's input.
const lingerTimeout = 250 * time.Millisecond

// closeConn closes nc so that the replies already written reach the
// client. Closing a TCP socket whose input holds unread bytes (the rest of
// a pipeline, at shutdown or after a protocol error) makes the kernel send
// a reset, and the client's stack then drops replies it has received but
// not yet read: acknowledged commands would look unanswered. So the write
// side is shut first and the input drained, for at most lingerTimeout (a
// client that has closed its side ends it at once), before the close.
func closeConn(nc net.Conn) {
	if cw, ok := nc.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		nc.SetReadDeadline(time.Now().Add(lingerTimeout))
		var buf [4096]byte
		for {
			if _, err := nc.Read(buf[:]); err != nil {
				break
			}
		}
	}
	nc.Close()
}

// dropReason says why the server closed a client's connection.
type dropReason string

const (
	reasonTooLarge    dropReason = "request_too_large"
	reasonTooManyArgs dropReason = "too_many_args"
	reasonProtocol    dropReason = "protocol_error"
	reasonWriteError  dropReason = "write_error"
	reasonReadError   dropReason = "read_error"
	reasonIdle        dropReason = "idle_timeout"
	reasonCrossProto  dropReason = "cross_protocol"
	reasonKilled      dropReason = "killed" // CLIENT KILL
)

// allDropReasons lists every reason, for the metric's zero values.
var allDropReasons = []dropReason{reasonTooLarge, reasonTooManyArgs, reasonProtocol, reasonWriteError,
	reasonReadError, reasonIdle, reasonCrossProto, reasonKilled}

// dropped records a client the server drops.
func (s *Server) dropped(c *Conn, reason dropReason, err error) {
	s.stats.dropped.Add(1)
	s.metrics.dropped.WithLabelValues(string(reason)).Inc()
	s.opts.Logger.Info("client dropped", "client", c.addr, "id", c.id, "reason", string(reason), "err", err)
}

// crossProtocol records a client dropped for sending HTTP (see
// Conn.httpRequest), with Redis's warning.
func (s *Server) crossProtocol(c *Conn) {
	s.stats.dropped.Add(1)
	s.metrics.dropped.WithLabelValues(string(reasonCrossProto)).Inc()
	s.opts.Logger.Warn("Possible SECURITY ATTACK detected. It looks like somebody is sending POST or Host: "+
		"commands to tally. This is likely due to an attacker attempting to use Cross Protocol Scripting "+
		"to compromise your tally instance. Connection aborted.", "client", c.addr, "id", c.id)
}

// Shutdown stops the server gracefully: it stops accepting, lets every
// connection finish the commands it has already received (their replies
// are sent), then closes the connections and returns. Commands a client
// has only partly sent are not run. If ctx ends first, Shutdown closes the
// remaining connections at once, ends the context of the commands still
// running (Conn.Context), waits for their goroutines, and returns ctx's
// error. The store is left open for the caller to checkpoint and
// close.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.mu.Lock()
	s.mu.closed = true
	for ln := range s.mu.listeners {
		ln.Close()
	}
	for c := range s.mu.conns {
		// The connection's goroutine sees the deadline at its next read:
		// after the batch it is running, or at once if it waits for input.
		c.nc.SetReadDeadline(aLongTimeAgo)
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() {
		s.conns.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.closeConns()
		<-done
		return ctx.Err()
	}
}

// Close stops the server now: it closes the listeners and every
// connection (replies not yet written are lost) and waits for the
// connections' goroutines to end.
func (s *Server) Close() error {
	s.closing.Store(true)
	s.mu.Lock()
	s.mu.closed = true
	for ln := range s.mu.listeners {
		ln.Close()
	}
	s.mu.Unlock()
	s.closeConns()
	s.conns.Wait()
	return nil
}

func (s *Server) closeConns() {
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.mu.conns {
		c.nc.Close()
	}
}

// MetricsHandler serves the server's Prometheus metrics (commands, latency,
// connections, store and Go runtime figures) from its own registry. With
// Options.Password it requires HTTP basic authentication with that
// password and any user name (Prometheus: basic_auth with any username);
// a request without it is answered 401.
func (s *Server) MetricsHandler() http.Handler { return s.Guard(s.metrics.handler()) }

// Guard returns h behind the authentication MetricsHandler uses: with
// Options.Password, HTTP basic auth with that password and any user name
// (a wrong password counts in tally_server_auth_failures_total); without
// one, h itself. Other handlers served beside /metrics (tally serve
// --pprof) use it so they need what /metrics needs.
func (s *Server) Guard(h http.Handler) http.Handler {
	if s.opts.Password == "" {
		return h
	}
	return &basicAuth{h: h, want: sha256.Sum256([]byte(s.opts.Password)), failures: s.metrics.authFailures}
}

// basicAuth guards a handler with a password. Both sides are hashed
// before the constant-time compare, so neither the password's bytes nor
// its length leak through timing.
type basicAuth struct {
	h        http.Handler
	want     [sha256.Size]byte
	failures prometheus.Counter
}

func (a *basicAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, pass, ok := r.BasicAuth()
	got := sha256.Sum256([]byte(pass))
	if !ok || subtle.ConstantTimeCompare(got[:], a.want[:]) != 1 {
		if ok {
			a.failures.Inc()
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="tally metrics", charset="UTF-8"`)
		http.Error(w, "401 Unauthorized: the server requires a password (HTTP basic auth, any user name)",
			http.StatusUnauthorized)
		return
	}
	a.h.ServeHTTP(w, r)
}

// Clients returns the number of connections being served.
func (s *Server) Clients() int { return int(s.stats.clients.Load()) }
