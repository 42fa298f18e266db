// Package server is the Redis-protocol (RESP) front end of tally, the
// server of "tally serve": one process owns one store, and any number of
// clients (redis-cli, redis-benchmark, any Redis client library) use it over
// TCP, with pipelining. It uses the public APIs of package store and of the
// root package tally (a *tally.DB: every package, and the counter
// namespaces), and tally's one command table (internal/commands).
//
// Requests are read by a RESP2 reader of this package's own (resp.go: why
// not redcon's, which tally used until issue 16), replies encoded by it
// too; connection handling (limits, deadlines, graceful shutdown) is this
// package's own as well, see conn.go for why redcon.Server is not used.
//
// # API
//
//	s, err := server.New(db, &server.Options{Password: pw})
//	go s.ListenAndServe("127.0.0.1:6380")   // or s.Serve(listener)
//	...
//	s.Shutdown(ctx)                         // then db.Close() checkpoints
//
// Register adds commands before Serve; the built-in groups (connection,
// server and inspection commands, Redis's counter commands) are registered
// by New, the one command table by the host (Register(DBCommands(db)...)).
// A command is a Command value: name, arity, flags, key positions,
// documentation for COMMAND DOCS and a Handler that writes one reply to
// its *Conn. MetricsHandler serves Prometheus metrics.
//
// # One command table, two front ends
//
// Every command a user runs against a database (timelines, unread, likes,
// counters and schema, jobs and maintenance) is declared once, in
// internal/commands: its CLI words, its RESP name, its parameters, its
// help and its handler against the *tally.DB. DBCommands renders that
// table over RESP and cmd/tally renders it as the CLI, so arguments,
// defaults, limits and errors agree by construction. The mapping rules:
//
//   - names: CLI words become a RESP name in the group's prefix ("like" is
//     LIKE.LIKE, "unread kind add" is UNREAD.KIND ADD, "jobs wait" is
//     TALLY.JOBS WAIT); a CLI name with a dash loses it (feed-reset is
//     UNREAD.FEEDRESET).
//   - positionals: the same, in the same order, in both front ends; the
//     last may repeat or be optional.
//   - options: CLI --name VALUE is RESP NAME VALUE (upper case, dashes
//     dropped: --range-bits is RANGEBITS); a flag without a value is a
//     bare token (--wait is WAIT). Over RESP options follow the
//     positionals; old names stay as aliases (EPOCHMS beside IDEPOCHMS).
//   - many ids: a CLI command over many ids ("unread get UID...") has an
//     M-form over RESP (UNREAD.MGET, one array element per id) and, where
//     Redis users expect it, a single-id form replying that element
//     (UNREAD.GET), as Redis has GET beside MGET.
//   - replies: a number is an integer; a list an array; a record (a like's
//     counts, a user's unread counts by kind, a post's status, a user's
//     follow counts, a board entry) name/value pairs as HGETALL replies
//     (RESP2 has no map type; see RESP2 below); a page the array [next
//     cursor or nil, [entries]], its entries fixed tuples ([post, author])
//     to keep pages small; a missing value nil; a status OK; prose of the
//     CLI (stats, jobs, replay) one bulk string of its lines. The CLI
//     prints lines; "tally --json COMMAND" prints the RESP reply as JSON,
//     records as objects. TALLY.MGET keeps its rows as values in column
//     order (TALLY.COUNTER LIST names them): it is the many-row read of a
//     feed page, and pairs would double its reply; HGETALL gives pairs.
//   - errors: bad input is refused before anything is opened or written,
//     with the same words in both front ends (the CLI exits 2 for a
//     malformed command line, 1 for a refused value; RESP replies "ERR "
//     and the message).
//   - the one default that differs: post (TL.POST) waits for its fan-outs
//     in the CLI, whose process exits when the command returns, and not
//     over RESP; both take --wait/WAIT and --async/ASYNC.
//   - CLI only: the loads (they read local files), serve, demo, help and
//     version; a client reaches the loads, and every other CLI command,
//     through TALLY.EXEC, which runs the CLI's own code in the server.
//   - RESP only: Redis's own commands (HINCRBY, HGET, HGETALL, HSET, DEL,
//     INCR, GET, MGET, TALLY.MGET, TALLY.HINCRBYONCE, SCAN, TYPE, CLIENT,
//     CONFIG, INFO, SLOWLOG, ...), which keep Redis's shapes for Redis
//     clients and tools.
//
// # Keys
//
// A key is COUNTER:ID: a counter's name, a colon, a decimal id (leading
// zeros allowed, so redis-benchmark -r's "counter:__rand_int__", which
// "-t incr" sends since Redis 6.2, is counter "counter", id N; older
// versions send "key:__rand_int__"). Hash fields are the counter's columns.
// Every row of an existing counter exists: a row never written reads as
// zeros.
//
// # Commands
//
//	command                          reply
//	-------------------------------  -------------------------------------------------
//	HINCRBY key column delta         integer: the new value
//	HGET key column                  bulk: the value; nil for an unknown column
//	HMGET key column [column ...]    array of bulk; nil for unknown columns
//	HGETALL key                      array: column, value, ... (every column, zeros too)
//	HSET key column v [column v ...] integer 0 (every column already exists)
//	HMSET key column v [column v ...] OK
//	DEL key [key ...], UNLINK ...    integer: rows that held a non-zero value
//	EXISTS key [key ...]             integer: rows that hold a non-zero value
//	INCR key, DECR key               integer: the first column's new value
//	INCRBY key delta, DECRBY key d   integer: the first column's new value
//	GET key                          bulk: the first column's value
//	MGET key [key ...]               array of bulk: first columns; nil for a key
//	                                 that names no counter row
//	TALLY.MGET counter id [id ...]   array, one entry per id in request order, each
//	                                 an array of the row's values in column order
//	                                 (integers; a value above 2^63-1, possible only
//	                                 in a 64-bit column, as a bulk string)
//	TALLY.HINCRBYONCE key field n source seq
//	                                 array [value, 1] when applied, [value, 0] for
//	                                 a redelivered or older seq of source (as
//	                                 "tally incr ... --source S --seq N")
//
// The commands of the one table (DBCommands), as "tally COMMAND" with the
// same arguments (CLI --range-bits is RANGEBITS):
//
//	TALLY.COUNTER ADD name [RANGEBITS n] [KEEPHOT | HOTRANGES k |
//	    AGE duration [IDEPOCHMS ms] [IDTIMESHIFT bits]]  OK (counter add;
//	                                 EPOCHMS and TIMESHIFT are accepted too)
//	TALLY.COUNTER LIST               array of bulk, as "tally counter list" prints
//	TALLY.COLUMN ADD name column [HINT 8|16|32] [MAX 32|64]  OK (column add)
//	TALLY.INCR name id column [delta] integer: the new value (incr); id.column
//	    [SOURCE s SEQ n]             may stand for id column; with SOURCE and
//	                                 SEQ [value, 1] when applied, [value, 0]
//	                                 for a duplicate (as TALLY.HINCRBYONCE)
//	TALLY.SET name id [value ...]    OK: one value per column (set)
//	TALLY.GET name id|id.column ...  array, one element per argument: the row's
//	                                 values in column order, or the column's (get)
//	TALLY.DELETE name id [id ...]    OK: the rows deleted atomically (delete)
//	LIKE.BUSINESS ADD biz [RANGEBITS n] [HOTRANGES k | AGE duration
//	    [IDEPOCHMS ms] [IDTIMESHIFT bits]]  OK: declares a business
//	LIKE.BUSINESS LIST               array of business names (business list)
//	UNREAD.*, DOT.*, NOTICE.*        unread counts, red dots, notices (package
//	                                 unread): see internal/commands/unread.go
//
// A counter in a package's namespace (users, likes_*, unread_*) is refused
// by every counter command, Redis's and the table's ("ERR tally: reserved:
// counter ..."): its data is reached through its package.
//
//	command                          reply
//	-------------------------------  -------------------------------------------------
//	PING [msg], ECHO msg, QUIT       PONG or msg; msg; OK and close
//	SELECT 0                         OK (any other index: ERR DB index is out of range)
//	AUTH [user] password             OK; user must be "default"
//	HELLO [2 [AUTH user pw] [SETNAME name]]  the handshake map; HELLO 3 is NOPROTO
//	CLIENT ID|GETNAME|SETNAME|SETINFO, CLIENT HELP
//	CONFIG GET pattern [pattern ...] appendfsync, appendonly, databases, maxclients,
//	                                 proto-max-bulk-len, save, timeout
//	COMMAND, COMMAND COUNT|DOCS|INFO|LIST
//	DBSIZE                           integer: stored rows (non-zero rows of every
//	                                 counter; a row written after its range was aged
//	                                 counts twice until the next merge)
//	INFO [section ...]               server, clients, memory, persistence, stats
//	                                 (instantaneous_ops_per_sec: the rate since the
//	                                 previous INFO at least a second ago),
//	                                 replication (role:master), cpu, errorstats
//	                                 (errorstat_CODE:count=N), keyspace, tally; with
//	                                 all, everything or commandstats also
//	                                 commandstats (cmdstat_NAME:calls=,usec=,
//	                                 usec_per_call=,rejected_calls=,failed_calls=),
//	                                 as redis_exporter reads them
//	SAVE                             OK after a checkpoint
//	TALLY.JOBS LIST                  bulk: the lines of "tally jobs" (queued jobs)
//	TALLY.JOBS WAIT                  integer: jobs finished (runs every queued job)
//	TALLY.COMPACT                    bulk: the lines of "tally compact"; BYTESPERSEC
//	                                 is refused (the server's pace applies)
//	TALLY.VERIFY                     OK; on damage an error naming every problem
//	TALLY.CHECKPOINT                 integer: the sequence the checkpoint includes
//	TALLY.STATS, TALLY.REPLAY        bulk: the lines of "tally stats", "tally
//	                                 replay": the server's figures, the recovery
//	                                 of its own open
//
// Every container (CLIENT, CONFIG, COMMAND, TALLY.COUNTER, TALLY.COLUMN)
// answers HELP with its subcommands.
//
// Groups of the packages above store are registered by their hosts ("tally
// serve" registers them all). The TL.* group of package timeline is part
// of the one command table (DBCommands): TL.FOLLOW, TL.UNFOLLOW,
// TL.ISFOLLOWING and TL.MISFOLLOWING, TL.POST [WAIT] [ASYNC], TL.UNPOST,
// TL.HOME uid [LIMIT n] [CURSOR c], TL.FOLLOWERS, TL.FOLLOWEES, TL.POSTS,
// TL.USER and TL.MUSER, TL.ACTIVE, TL.CONFIG and TL.EXPIRE;
// internal/commands/timeline.go lists every reply beside its CLI form.
//
// Likes (LIKE.LIKE, LIKE.UNLIKE, LIKE.DISLIKE, LIKE.UNDISLIKE,
// LIKE.SETOWNER, LIKE.COUNTS, LIKE.STATES, LIKE.LIKERS, LIKE.USERLIKES,
// LIKE.TOP, LIKE.RANK, LIKE.RECEIVED, LIKE.BUSINESS ADD|LIST) are entries of
// the one command table (package internal/commands), which DBCommands
// renders and "tally serve" registers; "tally help COMMAND" shows each
// one's RESP form.
//
// # Differences from Redis
//
//   - Counts never go below 0: DECR, DECRBY and a negative HINCRBY past 0
//     leave 0 (Redis would go negative). INFO says so (count_floor:0), and so
//     do the COMMAND DOCS summaries.
//   - A value never exceeds its column's maximum (2^32-1 by default): an
//     increment past it is "ERR increment or decrement would overflow" and
//     changes nothing. A 64-bit column is capped at 2^63-1 through the
//     server, the largest RESP integer.
//   - Keys name counter rows; a counter and its columns must be created
//     first (TALLY.COUNTER ADD, TALLY.COLUMN ADD). Unknown counters and
//     columns are errors for writes; GET and HGET of a row never written
//     return "0", not nil.
//   - Only RESP2: HELLO 3 is refused with NOPROTO, and clients fall back
//     to RESP2 (go-redis, redis-py, Jedis and redis-cli do). Why not
//     RESP3: every reply of tally is documented, tested and consumed in
//     its RESP2 shape (arrays of pairs, "$-1" nil), and RESP3 would change
//     the type of a third of them for clients that negotiate it (maps,
//     "_" nil, booleans) for no new information: tally has no push
//     messages (no pub/sub, no client tracking), the one feature that
//     needs RESP3. A RESP3 rendering of the command table (maps for
//     records) is a change of this package's writer only, if a client
//     ever needs it.
//   - One database (SELECT 0); no expiry, no other data types.
//
// # Errors
//
// Bad input gets an error reply in Redis's wording, changes nothing, and the
// connection stays usable: "ERR unknown command 'x', with args beginning
// with: ...", "ERR wrong number of arguments for 'hincrby' command", "ERR
// value is not an integer or out of range", "ERR invalid key ...", "ERR no
// such counter ...", "ERR no such column ...", "WRONGTYPE counter 'x' has no
// columns ...", "ERR increment or decrement would overflow". Store errors are
// sent as "ERR " and the store's message.
//
// # Pipelining and batches
//
// A connection reads every complete command the client has sent, runs them
// in order and writes the replies with one write. A run of consecutive
// writes that can be batched (HINCRBY, INCR, INCRBY, DECR, DECRBY, and HSET
// of every column) commits as one store batch, so a pipeline of 16
// increments costs one log commit (and under the sync durability one fsync
// wait) instead of 16; replies are the same as one by one. See batch.go.
//
// # Atomicity of HSET
//
// The store's Set writes a whole row and an Incr by the difference would
// race with concurrent increments, so an HSET of some columns reads the row
// and sets it under an exclusive lock on the row's stripe; every other
// write of the server holds the stripe shared. Increments therefore never
// block each other, and an HSET never loses a concurrent increment. Writes
// to the same store outside this server are not ordered against it.
//
// # Requests
//
// A request is a multibulk array of bulk strings (*N\r\n$L\r\n...\r\n,
// what every client library sends) or an inline line (words separated by
// blanks, ending in \n; "double" and 'single' quotes as redis-cli and Redis
// take them: "\x41\n" escapes in double quotes, \' in single ones). Redis
// ignores an empty request (*0, *-1, a blank line), and so does tally.
//
// # Limits and protocol errors
//
// Input that breaks a limit or is not a request is answered with an error
// in Redis's words, then the client is dropped. Every complete command the
// client sent before it runs and is answered first, as Redis does. The
// limits are checked at the header that breaks them, before anything is
// read, looped over or allocated for it.
//
//	input                                          reply (then the client is dropped)
//	---------------------------------------------  ---------------------------------------------------
//	*N not a decimal integer, N > MaxArgs          ERR Protocol error: invalid multibulk length
//	an element not a bulk ('*' nested, ':' ...)    ERR Protocol error: expected '$', got 'c'
//	$L not a decimal integer, L < 0 ($-1),         ERR Protocol error: invalid bulk length
//	  L > MaxRequestBytes, bulk without \r\n
//	bulks adding up past MaxRequestBytes           ERR Protocol error: request larger than N bytes
//	inline line reaching MaxRequestBytes           ERR Protocol error: too big inline request
//	inline line of more than MaxArgs words         ERR Protocol error: more than N arguments
//	inline quote not closed, or closed before      ERR Protocol error: unbalanced quotes in request
//	  other than a blank
//	a command name with control or non-ASCII bytes ERR Protocol error: unreadable command name
//
// The limits:
//
//   - Options.MaxRequestBytes (default 4 MiB): the most bytes read while
//     waiting for one complete command. A connection's input buffer holds
//     at most one incomplete command plus one read (1 KiB or more), so it
//     stays within about the limit; arguments are slices of it (24 bytes
//     each, at most MaxArgs of them for one command), never copies.
//   - Options.MaxArgs (default 65536): arguments of one command.
//   - Reading is linear in the input: an inline line is split in one pass,
//     a request that arrives in pieces is not scanned again from its start.
//   - Options.WriteTimeout (default 10s): a client that reads none of its
//     replies for that long is dropped. Replies are flushed every 64 KiB, and
//     a connection reads nothing while its write waits, so its memory stays
//     bounded; each connection has its own goroutine, so others are not
//     slowed.
//   - Options.MaxClients (default 10000): one more connection gets "ERR max
//     number of clients reached" and is closed.
//   - Options.IdleTimeout (default none) closes silent connections.
//
// Differences from Redis: Redis does not check the \r\n after a bulk, has
// no argument limit for inline commands, and refuses an inline line at 64 KiB
// (tally at MaxRequestBytes). Redis also bounds a client that has not
// authenticated to 10 arguments of 16 KiB; tally's limits are the same for
// every client.
//
// # HTTP requests (cross-protocol attacks)
//
// A web page can make a browser send an HTTP request to any port on the
// machine, and an inline-command server would run the lines of its body. As
// Redis does, a connection that sends a command named POST or "Host:"
// (any case) is closed without a reply, and nothing of that read runs, not
// even the commands before it; tally also closes a connection whose first
// command is an HTTP request line (an upper-case method, a target,
// HTTP/x.y). The server logs "Possible SECURITY ATTACK detected ..." at
// warning level with the client's address, and counts it in
// tally_server_clients_dropped_total{reason="cross_protocol"}.
//
// # Authentication and remote clients
//
// With Options.Password, every command but AUTH, HELLO and QUIT is
// answered "NOAUTH Authentication required." until AUTH password, AUTH
// default password or HELLO 2 AUTH default password succeeds; a wrong one is
// "WRONGPASS ...". Without a password only loopback clients are served: a
// client from another address gets "DENIED ..." and is closed (Redis's
// protected mode), and CheckAddr and ListenAndServe refuse a non-loopback
// address, unless Options.AllowRemote says remote clients without a
// password are intended.
//
// # Shutdown
//
// Shutdown: (1) close the listeners, so no new connection is accepted; (2)
// move every connection's read deadline to the past, so each connection
// finishes the commands it has already read, sends their replies, and ends
// at its next read (a command only partly received is not run); (3) wait for
// every connection, or, when the context ends first, close the rest at once.
// The store stays open: the caller checkpoints and closes it ("tally
// serve" does db.Close, which checkpoints). Every command the store ran was
// answered, and every answered write is durable as the store's durability
// promises; after a kill -9, Open recovers every acknowledged write (under
// sync durability, the default of "tally serve"). A client cannot hold
// Shutdown up: a partial or malformed request ends at the read deadline or
// at its header, and a command that waits (TL.POST WAIT, TL.EXPIRE) waits
// under Conn.Context, which ends when Shutdown's context does.
//
// # Metrics
//
// MetricsHandler serves the metrics below. With Options.Password it
// requires HTTP basic authentication with that password and any user name
// (Prometheus: basic_auth with any username, e.g. "default"); a request
// without it gets 401, one with a wrong password also counts in
// tally_server_auth_failures_total. "tally serve" applies CheckAddr to
// --metrics-addr as to --addr: a non-loopback metrics address needs a
// password (which then guards it) or AllowRemote.
//
// From a registry of the server's own:
// tally_server_commands_total{command,outcome}, tally_server_command_
// duration_seconds{command} (a histogram), tally_server_connections,
// tally_server_connections_accepted_total, tally_server_connections_
// rejected_total{reason}, tally_server_clients_dropped_total{reason},
// tally_server_auth_failures_total, tally_server_net_{input,output}_bytes_
// total; from store.Stats at scrape time tally_store_rows{counter,tier},
// tally_store_ranges{counter,tier}, tally_store_memory_bytes{counter},
// tally_store_cold_payload_bytes{counter}, log, checkpoint, disk, block cache,
// job and recovery figures, tally_pebble_memory_bytes; and the Go runtime
// and process collectors.
//
// # Cluster mode (tally serve --cluster)
//
// A replicated shard is one Raft group of replicas (package replica).
// SetReplication, before Serve, connects the server to its replica
// through the Replication interface (Propose, ReadIndex, Status; this
// package does not import replica) and turns on the Redis Cluster
// protocol: to a cluster client the group is one shard whose master is
// the Raft leader and whose replicas are the followers, and every slot
// 0-16383 is the shard's.
//
// Writes are replicated as logical commands. A write from a client is not
// run where it arrives: its arguments are encoded (EncodeCommand: a
// versioned, length-prefixed, checksummed entry, bounded by
// MaxEntryCommands, MaxEntryArgs and MaxEntryBytes; DecodeCommand refuses
// anything else with ErrBadEntry) and proposed; every replica, the leader
// included, runs committed entries through Server.Apply, serially and in
// log order, with the same handlers a client's command runs (on a Conn
// without a network, Conn.Replicated true); the client gets the reply of
// the leader's Apply. A run of consecutive writes within one read of a
// client's input is proposed as one entry (at most 128 commands, about
// 1 MiB), as a standalone server folds it into one store batch: each
// command of it succeeds or fails on its own and replies stay in order.
// Apply counts its commands in INFO and the metrics on every replica.
//
// Which commands are replicated (Command.ClassOf):
//
//   - ClassWrite, proposed and applied everywhere: every FlagWrite command
//     that is not FlagLocal: HINCRBY, HSET, HMSET, DEL, UNLINK, INCR...,
//     TALLY.HINCRBYONCE, and every Write or Admin command of the one table
//     (TALLY.INCR/SET/DELETE, TALLY.COUNTER ADD, TALLY.COLUMN ADD,
//     LIKE.*, TL.* writes, TL.CONFIG, TL.EXPIRE, UNREAD.*, DOT.*,
//     NOTICE.* writes).
//   - ClassLocal, run on the node it is sent to, never replicated or
//     redirected: FlagLocal commands (CONFIG GET and SET, SLOWLOG,
//     LATENCY, CLIENT KILL, SAVE, and the table's Local commands:
//     TALLY.CHECKPOINT, TALLY.COMPACT, TALLY.VERIFY, TALLY.STATS,
//     TALLY.REPLAY, TALLY.JOBS LIST and WAIT, which are about this node's
//     files, figures and background jobs), and commands with neither
//     FlagWrite nor FlagReadOnly (PING, INFO, CLIENT, COMMAND, CLUSTER,
//     READONLY, ...). COMMAND reports FlagLocal as the flag "local".
//   - ClassRead, every other FlagReadOnly command: on the leader it runs
//     after a ReadIndex barrier (one per batch of a connection's
//     commands; none with ClusterOptions.LeaderReadsLocal), so it is
//     linearizable; on a follower it is redirected to the leader with
//     MOVED unless the connection sent READONLY, when it runs on the
//     follower's state as it is, stale by the follower's lag as on a
//     Redis replica (or after a ReadIndex with
//     ClusterOptions.FollowerReadIndex).
//   - A command with a Classify function classifies each call itself
//     (TALLY.EXEC, whose CLI command line may read, write or read a local
//     file); an error refuses the call (ErrNotReplicable).
//
// Replies of the routing: a write on a follower, or a read without
// READONLY, gets "-MOVED <slot> <leader host:port>", the slot of the
// command's keys (0 for a command without keys); while the replica knows
// no leader, "-MOVED" to its shard's leader hint in the slot map (with a
// Topology, when the hint names another node: a partitioned ex-leader
// sends clients to the leader the metadata group knows), else
// "-CLUSTERDOWN ..."; "-TRYAGAIN ..." when the group says the write surely did not apply (ErrTryAgain)
// or a read's barrier failed; and "-ERR tally: the write may or may not
// have been applied: ..." when the outcome is unknown (the proposal's
// context ended: ClusterOptions.ProposeTimeout), which a client must not
// retry blindly (TALLY.HINCRBYONCE and TALLY.INCR SOURCE/SEQ make a retry
// safe). Redis Cluster clients (go-redis ClusterClient, redis-cli -c)
// follow MOVED and retry TRYAGAIN and CLUSTERDOWN.
//
//	CLUSTER SLOTS                    one range 0-16383: the leader (or, with no
//	                                 leader known, this node), then the others;
//	                                 each [ip, port, node id, {}]
//	CLUSTER SHARDS                   one shard: slots, nodes (id, port, ip,
//	                                 endpoint, role, replication-offset, health)
//	CLUSTER NODES                    nodes.conf lines; config-epoch is the term
//	CLUSTER INFO                     cluster_state:ok while a leader is known,
//	                                 cluster_size:1, epochs = the term, tally_*
//	CLUSTER KEYSLOT key              CRC16/XMODEM of the key or its {hash tag}
//	CLUSTER MYID, MYSHARDID          NodeID(replica id): 40 hex digits, stable
//	                                 (MYSHARDID: ShardID with a topology)
//	CLUSTER COUNTKEYSINSLOT, GETKEYSINSLOT  an error: keys are counter rows
//	READONLY, READWRITE, ASKING      OK (per connection; ASKING does nothing:
//	                                 tally never sends ASK, since no slot is
//	                                 ever half moved; whole shards move by
//	                                 Raft membership, docs/ARCHITECTURE.md)
//
// With ClusterOptions.Topology (many shards, topology.go) a command's
// keys are checked first, per command: keys of different slots get
// "-CROSSSLOT Keys in request don't hash to the same slot", a slot no
// shard serves "-CLUSTERDOWN Hash slot not served", another shard's slot
// "-MOVED <slot> <its leader hint's host:port>"; this shard's slot is
// routed as above. CLUSTER SLOTS, SHARDS and NODES then list every shard
// of the map (this one from the live Raft status, the others from the
// map: the leader hint as master), NODES's config-epoch and INFO's epochs
// are the map's epoch, cluster_size counts the shards with slots.
//
// Keys of the table's commands (internal/commands Param.Key): a counter
// row COUNTER:ID (TALLY.INCR/SET/GET/DELETE and TALLY.MGET name no such
// argument: COMMAND reports them "movablekeys" without key positions, and
// they are routed by their rows' keys), the user a TL.*, UNREAD.*,
// DOT.CLEAR/HAS or NOTICE.READ/UNREAD command is about (its decimal id),
// a LIKE.* command's item (LIKE.LIKE's second argument: go-redis needs
// Cmd.SetFirstKeyPos(2) to route it, or follows MOVED). Schema, node-local,
// broadcast (DOT.MARK, NOTICE.POST) and scatter-gather (LIKE.TOP, RANK,
// USERLIKES, RECEIVED) commands have no key and run where they are sent.
//
// INFO in cluster mode: redis_mode:cluster; cluster_enabled:1 (section
// cluster; 0 standalone); replication has role:master with
// connected_slaves and slaveN:ip=,port=,state=online|offline,offset=
// (the replica's match index),lag= (entries behind, where Redis gives
// seconds) on the leader, role:slave with master_host, master_port,
// master_link_status and master_last_io_seconds_ago on a follower, and
// master_repl_offset = the applied index, with tally_raft_* figures.
// Outside cluster mode CLUSTER, READONLY, READWRITE and ASKING reply
// "ERR This instance has cluster support disabled", as Redis does.
//
// # Tests and benchmarks
//
// The tests drive an in-process server over loopback with go-redis and raw
// sockets: every command, each bad input, limits, garbage, stuck and idle
// clients, protected mode, pipelining, 100 concurrent clients, AUTH,
// shutdown and metrics, in a few seconds. TestReader checks the request
// reader against Redis's parsing rules and error texts, TestHostileClients
// runs issue 16's hostile requests and Redis's protocol-error cases against
// a running server (goroutines, clients, allocations and data checked after
// each). FuzzRequest feeds arbitrary bytes to the reader, each input
// bounded to 100 ms and twice its size (plus a fixed cost) in allocations;
// FuzzConn sends them through a server. Their seeds run with the tests;
// "go test -fuzz=FuzzRequest ./server/" explores further. cmd/tally's tests run "tally serve" as a child process (SIGTERM,
// kill -9 under writes, redis-cli and redis-benchmark when installed).
// BenchmarkServer measures commands through 50 pipelining connections in
// this process; bench/cmd/servebench compares "tally serve" with
// redis-server using redis-benchmark itself.
package server
