package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/cluster"
	"github.com/tallydb/tally/replica"
	"github.com/tallydb/tally/server"
	"github.com/tallydb/tally/store"
)

// clusterFlags are serve's flags for cluster mode (serve --cluster).
type clusterFlags struct {
	on       bool
	id       uint64
	raftAddr string
	peers    string
	join     bool
	secret   string
	announce string
	maxLog   uint64
	snapRate int64
}

// secretEnv names the environment variable of the cluster's secret.
const secretEnv = "TALLY_CLUSTER_SECRET"

// parsePeers reads --peers: "ID=RAFT_ADDR/CLIENT_ADDR,...".
func parsePeers(s string) ([]replica.Peer, error) {
	var out []replica.Peer
	seen := map[uint64]bool{}
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		idStr, addrs, ok := strings.Cut(item, "=")
		raft, client, ok2 := strings.Cut(addrs, "/")
		id, err := strconv.ParseUint(idStr, 10, 64)
		if !ok || !ok2 || err != nil || id == 0 {
			return nil, usagef("bad --peers item %q: want ID=RAFT_HOST:PORT/CLIENT_HOST:PORT", item)
		}
		for _, a := range []string{raft, client} {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, usagef("bad --peers item %q: %q is not HOST:PORT", item, a)
			}
		}
		if seen[id] {
			return nil, usagef("bad --peers: id %d twice", id)
		}
		seen[id] = true
		out = append(out, replica.Peer{ID: id, RaftAddr: raft, ClientAddr: client})
	}
	return out, nil
}

// runClusterServe is serve --cluster: one replica of a replicated
// database (package cluster) over TCP, serving RESP on ln until SIGTERM or
// SIGINT, when it hands leadership over, finishes its clients' commands,
// checkpoints and exits 0. A replica whose store failed under an entry
// exits 1 (a supervisor restarts it; it applies the entry again).
func runClusterServe(e *env, cf clusterFlags, addr, metricsAddr string, opts *server.Options) error {
	if cf.id == 0 {
		return usagef("serve --cluster needs --node-id N (this replica's id, 1 or more)")
	}
	if cf.raftAddr == "" {
		return usagef("serve --cluster needs --raft-addr HOST:PORT (where replicas reach this one)")
	}
	if len(cf.secret) < replica.MinSecretLen {
		return usagef("serve --cluster needs the cluster's secret, at least %d bytes: --cluster-secret S or $%s", replica.MinSecretLen, secretEnv)
	}
	peers, err := parsePeers(cf.peers)
	if err != nil {
		return err
	}
	switch {
	case len(peers) == 0 && cf.join:
		// The joining replica must reach the group to answer it: the
		// member table only reaches it through the group.
		return usagef("serve --cluster --join needs --peers: the group's replicas as ID=RAFT_HOST:PORT/CLIENT_HOST:PORT,...")
	case len(peers) == 0:
		return usagef("serve --cluster needs --peers (the group's voters, this replica among them) or --join")
	case !cf.join && !containsPeer(peers, cf.id):
		return usagef("--peers does not name this replica's --node-id %d", cf.id)
	}
	so, err := e.options()
	if err != nil {
		return err
	}
	so.ReopenOnFailure = false // a failed store stops the replica instead (see package cluster)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	announce := cf.announce
	if announce == "" {
		announce = ln.Addr().String()
	}
	logger := opts.Logger
	var node *cluster.Node
	var tr *replica.TCPTransport
	var live atomic.Pointer[tallydb.DB] // the database being served (a snapshot install opens another)
	node, err = cluster.Start(cluster.Config{
		Dir: e.dir, ID: cf.id, ClientAddr: announce, Peers: peers, Join: cf.join,
		Durability: so.Durability, Store: so, Server: opts, Logger: logger,
		MaxLogEntries: cf.maxLog,
		Register: func(srv *server.Server, db *tallydb.DB) error {
			if old := live.Swap(db); old != nil {
				setServed(old.Store(), false)
				setServed(db.Store(), true)
			}
			return srv.Register(execCommand(db))
		},
		NewSnapshots: func(db *store.DB, reopen func(string) (*store.DB, error)) (replica.Snapshotter, error) {
			return replica.NewCheckpointSnapshotter(replica.CheckpointConfig{
				ID: cf.id, Dir: e.dir, DB: db, Transport: tr, Reopen: reopen, Logger: logger,
			})
		},
		NewTransport: func(h cluster.TransportHooks) (replica.Transport, error) {
			tr, err = replica.NewTCPTransport(replica.TCPConfig{
				ID: cf.id, Listen: cf.raftAddr, Secret: []byte(cf.secret), Peers: peers,
				Handler: h.Deliver, Unreachable: h.Unreachable, SnapshotStatus: h.SnapshotStatus,
				Logger: logger, SnapshotRate: cf.snapRate,
			})
			return tr, err
		},
	})
	if err != nil {
		ln.Close()
		return err
	}
	tr.Start()
	db := node.DB()
	live.Store(db)
	addrPath, err := writeAddr(db.Store().Dir(), ln.Addr())
	if err != nil {
		ln.Close()
		return errors.Join(fmt.Errorf("serve: record the address in %s: %w", addrFile, err), node.Close(context.Background()))
	}
	defer os.Remove(addrPath)
	setServed(db.Store(), true)
	defer func() { setServed(live.Load().Store(), false) }()
	fmt.Fprintf(e.stdout, "addr %s\n", ln.Addr())
	fmt.Fprintf(e.stdout, "raft_addr %s\n", tr.Addr())
	if metricsAddr != "" {
		mln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return errors.Join(err, node.Close(context.Background()))
		}
		mux := http.NewServeMux()
		// The server of the moment: a snapshot install opens another.
		mux.Handle("/metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			node.Server().MetricsHandler().ServeHTTP(w, r)
		}))
		metrics := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go metrics.Serve(mln)
		defer metrics.Close()
		fmt.Fprintf(e.stdout, "metrics_addr %s\n", mln.Addr())
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- node.Serve(ln) }()
	failed := make(chan struct{})
	go func() { // a replica that stopped on its own ends the process
		for ctx.Err() == nil && node.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
		close(failed)
	}()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	case <-failed:
	}
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	os.Remove(addrPath)
	setServed(live.Load().Store(), false)
	closeErr := node.Close(sctx)
	db = node.DB()
	if err := node.Err(); err != nil {
		return fmt.Errorf("serve: the replica stopped: %w", err)
	}
	if serveErr != nil && !errors.Is(serveErr, server.ErrServerClosed) {
		return errors.Join(fmt.Errorf("serve: %w", serveErr), closeErr)
	}
	if closeErr == nil {
		fmt.Fprintf(e.stdout, "checkpoint_seq %d\n", db.Store().Stats().CheckpointSeq)
	}
	return closeErr
}

func containsPeer(peers []replica.Peer, id uint64) bool {
	for _, p := range peers {
		if p.ID == id {
			return true
		}
	}
	return false
}

// The cluster commands: tally cluster status|add|promote|remove|transfer
// talk to a running replica over RESP (TALLY.CLUSTER); tally cluster
// local start|stop run a group of processes on this machine.
var (
	cmdClusterStatus = &command{name: "cluster status", local: true,
		synopsis: "show a replica group as one of its replicas sees it",
		help: `Usage: tally cluster status --addr HOST:PORT [--password P]

Prints the group as the replica at --addr sees it (TALLY.CLUSTER STATUS):
"key value" lines (id, role, term, leader, leader_addr, commit, applied,
log), then one "member ID RAFT_ADDR CLIENT_ADDR voter|learner MATCH LAG"
line per replica (MATCH and LAG are the leader's view).

Example:
  tally cluster status --addr 127.0.0.1:7000
`}
	cmdClusterAdd = &command{name: "cluster add", local: true,
		synopsis: "add a replica to a group as a learner",
		help: `Usage: tally cluster add ID RAFT_ADDR CLIENT_ADDR --addr LEADER [--password P]

Adds replica ID as a learner: it receives the log (or a snapshot of the
store) and does not vote. Start it first with "tally -d DIR serve
--cluster --join --node-id ID --raft-addr RAFT_ADDR --peers GROUP ...";
promote it once caught up (tally cluster promote). --addr must be the
leader's client address.

Example:
  tally cluster add 4 127.0.0.1:17003 127.0.0.1:7003 --addr 127.0.0.1:7000
`}
	cmdClusterPromote = &command{name: "cluster promote", local: true,
		synopsis: "make a caught-up learner a voter",
		help: `Usage: tally cluster promote ID --addr LEADER [--password P]

Makes learner ID a voter; refused while it is not caught up.

Example:
  tally cluster promote 4 --addr 127.0.0.1:7000
`}
	cmdClusterRemove = &command{name: "cluster remove", local: true,
		synopsis: "remove a replica from a group",
		help: `Usage: tally cluster remove ID --addr LEADER [--password P]

Removes replica ID from the group (its process can then be stopped).

Example:
  tally cluster remove 3 --addr 127.0.0.1:7000
`}
	cmdClusterTransfer = &command{name: "cluster transfer", local: true,
		synopsis: "hand leadership to the most caught-up voter",
		help: `Usage: tally cluster transfer --addr LEADER [--password P]

Hands leadership to the most caught-up voter and waits until it leads.

Example:
  tally cluster transfer --addr 127.0.0.1:7000
`}
)

func init() {
	cmdClusterStatus.run = func(e *env, args []string) error { return e.clusterCall(cmdClusterStatus, args, 0, "STATUS") }
	cmdClusterAdd.run = func(e *env, args []string) error { return e.clusterCall(cmdClusterAdd, args, 3, "ADDLEARNER") }
	cmdClusterPromote.run = func(e *env, args []string) error { return e.clusterCall(cmdClusterPromote, args, 1, "PROMOTE") }
	cmdClusterRemove.run = func(e *env, args []string) error { return e.clusterCall(cmdClusterRemove, args, 1, "REMOVE") }
	cmdClusterTransfer.run = func(e *env, args []string) error { return e.clusterCall(cmdClusterTransfer, args, 0, "TRANSFER") }
}

// clusterCall sends TALLY.CLUSTER SUB with npos positionals to --addr and
// prints the reply.
func (e *env) clusterCall(c *command, args []string, npos int, sub string) error {
	fs := e.flags(c)
	addr := fs.String("addr", "", "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != npos {
		return usagef("takes %d arguments, got %d", npos, len(pos))
	}
	if *addr == "" {
		return usagef("--addr HOST:PORT is required (a replica's client address)")
	}
	if sub == "ADDLEARNER" {
		if _, err := strconv.ParseUint(pos[0], 10, 64); err != nil {
			return usagef("bad ID %q", pos[0])
		}
	}
	rc := redis.NewClient(&redis.Options{Addr: *addr, Password: e.password, MaxRetries: -1,
		DialTimeout: 5 * time.Second, ReadTimeout: 40 * time.Second})
	defer rc.Close()
	cargs := []any{"TALLY.CLUSTER", sub}
	for _, p := range pos {
		cargs = append(cargs, p)
	}
	v, err := rc.Do(context.Background(), cargs...).Result()
	if err != nil {
		return fmt.Errorf("cluster %s: %w", strings.ToLower(sub), err)
	}
	if sub != "STATUS" {
		fmt.Fprintln(e.stdout, "ok")
		return nil
	}
	return printClusterStatus(e, v)
}

// printClusterStatus prints TALLY.CLUSTER STATUS's reply.
func printClusterStatus(e *env, v any) error {
	kv, ok := v.([]any)
	if !ok || len(kv)%2 != 0 {
		return fmt.Errorf("cluster status: unexpected reply %v", v)
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i] != "members" {
			fmt.Fprintf(e.stdout, "%v %v\n", kv[i], kv[i+1])
			continue
		}
		members, _ := kv[i+1].([]any)
		for _, m := range members {
			f, _ := m.([]any)
			rec := map[string]any{}
			for j := 0; j+1 < len(f); j += 2 {
				rec[fmt.Sprint(f[j])] = f[j+1]
			}
			kind := "learner"
			if rec["voter"] == int64(1) {
				kind = "voter"
			}
			fmt.Fprintf(e.stdout, "member %v %v %v %s %v %v\n", rec["id"], rec["raft_addr"], rec["client_addr"], kind, rec["match"], rec["lag"])
		}
	}
	return nil
}

// errNoLeader is returned by cluster local start when no leader is
// elected in time.
var errNoLeader = errors.New("no leader elected")
