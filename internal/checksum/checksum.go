// Package checksum holds the module's one checksum: CRC-32C (Castagnoli),
// hardware-accelerated on amd64 and arm64. Every tally format (log records,
// checkpoint chunks, schema, cold blocks and descriptors, family values)
// ends with it; each encoder documents its byte order.
//
// AppendTrailer and CutTrailer are the one place the usual trailer (the
// CRC-32C of a record's bytes, big-endian, after them) is written and
// verified; CutRecord also checks the leading version byte most records
// start with. The timeline, unread and likes codecs use them.
package checksum

import "hash/crc32"

// table is immutable after package init.
var table = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the CRC-32C of b.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, table) }
