package server

import (
	"bytes"
	"slices"
	"sync"
	"time"
)

// Pipelined writes share one store commit.
//
// A client that pipelines 16 HINCRBYs would, one command at a time, wait
// for 16 log commits in a row, and under SyncAlways for 16 fsyncs. Redis
// with appendfsync always fsyncs once per event-loop iteration for every
// reply it is about to send; we do the same per connection: a run of
// consecutive batchable commands (HINCRBY, INCR, INCRBY, DECR, DECRBY,
// HSET and HMSET) within one read of the client's input is staged
// into one store.Batch, committed once, and answered from the batch's
// results. Replies are exactly those of running the commands one by one,
// in order: a command that cannot be staged (bad input) ends the run and runs alone after it. An increment of a 64-bit column is
// staged like any other, capped at 2^63-1 (store.Batch.IncrCapped), so a
// wide column costs nothing more than a narrow one. If the batch fails (an
// increment past a column's maximum or cap fails the whole store batch,
// and it changes nothing), each staged command is run again on its own, so
// each gets its own reply.

// maxBatch bounds the commands folded into one store batch: the store
// finds a row's after-image by a linear scan of the batch's rows.
const maxBatch = 128

// pending is one staged command.
type pending struct {
	cmd  *Command
	args [][]byte
	op   int    // index of its first operation in the batch
	lock uint32 // row-lock stripe + 1, or 0 for none
}

// runBatch stages the run of batchable commands at the start of cmds (the
// first is first, already resolved), commits it and writes the replies. It
// returns the number of commands it consumed (at least one).
func (c *Conn) runBatch(first *Command, cmds []request) int {
	if c.batch == nil {
		c.batch = c.s.db.NewBatch()
	}
	b := c.batch
	b.Reset()
	c.pend = c.pend[:0]
	t0 := time.Now()
	prev := cmds[0].Args
	for i := range cmds {
		if len(c.pend) == maxBatch {
			break
		}
		args := cmds[i].Args
		cmd := first
		if i > 0 {
			// A pipeline repeats one command: the same name (same bytes)
			// with as many arguments resolves as the one before did (a
			// batchable command has no subcommands, and nothing staged
			// changes AUTH), without the table lookup.
			if len(args) != len(prev) || !bytes.Equal(args[0], prev[0]) {
				var msg string
				if cmd, msg, _ = c.find(args); msg != "" || cmd.stage == nil {
					break
				}
			} else {
				cmd = c.pend[len(c.pend)-1].cmd
			}
			prev = args
			if c.applying && !cmd.hasKeys() && c.s.cluster != nil && c.s.cluster.opts.Broadcast != nil {
				break // Apply runs it alone, after its broadcast
			}
		}
		// Staged in place: a pending on the stack would escape through
		// the stage function (an allocation per command).
		c.pend = append(c.pend, pending{cmd: cmd, args: args, op: b.Len()})
		if !cmd.stage(c, args, b, &c.pend[len(c.pend)-1]) {
			c.pend = c.pend[:len(c.pend)-1]
			break
		}
	}
	if len(c.pend) == 0 {
		c.run(first, cmds[0].Args)
		return 1
	}

	c.locks = c.locks[:0]
	for i := range c.pend {
		if l := c.pend[i].lock; l != 0 {
			c.locks = append(c.locks, l-1)
		}
	}
	slices.Sort(c.locks)
	c.locks = slices.Compact(c.locks)
	for _, l := range c.locks {
		c.s.rows.stripe(l).RLock()
	}
	err := b.Commit()
	for _, l := range c.locks {
		c.s.rows.stripe(l).RUnlock()
	}
	if err != nil {
		for i := range c.pend {
			p := &c.pend[i]
			if c.applyBase > 0 {
				c.declareCommand(c.applyBase - 1 + i)
			}
			c.run(p.cmd, p.args)
		}
		return len(c.pend)
	}
	d := time.Since(t0)
	// Metrics once per run of one command (observeN): each command still
	// counts as one call that took the batch's time.
	run, failed := 0, 0
	for i := range c.pend {
		p := &c.pend[i]
		c.errReply = false
		p.cmd.finish(c, b, p)
		if c.errReply {
			failed++
		}
		if i+1 == len(c.pend) || c.pend[i+1].cmd != p.cmd {
			c.accountN(p.cmd, d, i+1-run, failed)
			run, failed = i+1, 0
		}
	}
	// The slow log records a batch once, as its first command with the
	// batch's time: every command of it took that long.
	c.s.slow.record(c, c.pend[0].args, d)
	return len(c.pend)
}

// Row locks.
//
// The store applies each write atomically, but HSET of some columns is a
// read-modify-write (the store's Set takes every column, and an Incr by
// the difference would race with a concurrent HINCRBY). So every server
// write takes a lock on its row's stripe: increments and whole-row sets
// share it (the store orders them, and checks a 64-bit column's cap at
// commit); a partial HSET and a DEL (which reads before it deletes, to
// count) take it exclusively.
// Several stripes are always taken in ascending order, so no two
// connections wait for each other. Writes that do not go through this
// server (the host process using the store directly) are not ordered
// against a partial HSET.

const rowStripeBits = 10

type rowLocks struct {
	m [1 << rowStripeBits]struct {
		sync.RWMutex
		_ [64 - 24]byte // one stripe per cache line
	}
}

func (r *rowLocks) stripe(i uint32) *sync.RWMutex { return &r.m[i].RWMutex }

// stripeOf returns the stripe of row id of the counter with store id cid.
func stripeOf(cid uint32, id uint64) uint32 {
	h := (id ^ uint64(cid)<<48) * 0x9e3779b97f4a7c15
	return uint32(h >> (64 - rowStripeBits))
}

// lockRows takes the stripes of c.locks exclusively, sorted; unlockRows
// releases them.
func (c *Conn) lockRows() {
	slices.Sort(c.locks)
	c.locks = slices.Compact(c.locks)
	for _, l := range c.locks {
		c.s.rows.stripe(l).Lock()
	}
}

func (c *Conn) unlockRows() {
	for _, l := range c.locks {
		c.s.rows.stripe(l).Unlock()
	}
}
