package bench

// The tally-serve targets (issue 18): tally reached exactly as Redis is,
// over RESP on loopback through a "tally serve" process the runner starts,
// with the same client code (resp.go) and the same one-request-at-a-time
// clients as the Redis targets. The in-process "tally" targets call the
// store from the benchmark's goroutines; these measure the deployment a
// Redis user would swap in.

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tallydb/tally/bench/workload"
)

// servedModes are tally serve's --durability values with the Durability
// each promises and how the tables name them.
var servedModes = []struct {
	flag string
	dur  Durability
	mode string
}{
	{"sync", DurAlways, "serve --durability sync"},
	{"interval", DurInterval, "serve --durability interval"},
	{"nosync", DurNone, "serve --durability nosync"},
}

// ServedTallySpecs returns the tally-serve counter targets, one per
// durability, started as o says; their Skip says why when o has no
// binary.
func ServedTallySpecs(o ServeOptions) []Spec {
	var specs []Spec
	for _, m := range servedModes {
		specs = append(specs, Spec{Name: "tally-serve", Durability: m.dur, Mode: m.mode, Tally: true, Served: true, Skip: o.skip(),
			Open: func(dir string, w *workload.Workload) (Target, error) { return openServedTally(o, dir, w, m.flag) }})
	}
	return specs
}

// tallyServer is a "tally serve" process of the benchmark's own, on a free
// loopback port and the store dir/db.
type tallyServer struct {
	bin, db string // the binary (for its CLI commands) and the store
	proc    *serveTarget
	running bool // proc was started and not stopped since
	// baseHeap and baseRSS are INFO used_memory and used_memory_rss of the
	// server once started on its empty store.
	baseHeap, baseRSS int64
}

func startTallyServer(o ServeOptions, dir, durability string) (*tallyServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &tallyServer{bin: o.Bin, db: filepath.Join(dir, "db")}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.proc = &serveTarget{name: "tally serve", addr: addr, port: strconv.Itoa(port), cmd: tallyServeCmd(o, s.db, durability, addr), log: o.Log}
	if err := s.proc.start(); err != nil {
		return nil, err
	}
	s.running = true
	c, err := s.conn()
	if err == nil {
		s.baseHeap, err = infoInt(c, "memory", "used_memory")
		if err == nil {
			s.baseRSS, err = infoInt(c, "memory", "used_memory_rss")
		}
		c.Close()
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *tallyServer) conn() (*respConn, error) { return dialRESP(s.proc.addr, redisTimeout) }

// do runs setup commands on one connection, stopping at the first error.
func (s *tallyServer) do(cmds ...[]string) error {
	c, err := s.conn()
	if err != nil {
		return err
	}
	defer c.Close()
	for _, cmd := range cmds {
		if _, err := c.do(cmd...); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(cmd, " "), err)
		}
	}
	return nil
}

// cli runs "tally -d DB ARGS..." while the server serves DB: the CLI finds
// the server through DB/TALLY.SERVE and runs the command inside it
// (TALLY.EXEC). It returns the command's "key value" output lines as a map.
func (s *tallyServer) cli(args ...string) (map[string]string, error) {
	cmd := exec.Command(s.bin, append([]string{"-d", s.db}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("tally %s: %w: %s", strings.Join(args, " "), err, lastLines(stderr.String(), 5))
	}
	kv := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok {
			kv[k] = v
		}
	}
	return kv, nil
}

// memory is the server's growth since it started on its empty store:
// Heap is INFO used_memory (the Go heap's live objects as the runtime last
// counted them, not after a forced collection), RSS used_memory_rss; Own is
// the store's accounting as the in-process target sums it (tally_table_bytes
// + tally_block_cache_bytes + pebble_memory_bytes).
func (s *tallyServer) memory() (Memory, error) {
	c, err := s.conn()
	if err != nil {
		return Memory{}, err
	}
	defer c.Close()
	var m Memory
	var v [5]int64
	for i, f := range []string{"used_memory", "used_memory_rss", "tally_table_bytes", "tally_block_cache_bytes", "pebble_memory_bytes"} {
		if v[i], err = infoInt(c, "memory", f); err != nil {
			return m, err
		}
	}
	m.Heap, m.RSS, m.Own = v[0]-s.baseHeap, v[1]-s.baseRSS, v[2]+v[3]+v[4]
	return m, nil
}

// diskBytes is INFO disk_bytes: every file of the store's Pebble instance,
// the in-process target's figure.
func (s *tallyServer) diskBytes() (int64, error) {
	c, err := s.conn()
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return infoInt(c, "persistence", "disk_bytes")
}

// restart stops the server cleanly (SIGTERM: it finishes its commands,
// checkpoints and closes the store; untimed, as Redis's SHUTDOWN and the
// in-process Close are) and times a start on the same store until it
// answers PING, which it does once the store is open with the log replayed.
func (s *tallyServer) restart() (time.Duration, error) {
	s.running = false
	if err := s.proc.stop(); err != nil {
		return 0, err
	}
	start := time.Now()
	err := s.proc.start()
	d := time.Since(start)
	s.running = err == nil
	return d, err
}

func (s *tallyServer) close() error {
	if !s.running {
		return nil
	}
	s.running = false
	return s.proc.stop()
}

// servedTally is the counter of the in-process tally target (tallyTarget:
// "posts", the workload's columns c0.. with HINT 16 MAX 32, RANGEBITS
// TallyRangeBits) served by "tally serve". The in-process store's clock is
// the workload's end time; a server's is the wall clock, so its age policy
// is TallyMaxAge plus the time since the workload's end, which ages the
// same ranges.
//
// Keys and commands are those of a Redis user: "posts:ID" with the columns
// as hash fields, HINCRBY to write, one HMGET of every column per id of a
// batch, pipelined, to read (redis-hash's shapes).
type servedTally struct {
	srv  *tallyServer
	dir  string
	cols []string
}

func openServedTally(o ServeOptions, dir string, w *workload.Workload, durability string) (*servedTally, error) {
	srv, err := startTallyServer(o, dir, durability)
	if err != nil {
		return nil, err
	}
	t := &servedTally{srv: srv, dir: dir}
	l := w.Config().Layout
	age := TallyMaxAge + time.Since(w.Config().End)
	cmds := [][]string{{"TALLY.COUNTER", "ADD", "posts", "RANGEBITS", strconv.Itoa(TallyRangeBits),
		"AGE", strconv.FormatInt(age.Milliseconds(), 10) + "ms",
		"IDEPOCHMS", strconv.FormatInt(l.EpochMs, 10), "IDTIMESHIFT", strconv.FormatUint(uint64(l.TimeShift), 10)}}
	for c := 0; c < w.Columns(); c++ {
		name := fmt.Sprintf("c%d", c)
		t.cols = append(t.cols, name)
		cmds = append(cmds, []string{"TALLY.COLUMN", "ADD", "posts", name, "HINT", "16", "MAX", "32"})
	}
	if err := srv.do(cmds...); err != nil {
		srv.close()
		return nil, err
	}
	return t, nil
}

// Load writes the non-zero items as CSV (ID,V0,V1,...) into the target's
// directory and runs "tally load posts FILE" against the serving store
// (the CLI's bulk load, DB.Load inside the server: old ranges straight into
// cold blocks, recent ones into hot tables and a checkpoint, as the
// in-process target loads). The time includes writing the file.
func (t *servedTally) Load(w *workload.Workload) error {
	path := filepath.Join(t.dir, "load.csv")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	bw := bufio.NewWriterSize(f, 1<<20)
	var line []byte
	rows := 0
	w.Items(func(id uint64, vals []uint64) bool {
		if workload.IsZero(vals) {
			return true
		}
		rows++
		line = strconv.AppendUint(line[:0], id, 10)
		for _, v := range vals {
			line = append(line, ',')
			line = strconv.AppendUint(line, v, 10)
		}
		line = append(line, '\n')
		_, err = bw.Write(line)
		return err == nil
	})
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	kv, err := t.srv.cli("load", "posts", path)
	if err != nil {
		return err
	}
	if got := kv["input_rows"]; got != strconv.Itoa(rows) {
		return fmt.Errorf("tally load read %s rows, the file has %d", got, rows)
	}
	return nil
}

type servedTallyClient struct {
	t   *servedTally
	c   *respConn
	key []byte
}

func (t *servedTally) NewClient() (Client, error) {
	c, err := t.srv.conn()
	if err != nil {
		return nil, err
	}
	return &servedTallyClient{t: t, c: c}, nil
}

func (sc *servedTallyClient) appendKey(id uint64) []byte {
	sc.key = append(sc.key[:0], "posts:"...)
	sc.key = strconv.AppendUint(sc.key, id, 10)
	return sc.key
}

func (sc *servedTallyClient) MultiGet(ids []uint64, dst []uint64) ([]uint64, error) {
	dst = dst[:0]
	c := sc.c
	for _, id := range ids {
		c.begin(2 + len(sc.t.cols))
		c.argString("HMGET")
		c.arg(sc.appendKey(id))
		for _, col := range sc.t.cols {
			c.argString(col)
		}
	}
	return c.flushReadInts(dst)
}

func (sc *servedTallyClient) Incr(id uint64, col int, delta int64) error {
	c := sc.c
	c.begin(4)
	c.argString("HINCRBY")
	c.arg(sc.appendKey(id))
	c.argString(sc.t.cols[col])
	c.argInt(delta)
	if err := c.flush(); err != nil {
		return err
	}
	return c.readOK()
}

func (sc *servedTallyClient) Close() error { return sc.c.Close() }

func (t *servedTally) Memory() (Memory, error)        { return t.srv.memory() }
func (t *servedTally) DiskBytes() (int64, error)      { return t.srv.diskBytes() }
func (t *servedTally) Reopen() (time.Duration, error) { return t.srv.restart() }
func (t *servedTally) Close() error                   { return t.srv.close() }

// errServedReply is a reply of tally serve of an unexpected shape.
var errServedReply = errors.New("bench: unexpected reply from tally serve")
