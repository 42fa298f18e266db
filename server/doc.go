// Package server is the Redis-protocol (RESP) front end of tally, the
// server of "tally serve": one process owns one store, and any number of
// clients (redis-cli, redis-benchmark, any Redis client library) use it over
// TCP, with pipelining. It uses only the public API of package store.
//
// RESP is parsed and encoded with github.com/tidwall/redcon; connection
// handling (limits, deadlines, graceful shutdown) is this package's own, see
// conn.go for why redcon.Server is not used.
//
// # API
//
//	s, err := server.New(db, &server.Options{Password: pw})
//	go s.ListenAndServe("127.0.0.1:6380")   // or s.Serve(listener)
//	...
//	s.Shutdown(ctx)                         // then db.Close() checkpoints
//
// Register adds commands before Serve; the built-in groups (connection and
// server commands, counters, schema) are registered by New, the unread group
// by the host (Register(UnreadCommands(x)...)). A command is a
// Command value: name, arity, flags, key positions, documentation for
// COMMAND DOCS and a Handler that writes one reply to its *Conn. Later
// groups (timelines, unread, likes) are one slice of Commands each.
// MetricsHandler serves Prometheus metrics.
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
//	TALLY.COUNTER ADD name [RANGEBITS n] [KEEPHOT | HOTRANGES k |
//	    AGE duration [EPOCHMS ms] [TIMESHIFT bits]]      OK (as "tally counter add")
//	TALLY.COUNTER LIST               array of bulk, as "tally counter list" prints
//	TALLY.COLUMN ADD counter column [HINT 8|16|32] [MAX 32|64]  OK (as "tally column add")
//	UNREAD.*, DOT.*, NOTICE.*        unread counts (package unread), when the
//	                                 host registers UnreadCommands ("tally
//	                                 serve" does): see unread.go
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
//	INFO [section ...]               server, clients, memory, persistence, stats,
//	                                 keyspace, tally
//	SAVE                             OK after a checkpoint
//
// Every container (CLIENT, CONFIG, COMMAND, TALLY.COUNTER, TALLY.COLUMN)
// answers HELP with its subcommands.
//
// Groups of the packages above store are registered by their hosts ("tally
// serve" registers them all): TimelineCommands (timeline.go) is the TL.*
// group of package timeline: TL.FOLLOW, TL.UNFOLLOW, TL.ISFOLLOWING,
// TL.POST [WAIT], TL.UNPOST, TL.HOME uid [LIMIT n] [CURSOR c],
// TL.FOLLOWERS, TL.FOLLOWEES, TL.USER, TL.ACTIVE, TL.CONFIG and TL.EXPIRE;
// its file comment lists every reply.
//
// Likes (LIKE.LIKE, LIKE.UNLIKE, LIKE.DISLIKE, LIKE.UNDISLIKE,
// LIKE.SETOWNER, LIKE.COUNTS, LIKE.STATES, LIKE.LIKERS, LIKE.USERLIKES,
// LIKE.TOP, LIKE.RANK, LIKE.RECEIVED) are the group LikesCommands returns,
// registered by "tally serve"; likes.go has their table.
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
//   - Only RESP2 (redcon encodes RESP2): HELLO 3 is refused with NOPROTO, and
//     clients fall back to RESP2.
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
// # Limits
//
//   - Options.MaxRequestBytes (default 4 MiB): the most bytes read while
//     waiting for one complete command. Over it: "ERR Protocol error:
//     request larger than N bytes" and the client is dropped.
//   - Options.MaxArgs (default 65536): arguments of one command. Over it:
//     "ERR Protocol error: more than N arguments", client dropped.
//   - Garbage (not RESP, or an inline command with control bytes in its
//     name): "ERR Protocol error: ...", client dropped.
//   - Options.WriteTimeout (default 10s): a client that reads none of its
//     replies for that long is dropped. Replies are flushed every 64 KiB, and
//     a connection reads nothing while its write waits, so its memory stays
//     bounded; each connection has its own goroutine, so others are not
//     slowed.
//   - Options.MaxClients (default 10000): one more connection gets "ERR max
//     number of clients reached" and is closed.
//   - Options.IdleTimeout (default none) closes silent connections.
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
// sync durability, the default of "tally serve").
//
// # Metrics
//
// MetricsHandler serves, from a registry of the server's own:
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
// # Tests and benchmarks
//
// The tests drive an in-process server over loopback with go-redis and raw
// sockets: every command, each bad input, limits, garbage, stuck and idle
// clients, protected mode, pipelining, 100 concurrent clients, AUTH,
// shutdown and metrics, in a few seconds. FuzzRequest's seeds run with
// them; "go test -fuzz=FuzzRequest ./server/" explores arbitrary client
// input. cmd/tally's tests run "tally serve" as a child process (SIGTERM,
// kill -9 under writes, redis-cli and redis-benchmark when installed).
// BenchmarkServer measures commands through 50 pipelining connections in
// this process; bench/cmd/servebench compares "tally serve" with
// redis-server using redis-benchmark itself.
package server
