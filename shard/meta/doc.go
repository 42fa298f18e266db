// Package meta runs the metadata group of a sharded tally cluster (issue
// 23): a Raft group of its own (package replica, its own small store under
// the node's directory, its own Raft address) whose state machine is the
// slot map of package shard.
//
// # Members
//
// Every tally process is a member. The first voters (three or five) are
// given when the cluster is created; every other process joins as a
// learner: it votes in no election and counts toward no quorum, but it
// receives the log, so it holds the current map locally, applied from the
// log, and serves CLUSTER SLOTS/SHARDS/NODES and MOVED from it without
// asking anyone. A learner is added on the leader with
// Group.Replica().AddLearner and may be promoted to voter (Promote) to
// replace a voter that left.
//
// # Who changes the map
//
// Any member proposes a shard.Op with Group.Propose: a voter, a follower
// or a learner alike, because the group's replica forwards a non-leader's
// proposal to the leader (replica.Config.ForwardProposals). The op
// applies in log order on every member through shard.Map.Apply, so every
// member holds the same bytes at the same epoch; an op the map refuses
// (a stale leader hint, an unknown shard) applies as a refusal, the same
// on every member, and Propose returns its named error.
//
// # Epochs
//
// Before the Create op the group holds no map (Map returns nil). Create
// makes epoch 1 and every accepted op adds one; a refused op changes
// neither the map nor its epoch. A reader compares epochs to tell a newer
// map from an older one; Map is a lock-free load of an immutable value.
//
// # Exactly once
//
// Each proposal carries a request id (the member's id and a per-start
// random base plus a counter). Propose retries a proposal whose fate is
// unknown (a forwarded proposal lost with a leader, a snapshot covering
// it) or that was dropped, with the same request id; the state machine
// remembers the last recentKept request ids with their results, so a
// retry of an op that already applied answers that result instead of
// applying it again. This also covers a command the leader appended twice
// (a duplicating transport).
//
// # Storage and snapshots
//
// The state (the encoded map, the request ids, the index of the last
// entry applied) is one value at one key of family "shard-meta" (prefix
// 0x60, a host prefix of store's family table) in the group's store, with
// replica.Families() beside it. Each entry writes it inside
// store.DB.ApplyEntry, and Apply skips an entry at or below the stored
// index, so a re-applied entry is a no-op. A snapshot is the state value
// itself: it is a few kilobytes, so it travels inside the raft snapshot
// message (the Snapshotter's descriptor) and is installed by writing it at
// its key, with no checkpoint files to fetch. See state.go for the
// encodings.
package meta
