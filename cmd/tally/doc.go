// Command tally is the command line of tally, an embedded counter store: it
// creates counters and columns, reads and writes rows, and inspects a store
// directory, using only the public API of package store.
//
// # Usage
//
//	tally [-d DIR] [--durability sync|interval|nosync] COMMAND [ARGS]
//
// DIR defaults to $TALLY_DIR. Every store command also accepts -d and
// --durability after its name. Run "tally help COMMAND" or "tally COMMAND -h"
// for a command's help with an example.
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
//	                            stdin); old ranges go straight into cold
//	                            blocks; prints a "key value" summary
//	compact [--bytes-per-sec N] age due ranges and merge cold deltas now
//	verify                      check every block, chunk and record; "ok"
//	                            or each problem on stderr and exit 1
//	replay                      open (recover, read-only) and report what
//	                            recovery did
//	stats                       "key value" lines per tier, block cache and
//	                            jobs; per counter as counter.NAME.KEY
//	checkpoint                  force a checkpoint, print its sequence
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
// to stderr prefixed "tally: ", with the store's error text unchanged. The
// exit status is 0 on success, 1 when the store refuses or fails (unknown
// counter or column, duplicate name, invalid option, value out of range,
// locked or foreign directory), and 2 for a malformed command line (unknown
// command or flag, missing argument, an ID or value that is not a decimal
// number, conflicting flags). Arguments are checked before the store is
// opened, so a usage error never touches it.
//
// Commands other than "counter add" and "demo" refuse a missing or empty
// directory instead of creating a store there, so a mistyped -d fails.
//
// The commands that only read (get, counter list, verify, replay, stats)
// open the store read-only (store.Options.ReadOnly): they write nothing, so
// they work on a full disk and leave a damaged store exactly as it was. A
// damaged store makes them exit 1 with a "tally: corrupt data: PATH: ..."
// line naming the file; see docs/FAULTS.md.
//
// # Caveats
//
// Each invocation opens the store, which replays the log since the last
// checkpoint, and closes it, which checkpoints (for the commands that
// write): fine for administration and scripts, far too slow for serving
// traffic. Embed package store for that.
// incr, set, get and delete take their flags before NAME, so that a negative
// DELTA is not read as a flag.
package main
