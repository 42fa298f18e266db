package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CatchupResult is the catch-up benchmark's outcome: a 3-replica group
// loaded with Rows rows through RESP, then a 4th replica started empty
// with --join and added as a learner; Seconds runs from "tally cluster add"
// to the moment the leader sees its match index reach the leader's applied
// index (the group is idle meanwhile, so that index does not move); its own
// applied index is then checked.
type CatchupResult struct {
	Rows        int
	LoadSeconds float64
	LeaderBytes int64 // the leader's store directory (every file) when the learner is added
	NewBytes    int64 // the new replica's directory once caught up
	LeaderIndex int64 // the leader's applied index the learner had to reach
	LogFirst    string
	Seconds     float64
	Err         error
}

// SecondsPerGB returns Seconds per GiB of the leader's store.
func (r CatchupResult) SecondsPerGB() float64 {
	if r.LeaderBytes <= 0 {
		return 0
	}
	return r.Seconds / (float64(r.LeaderBytes) / (1 << 30))
}

// runCatchup loads rows into g through its leader, then starts replica
// g.replicas+1 with --join in g.dir/node-N, adds it with "tally cluster
// add" and times its catch-up. The new replica is stopped before it
// returns; the group is left running.
func runCatchup(ctx context.Context, g *group, rows int, logf func(string, ...any)) CatchupResult {
	res := CatchupResult{Rows: rows}
	leader, err := g.leader()
	if err != nil {
		res.Err = err
		return res
	}
	d, err := loadRows(ctx, leader, rows, 4, 1000)
	res.LoadSeconds = d.Seconds()
	if err != nil {
		res.Err = fmt.Errorf("load: %w", err)
		return res
	}
	logf("catch-up: loaded %d rows through the leader in %.1fs", rows, res.LoadSeconds)
	if err := waitCaughtUp(ctx, g, time.Minute); err != nil {
		res.Err = err
		return res
	}
	// Let the followers finish applying and every store settle.
	time.Sleep(2 * time.Second)
	li, err := g.leaderIndex()
	if err != nil {
		res.Err = err
		return res
	}
	st, err := clusterStatus(leader)
	if err != nil {
		res.Err = err
		return res
	}
	res.LeaderIndex = st.Applied
	res.LeaderBytes = dirBytes(filepath.Join(g.dir, fmt.Sprintf("node-%d", li)))
	res.LogFirst = strings.Split(st.Log, "-")[0]
	id := g.replicas + 1
	dir := filepath.Join(g.dir, fmt.Sprintf("node-%d", id))
	addr := g.addr(id)
	raftAddr := fmt.Sprintf("127.0.0.1:%d", g.port+id-1+raftPortOffset)
	secret, err := os.ReadFile(filepath.Join(g.dir, "cluster.secret"))
	if err != nil {
		res.Err = err
		return res
	}
	// --peers with --join gives the new replica's transport the group's
	// raft addresses (it answers the leader before it knows the members);
	// without it the leader never hears back and the replica never
	// catches up.
	var peers []string
	for i := 1; i <= id; i++ {
		peers = append(peers, fmt.Sprintf("%d=127.0.0.1:%d/%s", i, g.port+i-1+raftPortOffset, g.addr(i)))
	}
	cmd := exec.Command(g.bin, "-d", dir, "--durability", g.durability, "serve", "--create", "--cluster", "--join",
		"--id", strconv.Itoa(id), "--addr", addr, "--raft-addr", raftAddr, "--peers", strings.Join(peers, ","))
	cmd.Env = append(os.Environ(), "TALLY_CLUSTER_SECRET="+strings.TrimSpace(string(secret)))
	p, err := startProc(fmt.Sprintf("replica %d", id), addr, cmd, dir+".log")
	if err != nil {
		res.Err = err
		return res
	}
	defer p.stop()
	start := time.Now()
	out, err := exec.Command(g.bin, "cluster", "add", strconv.Itoa(id), raftAddr, addr, "--addr", leader).CombinedOutput()
	if err != nil {
		res.Err = fmt.Errorf("cluster add: %v: %s", err, out)
		return res
	}
	deadline := start.Add(30 * time.Minute)
	for {
		// The leader's view of the new replica's match index: asking the
		// new replica itself while it installs a snapshot deadlocks it (a
		// TALLY.CLUSTER STATUS waits for the Raft loop, which waits in the
		// install for the server's connections to end; reported with
		// issue 22), so it is asked only once the leader has its ack.
		lst, err := clusterStatus(leader)
		if err == nil && lst.MemberMatch[int64(id)] >= res.LeaderIndex {
			res.Seconds = time.Since(start).Seconds()
			st, err := clusterStatus(addr)
			if err != nil {
				res.Err = fmt.Errorf("replica %d after its catch-up: %w", id, err)
				return res
			}
			if st.Applied < res.LeaderIndex {
				res.Err = fmt.Errorf("replica %d acknowledged index %d to the leader but has applied %d", id, res.LeaderIndex, st.Applied)
				return res
			}
			break
		}
		if time.Now().After(deadline) {
			res.Err = fmt.Errorf("replica %d did not reach index %d in 30 minutes", id, res.LeaderIndex)
			return res
		}
		if ctx.Err() != nil {
			res.Err = ctx.Err()
			return res
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.NewBytes = dirBytes(dir)
	logf("catch-up: replica %d reached index %d in %.2fs (leader's store %s, the new one's %s)", id, res.LeaderIndex,
		res.Seconds, fmtMiB(float64(res.LeaderBytes)), fmtMiB(float64(res.NewBytes)))
	// Take it out of the group again so the group's stop does not wait on it.
	exec.Command(g.bin, "cluster", "remove", strconv.Itoa(id), "--addr", leader).Run()
	return res
}
