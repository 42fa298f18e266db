// Command tally is the command line of tally, an embedded counter store: it
// creates counters and columns, reads and writes rows, and inspects a store
// directory, using only the public APIs of package tally, store and the
// packages on it.
//
// # Usage
//
//	tally [-d DIR] [--durability sync|interval|nosync] [--password P] COMMAND [ARGS]
//
// DIR defaults to $TALLY_DIR. Every store command also accepts -d and
// --durability after its name. Run "tally help COMMAND" or "tally COMMAND -h"
// for a command's help with an example. While "tally serve" holds DIR the
// commands run inside it (see "A running server" below); --password (or
// $TALLY_PASSWORD) is its --requirepass.
//
// # Commands
//
//	counter add NAME [--range-bits N] [--keep-hot | --hot-ranges K |
//	    --age DURATION [--id-epoch-ms MS] [--id-time-shift BITS]]
//	                            create a counter (and the store, if DIR is
//	                            new or empty)
//	counter list                NAME range_bits=N policy=P columns=COL:HINT/MAX,...
//	column add NAME COLUMN [--hint 8|16|32] [--max 32|64]
//	incr NAME ID COLUMN [DELTA] print the new value; DELTA defaults to 1 and
//	incr NAME ID.COLUMN [DELTA] may be negative (a count stops at 0)
//	set NAME ID V...            one value per column, in column order
//	get NAME ID|ID.COLUMN...    one line per argument: "ID col=v ..." or
//	                            "ID.COLUMN v"
//	delete NAME ID...           atomically
//	load NAME FILE [--skip-bad] bulk-load CSV "id,v1,v2,..." (FILE "-" is
//	                            stdin); the last line of an id wins, an
//	                            all-zero line sets the row to zeros; old
//	                            ranges go straight into cold blocks; prints
//	                            a "key value" summary
//	compact [--bytes-per-sec N] age due ranges and merge cold deltas now
//	verify                      check every block, chunk and record; "ok"
//	                            or each problem on stderr and exit 1
//	replay                      open (recover, read-only) and report what
//	                            recovery did, including the intents of
//	                            interrupted jobs it found and data nothing
//	                            accounts for
//	stats                       "key value" lines per tier, block cache and
//	                            jobs; per counter as counter.NAME.KEY (it
//	                            flushes Pebble's memtable first, so
//	                            table_bytes are the bytes of Pebble's data
//	                            files; cold_payload_bytes are tally's
//	                            encoded blocks and descriptors)
//	checkpoint                  force a checkpoint, print its sequence
//	follow UID FOLLOWEE...      "followed N"; unfollow: "unfollowed N"
//	follows load FILE [--skip-bad]
//	                            bulk-load CSV "follower,followee"
//	active UID...               mark users active (rebuilds expired inboxes)
//	post AUTHOR POSTID... [--wait] [--async]
//	                            publish; "POSTID delivered N" after the
//	                            fan-out; unpost: "POSTID removed|absent"
//	home UID [--limit N] [--cursor C]
//	                            "POSTID AUTHOR" lines, then "next C" or "end"
//	user UID...                 "UID followers=N followees=M posts=K"
//	followers|followees UID [--limit N] [--cursor C]
//	timeline config [--inbox-cap N] [--active-window D] [--pull-threshold N]
//	    [--chunk-size N]        persisted timeline options (package timeline)
//	unread kind add KIND [--hint 8|16|32] [--max 32|64]
//	                            add a kind of one-to-one unread count (and
//	                            the store, if DIR is new or empty)
//	unread incr UID KIND [N]    print the new count (N may be negative)
//	unread reset UID [KIND...]  no KIND: every kind
//	unread get UID...           "UID kind=n ..." per user, zeros included
//	unread feed UID...          "UID N": new posts of the accounts UID follows
//	unread feed-reset UID       UID's feed unread becomes 0
//	dot mark CHANNEL            a red dot for every user (declares CHANNEL)
//	dot clear UID CHANNEL
//	dot has UID CHANNEL         "yes" or "no"
//	notice post CHANNEL ID      notice ids ≥ 1, higher is newer
//	notice read UID CHANNEL
//	notice unread UID CHANNEL   N, the notices newer than the last read one
//	serve [--addr HOST:PORT] [--requirepass P] [--maxclients N]
//	    [--metrics-addr HOST:PORT [--pprof]] [--allow-remote] [--create]
//	                            serve the store over the Redis protocol
//	                            until SIGTERM/SIGINT (then finish commands
//	                            in flight, checkpoint, close, exit 0)
//	demo [-d DIR] [--items N] [--duration D] [--clients C] ...
//	                            end-to-end demo on a temporary store
//
// # Bulk load
//
// load parses its input by hand (no encoding/csv, no allocation per line)
// and radix-sorts the rows before handing them to store's DB.Load, which
// would sort them too, but with a comparison sort that costs seconds on
// millions of rows. Bad lines are reported with their line number; without
// --skip-bad one bad line means nothing is loaded. Progress bars are drawn
// only when stdout is a terminal.
//
// # Scripting
//
// Results are plain lines on stdout; mutations other than incr print
// nothing. Numbers are unsigned 64-bit decimals (DELTA is signed). Errors go
// to stderr prefixed "tally: ", with the store's error text unchanged; an
// error echoes at most 64 bytes of an argument (internal/quote), never 10 KB
// of it. The exit status is
//
//   - 0 on success;
//   - 1 when the store refuses or fails: unknown or invalid counter or
//     column name, duplicate name, invalid option (a flag value outside its
//     allowed set, whichever check finds it), wrong number of values, value
//     out of range, locked, unwritable or foreign directory;
//   - 2 for a malformed command line: unknown command or flag, missing
//     argument, an ID or value that is not a decimal number, conflicting
//     flags;
//   - 3 for an internal error: tally panicked, on the command's goroutine
//     or one it started. That is a bug in tally, never the input's fault;
//     the panic and its stack are printed with a request to report them.
//     (Go's own status for a panic is 2, the usage status, hence the
//     recover.)
//
// Arguments are checked before the store is opened, so a usage error never
// touches it, and "counter add" checks the name and every option before it
// creates anything: a refused counter leaves no store behind (should a later
// step still fail on a directory that was missing or empty, what the
// command created there is removed).
//
// Commands other than "counter add", "unread kind add" and "demo" refuse a
// missing or empty directory instead of creating a store there, so a
// mistyped -d fails.
//
// # Unread
//
// The unread, dot and notice commands open the store with the follow graph
// (package timeline) and package unread on it, so unread's observer sees
// every follow: a command that changes the follow graph must open it the
// same way (openGraph), or feed snapshots would miss that change.
//
// # Serving
//
// serve keeps the store open and answers Redis clients (package server):
// keys are COUNTER:ID and hash fields are columns, so redis-cli,
// redis-benchmark and client libraries work unchanged. It binds loopback by
// default; a non-loopback --addr is refused unless --requirepass (clients
// must AUTH) or --allow-remote is given, and a non-loopback --metrics-addr
// needs --allow-remote. It prints "addr HOST:PORT" (and "metrics_addr ...")
// once serving and "checkpoint_seq N" after its shutdown checkpoint.
//
// # A running server
//
// A store directory has one owner (store.ErrLocked). While serve owns it,
// the other commands run inside the server rather than fail: serve writes
// "addr HOST:PORT" to DIR/TALLY.SERVE (atomically, mode 0600) once
// listening and removes it at shutdown; the CLI, for a DIR with that file
// (or when its own open fails with ErrLocked, as with a -d given after the
// command's name), sends TALLY.EXEC DIR CWD ARG... there with go-redis
// (AUTH with --password or $TALLY_PASSWORD; never retried), prints the
// [exit code, stdout, stderr] reply and exits with the code. The server
// runs the command through env.run, the very dispatcher and command table
// of the CLI, with buffers for streams and env.served set: every open
// (open, openRead, openDB, openGraph, openLikes) returns the
// server's tally.DB and closeDB/closeTally leave it open. Output and exit
// codes are therefore those of embedded mode by construction, and a new
// command is reachable through a running server with no extra code;
// remote.go has the design, the alternatives rejected and every
// difference. The CLI connects, authenticates and PINGs before it sends
// TALLY.EXEC: a failure up to there (a stale file naming a port nothing or
// something else listens on, a server of another directory, a refused
// AUTH) has run nothing, so the command runs here, and if the directory
// is locked after all, the lock error names why the server did not take
// it. A failure after sending (the connection dropped) is reported and
// never retried: the command may have run.
//
// The commands that only read (get, counter list, verify, replay, stats)
// open the store read-only (store.Options.ReadOnly): they write nothing, so
// they work on a full disk and leave a damaged store exactly as it was. A
// damaged store makes them exit 1 with a "tally: corrupt data: PATH: ..."
// line naming the file; see docs/FAULTS.md.
//
// # Caveats
//
// Each other invocation opens the store, which replays the log since the
// last checkpoint, and closes it, which checkpoints (for the commands that
// write): fine for administration and scripts, far too slow for serving
// traffic. Use serve, or embed package store. Through a running server a
// command costs a connection and a round trip instead, but one command per
// connection is still no way to serve traffic.
//
// Against a running server: verify reads a snapshot of the store, but the
// packages' Check expects no concurrent writes, so a package problem
// reported under load should be confirmed on a quiet server; interrupting
// the CLI does not stop a command the server is running (compact, jobs
// wait run to their end, or until the server's shutdown deadline closes
// the connections: they wait under server.Conn.Context); TALLY.EXEC makes
// the server read any file its user can read (the loads), so the address
// file is private and --requirepass guards it like every command.
// incr, set, get and delete take their flags before NAME, so that a negative
// DELTA is not read as a flag.
package main
