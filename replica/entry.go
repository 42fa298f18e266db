package replica

import (
	"encoding/binary"
	"fmt"
)

// headerVersion is the version byte of a command entry's header.
const headerVersion = 1

// headerLen is the length of a command entry's header.
const headerLen = 1 + 8 + 8 + 8

// header is what a replica adds to a proposed command: who proposed it
// (so the proposer can find its waiter when the entry applies), and the
// leader's clock at proposal time (so every replica applies it with the
// same Clock.Now).
type header struct {
	node     uint64 // proposing node
	proposal uint64 // proposal id, unique per node and run
	millis   int64  // leader's wall clock at proposal, Unix ms (monotonic in the log)
}

// appendHeader encodes a command entry: the header, then the command.
//
//	field     width  meaning
//	--------  -----  -------------------------------------------------
//	version   1      headerVersion
//	node      8      proposing node id, big-endian
//	proposal  8      proposal id (per node), big-endian
//	millis    8      leader's clock at proposal, Unix ms, big-endian
//	command   rest   the command, opaque (Config.Apply decodes it)
//
// A conf change carries the same header followed by the member's Peer
// (appendPeer) in its Context.
func appendHeader(dst []byte, h header) []byte {
	dst = append(dst, headerVersion)
	dst = binary.BigEndian.AppendUint64(dst, h.node)
	dst = binary.BigEndian.AppendUint64(dst, h.proposal)
	return binary.BigEndian.AppendUint64(dst, uint64(h.millis))
}

// decodeHeader returns an entry's header and the rest of its data.
func decodeHeader(b []byte) (header, []byte, error) {
	if len(b) < headerLen || b[0] != headerVersion {
		return header{}, nil, fmt.Errorf("%w: entry header of %d bytes", ErrCorrupt, len(b))
	}
	return header{
		node:     binary.BigEndian.Uint64(b[1:]),
		proposal: binary.BigEndian.Uint64(b[9:]),
		millis:   int64(binary.BigEndian.Uint64(b[17:])),
	}, b[headerLen:], nil
}
