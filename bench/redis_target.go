package bench

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/bits"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tallydb/tally/bench/workload"
)

// redisTimeout bounds one round trip to the server and its start-up.
const redisTimeout = 30 * time.Second

// RedisSkip returns why the Redis targets cannot run ("" if they can).
func RedisSkip() string {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return "skipped: redis-server not installed (apt-get install redis-server)"
	}
	return ""
}

// RedisSpecs returns the Redis targets: strings and small hashes, each with
// AOF off and with appendfsync everysec. Their Skip is set when
// redis-server is not on PATH.
func RedisSpecs() []Spec {
	skip := RedisSkip()
	var specs []Spec
	for _, layout := range []string{"redis-strings", "redis-hash"} {
		hash := layout == "redis-hash"
		specs = append(specs,
			Spec{Name: layout, Durability: DurNone, Mode: "no AOF, RDB snapshot", Skip: skip,
				Open: func(dir string, w *workload.Workload) (Target, error) { return openRedis(dir, w, hash, false) }},
			Spec{Name: layout, Durability: DurInterval, Mode: "AOF everysec", Skip: skip,
				Open: func(dir string, w *workload.Workload) (Target, error) { return openRedis(dir, w, hash, true) }},
		)
	}
	return specs
}

// redisTarget is a redis-server of its own, on a free loopback port and a
// temporary directory, started and killed by the runner.
//
// Strings (redis-strings): one key per non-zero counter value, "ID:COL",
// INCRBY to write, one MGET of every column of the batch to read.
//
// Small hashes (redis-hash): the memory optimization of Redis's
// documentation ("use hashes when possible": many small hashes encoded as
// listpacks instead of one key per value). Ids are time-ordered and sparse,
// so instead of id/100 the bucket is id >> shift with the shift chosen so a
// bucket holds 50–100 items of this workload; the hash key is "h:BUCKET"
// and the field is the integer (id mod 2^shift)·columns + col, which a
// listpack stores as an integer. hash-max-listpack-entries is 512 and
// hash-max-listpack-value 64, the values the documentation uses. HINCRBY to
// write; one HMGET per id of a batch, pipelined, to read.
//
// AOF off runs with --save "" (no persistence while running); DiskBytes
// then takes an RDB snapshot (SAVE), and Reopen restarts from it. AOF on
// runs with appendfsync everysec; after the load the AOF is rewritten
// (BGREWRITEAOF, as auto-aof-rewrite would) so it does not hold the load's
// commands twice. Reopen shuts the server down cleanly and times the restart
// until PING answers and INFO says loading:0. Memory is INFO used_memory
// (and used_memory_rss) less the empty server's.
type redisTarget struct {
	dir       string
	hash      bool
	aof       bool
	cols      int
	shift     uint // redis-hash: bucket = id >> shift
	cmd       *exec.Cmd
	exited    chan error // receives the server's exit status
	addr      string
	baseBytes int64 // used_memory of the empty server
	baseRSS   int64 // used_memory_rss of the empty server
	// fsync is the appendfsync setting when aof is set; empty means
	// everysec. The likes comparison (likes.go) also runs "always".
	fsync string
}

func openRedis(dir string, w *workload.Workload, hash, aof bool) (*redisTarget, error) {
	t := &redisTarget{dir: dir, hash: hash, aof: aof, cols: w.Columns()}
	if hash {
		// Average id gap between items, times 100 items, rounded down to a
		// power of two: 50–100 items per bucket.
		gap := (w.ID(w.Len()-1) - w.ID(0)) / max(w.Len()-1, 1)
		t.shift = uint(bits.Len64(max(gap*100, 1)) - 1)
	}
	if err := t.start(); err != nil {
		return nil, err
	}
	c, err := t.conn()
	if err != nil {
		t.Close()
		return nil, err
	}
	defer c.Close()
	t.baseBytes, err = infoInt(c, "memory", "used_memory")
	if err == nil {
		t.baseRSS, err = infoInt(c, "memory", "used_memory_rss")
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs redis-server on the target's directory and waits until it
// answers PING with its data loaded.
func (t *redisTarget) start() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	args := []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", t.dir,
		"--save", "", "--daemonize", "no", "--logfile", filepath.Join(t.dir, "redis.log"),
		"--hash-max-listpack-entries", "512", "--hash-max-listpack-value", "64",
	}
	if t.aof {
		fsync := t.fsync
		if fsync == "" {
			fsync = "everysec"
		}
		args = append(args, "--appendonly", "yes", "--appendfsync", fsync)
	} else {
		args = append(args, "--appendonly", "no")
	}
	t.cmd = exec.Command("redis-server", args...)
	if err := t.cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	t.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	exited := make(chan error, 1)
	cmd := t.cmd // the goroutine must not read t.cmd: kill clears it
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(redisTimeout)
	for {
		select {
		case err := <-exited:
			t.cmd = nil
			log, _ := os.ReadFile(filepath.Join(t.dir, "redis.log"))
			return fmt.Errorf("redis-server exited (%v): %s", err, lastLines(string(log), 5))
		default:
		}
		if time.Now().After(deadline) {
			return errors.New("redis-server did not answer PING in time")
		}
		if t.ready() {
			t.exited = exited
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// ready reports whether the server answers PING and has loaded its data.
func (t *redisTarget) ready() bool {
	c, err := dialRESP(t.addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	if pong, err := c.do("PING"); err != nil || pong != "PONG" {
		return false
	}
	loading, err := infoInt(c, "persistence", "loading")
	return err == nil && loading == 0
}

func (t *redisTarget) conn() (*respConn, error) { return dialRESP(t.addr, redisTimeout) }

// infoInt returns one integer field of INFO section.
func infoInt(c *respConn, section, field string) (int64, error) {
	info, err := c.do("INFO", section)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("redis: INFO %s has no %s", section, field)
}

// appendKey appends the strings key of one counter value, or the hash key
// of its bucket.
func (t *redisTarget) appendKey(dst []byte, id uint64, col int) []byte {
	if t.hash {
		dst = append(dst[:0], 'h', ':')
		return strconv.AppendUint(dst, id>>t.shift, 10)
	}
	dst = strconv.AppendUint(dst[:0], id, 10)
	dst = append(dst, ':')
	return strconv.AppendInt(dst, int64(col), 10)
}

func (t *redisTarget) appendField(dst []byte, id uint64, col int) []byte {
	low := id & (1<<t.shift - 1)
	return strconv.AppendUint(dst[:0], low*uint64(t.cols)+uint64(col), 10)
}

// Load sends SET (strings) or one HSET per item (hashes), pipelined 1000
// commands at a time.
func (t *redisTarget) Load(w *workload.Workload) error {
	c, err := t.conn()
	if err != nil {
		return err
	}
	defer c.Close()
	var key, field []byte
	w.Items(func(id uint64, vals []uint64) bool {
		if workload.IsZero(vals) {
			return true
		}
		if t.hash {
			n := 0
			for _, v := range vals {
				if v != 0 {
					n++
				}
			}
			c.begin(2 + 2*n)
			c.argString("HSET")
			key = t.appendKey(key, id, 0)
			c.arg(key)
			for col, v := range vals {
				if v != 0 {
					field = t.appendField(field, id, col)
					c.arg(field)
					c.argInt(int64(v))
				}
			}
		} else {
			for col, v := range vals {
				if v != 0 {
					c.begin(3)
					c.argString("SET")
					key = t.appendKey(key, id, col)
					c.arg(key)
					c.argInt(int64(v))
				}
			}
		}
		if c.pending >= 1000 {
			if err = c.flush(); err == nil {
				err = c.drain()
			}
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	if err := c.flush(); err != nil {
		return err
	}
	if err := c.drain(); err != nil {
		return err
	}
	if t.aof {
		return t.rewriteAOF(c)
	}
	return nil
}

func (t *redisTarget) rewriteAOF(c *respConn) error {
	// NB: the load may already have triggered an automatic rewrite; then
	// waiting for it is all that is needed.
	if _, err := c.do("BGREWRITEAOF"); err != nil && !strings.Contains(err.Error(), "already in progress") {
		return err
	}
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		running, err := infoInt(c, "persistence", "aof_rewrite_in_progress")
		if err != nil {
			return err
		}
		scheduled, err := infoInt(c, "persistence", "aof_rewrite_scheduled")
		if err != nil {
			return err
		}
		if running == 0 && scheduled == 0 {
			return nil
		}
	}
	return errors.New("redis: AOF rewrite did not finish")
}

type redisClient struct {
	t     *redisTarget
	c     *respConn
	key   []byte
	field []byte
}

func (t *redisTarget) NewClient() (Client, error) {
	c, err := t.conn()
	if err != nil {
		return nil, err
	}
	return &redisClient{t: t, c: c}, nil
}

func (rc *redisClient) MultiGet(ids []uint64, dst []uint64) ([]uint64, error) {
	dst = dst[:0]
	c, t := rc.c, rc.t
	if t.hash {
		for _, id := range ids {
			c.begin(2 + t.cols)
			c.argString("HMGET")
			rc.key = t.appendKey(rc.key, id, 0)
			c.arg(rc.key)
			for col := 0; col < t.cols; col++ {
				rc.field = t.appendField(rc.field, id, col)
				c.arg(rc.field)
			}
		}
	} else {
		c.begin(1 + len(ids)*t.cols)
		c.argString("MGET")
		for _, id := range ids {
			for col := 0; col < t.cols; col++ {
				rc.key = t.appendKey(rc.key, id, col)
				c.arg(rc.key)
			}
		}
	}
	return c.flushReadInts(dst)
}

func (rc *redisClient) Incr(id uint64, col int, delta int64) error {
	c, t := rc.c, rc.t
	rc.key = t.appendKey(rc.key, id, col)
	if t.hash {
		c.begin(4)
		c.argString("HINCRBY")
		c.arg(rc.key)
		rc.field = t.appendField(rc.field, id, col)
		c.arg(rc.field)
	} else {
		c.begin(3)
		c.argString("INCRBY")
		c.arg(rc.key)
	}
	c.argInt(delta)
	if err := c.flush(); err != nil {
		return err
	}
	return c.readOK()
}

func (rc *redisClient) Close() error { return rc.c.Close() }

// Memory: Own and Heap are used_memory growth (Redis's accounting is its
// allocator's count of live bytes), RSS is used_memory_rss growth, both
// against the empty server.
func (t *redisTarget) Memory() (Memory, error) {
	c, err := t.conn()
	if err != nil {
		return Memory{}, err
	}
	defer c.Close()
	used, err := infoInt(c, "memory", "used_memory")
	if err != nil {
		return Memory{}, err
	}
	rss, err := infoInt(c, "memory", "used_memory_rss")
	if err != nil {
		return Memory{}, err
	}
	return Memory{Own: used - t.baseBytes, Heap: used - t.baseBytes, RSS: rss - t.baseRSS}, nil
}

// DiskBytes is the size of every file in the directory but the log: the
// AOF directory, or the RDB snapshot that DiskBytes takes without AOF.
func (t *redisTarget) DiskBytes() (int64, error) {
	if !t.aof {
		c, err := t.conn()
		if err != nil {
			return 0, err
		}
		_, err = c.do("SAVE")
		c.Close()
		if err != nil {
			return 0, err
		}
	}
	var total int64
	err := filepath.WalkDir(t.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "redis.log" {
			return err
		}
		info, err := d.Info()
		if err == nil {
			total += info.Size()
		}
		return err
	})
	return total, err
}

// Reopen shuts the server down cleanly, as tally and Pebble are closed
// (SHUTDOWN SAVE without AOF writes the RDB snapshot; with AOF, SHUTDOWN
// flushes and fsyncs it), and times a restart on the same directory until
// PING answers with the data loaded.
func (t *redisTarget) Reopen() (time.Duration, error) {
	c, err := t.conn()
	if err != nil {
		return 0, err
	}
	if t.aof {
		c.cmd("SHUTDOWN", "NOSAVE")
	} else {
		c.cmd("SHUTDOWN", "SAVE")
	}
	err = c.flush()
	if err == nil {
		// A successful SHUTDOWN closes the connection without a reply.
		if _, _, _, rerr := c.reply(); rerr != nil && !errors.Is(rerr, io.EOF) {
			err = rerr
		} else if rerr == nil {
			err = errors.New("redis: SHUTDOWN refused")
		}
	}
	c.Close()
	if err != nil {
		return 0, err
	}
	select {
	case <-t.exited:
		t.cmd = nil
	case <-time.After(redisTimeout):
		return 0, errors.New("redis-server did not shut down")
	}
	start := time.Now()
	err = t.start()
	return time.Since(start), err
}

func (t *redisTarget) kill() error {
	if t.cmd == nil {
		return nil
	}
	p := t.cmd.Process
	t.cmd = nil
	if err := p.Kill(); err != nil {
		return err
	}
	select {
	case <-t.exited:
		return nil
	case <-time.After(redisTimeout):
		return errors.New("redis-server did not stop")
	}
}

func (t *redisTarget) Close() error { return t.kill() }
