package replica

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Peer is a member of the group: its Raft id, the address its replicas
// reach it on, and the address clients reach it on.
type Peer struct {
	ID         uint64
	RaftAddr   string
	ClientAddr string
}

// maxAddrLen bounds an address in a conf change or the member table.
const maxAddrLen = 1024

// appendPeer encodes a peer (a conf change's context after the header,
// and each row of the member table).
//
//	field       width  meaning
//	----------  -----  --------------------------------
//	id          8      node id, big-endian
//	raftLen     2      length of RaftAddr, big-endian
//	raftAddr    n      RaftAddr
//	clientLen   2      length of ClientAddr, big-endian
//	clientAddr  n      ClientAddr
func appendPeer(dst []byte, p Peer) []byte {
	dst = binary.BigEndian.AppendUint64(dst, p.ID)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(p.RaftAddr)))
	dst = append(dst, p.RaftAddr...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(p.ClientAddr)))
	return append(dst, p.ClientAddr...)
}

func decodePeer(b []byte) (Peer, []byte, error) {
	var p Peer
	if len(b) < 10 {
		return p, nil, fmt.Errorf("%w: peer of %d bytes", ErrCorrupt, len(b))
	}
	p.ID = binary.BigEndian.Uint64(b)
	b = b[8:]
	for _, s := range []*string{&p.RaftAddr, &p.ClientAddr} {
		if len(b) < 2 {
			return p, nil, fmt.Errorf("%w: truncated peer %d", ErrCorrupt, p.ID)
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			return p, nil, fmt.Errorf("%w: truncated peer %d", ErrCorrupt, p.ID)
		}
		*s = string(b[2 : 2+n])
		b = b[2+n:]
	}
	return p, b, nil
}

func validPeer(p Peer) error {
	if p.ID == 0 {
		return fmt.Errorf("%w: peer id 0", ErrInvalidConfig)
	}
	if len(p.RaftAddr) > maxAddrLen || len(p.ClientAddr) > maxAddrLen {
		return fmt.Errorf("%w: peer %d: address longer than %d bytes", ErrInvalidConfig, p.ID, maxAddrLen)
	}
	return nil
}

// appendMembers encodes the member table: count u32 big-endian, then each
// peer (appendPeer) in id order.
func appendMembers(dst []byte, m map[uint64]Peer) []byte {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(ids)))
	for _, id := range ids {
		dst = appendPeer(dst, m[id])
	}
	return dst
}

func decodeMembers(b []byte) (map[uint64]Peer, []byte, error) {
	m := map[uint64]Peer{}
	if len(b) < 4 {
		return nil, nil, fmt.Errorf("%w: member table of %d bytes", ErrCorrupt, len(b))
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	for range n {
		p, rest, err := decodePeer(b)
		if err != nil {
			return nil, nil, err
		}
		m[p.ID] = p
		b = rest
	}
	return m, b, nil
}
