package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tallydb/tally/bench/workload"
	"github.com/tallydb/tally/likes"
)

// LikesServedSpecs returns the tally-serve likes targets, one per
// durability, started as o says; their Skip says why when o has no
// binary.
func LikesServedSpecs(o ServeOptions) []LikesSpec {
	var specs []LikesSpec
	for _, m := range servedModes {
		specs = append(specs, LikesSpec{Name: "tally-serve", Durability: m.dur, Mode: m.mode, Tally: true, Served: true, Skip: o.skip(),
			Open: func(dir string) (LikesTarget, error) { return openServedLikes(o, dir, m.flag) }})
	}
	return specs
}

// servedLikes is business LikesBusiness (declared with the defaults, as the
// in-process target declares it) of a "tally serve" process, reached with
// the LIKE.* commands over RESP: LIKE.LIKE, LIKE.UNLIKE, LIKE.DISLIKE and
// LIKE.UNDISLIKE for the transitions (one request each, as the Redis
// target sends one EVALSHA), LIKE.STATES of the 20 items of a page (one
// request; Redis pipelines 40 SISMEMBER), LIKE.TOP 100 and LIKE.LIKERS
// LIMIT 100.
type servedLikes struct {
	srv *tallyServer
	dir string
}

func openServedLikes(o ServeOptions, dir, durability string) (*servedLikes, error) {
	srv, err := startTallyServer(o, dir, durability)
	if err != nil {
		return nil, err
	}
	if err := srv.do([]string{"LIKE.BUSINESS", "ADD", LikesBusiness}); err != nil {
		srv.close()
		return nil, err
	}
	return &servedLikes{srv: srv, dir: dir}, nil
}

// Load writes the history as CSV (BUSINESS,ITEM,USER,TIME with the time in
// RFC 3339 to the millisecond) into the target's directory and runs "tally
// likes load FILE" against the serving store: the CLI's bulk load
// (likes.Load inside the server, the in-process target's path: sets,
// counts, lists and boards in big batches, the counts without the log).
// The time includes writing the file. It returns the load's "added".
func (t *servedLikes) Load(h []HistLike) (int, error) {
	path := filepath.Join(t.dir, "likes.csv")
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	bw := bufio.NewWriterSize(f, 1<<20)
	var line []byte
	for _, x := range h {
		line = append(line[:0], LikesBusiness...)
		line = append(line, ',')
		line = strconv.AppendUint(line, x.Item, 10)
		line = append(line, ',')
		line = strconv.AppendUint(line, x.User, 10)
		line = append(line, ',')
		line = time.UnixMilli(x.Ms).UTC().AppendFormat(line, "2006-01-02T15:04:05.000Z07:00")
		line = append(line, '\n')
		if _, err = bw.Write(line); err != nil {
			break
		}
	}
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	kv, err := t.srv.cli("likes", "load", path)
	if err != nil {
		return 0, err
	}
	if kv["input_likes"] != strconv.Itoa(len(h)) {
		return 0, fmt.Errorf("tally likes load read %s likes, the file has %d", kv["input_likes"], len(h))
	}
	return strconv.Atoi(kv["added"])
}

type servedLikesClient struct {
	c *respConn
}

func (t *servedLikes) NewClient() (LikesClient, error) {
	c, err := t.srv.conn()
	if err != nil {
		return nil, err
	}
	return &servedLikesClient{c: c}, nil
}

var likeCommands = map[workload.LikeKind]string{
	workload.Like: "LIKE.LIKE", workload.Unlike: "LIKE.UNLIKE", workload.Dislike: "LIKE.DISLIKE", workload.Undislike: "LIKE.UNDISLIKE",
}

// roundTrip sends the buffered command and reads its whole reply.
func (c *servedLikesClient) roundTrip() (any, error) {
	if err := c.c.flush(); err != nil {
		return nil, err
	}
	return c.c.readValue()
}

// Apply sends the transition (the server's clock times it, as the
// in-process target's store does).
func (c *servedLikesClient) Apply(op workload.LikeOp, _ int64) error {
	rc := c.c
	rc.begin(4)
	rc.argString(likeCommands[op.Kind])
	rc.argString(LikesBusiness)
	rc.argInt(int64(op.Item))
	rc.argInt(int64(op.User))
	_, err := c.roundTrip()
	return err
}

func (c *servedLikesClient) States(user uint64, items []uint64) error {
	_, err := c.states(user, items)
	return err
}

// states returns LIKE.STATES's reply: "like", "dislike" or "none" per item.
func (c *servedLikesClient) states(user uint64, items []uint64) ([]string, error) {
	rc := c.c
	rc.begin(3 + len(items))
	rc.argString("LIKE.STATES")
	rc.argString(LikesBusiness)
	rc.arg(strconv.AppendUint(nil, user, 10))
	for _, it := range items {
		rc.arg(strconv.AppendUint(nil, it, 10))
	}
	v, err := c.roundTrip()
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != len(items) {
		return nil, fmt.Errorf("%w: LIKE.STATES of %d items: %v", errServedReply, len(items), v)
	}
	out := make([]string, len(arr))
	for i, s := range arr {
		if out[i], ok = s.(string); !ok {
			return nil, fmt.Errorf("%w: LIKE.STATES: %v", errServedReply, v)
		}
	}
	return out, nil
}

// Top reads the reply without building it, as the Redis target's Top
// does (top returns it, for the tests that compare targets).
func (c *servedLikesClient) Top(n int) error {
	c.c.cmd("LIKE.TOP", LikesBusiness, strconv.Itoa(n))
	if err := c.c.flush(); err != nil {
		return err
	}
	return c.c.readOK()
}

// top returns LIKE.TOP's records as board entries.
func (c *servedLikesClient) top(n int) ([]likes.Entry, error) {
	c.c.cmd("LIKE.TOP", LikesBusiness, strconv.Itoa(n))
	v, err := c.roundTrip()
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: LIKE.TOP: %v", errServedReply, v)
	}
	var out []likes.Entry
	for _, rec := range arr {
		f, err := record(rec)
		if err != nil {
			return nil, fmt.Errorf("LIKE.TOP: %w", err)
		}
		out = append(out, likes.Entry{Rank: int(f["rank"]), Item: f["item"], Likes: f["likes"]})
	}
	return out, nil
}

func (c *servedLikesClient) Likers(item uint64, n int) error {
	_, err := c.likers(item, n)
	return err
}

// likers returns the user ids of LIKE.LIKERS's first page.
func (c *servedLikesClient) likers(item uint64, n int) ([]uint64, error) {
	c.c.cmd("LIKE.LIKERS", LikesBusiness, strconv.FormatUint(item, 10), "LIMIT", strconv.Itoa(n))
	v, err := c.roundTrip()
	if err != nil {
		return nil, err
	}
	page, ok := v.([]any)
	if !ok || len(page) != 2 {
		return nil, fmt.Errorf("%w: LIKE.LIKERS: %v", errServedReply, v)
	}
	ids, ok := page[1].([]any)
	if !ok {
		return nil, fmt.Errorf("%w: LIKE.LIKERS: %v", errServedReply, v)
	}
	out := make([]uint64, len(ids))
	for i, id := range ids {
		if out[i], err = replyUint(id); err != nil {
			return nil, fmt.Errorf("LIKE.LIKERS: %w", err)
		}
	}
	return out, nil
}

func (c *servedLikesClient) Close() error { return c.c.Close() }

// replyUint reads an unsigned number replied as an integer or a bulk
// string.
func replyUint(v any) (uint64, error) {
	switch x := v.(type) {
	case int64:
		if x >= 0 {
			return uint64(x), nil
		}
	case string:
		if n, err := strconv.ParseUint(x, 10, 64); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: %v is not an unsigned number", errServedReply, v)
}

// record reads a record reply (name, value, name, value, ...) of numbers.
func record(v any) (map[string]uint64, error) {
	arr, ok := v.([]any)
	if !ok || len(arr)%2 != 0 {
		return nil, fmt.Errorf("%w: %v is not a record", errServedReply, v)
	}
	out := map[string]uint64{}
	for i := 0; i < len(arr); i += 2 {
		name, ok := arr[i].(string)
		if !ok {
			return nil, fmt.Errorf("%w: %v is not a record", errServedReply, v)
		}
		n, err := replyUint(arr[i+1])
		if err != nil {
			return nil, err
		}
		out[name] = n
	}
	return out, nil
}

func (t *servedLikes) Memory() (Memory, error) { return t.srv.memory() }

// DiskBytes runs "tally compact --disk" inside the server (TALLY.EXEC)
// and returns its table_bytes: Pebble's data files after a flush and a
// full compaction, as the in-process target settles them with
// DB.CompactDisk. Both targets then run their transitions and reads on a
// compacted store, not one whose load still sits in unmerged files.
func (t *servedLikes) DiskBytes() (int64, error) {
	kv, err := t.srv.cli("compact", "--disk")
	if err != nil {
		return 0, err
	}
	v, ok := kv["table_bytes"]
	if !ok {
		return 0, fmt.Errorf("%w: tally compact --disk printed no table_bytes", errServedReply)
	}
	return strconv.ParseInt(v, 10, 64)
}

func (t *servedLikes) Close() error { return t.srv.close() }
