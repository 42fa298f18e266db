package main

// The CLI against a running server.
//
// A store directory has one owner at a time (store.ErrLocked). While
// "tally serve" owns it, the CLI does not open it: it sends the command
// line to the server, which runs the very same command implementation
// (env.run, the commands table) in-process against the database it has
// open, with the output streams captured, and replies with the exit code
// and both streams. The CLI prints them and exits with that code, so
// output and exit codes are those of embedded mode by construction: there
// is no second rendering of any command to keep in step.
//
//	client                                   tally serve (DIR)
//	------                                   -----------------
//	read DIR/TALLY.SERVE ("addr HOST:PORT")
//	AUTH (--password / $TALLY_PASSWORD)  ->  AUTH, as for every command
//	TALLY.EXEC DIR CWD ARG...            ->  DIR is the served one (or "*",
//	                                         route.go)? run ARG...
//	                                         with every open returning the
//	                                         server's database, closes no-ops
//	print stdout, stderr; exit CODE      <-  [CODE, STDOUT, STDERR]
//
// The alternative, a RESP rendering per command (TL.*, LIKE.*, ...) that
// the CLI would translate to and from, was rejected: every command would
// have two output paths to keep identical. (Commands of the one table,
// internal/commands, have a RESP form too, e.g. TALLY.JOBS, TALLY.COMPACT,
// TALLY.VERIFY, TALLY.STATS; TALLY.EXEC runs their CLI rendering.)
//
// What differs from embedded mode, by necessity:
//   - The server opened every package writable at its start, so commands
//     that open read-only or only the packages whose data exists (stats,
//     verify, jobs, likes reads) see every package.
//   - stats and replay report the live server: its log, checkpoint and
//     Pebble figures, and the recovery of its own Open.
//   - --durability is refused (errNotRemote): the server's applies; so is
//     compact --bytes-per-sec (the server's pace applies).
//   - FILE "-" (stdin) is refused: the server reads files, not the
//     client's stdin. A relative FILE is read relative to the client's
//     working directory, sent along (CWD), so the server reads the file
//     the user named; messages still name it as given.
//   - A -d after the command's name is checked by the server against the
//     directory it serves (errOtherDir): another directory makes the
//     client run the command itself, on that directory.
//   - serve, demo and help never go to a server (command.local).
//   - Interrupting the CLI does not stop a command the server runs; a
//     command that waits (compact, jobs wait, loads) waits under the
//     connection's context (interruptContext), which the server's shutdown
//     ends at its deadline.
//   - No progress bars: the server's buffers are not a terminal.
//
// Security: TALLY.EXEC is an admin command. With --requirepass it needs
// AUTH like every command; it can read any file the server's user can read
// (the load commands), and echoes at most a clipped bad line of one. The
// address file is written 0600.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	tallydb "github.com/tallydb/tally"
	cmdtab "github.com/tallydb/tally/internal/commands"
	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/server"
	"github.com/tallydb/tally/store"
)

// addrFile is the file in the store directory where tally serve records
// the address it listens on, "addr HOST:PORT\n", while it serves.
const addrFile = "TALLY.SERVE"

// errNotRemote is returned for what cannot run inside a running server.
var errNotRemote = errors.New("tally: not possible against a running server")

// msgNotServed starts TALLY.EXEC's error for a directory the server does
// not serve (a stale address file whose port another server now holds).
const msgNotServed = "ERR tally: not served here:"

// served records the databases tally serve lends to the commands it runs,
// so closeDB and closeTally leave them open.
var servedDBs struct {
	sync.Mutex
	dbs map[*store.DB]bool
}

func setServed(db *store.DB, on bool) {
	servedDBs.Lock()
	defer servedDBs.Unlock()
	if servedDBs.dbs == nil {
		servedDBs.dbs = map[*store.DB]bool{}
	}
	if on {
		servedDBs.dbs[db] = true
	} else {
		delete(servedDBs.dbs, db)
	}
}

func isServed(db *store.DB) bool {
	servedDBs.Lock()
	defer servedDBs.Unlock()
	return servedDBs.dbs[db]
}

// dirFlag is where -d is parsed to: e.dir, except inside the server, whose
// directory is fixed: there a -d after the command's name goes to dirArg,
// which servedOptions checks.
func (e *env) dirFlag() *string {
	if e.served != nil {
		return &e.dirArg
	}
	return &e.dir
}

// errOtherDir is what a served command's opens return when its own -d names
// another directory (TALLY_DIR=/a tally get -d /b ...): TALLY.EXEC then
// replies msgNotServed and the client runs the command itself.
var errOtherDir = errors.New("tally: the command's -d is not the served directory")

// servedOptions refuses the flags that choose how a store is opened when
// the server's database is used: the server opened it with its own. It is
// called by every open, before the command changes anything.
func (e *env) servedOptions() error {
	if e.dirArg != "" {
		dir := e.dirArg
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(e.cwd, dir)
		}
		if sameDir(dir, e.served.Store().Dir()) != nil {
			e.otherDir = true
			return errOtherDir
		}
	}
	if e.durability != "" {
		return fmt.Errorf("%w: --durability %s (the server's durability applies; stop tally serve to open the store with another)",
			errNotRemote, quote.Input(e.durability))
	}
	return nil
}

// openInput opens a load command's FILE argument. Inside the server "-"
// is refused and a relative path is read from the client's directory.
func (e *env) openInput(path string) (*input, error) {
	if e.served == nil {
		return openInput(path)
	}
	if path == "-" {
		return nil, fmt.Errorf("%w: FILE - (stdin is not sent to the server; give a file path)", errNotRemote)
	}
	real := path
	if !filepath.IsAbs(path) {
		real = filepath.Join(e.cwd, path)
	}
	in, err := openInput(real)
	if err != nil {
		// Name the file as the user did.
		var pe *os.PathError
		if errors.As(err, &pe) {
			pe.Path = path
		}
		return nil, err
	}
	in.name = path
	return in, nil
}

// interruptContext is the context of a command that waits (compact,
// verify, jobs wait, loads, post's fan-out). Embedded it ends at SIGINT;
// in the server it is the connection's (server.Conn.Context), which ends
// when the server closes its connections, so no command outlives the
// shutdown deadline or runs on a closed store.
func (e *env) interruptContext() (context.Context, context.CancelFunc) {
	if e.served != nil {
		return context.WithCancel(e.base)
	}
	return signal.NotifyContext(context.Background(), os.Interrupt)
}

// readAddr returns the address recorded in dir's address file.
func readAddr(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, addrFile))
	if err != nil {
		return "", err
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "addr ")
	if !ok || strings.ContainsAny(addr, " \n") {
		return "", fmt.Errorf("%s: bad contents %s", addrFile, quote.Input(string(b)))
	}
	return addr, nil
}

// writeAddr records addr (what the server listens on) in dir, atomically
// and readable by the owner only. An unspecified host (0.0.0.0, ::) is
// recorded as loopback, where a local client reaches it.
func writeAddr(dir string, addr net.Addr) (string, error) {
	a := addr.String()
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		lo := "127.0.0.1"
		if ta.IP.To4() == nil {
			lo = "::1"
		}
		a = net.JoinHostPort(lo, fmt.Sprint(ta.Port))
	}
	path := filepath.Join(dir, addrFile)
	tmp, err := os.CreateTemp(dir, addrFile+".tmp*")
	if err != nil {
		return "", err
	}
	_, err = fmt.Fprintf(tmp, "addr %s\n", a)
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return path, nil
}

// errNotSent matches (errors.Is) why forward did not send a command to a
// server: no address file, nothing listening there, a connection or AUTH
// that failed before TALLY.EXEC went out, or a server of another
// directory. The command has not run anywhere, so the CLI may run it
// itself.
var errNotSent = errors.New("tally: command not sent to a server")

// notSentError is a reason forward did not send; it reads as the reason.
type notSentError struct{ err error }

func (n *notSentError) Error() string        { return n.err.Error() }
func (n *notSentError) Unwrap() error        { return n.err }
func (n *notSentError) Is(target error) bool { return target == errNotSent }

// forward sends the command line rest (after the global flags) to the
// tally serve that holds e.dir, prints its output and returns its exit
// code. An error wrapping errNotSent means the command did not run (see
// there); any other error is a failure after TALLY.EXEC was sent (the
// connection dropped: the command may have run), which the CLI reports
// and never retries here.
func (e *env) forward(rest []string) (int, error) {
	notSent := func(err error) error { return &notSentError{err} }
	addr, err := readAddr(e.dir)
	if err != nil {
		return 0, notSent(err)
	}
	dir, err := filepath.Abs(e.dir)
	if err != nil {
		return 0, notSent(err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return 0, notSent(err)
	}
	args := []any{"TALLY.EXEC", dir, cwd}
	if e.durabilitySet {
		args = append(args, "--durability", e.durability)
	}
	if e.json {
		args = append(args, "--json")
	}
	for _, a := range rest {
		args = append(args, a)
	}
	rdb := redis.NewClient(&redis.Options{
		Addr:             addr,
		Password:         e.password,
		Protocol:         2,
		DisableIndentity: true,
		// One connection: the PING's, authenticated, carries TALLY.EXEC.
		PoolSize: 1,
		// NB: never retried: the command may have run.
		MaxRetries:  -1,
		DialTimeout: 5 * time.Second,
		// compact, verify or jobs wait run as long as they need.
		ReadTimeout:  -1,
		WriteTimeout: time.Minute,
	})
	defer rdb.Close()
	ctx := context.Background()
	// The connection, HELLO, AUTH and a PING (which needs AUTH) first, so
	// a failure up to here is known to have run nothing.
	if err := rdb.Ping(ctx).Err(); err != nil {
		msg := err.Error()
		if strings.HasPrefix(msg, "NOAUTH") || strings.HasPrefix(msg, "WRONGPASS") {
			msg += " (give the server's --requirepass with --password or $TALLY_PASSWORD)"
		}
		return 0, notSent(fmt.Errorf("tally serve at %s (from %s): %s", addr, addrFile, msg))
	}
	// A sharded cluster's node holds one shard: route by the slot map.
	r, err := e.route(addr, rest)
	if err != nil {
		return 0, err // refused before anything ran, and not to run here
	}
	switch {
	case len(r.addrs) > 1:
		return e.fanOut(ctx, r, args), nil
	case len(r.addrs) == 1:
		if r.addrs[0] != addr {
			args[1] = execAnyDir
		}
		res, err := e.execAt(ctx, r.addrs[0], args)
		if err != nil {
			if strings.Contains(err.Error(), msgNotServed) {
				return 0, notSent(err)
			}
			return 0, err
		}
		fmt.Fprint(e.stdout, res.out)
		fmt.Fprint(e.stderr, res.errOut)
		return res.code, nil
	}
	res, err := rdb.Do(ctx, args...).Slice()
	if err != nil {
		if strings.HasPrefix(err.Error(), msgNotServed) {
			return 0, notSent(fmt.Errorf("tally serve at %s: %w", addr, err))
		}
		return 0, fmt.Errorf("tally serve at %s holds %s: %w", addr, e.dir, err)
	}
	if len(res) != 3 {
		return 0, fmt.Errorf("tally serve at %s: bad TALLY.EXEC reply of %d elements", addr, len(res))
	}
	n, _ := res[0].(int64)
	out, _ := res[1].(string)
	errOut, _ := res[2].(string)
	fmt.Fprint(e.stdout, out)
	fmt.Fprint(e.stderr, errOut)
	return int(n), nil
}

// execCommand is TALLY.EXEC DIR CWD ARG...: the command line ARG... of
// the CLI (without its global -d) run on db, the server's database, when
// DIR is the directory db is in. The reply is [exit code, stdout, stderr].
func execCommand(db *tallydb.DB) server.Command {
	return server.Command{
		Name:  "TALLY.EXEC",
		Arity: -4,
		Flags: server.FlagWrite | server.FlagAdmin,
		Group: "tally", Since: "0.1.0", Complexity: "that of the command",
		Summary: "runs a tally CLI command on the served database (what tally -d DIR COMMAND sends while tally serve holds DIR)",
		Args: []server.Arg{
			{Name: "dir", Type: "string"},
			{Name: "cwd", Type: "string"},
			{Name: "arg", Type: "string", Multiple: true},
		},
		Classify: classifyExec,
		Handler: func(c *server.Conn, args [][]byte) {
			dir, cwd := string(args[1]), string(args[2])
			// A replicated TALLY.EXEC names the proposing node's
			// directory: every replica runs it on its own. DIR "*" is
			// the CLI's routing in a sharded cluster (route.go): it chose
			// this node from the slot map, not from an address file.
			if err := sameDir(dir, db.Store().Dir()); err != nil && !c.Replicated() && dir != execAnyDir {
				c.WriteError(fmt.Sprintf("%s %s: %v", msgNotServed, quote.Input(dir), err))
				return
			}
			var stdout, stderr bytes.Buffer
			e := &env{stdout: &stdout, stderr: &stderr, dir: db.Store().Dir(), served: db, cwd: cwd, base: c.Context()}
			cargs := make([]string, len(args)-3)
			for i, a := range args[3:] {
				cargs[i] = string(a)
			}
			code := e.run(cargs)
			if e.otherDir {
				// Nothing was opened: the output so far (a load's bad
				// lines) is printed again where the command runs.
				c.WriteError(fmt.Sprintf("%s %s: %v", msgNotServed, quote.Input(e.dirArg), errOtherDir))
				return
			}
			if e.bulk {
				// A bulk load builds rows, batches and sstables in the
				// server's heap, hundreds of MB for millions of rows,
				// freed when it returns; the runtime would hand those
				// pages back over minutes, and until then the server's
				// RSS looks like the data's (bench/RESULTS.md, issue 18:
				// 155 B a like after "likes load" against 16 B of live
				// heap). One collection now returns them.
				debug.FreeOSMemory()
			}
			c.WriteArray(3)
			c.WriteInt(int64(code))
			c.WriteBulk(stdout.Bytes())
			c.WriteBulk(stderr.Bytes())
		},
	}
}

// classifyExec routes TALLY.EXEC in cluster mode by the CLI command it
// carries: a table command as its Mode says (a Local one, such as jobs or
// stats, runs on the node it is sent to), the local commands (help,
// version) on the node, and the loads, which read files on the client's
// machine, not at all (server.ErrNotReplicable): a replica could not read
// them. A line that does not parse runs locally, where it prints its
// usage error and writes nothing.
func classifyExec(args [][]byte) (server.Class, error) {
	if len(args) < 4 {
		return server.ClassLocal, nil
	}
	cargs := make([]string, len(args)-3)
	for i, a := range args[3:] {
		cargs[i] = string(a)
	}
	fs := flag.NewFlagSet("tally", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var ignored string
	var json, version bool
	fs.StringVar(&ignored, "d", "", "")
	fs.StringVar(&ignored, "durability", "", "")
	fs.StringVar(&ignored, "password", "", "")
	fs.BoolVar(&json, "json", false, "")
	fs.BoolVar(&version, "version", false, "")
	if fs.Parse(cargs) != nil || len(fs.Args()) == 0 {
		return server.ClassLocal, nil
	}
	cmd, _, err := lookup(fs.Args())
	switch {
	case err != nil || cmd.local:
		return server.ClassLocal, nil
	case cmd.entry == nil:
		return 0, fmt.Errorf("%w: %s reads files where the client runs; load on one node with "+
			"cluster mode off, or send the rows as commands", server.ErrNotReplicable, cmd.name)
	case cmd.entry.Local:
		return server.ClassLocal, nil
	case cmd.entry.Mode == cmdtab.Read:
		return server.ClassRead, nil
	}
	return server.ClassWrite, nil
}

// sameDir reports why dir is not served, the served directory.
func sameDir(dir, served string) error {
	a, err := os.Stat(dir)
	if err != nil {
		return err
	}
	b, err := os.Stat(served)
	if err != nil {
		return err
	}
	if !os.SameFile(a, b) {
		return fmt.Errorf("this server serves another directory")
	}
	return nil
}
