package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"github.com/tallydb/tally/store"
)

// Replicated writes.
//
// In cluster mode (SetReplication) a write command from a client is not
// run where it arrives: its arguments are encoded (EncodeCommand) and
// proposed to the replication group (Replication.Propose); once the entry
// is committed every replica, the leader included, runs it through
// Server.Apply, serially, in log order, against its own store, and the
// leader's Propose returns the reply its own Apply produced, which the
// client gets. An entry is therefore a logical command, evaluated
// deterministically on each replica from the same state; see ClassOf for
// which commands are replicated.
//
// A run of consecutive replicated writes within one read of a client's
// input (a pipeline) is proposed as one entry: one Raft round trip and
// one log append for the run, as a non-replicated server commits such a
// run as one store batch. Each command of an entry runs on its own (one
// failing does not stop the next), and replies stay in order.

// Replication is what a replicated server needs of its replication group
// (package replica's Node, through an adapter): it is implemented outside
// this package, and tests use a fake.
type Replication interface {
	// Propose replicates data (as encoded by EncodeCommand) and returns
	// the reply this node's Server.Apply produced when the entry was
	// applied. An error means the entry was not applied here: it wraps
	// ErrNotLeader (a *NotLeaderError naming the leader) or ErrTryAgain
	// only when the entry will never apply (the client is told to retry
	// or to go to the leader); any other error (ctx ended, the node shut
	// down) is ambiguous, the entry may still apply, and the client is
	// told so.
	Propose(ctx context.Context, data []byte) ([]byte, error)
	// ReadIndex returns once this node has applied every entry committed
	// before the call: a read after it is linearizable. An error wraps
	// ErrNotLeader when the node cannot serve one (a follower whose
	// implementation only serves ReadIndex on the leader, or a leader
	// deposed), ErrTryAgain or ctx's error.
	ReadIndex(ctx context.Context) error
	// Status describes the group as this node sees it. It is called per
	// batch of client commands and by INFO and CLUSTER, so it must be
	// cheap and never block on the network.
	Status() ReplicationStatus
}

var (
	// ErrNotLeader is wrapped by Replication errors on a node that is not
	// the leader; a *NotLeaderError says where the leader is.
	ErrNotLeader = errors.New("tally: not the leader")
	// ErrTryAgain is wrapped by Replication errors for a request that
	// surely did not apply and may be retried (no leader yet, a
	// leadership change dropped the proposal before it was appended).
	ErrTryAgain = errors.New("tally: try again")
	// ErrBadEntry is returned by DecodeCommand, and replied by Apply, for
	// bytes that are not an entry EncodeCommand wrote.
	ErrBadEntry = errors.New("tally: bad replicated entry")
	// ErrEntryTooLarge is returned by EncodeCommand for a command over the
	// entry limits (MaxEntryArgs, MaxEntryBytes).
	ErrEntryTooLarge = errors.New("tally: replicated entry too large")
	// ErrNotReplicable is the error of a command that cannot run in
	// cluster mode (a CLI load reads a local file; a Classify refused it).
	ErrNotReplicable = errors.New("tally: not possible in cluster mode")
	// ErrNotReplicated is replied by Apply for an entry naming a command
	// that is not a replicated write (only a proposer that is not this
	// package's writes one).
	ErrNotReplicated = errors.New("tally: not a replicated command")
	// ErrClusterDisabled is the error of CLUSTER, READONLY, READWRITE and
	// ASKING outside cluster mode (Redis's words).
	ErrClusterDisabled = errors.New("This instance has cluster support disabled")
)

// NotLeaderError is a Replication error on a follower: Addr is the
// leader's announced client address ("host:port"), empty when no leader
// is known. It wraps ErrNotLeader.
type NotLeaderError struct {
	LeaderID uint64
	Addr     string
}

func (e *NotLeaderError) Error() string {
	if e.Addr == "" {
		return "tally: not the leader; no leader is known"
	}
	return fmt.Sprintf("tally: not the leader; the leader is %d at %s", e.LeaderID, e.Addr)
}

// Is makes errors.Is(err, ErrNotLeader) hold.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Role is a replica's role in its group.
type Role uint8

const (
	// RoleFollower follows a leader (or waits for one).
	RoleFollower Role = iota
	// RoleCandidate campaigns (or pre-campaigns) for leadership.
	RoleCandidate
	// RoleLeader serves writes.
	RoleLeader
	// RoleLearner receives the log but does not vote.
	RoleLearner
)

func (r Role) String() string {
	switch r {
	case RoleFollower:
		return "follower"
	case RoleCandidate:
		return "candidate"
	case RoleLeader:
		return "leader"
	case RoleLearner:
		return "learner"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// ReplicationStatus is a replica's view of its group.
type ReplicationStatus struct {
	Role Role
	// ID is this replica's id (non-zero).
	ID uint64
	// LeaderID is the leader's id, 0 when none is known; LeaderAddr its
	// announced client address ("host:port"), empty when not known.
	LeaderID   uint64
	LeaderAddr string
	// Term, Commit and Applied are Raft's term, commit index and this
	// replica's applied index.
	Term, Commit, Applied uint64
	// Members are the group's replicas, this one included, in id order.
	Members []Member
	// LastLeaderContact is when this follower last heard from the leader;
	// zero on the leader and before any contact.
	LastLeaderContact time.Time
}

// Member is one replica of the group.
type Member struct {
	ID uint64
	// Addr is the replica's announced client address ("host:port").
	Addr string
	// Voter is false for a learner.
	Voter bool
	// Match is the highest log index known to be replicated on the
	// replica (the leader's progress; on a follower, 0 for others and
	// Applied for itself).
	Match uint64
	// Lag is how many entries the replica is behind the leader's last
	// index, as far as this node knows.
	Lag uint64
	// Active reports recent contact with the leader (Raft's
	// RecentActive), as the leader sees it; true for the leader itself.
	Active bool
}

// Entry encoding.
//
// An entry is one or more commands, each an argument vector:
//
//	version byte (1)
//	uvarint number of commands (1..MaxEntryCommands)
//	per command: uvarint argc (1..MaxEntryArgs), per argument uvarint
//	             length and the bytes
//	CRC-32C (Castagnoli) of everything before it, 4 bytes little endian
//
// The whole entry is at most MaxEntryBytes. DecodeCommand refuses
// anything else with ErrBadEntry before it allocates for it: counts and
// lengths are checked against the bytes that remain.

const (
	entryVersion = 1
	// MaxEntryCommands is the most commands in one entry.
	MaxEntryCommands = 1024
	// MaxEntryArgs is the most arguments of one command of an entry, its
	// name included (DefaultMaxArgs).
	MaxEntryArgs = DefaultMaxArgs
	// MaxEntryBytes is the most bytes of one entry: room for one command
	// of the largest request a client may send by default
	// (DefaultMaxRequestBytes) with the entry's framing.
	MaxEntryBytes = DefaultMaxRequestBytes + 64<<10
	// batchEntryBytes is where a run of pipelined writes stops adding
	// commands to its entry (a single command may be larger).
	batchEntryBytes = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeCommand encodes one command (argv[0] is its name) as a
// replicated entry for Replication.Propose and Server.Apply.
func EncodeCommand(argv [][]byte) ([]byte, error) {
	return encodeEntry([][][]byte{argv})
}

// encodeEntry encodes commands as one entry.
func encodeEntry(cmds [][][]byte) ([]byte, error) {
	if len(cmds) == 0 || len(cmds) > MaxEntryCommands {
		return nil, fmt.Errorf("%w: %d commands in one entry (1 to %d)", ErrEntryTooLarge, len(cmds), MaxEntryCommands)
	}
	n := 1 + binary.MaxVarintLen64 + 4
	for _, argv := range cmds {
		if len(argv) == 0 || len(argv) > MaxEntryArgs {
			return nil, fmt.Errorf("%w: a command of %d arguments (1 to %d)", ErrEntryTooLarge, len(argv), MaxEntryArgs)
		}
		n += binary.MaxVarintLen64
		for _, a := range argv {
			n += binary.MaxVarintLen64 + len(a)
		}
	}
	b := make([]byte, 0, min(n, MaxEntryBytes+64))
	b = append(b, entryVersion)
	b = binary.AppendUvarint(b, uint64(len(cmds)))
	for _, argv := range cmds {
		b = binary.AppendUvarint(b, uint64(len(argv)))
		for _, a := range argv {
			b = binary.AppendUvarint(b, uint64(len(a)))
			b = append(b, a...)
			if len(b)+4 > MaxEntryBytes {
				return nil, fmt.Errorf("%w: over %d bytes", ErrEntryTooLarge, MaxEntryBytes)
			}
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// DecodeCommand decodes an entry EncodeCommand wrote: its commands'
// argument vectors, which alias data. Anything else is an error wrapping
// ErrBadEntry.
func DecodeCommand(data []byte) ([][][]byte, error) {
	bad := func(format string, args ...any) ([][][]byte, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrBadEntry}, args...)...)
	}
	if len(data) < 1+1+4 {
		return bad("%d bytes", len(data))
	}
	if len(data) > MaxEntryBytes {
		return bad("%d bytes, over %d", len(data), MaxEntryBytes)
	}
	if data[0] != entryVersion {
		return bad("unknown version %d", data[0])
	}
	body := data[:len(data)-4]
	if binary.LittleEndian.Uint32(data[len(data)-4:]) != crc32.Checksum(body, castagnoli) {
		return bad("checksum mismatch")
	}
	p := body[1:]
	uvarint := func() (uint64, bool) {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			return 0, false
		}
		p = p[n:]
		return v, true
	}
	ncmds, ok := uvarint()
	// Every command takes at least 2 bytes (argc and one length).
	if !ok || ncmds == 0 || ncmds > MaxEntryCommands || ncmds > uint64(len(p))/2 {
		return bad("bad command count")
	}
	cmds := make([][][]byte, 0, ncmds)
	for range ncmds {
		argc, ok := uvarint()
		if !ok || argc == 0 || argc > MaxEntryArgs || argc > uint64(len(p)) {
			return bad("bad argument count")
		}
		argv := make([][]byte, argc)
		for j := range argv {
			l, ok := uvarint()
			if !ok || l > uint64(len(p)) {
				return bad("bad argument length")
			}
			argv[j] = p[:l:l]
			p = p[l:]
		}
		cmds = append(cmds, argv)
	}
	if len(p) != 0 {
		return bad("%d trailing bytes", len(p))
	}
	return cmds, nil
}

// Class is how a command is routed in cluster mode.
type Class uint8

const (
	// ClassLocal runs on the node it is sent to: connection and server
	// commands, and FlagLocal ones.
	ClassLocal Class = iota
	// ClassRead runs on the leader (after a ReadIndex barrier, unless
	// ClusterOptions.LeaderReadsLocal), or on a follower for a READONLY
	// connection (stale, as on a Redis replica); a follower redirects
	// other connections to the leader with MOVED.
	ClassRead
	// ClassWrite is proposed to the group and applied on every replica;
	// a follower redirects it with MOVED.
	ClassWrite
)

func (k Class) String() string {
	switch k {
	case ClassLocal:
		return "local"
	case ClassRead:
		return "read"
	case ClassWrite:
		return "write"
	}
	return fmt.Sprintf("class(%d)", uint8(k))
}

// ClassOf says how a call of the command (args as the client sent them)
// is routed in cluster mode: by Classify when the command has one;
// otherwise FlagLocal is ClassLocal, FlagWrite ClassWrite, FlagReadOnly
// ClassRead, and a command with none of them (PING, INFO, CLIENT,
// CONFIG GET, COMMAND, CLUSTER, ...) ClassLocal.
func (c *Command) ClassOf(args [][]byte) (Class, error) {
	switch {
	case c.Classify != nil:
		return c.Classify(args)
	case c.Flags&FlagLocal != 0:
		return ClassLocal, nil
	case c.Flags&FlagWrite != 0:
		return ClassWrite, nil
	case c.Flags&FlagReadOnly != 0:
		return ClassRead, nil
	}
	return ClassLocal, nil
}

// Replicated reports whether the running command was sent by no client:
// it runs from the replicated log (Server.Apply), on this node as on
// every other replica. A handler must then depend on nothing of this node
// but its store (no local paths, no clock it reads itself).
func (c *Conn) Replicated() bool { return c.applying }

// Apply runs one replicated entry (data as encoded by EncodeCommand)
// against the local store, serially, as if a client had sent its
// commands, and returns their RESP replies, concatenated in order. It
// never proposes. Decode errors and command errors become error replies,
// deterministically the same on every replica: bytes that are not an
// entry get one "-ERR tally: bad replicated entry: ..." reply, a command
// that is not a replicated write (ClassOf) "-ERR tally: not a replicated
// command ...". Commands run through the same handlers as a client's,
// and a run of batchable writes folds into one store batch as a
// client's pipeline does, with the same replies as one by one.
//
// Apply counts its commands in INFO's and the metrics' command figures on
// every replica (a proposing node does not count them again).
func (s *Server) Apply(data []byte) []byte {
	s.apply.Lock()
	defer s.apply.Unlock()
	c := s.apply.conn
	if c == nil {
		c = &Conn{s: s, addr: "replication", opened: time.Now(), authed: true, applying: true}
		s.apply.conn = c
	}
	c.out = c.out[:0]
	cmds, err := DecodeCommand(data)
	if err != nil {
		c.writeError(replyFor(err))
		s.stats.errorReplies.Add(1)
		return append([]byte(nil), c.out...)
	}
	reqs := c.applyReqs[:0]
	for _, argv := range cmds {
		reqs = append(reqs, request{Args: argv})
	}
	c.applyReqs = reqs[:0]
	c.unitShift = 0
	for i := 0; i < len(reqs); {
		c.declareCommand(i)
		args := reqs[i].Args
		cmd, msg, _ := c.find(args)
		if msg != "" {
			// As resolve, but no client is dropped: the entry's bytes
			// were a client's on the proposing node, which answered.
			c.reject(cmd, msg)
			i++
			continue
		}
		if class, err := cmd.applyClass(args); class != ClassWrite || err != nil {
			c.errReply = false
			c.writeError(fmt.Sprintf("ERR %s: '%.128s'", ErrNotReplicated.Error(), sanitize([]byte(cmd.fullName))))
			c.account(cmd, 0)
			i++
			continue
		}
		if cl := s.cluster; cl != nil && cl.opts.Broadcast != nil && !cmd.hasKeys() {
			if err := cl.opts.Broadcast(cmd, args); err != nil {
				c.writeError(replyFor(err))
				c.account(cmd, 0)
				i++
				continue
			}
			c.run(cmd, args) // alone: the next command may need its own broadcast
			i++
			continue
		}
		if cmd.stage != nil {
			c.applyBase = i + 1
			i += c.runBatch(cmd, reqs[i:])
			c.applyBase = 0
			continue
		}
		c.run(cmd, args)
		i++
	}
	clear(reqs)
	out := append([]byte(nil), c.out...)
	if cap(c.out) > maxKeptBuffer {
		c.out = nil
	}
	return out
}

// declareCommand tells the store that the entry being applied runs its
// command i (0-based) from now on (store.DB.ApplyCommand): a re-apply
// after a crash then numbers each command's commits as its first apply
// did, whatever the commands before it commit the second time
// (TestReappliedEntryNumbersCommands). A command's number is its
// position in the entry plus the numbers the nested commands of the
// commands before it took (NestCommands), so every number follows from
// the entry's bytes alone. Numbers past the store's limit share its last
// number, numbered one after another as without it; so cannot the call
// fail (numbers only go up), and outside store.DB.ApplyEntry it does
// nothing.
func (c *Conn) declareCommand(i int) {
	c.unit, c.nestN = i+1+c.unitShift, 0
	_ = c.s.db.ApplyCommand(uint64(min(c.unit, maxApplyCommand)))
}

// maxApplyCommand is store.DB.ApplyCommand's highest command number.
const maxApplyCommand = 1<<16 - 1

// hasKeys reports whether the command names keys (COMMAND's key
// positions or a Keys function).
func (c *Command) hasKeys() bool { return c.FirstKey > 0 || c.Keys != nil }

// maxApplyRun bounds the commands ApplyRun folds into one store batch.
// Past imageScan rows the store keeps a batch's rows in a map, so a larger
// batch than a client's pipeline (maxBatch) costs no more per command.
const maxApplyRun = 1024

// ApplyRun runs a run of consecutive replicated entries (entries[k] is
// entry first+k, each as encoded by EncodeCommand) in one store commit
// when it can. It returns n, how many entries at the start of entries it
// took (1 <= n <= len(entries); 0 only for no entries or first 0).
//
// With folded true it has applied those n entries: every command of each
// is a batchable replicated write (HINCRBY, INCR, HSET, ...: what a
// client's pipeline folds into one batch) with valid arguments, at most
// maxApplyRun commands in all; their effects are one store batch,
// committed with store.Batch.MarkEntries(first, first+n-1), so the run is
// in the store completely or not at all; and replies[k] is entry first+k's
// reply, byte for byte what Apply would have returned for it on the same
// state.
//
// With folded false it has changed nothing, and the caller applies the n
// entries one by one with Apply (inside store.DB.ApplyEntry): the first
// entry does not qualify (n is 1), or the store refused the run (an
// increment past a column's cap fails the whole batch; the run is not
// above the store's applied index). It must be called where Apply is,
// never inside store.DB.ApplyEntry, and it never proposes.
func (s *Server) ApplyRun(first uint64, entries [][]byte) (n int, replies [][]byte, folded bool) {
	if len(entries) == 0 || first == 0 {
		return 0, nil, false
	}
	s.apply.Lock()
	defer s.apply.Unlock()
	c := s.apply.conn
	if c == nil {
		c = &Conn{s: s, addr: "replication", opened: time.Now(), authed: true, applying: true}
		s.apply.conn = c
	}
	if c.batch == nil {
		c.batch = s.db.NewBatch()
	}
	b := c.batch
	defer func() {
		b.Reset()
		clear(c.pend)
		c.pend = c.pend[:0]
	}()
	t0 := time.Now()
	var endsBuf [64]int
	ends := endsBuf[:0] // ends[k]: len(c.pend) after entry k
	n, partial := c.stageRun(b, entries, &ends)
	if n == 0 {
		return 1, nil, false
	}
	if partial {
		// Entry n staged part of its commands before one failed: stage
		// the n whole entries again on a clean batch.
		ends = ends[:0]
		if m, partial := c.stageRun(b, entries[:n], &ends); m != n || partial {
			return n, nil, false
		}
	}
	if err := b.MarkEntries(first, first+uint64(n)-1); err != nil {
		return n, nil, false
	}
	c.locks = c.locks[:0]
	for i := range c.pend {
		if l := c.pend[i].lock; l != 0 {
			c.locks = append(c.locks, l-1)
		}
	}
	slices.Sort(c.locks)
	c.locks = slices.Compact(c.locks)
	for _, l := range c.locks {
		s.rows.stripe(l).RLock()
	}
	err := b.Commit()
	for _, l := range c.locks {
		s.rows.stripe(l).RUnlock()
	}
	if err != nil {
		return n, nil, false
	}
	d := time.Since(t0)
	c.out = c.out[:0]
	var outEndsBuf [64]int
	outEnds := outEndsBuf[:0]
	p := 0
	for _, end := range ends {
		for ; p < end; p++ {
			pe := &c.pend[p]
			c.errReply = false
			pe.cmd.finish(c, b, pe)
			c.account(pe.cmd, d)
		}
		outEnds = append(outEnds, len(c.out))
	}
	s.slow.record(c, c.pend[0].args, d)
	out := append([]byte(nil), c.out...)
	replies = make([][]byte, n)
	start := 0
	for k, end := range outEnds {
		replies[k] = out[start:end:end]
		start = end
	}
	if cap(c.out) > maxKeptBuffer {
		c.out = nil
	}
	return n, replies, true
}

// stageRun resets b and stages whole entries from the start of entries
// while every command of each is a batchable replicated write that
// stages, up to maxApplyRun commands: c.pend holds the staged commands
// and *ends each staged entry's end in it. It returns the number of
// entries staged whole, and partial true when the next entry staged some
// of its commands into b before one failed to stage (b is then not fit to
// commit).
func (c *Conn) stageRun(b *store.Batch, entries [][]byte, ends *[]int) (whole int, partial bool) {
	b.Reset()
	c.pend = c.pend[:0]
	for k, data := range entries {
		cmds, err := DecodeCommand(data)
		if err != nil || len(c.pend)+len(cmds) > maxApplyRun {
			return k, false
		}
		// Every command must be a batchable write before any is staged, so
		// that an entry of other commands leaves b as it was.
		for _, argv := range cmds {
			cmd, msg, _ := c.find(argv)
			if msg != "" || cmd.stage == nil || (!cmd.hasKeys() && c.s.cluster != nil && c.s.cluster.opts.Broadcast != nil) {
				return k, false
			}
			if class, err := cmd.applyClass(argv); class != ClassWrite || err != nil {
				return k, false
			}
		}
		for _, argv := range cmds {
			cmd, _, _ := c.find(argv)
			p := pending{cmd: cmd, args: argv, op: b.Len()}
			if !cmd.stage(c, argv, b, &p) {
				return k, true
			}
			c.pend = append(c.pend, p)
		}
		*ends = append(*ends, len(c.pend))
	}
	return len(entries), false
}

// applyClass is ClassOf on Apply's path: Classify is not consulted there
// (it may depend on this node); a command with one is replicated when its
// flags say write.
func (c *Command) applyClass(args [][]byte) (Class, error) {
	if c.Classify != nil {
		if c.Flags&FlagWrite != 0 && c.Flags&FlagLocal == 0 {
			return ClassWrite, nil
		}
		return ClassLocal, nil
	}
	return c.ClassOf(args)
}
