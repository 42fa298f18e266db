// Package shard is the slot map of a sharded tally cluster (issue 23):
// which shard (a Raft group of replicas, package cluster) serves each of
// the 16,384 Redis Cluster slots, which replicas each shard has, and a
// hint of each shard's leader. It is pure data and stdlib only, so the
// server (routing, MOVED, CLUSTER SLOTS) and the metadata group
// (package shard/meta) share it.
//
// # The map
//
// A Map lists its shards sorted by id (ids ≥ 1), each with its replicas
// (replica ids are unique across the whole map, as they are across the
// cluster) and a leader hint (Leader, LeaderTerm; Leader 0 is unknown),
// and its slot ranges sorted by slot, covering 0..NumSlots-1 exactly once,
// each naming a shard of the map. Validate checks all of it.
//
// # Who changes it, and epochs
//
// Nobody mutates a Map. A change is an Op (Create, SetLeader,
// SetReplicas, AddShard, AssignSlots), and Map.Apply returns a new Map
// with Epoch one higher; an op it refuses returns a named error and
// changes nothing. Apply is deterministic (the same op on the same map
// gives the same bytes), which is what lets the metadata group replicate
// ops through its Raft log and every member hold the same map: package
// shard/meta proposes ops, applies them in log order, and stores the
// encoded result. Create turns the empty state (a nil *Map) into epoch 1;
// every later op adds one, so a higher epoch is a later map, and a node
// comparing two maps keeps the higher epoch.
//
// A leader hint only moves forward in Raft terms: SetLeader is accepted
// when its term is above the hint's, or equal to it while the hint names
// no leader, so hints proposed concurrently by replicas that saw different
// elections settle on the newest term whatever order they commit in.
//
// # Encoding
//
// Map.Encode is a compact versioned binary form with a CRC-32C
// (encode.go); Op.Encode likewise. Decode checks the CRC, the bounds and
// then Validate, so what it returns is always a valid map.
package shard
