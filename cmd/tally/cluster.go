package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/cluster"
	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/likes"
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
	// snapTimeout and maxHeld: replica.Config's SnapshotTimeout and
	// MaxHeldLogBytes (0: its defaults).
	snapTimeout time.Duration
	maxHeld     uint64

	// Many shards (--shard and the metadata group's member).
	shard        uint64
	metaRaftAddr string
	metaPeers    string
	metaJoin     bool
	metaDir      string
}

// secretEnv names the environment variable of the cluster's secret.
const secretEnv = "TALLY_CLUSTER_SECRET"

// parsePeers reads --peers: "ID=RAFT_ADDR/CLIENT_ADDR,...".
func parsePeers(s string) ([]replica.Peer, error) {
	peers, err := cluster.ParseReplicas(s)
	if err != nil {
		return nil, usagef("bad --peers: %v", errors.Unwrap(err))
	}
	return peers, nil
}

// sharding reads the flags of a replica in a multi-shard cluster (nil
// without --shard).
//
// The metadata group's transport is made by cluster.Start and left in
// *tr, for the caller to start.
func (cf *clusterFlags) sharding(dir string, logger *slog.Logger, tr **replica.TCPTransport) (*cluster.Sharding, error) {
	if cf.shard == 0 {
		if cf.metaRaftAddr != "" || cf.metaPeers != "" || cf.metaJoin || cf.metaDir != "" {
			return nil, usagef("--meta-raft-addr, --meta-peers, --meta-join and --meta-dir need --shard")
		}
		return nil, nil
	}
	if cf.shard > math.MaxUint32 {
		return nil, usagef("bad --shard %d", cf.shard)
	}
	if cf.metaRaftAddr == "" || cf.metaPeers == "" {
		return nil, usagef("--shard needs --meta-raft-addr HOST:PORT and --meta-peers (the metadata group's voters)")
	}
	peers, err := cluster.ParseReplicas(cf.metaPeers)
	if err != nil {
		return nil, usagef("bad --meta-peers: %v", errors.Unwrap(err))
	}
	if !cf.metaJoin && !containsPeer(peers, cf.id) {
		return nil, usagef("--meta-peers does not name this node's --node-id %d (give --meta-join to join as a learner)", cf.id)
	}
	metaDir := cf.metaDir
	if metaDir == "" {
		metaDir = filepath.Clean(dir) + ".meta"
	}
	s := &cluster.Sharding{Shard: uint32(cf.shard), MetaDir: metaDir, MetaRaftAddr: cf.metaRaftAddr,
		MetaPeers: peers, MetaJoin: cf.metaJoin}
	s.NewMetaTransport = func(h cluster.TransportHooks) (replica.Transport, error) {
		// A joining member reaches the voters from the start: it must
		// answer the leader before the log tells it the members.
		t, err := replica.NewTCPTransport(replica.TCPConfig{
			ID: cf.id, Listen: cf.metaRaftAddr, Secret: []byte(cf.secret), Peers: peers,
			Handler: h.Deliver, Unreachable: h.Unreachable, SnapshotStatus: h.SnapshotStatus, Logger: logger,
		})
		*tr = t
		return t, err
	}
	return s, nil
}

// runClusterServe is serve --cluster: one replica of a replicated
// database (package cluster) over TCP, serving RESP on ln until SIGTERM or
// SIGINT, when it hands leadership over, finishes its clients' commands,
// checkpoints and exits 0. A replica whose store failed under an entry
// exits 1 (a supervisor restarts it; it applies the entry again).
func runClusterServe(e *env, cf clusterFlags, addr, metricsAddr string, withPprof bool, opts *server.Options) error {
	if cf.id == 0 {
		return usagef("serve --cluster needs --node-id N (this replica's id, 1 or more)")
	}
	if cf.raftAddr == "" {
		return usagef("serve --cluster needs --raft-addr HOST:PORT (where replicas reach this one)")
	}
	if len(cf.secret) < replica.MinSecretLen {
		return usagef("serve --cluster needs the cluster's secret, at least %d bytes: --cluster-secret S or $%s", replica.MinSecretLen, secretEnv)
	}
	if cf.snapTimeout < 0 {
		return usagef("bad --snapshot-timeout %v: want a positive duration (0: the default 30s)", cf.snapTimeout)
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
	var tr, metaTr *replica.TCPTransport
	sharding, err := cf.sharding(e.dir, logger, &metaTr)
	if err != nil {
		ln.Close()
		return err
	}
	var live atomic.Pointer[tallydb.DB] // the database being served (a snapshot install opens another)
	node, err = cluster.Start(cluster.Config{
		Dir: e.dir, ID: cf.id, ClientAddr: announce, Peers: peers, Join: cf.join,
		Durability: so.Durability, Store: so, Server: opts, Logger: logger,
		MaxLogEntries: cf.maxLog, Sharding: sharding,
		SnapshotTimeout: cf.snapTimeout, MaxHeldLogBytes: cf.maxHeld,
		// Every replica signs and accepts the same likes cursors, so a
		// page fetched before a failover goes on after it.
		Likes: &likes.Options{CursorSecret: []byte(cf.secret)},
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
	if metaTr != nil {
		metaTr.Start()
	}
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
	if metaTr != nil {
		fmt.Fprintf(e.stdout, "meta_raft_addr %s\n", metaTr.Addr())
	}
	if metricsAddr != "" {
		mln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return errors.Join(err, node.Close(context.Background()))
		}
		// The server of the moment: a snapshot install opens another.
		mux := metricsMux(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			node.Server().MetricsHandler().ServeHTTP(w, r)
		}), withPprof, func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				node.Server().Guard(h).ServeHTTP(w, r)
			})
		})
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
line per replica (MATCH and LAG are the leader's view). A node of a
sharded cluster then prints the slot map it holds: map_epoch,
node_shard, meta_role, meta_leader, and one "shard ID LEADER
LEADER_ADDR SLOTS REPLICAS" line per shard.

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
		help: `Usage: tally cluster transfer [ID] --addr LEADER [--password P]

Hands leadership to voter ID (without ID, to the most caught-up voter) and
waits until it leads.

Example:
  tally cluster transfer --addr 127.0.0.1:7000
  tally cluster transfer 2 --addr 127.0.0.1:7000
`}
)

var cmdClusterCreate = &command{name: "cluster create", local: true,
	synopsis: "create the slot map of a multi-shard cluster",
	help: `Usage: tally cluster create --addr HOST:PORT SHARD REPLICAS [SHARD REPLICAS ...] [--password P]

Creates the cluster's first slot map through the node at --addr (any
node started with --shard): each SHARD id (1 or more) with its replica
group as REPLICAS (ID=RAFT_HOST:PORT/CLIENT_HOST:PORT,..., the group's
--peers); the 16384 slots are split evenly in the order given, as
redis-cli --cluster create does. Refused once a map exists. Prints
"map_epoch N". tally cluster local start --shards N runs it for you.

Example:
  tally cluster create --addr 127.0.0.1:7000 \
    1 1=127.0.0.1:17000/127.0.0.1:7000,2=127.0.0.1:17001/127.0.0.1:7001 \
    2 3=127.0.0.1:17002/127.0.0.1:7002,4=127.0.0.1:17003/127.0.0.1:7003
`}

var cmdClusterAddNode = &command{name: "cluster add-node", local: true,
	synopsis: "register a node in the slot map, for a later move",
	help: `Usage: tally cluster add-node ID RAFT_ADDR CLIENT_ADDR --addr HOST:PORT [--password P]

Registers node ID with its Raft address (where its shard's replicas reach
it) and client address (where clients do) in the cluster's slot map, held
by the metadata group, through the node at --addr (any node). The node
may be on any machine and need not run yet; it serves nothing until a
move makes it a replica ("tally cluster move SHARD FROM ID" then takes
its addresses from the map), and it leaves the list of spare nodes then.
Refused, leaving the map as it was: an ID that a node or a replica
already has, an address (of either kind) that one already has, or an
address that is not HOST:PORT. "tally cluster status" lists the spare
nodes ("node ID RAFT_ADDR CLIENT_ADDR"). Prints "map_epoch N".

Example:
  tally cluster add-node 10 10.0.0.7:17000 10.0.0.7:7000 --addr 127.0.0.1:7000
`}

var cmdClusterRebalance = &command{name: "cluster rebalance", local: true,
	synopsis: "balance shard leadership across hosts or nodes",
	help: `Usage: tally cluster rebalance --addr HOST:PORT [--by host|node] [--dry-run] [--password P]

Spreads the shards' Raft leadership so each host (the host of the
replicas' client addresses; --by node: each replica) leads as few shards
as the placement allows: a leader does its shard's writes, linearizable
reads and cross-shard sends. Only leadership moves (a Raft leadership
transfer to another voter of the same shard; clients see one MOVED), no
data. The node at --addr (any node) reads every replica's status, plans
and transfers one shard after the other. A shard with no leader or with
a voter that does not answer is skipped. A tally process serves one
shard, so --by node finds nothing to do; --by host is the default.

Prints "by UNIT", "before UNIT=N ..." and "after UNIT=N ..." (shards
led per unit), "warn ..." for each shard with two or more replicas on
one host (losing that host loses them all), "skip shard S: REASON",
then one "move shard S FROM@UNIT -> TO@UNIT" line per transfer ending
in "planned" (--dry-run), "ok" or "failed: ERROR"; exits 1 if a move
failed (run it again: it plans from what the cluster is then).

Example:
  tally cluster rebalance --addr 127.0.0.1:7000 --dry-run
`}

var cmdClusterMove = &command{name: "cluster move", local: true,
	synopsis: "move one replica of a shard to another node under load",
	help: `Usage: tally cluster move SHARD FROM_ID TO_ID [TO_RAFT_ADDR TO_CLIENT_ADDR] --addr HOST:PORT [--password P]

Moves shard SHARD's replica FROM_ID to the node TO_ID, which must be
running already, started empty with "serve --cluster --shard SHARD
--join --peers GROUP --meta-join ..." (tally cluster local add-node does
that on this machine). Without TO_RAFT_ADDR and TO_CLIENT_ADDR, TO_ID
must be registered (tally cluster add-node) and its addresses are the
map's. The steps: TO_ID joins the shard's group as a
learner and catches up (a checkpoint of the store, then the log); it is
promoted to a voter; if FROM_ID leads, it hands leadership over; FROM_ID
is removed (its process can then be stopped). The shard's leader
publishes the new replica list to the slot map, so clients follow by
MOVED. --addr is any node of the cluster. Prints each step with its time.

Example:
  tally cluster move 2 4 10 127.0.0.1:17009 127.0.0.1:7009 --addr 127.0.0.1:7000
  tally cluster move 2 4 10 --addr 127.0.0.1:7000
`}

func init() {
	cmdClusterMove.run = runClusterMove
	cmdClusterAddNode.run = runClusterAddNode
	cmdClusterRebalance.run = runClusterRebalance
	cmdClusterCreate.run = runClusterCreate
	cmdClusterStatus.run = func(e *env, args []string) error { return e.clusterCall(cmdClusterStatus, args, 0, "STATUS") }
	cmdClusterAdd.run = func(e *env, args []string) error { return e.clusterCall(cmdClusterAdd, args, 3, "ADDLEARNER") }
	cmdClusterPromote.run = func(e *env, args []string) error { return e.clusterCall(cmdClusterPromote, args, 1, "PROMOTE") }
	cmdClusterRemove.run = func(e *env, args []string) error { return e.clusterCall(cmdClusterRemove, args, 1, "REMOVE") }
	cmdClusterTransfer.run = func(e *env, args []string) error { return e.clusterCall(cmdClusterTransfer, args, -1, "TRANSFER") }
}

// clusterCall sends TALLY.CLUSTER SUB with npos positionals to --addr and
// prints the reply; npos -1 takes an optional ID.
func (e *env) clusterCall(c *command, args []string, npos int, sub string) error {
	fs := e.flags(c)
	addr := fs.String("addr", "", "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	switch {
	case npos < 0 && len(pos) > 1:
		return usagef("takes at most 1 argument (ID), got %d", len(pos))
	case npos < 0 && len(pos) == 1:
		if _, err := strconv.ParseUint(pos[0], 10, 64); err != nil {
			return usagef("bad ID %q", pos[0])
		}
	case npos >= 0 && len(pos) != npos:
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
	if err := printClusterStatus(e, v); err != nil {
		return err
	}
	// A node of a multi-shard cluster shows the slot map it holds too.
	st, err := shardsStatus(*addr, e.password)
	if err != nil {
		if strings.Contains(err.Error(), "not part of a multi-shard cluster") || strings.Contains(err.Error(), "unknown command") {
			return nil
		}
		return fmt.Errorf("cluster status: %w", err)
	}
	printShards(e, st)
	return nil
}

// errNodeNotRegistered: cluster move without addresses names a node that
// the map does not list as a spare node.
var errNodeNotRegistered = errors.New("tally: node not registered in the slot map")

// runClusterAddNode is tally cluster add-node: TALLY.SHARDS ADDNODE.
func runClusterAddNode(e *env, args []string) error {
	fs := e.flags(cmdClusterAddNode)
	addr := fs.String("addr", "", "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if *addr == "" {
		return usagef("--addr HOST:PORT is required (a node's client address)")
	}
	if len(pos) != 3 {
		return usagef("takes 3 arguments (ID RAFT_ADDR CLIENT_ADDR), got %d", len(pos))
	}
	if id, err := strconv.ParseUint(pos[0], 10, 64); err != nil || id == 0 {
		return usagef("bad ID %s", quote.Input(pos[0]))
	}
	// The addresses are checked by the map (shard.ErrBadAddr), the one
	// place that decides, so the CLI and RESP refuse alike.
	rc := redis.NewClient(&redis.Options{Addr: *addr, Password: e.password, MaxRetries: -1,
		DialTimeout: 5 * time.Second, ReadTimeout: 40 * time.Second})
	defer rc.Close()
	epoch, err := rc.Do(context.Background(), "TALLY.SHARDS", "ADDNODE", pos[0], pos[1], pos[2]).Int64()
	if err != nil {
		return fmt.Errorf("cluster add-node: %w", err)
	}
	fmt.Fprintf(e.stdout, "map_epoch %d\n", epoch)
	return nil
}

// runClusterRebalance is tally cluster rebalance: TALLY.SHARDS REBALANCE.
func runClusterRebalance(e *env, args []string) error {
	fs := e.flags(cmdClusterRebalance)
	addr := fs.String("addr", "", "")
	by := fs.String("by", "host", "")
	dry := fs.Bool("dry-run", false, "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if *addr == "" {
		return usagef("--addr HOST:PORT is required (a node's client address)")
	}
	if len(pos) != 0 {
		return usagef("takes no arguments, got %d", len(pos))
	}
	if _, err := cluster.ParseRebalanceBy(*by); err != nil {
		return usagef("bad --by %s (want host or node)", quote.Input(*by))
	}
	cargs := []any{"TALLY.SHARDS", "REBALANCE", "BY", *by}
	if *dry {
		cargs = append(cargs, "DRYRUN")
	}
	rc := redis.NewClient(&redis.Options{Addr: *addr, Password: e.password, MaxRetries: -1,
		DialTimeout: 5 * time.Second, ReadTimeout: 10 * time.Minute})
	defer rc.Close()
	lines, err := rc.Do(context.Background(), cargs...).StringSlice()
	if err != nil {
		return fmt.Errorf("cluster rebalance: %w", err)
	}
	for _, l := range lines {
		fmt.Fprintln(e.stdout, l)
	}
	return cluster.RebalanceFailed(lines)
}

// printShards prints TALLY.SHARDS STATUS: "map_epoch", "shard" (this
// node's), "meta_role", "meta_leader", then one "shard ID LEADER
// LEADER_ADDR SLOTS REPLICAS" line per shard (SLOTS as FROM-TO,...;
// REPLICAS as ID=RAFT/CLIENT,...), then one "node ID RAFT_ADDR
// CLIENT_ADDR" line per registered spare node.
func printShards(e *env, st shardsView) {
	fmt.Fprintf(e.stdout, "map_epoch %d\nnode_shard %d\nmeta_role %s\nmeta_leader %s\n", st.epoch, st.shard, st.metaRole, st.metaLeader)
	for _, s := range st.shards {
		fmt.Fprintf(e.stdout, "shard %d %d %s %s %s\n", s.id, s.leader, s.leaderAddr, strings.Join(s.slots, ","), strings.Join(s.replicas, ","))
	}
	for _, n := range st.nodes {
		fmt.Fprintf(e.stdout, "node %d %s %s\n", n.ID, n.RaftAddr, n.ClientAddr)
	}
}

// runClusterCreate is tally cluster create: TALLY.SHARDS CREATE.
func runClusterCreate(e *env, args []string) error {
	fs := e.flags(cmdClusterCreate)
	addr := fs.String("addr", "", "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if *addr == "" {
		return usagef("--addr HOST:PORT is required (a node's client address)")
	}
	if len(pos) == 0 || len(pos)%2 != 0 {
		return usagef("want SHARD REPLICAS pairs, got %d arguments", len(pos))
	}
	cargs := []any{"TALLY.SHARDS", "CREATE"}
	for i := 0; i < len(pos); i += 2 {
		if id, err := strconv.ParseUint(pos[i], 10, 32); err != nil || id == 0 {
			return usagef("bad shard id %q", pos[i])
		}
		if _, err := parsePeers(pos[i+1]); err != nil {
			return err
		}
		cargs = append(cargs, pos[i], pos[i+1])
	}
	rc := redis.NewClient(&redis.Options{Addr: *addr, Password: e.password, MaxRetries: -1,
		DialTimeout: 5 * time.Second, ReadTimeout: 40 * time.Second})
	defer rc.Close()
	epoch, err := rc.Do(context.Background(), cargs...).Int64()
	if err != nil {
		return fmt.Errorf("cluster create: %w", err)
	}
	fmt.Fprintf(e.stdout, "map_epoch %d\n", epoch)
	return nil
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

// runClusterMove is tally cluster move: a replica of a shard moves to a
// new node by the group's own membership changes (add as learner,
// promote, transfer if it leads, remove).
func runClusterMove(e *env, args []string) error {
	fs := e.flags(cmdClusterMove)
	addr := fs.String("addr", "", "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if *addr == "" {
		return usagef("--addr HOST:PORT is required (a node's client address)")
	}
	if len(pos) != 5 && len(pos) != 3 {
		return usagef("takes 3 or 5 arguments (SHARD FROM_ID TO_ID [TO_RAFT_ADDR TO_CLIENT_ADDR]), got %d", len(pos))
	}
	sh, err1 := strconv.ParseUint(pos[0], 10, 32)
	from, err2 := strconv.ParseUint(pos[1], 10, 64)
	to, err3 := strconv.ParseUint(pos[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || sh == 0 || from == 0 || to == 0 || from == to {
		return usagef("bad SHARD, FROM_ID or TO_ID: %q %q %q", pos[0], pos[1], pos[2])
	}
	if len(pos) == 3 {
		// A registered node: its addresses are the map's.
		st, err := shardsStatus(*addr, e.password)
		if err != nil {
			return fmt.Errorf("cluster move: %w", err)
		}
		p, ok := st.node(to)
		if !ok {
			return fmt.Errorf("cluster move: %w: %d (register it with tally cluster add-node, or give its addresses)", errNodeNotRegistered, to)
		}
		pos = append(pos, p.RaftAddr, p.ClientAddr)
	}
	if _, err := parsePeers(fmt.Sprintf("%d=%s/%s", to, pos[3], pos[4])); err != nil {
		return err
	}
	start := time.Now()
	step := func(what string) { fmt.Fprintf(e.stdout, "%s %.3fs\n", what, time.Since(start).Seconds()) }
	// leader finds the shard's leader through the map held by --addr and
	// the group's own status (the hint may be a term behind).
	leader := func() (string, error) {
		st, err := shardsStatus(*addr, e.password)
		if err != nil {
			return "", err
		}
		for _, s := range st.shards {
			if s.id != sh {
				continue
			}
			if la := clusterStatusField(s.leaderAddr, e.password, "leader_addr"); la != "" {
				return la, nil
			}
			return s.leaderAddr, nil
		}
		return "", fmt.Errorf("cluster move: no shard %d in the map", sh)
	}
	call := func(sub string, cargs ...any) error {
		deadline := time.Now().Add(10 * time.Minute)
		for {
			la, err := leader()
			if err == nil {
				rc := redis.NewClient(&redis.Options{Addr: la, Password: e.password, MaxRetries: -1,
					DialTimeout: 5 * time.Second, ReadTimeout: 40 * time.Second})
				err = rc.Do(context.Background(), append([]any{"TALLY.CLUSTER", sub}, cargs...)...).Err()
				rc.Close()
				if err == nil {
					return nil
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("cluster move: %s: %w", strings.ToLower(sub), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if err := call("ADDLEARNER", to, pos[3], pos[4]); err != nil {
		return err
	}
	step("learner_added")
	if err := call("PROMOTE", to); err != nil { // refused until caught up
		return err
	}
	step("promoted")
	if la, err := leader(); err == nil && clusterNodeID(la, e.password) == from {
		if err := call("TRANSFER"); err != nil {
			return err
		}
		step("leadership_transferred")
	}
	if err := call("REMOVE", from); err != nil {
		return err
	}
	step("removed")
	return nil
}

// clusterNodeID returns the id of the replica at addr (0 if it does not
// answer).
func clusterNodeID(addr, password string) uint64 {
	id, _ := strconv.ParseUint(clusterStatusField(addr, password, "id"), 10, 64)
	return id
}

// clusterStatusField reads one field of TALLY.CLUSTER STATUS.
func clusterStatusField(addr, password, field string) string {
	rc := redis.NewClient(&redis.Options{Addr: addr, Password: password, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 5 * time.Second})
	defer rc.Close()
	v, err := rc.Do(context.Background(), "TALLY.CLUSTER", "STATUS").Slice()
	if err != nil {
		return ""
	}
	for i := 0; i+1 < len(v); i += 2 {
		if v[i] == field {
			return fmt.Sprint(v[i+1])
		}
	}
	return ""
}
