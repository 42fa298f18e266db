package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tallydb/tally/server"
	"github.com/tallydb/tally/store"
)

var cmdServe = &command{
	name:     "serve",
	local:    true,
	synopsis: "serve the store to Redis clients (RESP: redis-cli, redis-benchmark, libraries)",
	help: `Usage: tally -d DIR serve [--addr HOST:PORT] [--requirepass PASSWORD] [--maxclients N]
           [--metrics-addr HOST:PORT [--pprof]] [--allow-remote] [--create]
           [--durability MODE] [--slowlog-threshold DURATION]
           [--cluster --node-id N --raft-addr HOST:PORT (--peers LIST | --join) ...]

Serves the store to any number of Redis clients (RESP2, pipelining) until
SIGTERM or SIGINT: then it stops accepting, finishes the commands already
received, checkpoints, closes the store and exits 0. After a kill -9 the
next start recovers every acknowledged write (with the default durability,
sync). Keys are COUNTER:ID, hash fields are columns: HINCRBY, HGET, HMGET,
HGETALL, HSET, DEL; INCR, INCRBY, DECR, DECRBY, GET, MGET use the first
column; TALLY.MGET COUNTER ID... reads a feed page; TALLY.COUNTER ADD/LIST
and TALLY.COLUMN ADD change the schema; TL.FOLLOW, TL.POST, TL.HOME and the
rest of the TL.* group serve timelines; UNREAD.*, DOT.* and NOTICE.* are the
unread commands. Counts never go below 0. See
"go doc github.com/tallydb/tally/server" for every command and limit.

Prints "key value" lines: addr (the address listened on) and, with
--metrics-addr, metrics_addr once serving; checkpoint_seq after the
shutdown checkpoint. Dropped clients and errors are logged on stderr; a
connection that sends an HTTP request (a web page reaching the port) is
closed before anything runs and logged as "Possible SECURITY ATTACK
detected".

A full disk does not need a restart: while it is full, writes get errors
("disk full", or "store failed" once the WAL could not be written) and
reads go on; once a probe (once a second) finds room again, serve reopens
the store in place (replaying its log, as a restart would) and writes
succeed again. Each reopen is logged and counted (INFO
tally_store_reopens, tally stats reopens).

Flags:
  --addr HOST:PORT         address to listen on (default 127.0.0.1:6380; port
                           0 picks a free one)
  --requirepass PASSWORD   clients must AUTH with PASSWORD first (default
                           $TALLY_REQUIREPASS; none if unset); note that a
                           command line is visible to other local users
  --maxclients N           connections served at once (default 10000)
  --metrics-addr HOST:PORT serve Prometheus metrics at /metrics there; with
                           --requirepass they need HTTP basic auth with that
                           password (any user name)
  --pprof                  also serve Go's profiles (net/http/pprof) under
                           /debug/pprof/ on --metrics-addr, with the same
                           password: CPU (/debug/pprof/profile?seconds=N),
                           execution trace (/debug/pprof/trace?seconds=N),
                           heap, goroutine, mutex, block; sets the mutex
                           profile fraction to 100 and the block profile
                           rate to 10µs. Example: go tool pprof
                           http://127.0.0.1:9121/debug/pprof/profile?seconds=10
  --allow-remote           allow a non-loopback --addr or --metrics-addr
                           without --requirepass (refused otherwise: anyone
                           who can reach the port could change counts)
  --create                 create the store if DIR is new or empty
  --durability MODE        sync (default), interval or nosync
  --slowlog-threshold D    SLOWLOG records commands that run at least D
                           (default 10ms; negative: off; CONFIG SET
                           slowlog-log-slower-than changes it while serving)

Cluster mode (one replica of a replica group on etcd raft; Redis Cluster
clients: CLUSTER SLOTS/SHARDS/NODES, MOVED, READONLY):
  --cluster                serve as a replica of a group
  --node-id N              this replica's id in the group (1 or more; --id
                           is the same)
  --raft-addr HOST:PORT    where the other replicas reach this one
  --peers LIST             the voters of a new group, this one among them:
                           ID=RAFT_HOST:PORT/CLIENT_HOST:PORT,... (ignored
                           once DIR holds the group's state)
  --join                   start empty and wait to be added by the group
                           (tally cluster add on the leader); --peers then
                           names the group's replicas, to reach them
  --cluster-secret S       the group's shared secret, 16 bytes or more
                           (default $TALLY_CLUSTER_SECRET); replicas
                           authenticate each other with it
  --announce HOST:PORT     the client address announced to clients (default
                           the address listened on; must be an IP)
  --max-log-entries N      log kept behind the applied index before a
                           lagging replica needs a snapshot (default 10000;
                           up to 64x that while the log still covers a
                           replica catching up; all of it after a snapshot
                           being installed, up to 256 MiB of log, until
                           the install or 30 s without a chunk fetched)
  --snapshot-rate B        bytes/s a snapshot is sent and fetched at (0: no
                           limit)
  --snapshot-timeout D     how long a leader keeps the log for a snapshot
                           it sent while no chunk of it is fetched
                           (default 30s)
  --max-held-log B         bytes of log a leader keeps for a snapshot being
                           installed (default 268435456, 256 MiB)

Many shards (a cluster of replica groups behind one slot map):
  --shard N                this replica's shard (1 or more); the map is
                           created once with "tally cluster create"
  --meta-raft-addr H:P     where the metadata group reaches this node
  --meta-peers LIST        the metadata group's voters, as --peers
                           (ID=META_RAFT_HOST:PORT/CLIENT_HOST:PORT,...)
  --meta-join              not a metadata voter: join the group as a
                           learner through a voter (every node holds the
                           map)
  --meta-dir DIR2          the metadata member's store (default DIR.meta)
With --durability sync (the default) a replica fsyncs the Raft log before
it acknowledges an entry, and a write is acknowledged once a majority has
it. "tally cluster local start" starts a group on this machine.

Example:
  tally -d /var/lib/tally serve --addr 127.0.0.1:6380 --metrics-addr 127.0.0.1:9121
  redis-cli -p 6380 HINCRBY posts:1234 likes 1

While serving, the other tally commands on DIR run inside the server:
serve records its address in DIR/TALLY.SERVE (mode 0600, removed at
shutdown), and "tally -d DIR COMMAND" sends the command line there
(TALLY.EXEC, an admin command; with --requirepass the CLI authenticates
with --password or $TALLY_PASSWORD). The output and exit code are those of
the command on a stopped store; stats and replay report the live server.
Refused there, by name: FILE "-" (stdin; a relative FILE is read from the
client's directory), --durability and compact --bytes-per-sec (the
server's apply).
  TALLY_PASSWORD=s3cret tally -d /var/lib/tally jobs
`,
}

func init() { cmdServe.run = runServe }

// shutdownTimeout bounds how long serve waits for connections to finish
// their commands after a signal.
const shutdownTimeout = 30 * time.Second

func runServe(e *env, args []string) error {
	fs := e.flags(cmdServe)
	addr := fs.String("addr", "127.0.0.1:6380", "")
	pass := fs.String("requirepass", os.Getenv("TALLY_REQUIREPASS"), "")
	maxClients := fs.Int("maxclients", server.DefaultMaxClients, "")
	metricsAddr := fs.String("metrics-addr", "", "")
	allowRemote := fs.Bool("allow-remote", false, "")
	create := fs.Bool("create", false, "")
	withPprof := fs.Bool("pprof", false, "")
	slowlog := fs.Duration("slowlog-threshold", server.DefaultSlowlogThreshold, "")
	var cf clusterFlags
	fs.BoolVar(&cf.on, "cluster", false, "")
	fs.Uint64Var(&cf.id, "node-id", 0, "")
	fs.Uint64Var(&cf.id, "id", 0, "") // --node-id's short name
	fs.StringVar(&cf.raftAddr, "raft-addr", "", "")
	fs.StringVar(&cf.peers, "peers", "", "")
	fs.BoolVar(&cf.join, "join", false, "")
	fs.StringVar(&cf.secret, "cluster-secret", os.Getenv(secretEnv), "")
	fs.StringVar(&cf.announce, "announce", "", "")
	fs.Uint64Var(&cf.maxLog, "max-log-entries", 0, "")
	fs.Int64Var(&cf.snapRate, "snapshot-rate", 0, "")
	fs.DurationVar(&cf.snapTimeout, "snapshot-timeout", 0, "")
	fs.Uint64Var(&cf.maxHeld, "max-held-log", 0, "")
	fs.Uint64Var(&cf.shard, "shard", 0, "")
	fs.StringVar(&cf.metaRaftAddr, "meta-raft-addr", "", "")
	fs.StringVar(&cf.metaPeers, "meta-peers", "", "")
	fs.BoolVar(&cf.metaJoin, "meta-join", false, "")
	fs.StringVar(&cf.metaDir, "meta-dir", "", "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("takes no arguments, got %q", strings.Join(pos, " "))
	}
	if *maxClients <= 0 {
		return usagef("bad --maxclients %d: want a positive number", *maxClients)
	}
	opts := &server.Options{
		Password:    *pass,
		AllowRemote: *allowRemote,
		MaxClients:  *maxClients,
		Logger:      slog.New(slog.NewTextHandler(e.stderr, nil)),
	}
	switch {
	case *slowlog < 0:
		opts.SlowlogThreshold = -1
	case *slowlog == 0:
		opts.SlowlogThreshold = time.Nanosecond // every command
	default:
		opts.SlowlogThreshold = *slowlog
	}
	if err := opts.Validate(); err != nil {
		return usagef("%v", err)
	}
	if err := server.CheckAddr(*addr, opts); err != nil {
		if errors.Is(err, server.ErrRemoteNotAllowed) {
			return usagef("--addr %s is not a loopback address: set --requirepass, or --allow-remote to serve remote clients without a password", *addr)
		}
		return usagef("bad --addr %q: %v", *addr, err)
	}
	if *withPprof && *metricsAddr == "" {
		return usagef("--pprof needs --metrics-addr (the profiles are served there)")
	}
	if *metricsAddr != "" {
		// With a password /metrics requires it (basic auth, see
		// server.MetricsHandler), so the same rule as --addr holds.
		if err := server.CheckAddr(*metricsAddr, opts); err != nil {
			if errors.Is(err, server.ErrRemoteNotAllowed) {
				return usagef("--metrics-addr %s is not a loopback address: set --requirepass (metrics then need it), "+
					"or --allow-remote to publish metrics without a password", *metricsAddr)
			}
			return usagef("bad --metrics-addr %q: %v", *metricsAddr, err)
		}
	}

	if cf.on {
		if !*create {
			if err := mustBeStoreDir(e.dir); err != nil {
				return err
			}
		}
		e.serving = true
		return runClusterServe(e, cf, *addr, *metricsAddr, *withPprof, opts)
	}
	if cf.id != 0 || cf.raftAddr != "" || cf.peers != "" || cf.join || cf.announce != "" ||
		cf.shard != 0 || cf.metaRaftAddr != "" || cf.metaPeers != "" || cf.metaJoin || cf.metaDir != "" ||
		cf.snapTimeout != 0 || cf.maxHeld != 0 {
		return usagef("--node-id, --raft-addr, --peers, --join, --announce, --shard, --snapshot-timeout, --max-held-log and --meta-* need --cluster")
	}

	// Every package on the one store, wired by tally.Open (unread observes
	// the timeline's follow graph); their command groups, job handlers
	// (fan-outs, backfills, board prunes run by the store's workers) and
	// the timeline's hourly expiry of inactive inboxes; and TALLY.EXEC,
	// which runs the CLI's commands on it for "tally -d DIR COMMAND" while
	// serve holds DIR (remote.go).
	e.serving = true // background work on; a full disk heals without a restart
	mode := openWrite
	if *create {
		mode = openCreate
	}
	all, err := e.openDB(mode)
	if err != nil {
		return err
	}
	db := all.Store()
	closeDB := func(_ *store.DB, err error) error { return closeTally(all, err) }
	srv, err := server.New(db, opts)
	if err != nil {
		return closeDB(db, err)
	}
	// Registered after the packages' hooks, so its After runs first: the
	// packages reload after it, and one that fails fails the store again
	// (the healer tries again, and this logs the next reopen).
	db.OnReopen(store.ReopenHook{After: func(ok bool) error {
		if ok {
			opts.Logger.Warn("store failed and was reopened in place; writes resume once the packages have reloaded", "reopens", db.Stats().Reopens)
		}
		return nil
	}})
	if err := srv.RegisterDB(all); err != nil {
		return closeDB(db, err)
	}
	if err := srv.Register(execCommand(all)); err != nil {
		return closeDB(db, err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return closeDB(db, err)
	}
	var metrics *http.Server
	if *metricsAddr != "" {
		mln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			ln.Close()
			return closeDB(db, err)
		}
		mux := metricsMux(srv.MetricsHandler(), *withPprof, srv.Guard)
		metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go metrics.Serve(mln)
		defer metrics.Close()
		fmt.Fprintf(e.stdout, "metrics_addr %s\n", mln.Addr())
	}
	// The address file tells "tally -d DIR COMMAND" where to send
	// commands; it goes before the store closes.
	addrPath, err := writeAddr(db.Dir(), ln.Addr())
	if err != nil {
		ln.Close()
		return closeDB(db, fmt.Errorf("serve: record the address in %s: %w", addrFile, err))
	}
	defer os.Remove(addrPath)
	// From here until shutdown, closes by TALLY.EXEC's commands leave the
	// store open.
	setServed(db, true)
	defer setServed(db, false)
	fmt.Fprintf(e.stdout, "addr %s\n", ln.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	// A second signal kills the process: recovery covers it.
	stop()

	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		fmt.Fprintf(e.stderr, "tally: serve: %v; closed the remaining connections\n", err)
	}
	if metrics != nil {
		metrics.Shutdown(sctx)
	}
	os.Remove(addrPath) // the CLI opens the store itself from now on
	setServed(db, false)
	for _, p := range all.Packages() {
		p.Close() // background work (the timeline's expiry) stops first
	}
	if err := db.Checkpoint(); err != nil {
		return closeDB(db, err)
	}
	fmt.Fprintf(e.stdout, "checkpoint_seq %d\n", db.Stats().CheckpointSeq)
	if serveErr != nil && !errors.Is(serveErr, server.ErrServerClosed) {
		return closeDB(db, fmt.Errorf("serve: %w", serveErr))
	}
	return closeDB(db, nil)
}
