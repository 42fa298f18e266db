//go:build !cgo

package procmem

// Cgo reports a cgo build: Pebble then allocates its block cache and
// memtables with C's allocator, outside the Go heap.
const Cgo = false
