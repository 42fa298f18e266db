package cluster

// Gathered reads on a sharded node (issue 23): the server's ShardCaller,
// sending a read's per-shard part to each shard's leader over RESP.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallydb/tally/server"
)

// maxGatherRedirects bounds the MOVED replies one part follows (a shard
// whose leader just changed names its new leader; more hops than this
// mean the map and the shard disagree, and the read is retried).
const maxGatherRedirects = 3

// shardCaller is server.ShardCaller over RESP: each part goes to the
// shard's leader hint in the slot map (its first replica without one) and
// follows MOVED to the shard's current leader, whose reads are
// linearizable (a ReadIndex barrier). One client per address, kept until
// Close.
type shardCaller struct {
	password string
	mu       sync.Mutex
	clients  map[string]*redis.Client
	closed   bool
}

func newShardCaller(password string) *shardCaller {
	return &shardCaller{password: password, clients: map[string]*redis.Client{}}
}

// errCallerClosed is returned by a part sent after the node closed.
var errCallerClosed = errors.New("cluster: the node is closing")

func (c *shardCaller) client(addr string) (*redis.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errCallerClosed
	}
	rc := c.clients[addr]
	if rc == nil {
		rc = redis.NewClient(&redis.Options{Addr: addr, Password: c.password, MaxRetries: -1, Protocol: 2,
			DialTimeout: time.Second, PoolSize: 4, DisableIdentity: true})
		c.clients[addr] = rc
	}
	return rc, nil
}

// leaderAddr is where a shard's part goes first: its leader hint's
// address, else its first replica's.
func leaderAddr(sh *server.TopologyShard) string {
	for _, n := range sh.Nodes {
		if n.ID == sh.Leader {
			return n.Addr
		}
	}
	if len(sh.Nodes) > 0 {
		return sh.Nodes[0].Addr
	}
	return ""
}

// CallShard implements server.ShardCaller.
func (c *shardCaller) CallShard(ctx context.Context, sh *server.TopologyShard, argv []string) (any, error) {
	addr := leaderAddr(sh)
	if addr == "" {
		return nil, fmt.Errorf("cluster: shard %d has no replicas", sh.ID)
	}
	args := make([]any, len(argv))
	for i, a := range argv {
		args[i] = a
	}
	for hop := 0; ; hop++ {
		rc, err := c.client(addr)
		if err != nil {
			return nil, err
		}
		r, err := rc.Do(ctx, args...).Result()
		if err == nil || errors.Is(err, redis.Nil) {
			return r, nil
		}
		var re redis.Error
		if !errors.As(err, &re) {
			return nil, err
		}
		msg := re.Error()
		if f := strings.Fields(msg); len(f) == 3 && f[0] == "MOVED" && hop < maxGatherRedirects {
			addr = f[2]
			continue
		}
		return nil, &server.ShardReplyError{Shard: sh.ID, Msg: msg}
	}
}

// Close closes the clients; later calls fail.
func (c *shardCaller) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, rc := range c.clients {
		rc.Close()
	}
	clear(c.clients)
}
