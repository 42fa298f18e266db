// Package xshard is tally's cross-shard streams (issue 23): ordered,
// exactly-once messages from one Raft-replicated shard to another. A
// message is a tally command's argv; the target shard runs it as if its
// own log had carried it.
//
// # The parts
//
// On the source shard S, a replicated command appends a message for
// target T into S's outbox, in the same store batch as its own effect
// (Streams.Stage(b).Append, or Streams.Append in a batch of its own).
// Sequence numbers are per target, from 1, consecutive; every replica of
// S applies the same entries in the same order, so every replica assigns
// the same numbers. The Sender runs on every replica of S and sends only
// while that replica leads: it reads each target's oldest pending
// messages (Streams.Pending) and sends them to T's leader as one
// command, TALLY.XRECV src first batch (batch: AppendBatch). T proposes
// it like any write; its apply (Streams.Receive) skips messages at or
// below the last sequence it applied from S, refuses a batch that would
// leave a gap (ErrGap, reply "XGAP last ..."), runs each new message
// through server.Conn.RunNested (a command of the same entry, numbered
// apart from the others: server.Conn.NestCommands) and
// replies the last sequence applied from S. The Sender then proposes
// TALLY.XACK T seq on S, whose apply (Streams.Ack) drops the prefix on
// every replica of S. A send that fails or whose outcome is unknown
// (MOVED, TRYAGAIN, CLUSTERDOWN, a connection lost, a leader change on
// either side, an ack that did not commit) is simply sent again, by this
// leader after a backoff or by the next one: T applies each sequence
// once, and acknowledging a prefix twice changes nothing.
//
// # Exactly once on T, through crashes
//
// T's record for S (last applied, and for the entry that last changed it,
// the entry index and the value before) is written in the entry that
// applies the messages. A replica applies each entry inside
// store.DB.ApplyEntry: the n-th commit of entry i carries the Once mark
// (i, n), and a replica that crashed mid-entry applies the entry again
// from AppliedIndex, skipping every commit whose mark is already in the
// store. That only works if a re-apply makes the same commits in the
// same order (store/apply.go, rule 2), so Receive decides everything from
// the state before the entry, never from what its own commits wrote:
//
//  1. Its first commit is a probe (a constant key), made by every call
//     whatever the state. After it, AppliedIndex is this entry's index,
//     and the probe's Duplicate tells a re-apply of this point from a
//     first apply.
//  2. On a re-apply whose record carries this entry's index, the record
//     is this call's own: the messages are chosen against its "before"
//     value, as the first apply chose them. Otherwise against "last".
//  3. The record is the second commit, made only when there is a new
//     message (a decision on "before", so the same on a re-apply); then
//     each new message runs, in order, numbered as a command of its own
//     (its position in the batch: server.Conn.NestCommands). A message's
//     commits are skipped on a re-apply exactly as a command's of any
//     multi-command entry are, even when a message before it commits
//     nothing the second time (a post found published).
//  4. A second TALLY.XRECV from the same source in one entry (a client
//     pipelining two) is refused with ErrRepeated, after the probe, by an
//     in-memory note of the sources seen in the entry. A re-apply starts
//     on a freshly opened store (ApplyEntry refuses an index it has seen),
//     hence a fresh Streams, so it refuses the same call. Rule 2 relies
//     on this: one record write per source per entry.
//
// So a crash at any commit of the entry leaves either nothing of it
// (the entry applies as new), or a prefix of its commits, which the
// re-apply skips while making the rest; no message applies twice, none is
// skipped. TestReceiveReapplyAfterCrash stops an entry after each of its
// messages, reopens the store and applies it again.
//
// The guarantee is the replicated log's own: a message's command must
// itself obey rule 2 (decide its commits from its arguments and the state
// before it), as every command of a multi-command entry must.
//
// Ack and the outbox append are simpler: Ack always makes exactly one
// commit (an ack at or below the last rewrites the head unchanged), and an
// append rides in its command's batch, so a re-applied append is skipped
// with the batch. Stage reads the outbox head from the store, never from
// memory, so a skipped batch cannot leave a number behind.
//
// # Order and loss
//
// Per (S, T) messages apply in sequence order: Receive runs them in order
// and refuses gaps, and S sends from its acknowledged prefix onwards. S
// drops a message only after T replied that it applied it, and T's
// record is replicated before that reply (the XRECV entry committed on
// a majority of T), so no acknowledged message can be missing on T after
// any minority of either side fails.
//
// # Data
//
// Two families (0x68, 0x69: in the hosts' range; 0x50/0x51 are Raft's):
//
//	family        key                       value
//	------------  ------------------------  ---------------------------
//	xshard-out    target u32 | seq u64      message: version, append ms,
//	                                        argv, CRC-32C (appendMessage)
//	xshard-state  'h' | target u32          outbox head: last appended,
//	                                        last acknowledged (appendHead)
//	xshard-state  'i' | source u32          inbox record: last, entry,
//	                                        before (appendInboxRecord)
//	xshard-state  'p'                       the probe (a constant)
//
// Both travel with the store's checkpoints, so a snapshot install carries
// them. Limits: MaxArgs, MaxMessageBytes per message; MaxBatchMessages,
// MaxBatchBytes per TALLY.XRECV; Options.MaxPending per target
// (ErrOutboxFull). Bad input is refused with a named error and changes
// nothing.
//
// # Wiring (the cluster layer)
//
// On every replica of every shard, for every store it opens (Start's and
// a snapshot install's: cluster.Config.Register):
//
//	st, err := xshard.Open(db.Store(), shardID, &xshard.Options{Now: node.Clock().Now})
//	srv.Register(xshard.Commands(st)...)
//
// and keep st where the host's own commands and the Sender find it (an
// atomic pointer swapped on reopen). Commands that make cross-shard
// effects (TL.POST's delivery to other shards, TL.FOLLOW's follower bit)
// call st.Stage(b).Append(target, argv) on the batch of their own effect.
// Once per replica process, run
//
//	snd, _ := xshard.NewSender(xshard.SenderConfig{Streams: ptr.Load,
//		Leader: (Replica().Status().Role == "leader"),
//		Peers: (shard id -> leader hint's ClientAddr from the shard map),
//		Proposer: (Replica().Propose(ctx, server.EncodeCommand(argv)), '-' reply as error),
//		Password: (the cluster's requirepass)})
//	go snd.Run(ctx)
//
// TALLY.XRECV has no key: in cluster mode it must be routed to the own
// shard's leader (a follower answers MOVED with the leader, which the
// Sender follows). TALLY.XSTATUS shows a replica's outboxes (pending,
// last appended, last acknowledged, oldest age) and inbox records.
//
// # Caveats
//
//   - The Sender sends to one target at a time, one batch in flight per
//     target; throughput per (S, T) is one XRECV round trip plus one
//     XACK commit per batch (not measured here).
//   - Message append times (XSTATUS's oldest age) come from Options.Now;
//     with the wall clock the stored bytes differ between replicas (the
//     logical state does not).
//   - A source shard that is retired leaves its inbox record on every
//     target; nothing drops it yet.
package xshard
