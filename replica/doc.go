// Package replica makes a tally store one replica of a Raft group, on
// go.etcd.io/raft/v3 (issue 22).
//
// # What an entry carries
//
// An entry carries a logical command (opaque bytes, the RESP argv of a
// write as package server encodes it) behind a header with the proposer's
// id, a proposal id and the leader's clock at proposal time (entry.go).
// Every replica applies committed entries in log order through
// Config.Apply, so the in-memory state of the packages (timeline, likes,
// unread caches) is built on every replica by the same code that builds it
// on one node; replicating the leader's evaluated Pebble batches would
// leave those caches stale on followers. Determinism: the packages read
// time from a Clock the apply loop sets to each entry's timestamp, and
// timestamps never decrease along the log.
//
// # Invariants
//
//   - Exactly-once apply: each entry applies inside store.DB.ApplyEntry,
//     which marks its commits so a re-apply after a crash skips what is
//     already in the store, or, a run of commands through Config.ApplyRun,
//     in one store commit marked as the complete apply of the whole run
//     (store.Batch.MarkEntries); the replica restarts its apply at the
//     store's AppliedIndex (store/apply.go).
//   - Durability: the Raft log and hard state live in the store's own
//     Pebble (storage.go) and, with Config.Sync, are fsynced before the
//     messages that acknowledge them are sent.
//   - A proposal is answered once: its reply, ErrProposalDropped when it
//     can never apply, or an ambiguous error (ErrResultUnknown,
//     ErrStopped, the context's) when the replica cannot know (core.go).
//   - Reads: ReadIndex with ReadOnlySafe, on the leader and on followers.
//   - PreVote and CheckQuorum are on; proposals are not forwarded (a
//     follower answers ErrNotLeader naming the leader) unless
//     Config.ForwardProposals is set (forward.go: the metadata group of
//     package shard/meta, whose every member proposes).
//
// # Transports and snapshots
//
// TCPTransport (tcp.go) carries messages between machines: connections
// authenticated by an HMAC-SHA256 challenge/response over both sides'
// nonces under the cluster's shared secret, length-prefixed protobuf
// frames, one bounded queue per peer. memtransport is the in-memory
// network of the tests. CheckpointSnapshotter (checkpoint.go) makes a
// snapshot a Pebble checkpoint of the sender's store, which the receiver
// fetches in chunks over the transport (resumable, rate-limited, CRC-32C
// checked) before raft sees the snapshot message (SnapshotPreparer), and
// swaps in crash-safely (store.InstallStaged).
//
// # Caveats
//
//   - The raft traffic is authenticated, not encrypted.
package replica
