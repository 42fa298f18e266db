package shard

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
)

// Format versions of the encodings. A map with registered nodes is
// written as mapVersion2; one without as mapVersion, byte for byte what a
// build before the registry wrote (and reads).
const (
	mapVersion  = 1
	mapVersion2 = 2
	opVersion   = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode returns the map's binary form:
//
//	field      width      meaning
//	---------  ---------  ----------------------------------------------
//	magic      2          "SM"
//	version    1          mapVersion
//	epoch      uvarint    Epoch
//	shards     uvarint    number of shards, then each shard (appendShard)
//	ranges     uvarint    number of ranges, then each:
//	  from     2          first slot, big-endian
//	  to       2          last slot, big-endian
//	  shard    uvarint    shard id
//	nodes      uvarint    version 2 only: number of registered nodes, then
//	                      each as a shard's replica (below)
//	crc        4          CRC-32C of everything before, big-endian
//
// Version 1 has no nodes field; Encode writes it when Nodes is empty.
//
// A shard (appendShard):
//
//	field      width      meaning
//	---------  ---------  ----------------------------------------------
//	id         uvarint    shard id
//	leader     uvarint    leader hint (0: unknown)
//	term       uvarint    the hint's Raft term
//	replicas   uvarint    number of replicas, then each:
//	  id       uvarint    replica id
//	  raft     uvarint+n  Raft address
//	  client   uvarint+n  client address
func (m *Map) Encode() []byte { return m.AppendEncoded(nil) }

// AppendEncoded appends Encode's form of m to dst.
func (m *Map) AppendEncoded(dst []byte) []byte {
	start := len(dst)
	v := byte(mapVersion)
	if len(m.Nodes) > 0 {
		v = mapVersion2
	}
	dst = append(dst, 'S', 'M', v)
	dst = binary.AppendUvarint(dst, m.Epoch)
	dst = binary.AppendUvarint(dst, uint64(len(m.Shards)))
	for _, s := range m.Shards {
		dst = appendShard(dst, s)
	}
	dst = appendRanges(dst, m.Ranges)
	if v == mapVersion2 {
		dst = appendReplicas(dst, m.Nodes)
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

func appendShard(dst []byte, s Shard) []byte {
	dst = binary.AppendUvarint(dst, uint64(s.ID))
	dst = binary.AppendUvarint(dst, s.Leader)
	dst = binary.AppendUvarint(dst, s.LeaderTerm)
	return appendReplicas(dst, s.Replicas)
}

func appendReplicas(dst []byte, rs []Replica) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(rs)))
	for _, r := range rs {
		dst = binary.AppendUvarint(dst, r.ID)
		dst = appendString(dst, r.RaftAddr)
		dst = appendString(dst, r.ClientAddr)
	}
	return dst
}

func appendRanges(dst []byte, rs []Range) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(rs)))
	for _, r := range rs {
		dst = binary.BigEndian.AppendUint16(dst, r.From)
		dst = binary.BigEndian.AppendUint16(dst, r.To)
		dst = binary.AppendUvarint(dst, uint64(r.Shard))
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// Decode decodes Encode's form and validates it: damaged bytes give
// ErrCorrupt, a well-formed encoding of an invalid map ErrInvalidMap.
func Decode(b []byte) (*Map, error) {
	body, err := checkFrame(b, 'M', mapVersion, mapVersion2)
	if err != nil {
		return nil, err
	}
	d := decoder{b: body[1:]}
	m := &Map{Epoch: d.uvarint()}
	n := d.count(4)
	for range n {
		m.Shards = append(m.Shards, d.shard())
	}
	m.Ranges = d.ranges()
	if body[0] == mapVersion2 {
		m.Nodes = d.replicas()
		if d.err == nil && len(m.Nodes) == 0 {
			d.fail("version 2 without nodes") // Encode writes version 1 then
		}
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// checkFrame checks the magic, version (one of versions) and CRC of an
// encoding and returns the version byte and what follows it, up to the
// CRC.
func checkFrame(b []byte, kind byte, versions ...byte) ([]byte, error) {
	if len(b) < 3+4 {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(b))
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	if body[0] != 'S' || body[1] != kind {
		return nil, fmt.Errorf("%w: magic %q", ErrCorrupt, body[:2])
	}
	if !slices.Contains(versions, body[2]) {
		return nil, fmt.Errorf("%w: version %d", ErrCorrupt, body[2])
	}
	return body[2:], nil
}

// decoder reads fields, remembering the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads an element count, refusing one that the remaining bytes
// cannot hold (each element takes at least min bytes).
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/min) {
		d.fail("count beyond the data")
		return 0
	}
	return int(n)
}

func (d *decoder) u32() uint32 {
	v := d.uvarint()
	if v > 1<<32-1 {
		d.fail("id beyond 32 bits")
	}
	return uint32(v)
}

func (d *decoder) u16() uint16 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 2 {
		d.fail("truncated")
		return 0
	}
	v := binary.BigEndian.Uint16(d.b)
	d.b = d.b[2:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("string beyond the data")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("bytes beyond the data")
		return nil
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

func (d *decoder) shard() Shard {
	s := Shard{ID: d.u32(), Leader: d.uvarint(), LeaderTerm: d.uvarint()}
	s.Replicas = d.replicas()
	return s
}

func (d *decoder) replicas() []Replica {
	n := d.count(3)
	var rs []Replica
	for range n {
		rs = append(rs, Replica{ID: d.uvarint(), RaftAddr: d.str(), ClientAddr: d.str()})
	}
	return rs
}

func (d *decoder) ranges() []Range {
	n := d.count(5)
	var rs []Range
	for range n {
		rs = append(rs, Range{From: d.u16(), To: d.u16(), Shard: d.u32()})
	}
	return rs
}

func (d *decoder) finish() error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(d.b))
	}
	return nil
}

// Encode returns the op's binary form:
//
//	field      width      meaning
//	---------  ---------  ----------------------------------------------
//	magic      2          "SO"
//	version    1          opVersion
//	kind       1          Kind
//	body                  by kind:
//	  create        uvarint+n  the map (Map.Encode)
//	  set-leader    uvarint ×3 shard, replica, term
//	  set-replicas  uvarint    shard, then the replicas as in a map's shard
//	  add-shard                the shard as in a map (appendShard)
//	  assign-slots             the ranges as in a map
//	  add-node                 the node as one replica of a shard (id
//	                           uvarint, raft and client uvarint+n)
//	crc        4          CRC-32C of everything before, big-endian
//
// An op of an unknown kind, or Create of a nil map, encodes with an empty
// body (DecodeOp refuses the first, Apply the second).
func (o Op) Encode() []byte {
	dst := []byte{'S', 'O', opVersion, byte(o.Kind)}
	switch o.Kind {
	case KindCreate:
		var mb []byte
		if o.Map != nil {
			mb = o.Map.Encode()
		}
		dst = binary.AppendUvarint(dst, uint64(len(mb)))
		dst = append(dst, mb...)
	case KindSetLeader:
		dst = binary.AppendUvarint(dst, uint64(o.Shard))
		dst = binary.AppendUvarint(dst, o.Replica)
		dst = binary.AppendUvarint(dst, o.Term)
	case KindSetReplicas:
		dst = binary.AppendUvarint(dst, uint64(o.Shard))
		dst = appendReplicas(dst, o.Replicas)
	case KindAddShard:
		dst = appendShard(dst, o.Add)
	case KindAssignSlots:
		dst = appendRanges(dst, o.Ranges)
	case KindAddNode:
		dst = binary.AppendUvarint(dst, o.Node.ID)
		dst = appendString(dst, o.Node.RaftAddr)
		dst = appendString(dst, o.Node.ClientAddr)
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst, castagnoli))
}

// DecodeOp decodes Op.Encode's form (ErrCorrupt if damaged). The op is
// not checked against any map: Apply does that.
func DecodeOp(b []byte) (Op, error) {
	body, err := checkFrame(b, 'O', opVersion)
	if err != nil {
		return Op{}, err
	}
	body = body[1:]
	if len(body) < 1 {
		return Op{}, fmt.Errorf("%w: no kind", ErrCorrupt)
	}
	o := Op{Kind: Kind(body[0])}
	d := decoder{b: body[1:]}
	switch o.Kind {
	case KindCreate:
		mb := d.bytes()
		if d.err == nil && len(mb) > 0 {
			m, err := Decode(mb)
			if err != nil {
				return Op{}, err
			}
			o.Map = m
		}
	case KindSetLeader:
		o.Shard, o.Replica, o.Term = d.u32(), d.uvarint(), d.uvarint()
	case KindSetReplicas:
		o.Shard = d.u32()
		o.Replicas = d.replicas()
	case KindAddShard:
		o.Add = d.shard()
	case KindAssignSlots:
		o.Ranges = d.ranges()
	case KindAddNode:
		o.Node = Replica{ID: d.uvarint(), RaftAddr: d.str(), ClientAddr: d.str()}
	default:
		return Op{}, fmt.Errorf("%w: op kind %d", ErrCorrupt, body[0])
	}
	if err := d.finish(); err != nil {
		return Op{}, err
	}
	return o, nil
}
