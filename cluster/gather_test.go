package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tallydb/tally/server"
)

// fakeRESP is a loopback listener answering every command but HELLO and
// CLIENT with reply (raw RESP), counting them.
type fakeRESP struct {
	addr  string
	reply atomic.Value // string
	calls atomic.Int64
}

func newFakeRESP(t *testing.T) *fakeRESP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRESP{addr: ln.Addr().String()}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(conn)
		}
	}()
	return f
}

func (f *fakeRESP) serve(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	for {
		argv, err := readCommand(r)
		if err != nil {
			return
		}
		reply := "-ERR unknown command\r\n"
		if name := strings.ToUpper(argv[0]); name != "HELLO" && name != "CLIENT" {
			f.calls.Add(1)
			reply = f.reply.Load().(string)
		}
		if _, err := conn.Write([]byte(reply)); err != nil {
			return
		}
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("bad command %q: %v", line, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, err
	}
	argv := make([]string, n)
	for i := range argv {
		if line, err = r.ReadString('\n'); err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(line[1:]))
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size+2)
		if _, err := readFull(r, buf); err != nil {
			return nil, err
		}
		argv[i] = string(buf[:size])
	}
	return argv, nil
}

func readFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestShardCaller: a part goes to the shard's leader hint, follows MOVED
// to the current leader, returns the shard's error replies as
// ShardReplyError and stops following after maxGatherRedirects.
func TestShardCaller(t *testing.T) {
	leader, follower := newFakeRESP(t), newFakeRESP(t)
	leader.reply.Store("*2\r\n:1\r\n*2\r\n:7\r\n$20\r\n18446744073709551615\r\n")
	follower.reply.Store("-MOVED 0 " + leader.addr + "\r\n")
	c := newShardCaller("")
	defer c.Close()
	ctx := context.Background()
	sh := &server.TopologyShard{ID: 2, Leader: 5, Nodes: []server.TopologyNode{{ID: 4, Addr: leader.addr}, {ID: 5, Addr: follower.addr}}}
	got, err := c.CallShard(ctx, sh, []string{"LIKE.PART", "USERLIKES", "v", "1"})
	want := []any{int64(1), []any{int64(7), "18446744073709551615"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("through a MOVED: %#v, %v; want %#v", got, err, want)
	}
	if leader.calls.Load() != 1 || follower.calls.Load() != 1 {
		t.Fatalf("calls: leader %d, follower %d", leader.calls.Load(), follower.calls.Load())
	}
	// Without a hint, the first replica.
	sh.Leader = 0
	if _, err := c.CallShard(ctx, sh, []string{"X"}); err != nil || leader.calls.Load() != 2 {
		t.Fatalf("no hint: %v, leader calls %d", err, leader.calls.Load())
	}
	// An error reply is the shard's.
	leader.reply.Store("-ERR likes: day board not kept: 2020-01-01\r\n")
	var re *server.ShardReplyError
	if _, err := c.CallShard(ctx, sh, []string{"X"}); !errors.As(err, &re) || re.Shard != 2 || re.Msg != "ERR likes: day board not kept: 2020-01-01" {
		t.Fatalf("error reply: %v", err)
	}
	// A MOVED loop ends as the last MOVED.
	leader.reply.Store("-MOVED 0 " + follower.addr + "\r\n")
	before := leader.calls.Load() + follower.calls.Load()
	if _, err := c.CallShard(ctx, sh, []string{"X"}); !errors.As(err, &re) || !strings.HasPrefix(re.Msg, "MOVED ") {
		t.Fatalf("MOVED loop: %v", err)
	}
	if n := leader.calls.Load() + follower.calls.Load() - before; n != maxGatherRedirects+1 {
		t.Fatalf("MOVED loop: %d calls, want %d", n, maxGatherRedirects+1)
	}
	// No replicas, an unreachable one, a closed caller.
	if _, err := c.CallShard(ctx, &server.TopologyShard{ID: 3}, []string{"X"}); err == nil {
		t.Fatal("a shard without replicas answered")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	if _, err := c.CallShard(ctx, &server.TopologyShard{ID: 3, Nodes: []server.TopologyNode{{ID: 9, Addr: dead}}}, []string{"X"}); err == nil || errors.As(err, &re) {
		t.Fatalf("unreachable: %v", err)
	}
	c.Close()
	if _, err := c.CallShard(ctx, sh, []string{"X"}); !errors.Is(err, errCallerClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
