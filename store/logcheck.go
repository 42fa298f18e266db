package store

// Damage in Pebble's record logs (the WAL and the MANIFEST).
//
// Pebble reads both with record.Reader and stops at the first chunk it
// cannot read. For the newest WAL that is the expected end of a log cut
// short by a crash, and for the MANIFEST Pebble treats any bad record as the
// end (version_set.go: "if err == io.EOF || record.IsInvalidRecord(err)
// { break }"). So one flipped byte in the middle of either silently drops
// everything after it: acknowledged writes (WAL) or whole flushes and
// compactions (MANIFEST, whose newer sstables are then deleted as obsolete).
//
// Pebble does disambiguate a WAL with sync offsets (FormatWALSyncChunks:
// every chunk records how far the log had been synced when it was written),
// but its read-ahead only looks at the 32 KiB blocks after the damaged one,
// so a small WAL, or damage in the last block, is never confirmed.
//
// checkRecordLog runs before Pebble replays a log (storeFS.Open calls it
// while Pebble opens). It reads the log with Pebble's record.Reader; at the
// first bad chunk it scans the rest of the file, byte by byte, for proof that
// the bad bytes had been durable:
//
//   - WAL: a valid sync chunk (right log number, CRC, type) whose synced
//     offset lies past the bad record, or the EOF trailer Pebble writes when
//     it closes a log cleanly. Either says the bytes at the bad offset were
//     synced before, so they were whole on disk and are now damaged. The
//     trailer has no checksum, so it counts only where a walk of chunk
//     headers from the bad chunk (its length, then valid chunks of this log)
//     ends on it: trailer-shaped bytes found by scanning (stale data of an
//     older log in a recycled file) prove nothing. A clean end whose trailer
//     sits after block padding (the last chunk left less than a header in
//     its block) is a clean end, not damage.
//   - MANIFEST: a valid chunk that starts a later record. The MANIFEST is
//     synced after every record, so a later record means the bad one had
//     been synced.
//
// Without proof the bad chunk is a torn end and replay stops there, as
// Pebble would. What this cannot see: damage in the last records of the
// newest WAL that no later chunk vouches for (after a crash, the records of
// the final group commit; after a clean close the trailer vouches for
// everything), and damage in the last MANIFEST record. Those look exactly
// like a write cut short by a crash. docs/FAULTS.md lists the cases.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/internal/checksum"
)

// The record log wire format (pebble/record/record.go), as far as the scan
// needs it. Chunks never cross a 32 KiB block.
const (
	logBlockSize        = 32 << 10
	legacyHeaderSize    = 7  // crc u32 | length u16 | type u8
	recyclableHdrSize   = 11 // + log number u32
	walSyncHeaderSize   = 19 // + synced offset u64
	chunkFullLegacy     = 1
	chunkFirstLegacy    = 2
	chunkFullRecyclable = 5 // also the EOF trailer's type
	chunkFullWALSync    = 9
	chunkLastWALSync    = 12
)

type logKind int

const (
	logWAL logKind = iota
	logManifest
)

// recordLogKind tells whether Pebble file name (a base name) is a WAL or a
// MANIFEST, and returns a WAL's log number.
func recordLogKind(name string) (kind logKind, num uint32, ok bool) {
	switch {
	case strings.HasPrefix(name, "MANIFEST-"):
		return logManifest, 0, true
	case strings.HasSuffix(name, ".log"):
		n, err := strconv.ParseUint(strings.TrimSuffix(name, ".log"), 10, 32)
		if err != nil {
			return 0, 0, false // a failover segment ("000012-001.log"): not used by tally
		}
		return logWAL, uint32(n), true
	}
	return 0, 0, false
}

// checkRecordLog reads the record log f (of size bytes) and returns an error
// wrapping ErrCorrupt if it is damaged before data that was durable. Other
// errors are I/O errors.
func checkRecordLog(f io.ReaderAt, size int64, path string, kind logKind, num uint32) error {
	rr := newRecordReader(record.NewReader, io.NewSectionReader(f, 0, size), num)
	for {
		start := rr.Offset()
		r, err := rr.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
			// A clean end, or a damaged log number that reads as the
			// next log's number (the EOF trailer's mark): only proof
			// of durable data after it tells the two apart. NB: the
			// trailer is at start, or at the next block when fewer
			// bytes than a chunk header were left in this one (block
			// padding); the scan for proof starts after it, or the
			// trailer would be taken for proof of itself.
			at := start
			if rem := logBlockSize - start%logBlockSize; kind == logWAL && rem < recyclableHdrSize {
				at += rem
			}
			damaged, serr := durableAfter(f, size, at, kind, num)
			if serr != nil {
				return fmt.Errorf("tally: read %s: %w", path, serr)
			}
			if !damaged {
				return nil
			}
			err = record.ErrInvalidChunk
		case !record.IsInvalidRecord(err):
			return fmt.Errorf("tally: read %s: %w", path, err)
		}
		// Pebble's own read-ahead (WAL sync chunks in later blocks) may
		// already have confirmed the damage; it reports ErrUnexpectedEOF
		// when it could not.
		confirmed := kind == logWAL && !errors.Is(err, record.ErrUnexpectedEOF)
		if errors.Is(err, io.EOF) {
			confirmed = true // by the scan above
		}
		if !confirmed {
			var serr error
			if confirmed, serr = durableAfter(f, size, start, kind, num); serr != nil {
				return fmt.Errorf("tally: read %s: %w", path, serr)
			}
		}
		if !confirmed {
			return nil // a torn end: replay stops here, as after any crash
		}
		what := "records synced after it"
		if kind == logManifest {
			what = "later records"
		}
		detail := ""
		if !errors.Is(err, record.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			detail = " (" + firstLine(err.Error()) + ")"
		}
		// NB: the record error must not be in the chain: Pebble reads
		// record.ErrUnexpectedEOF from the newest WAL as a torn end and
		// would replay up to here after all.
		return &pebbleError{ErrCorrupt, fmt.Sprintf("%s: damaged record at offset %d, followed by %s: replaying would silently drop them%s",
			path, start, what, detail), nil}
	}
}

// durableAfter scans the log after offset bad for proof that the bytes at
// bad had been synced (see the file comment): a valid chunk that records a
// synced offset past bad (WAL), a later record (MANIFEST), or, for a WAL,
// the EOF trailer of a clean close reached from bad by walking chunk
// headers (trailerAfter).
func durableAfter(f io.ReaderAt, size, bad int64, kind logKind, num uint32) (bool, error) {
	buf := make([]byte, logBlockSize)
	if kind == logWAL {
		if ok, err := trailerAfter(f, size, bad, num, buf); ok || err != nil {
			return ok, err
		}
	}
	for block := bad / logBlockSize * logBlockSize; block < size; block += logBlockSize {
		n, err := f.ReadAt(buf[:min(logBlockSize, size-block)], block)
		if err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
		b := buf[:n]
		from := 0
		if block <= bad {
			from = int(bad-block) + 1
		}
		for i := from; i+legacyHeaderSize <= len(b); i++ {
			if provesDurable(b, i, bad, kind, num) {
				return true, nil
			}
		}
	}
	return false, nil
}

// trailerAfter walks chunk headers from the damaged chunk at bad (its length
// field, then valid chunks of this log only) and reports whether the walk
// ends at the EOF trailer of a clean close: then the damaged bytes were
// written before the close, which synced them. NB: the trailer carries no
// checksum, so one found by scanning bytes proves nothing: a recycled WAL
// holds stale bytes of older logs, and those can look like a trailer (the
// crash simulation found one).
func trailerAfter(f io.ReaderAt, size, bad int64, num uint32, buf []byte) (bool, error) {
	hdr := buf[:walSyncHeaderSize]
	pos := bad
	for step := 0; ; step++ {
		if rem := logBlockSize - pos%logBlockSize; rem < recyclableHdrSize {
			pos += rem // block padding
		}
		if pos+recyclableHdrSize > size {
			return false, nil
		}
		n, err := f.ReadAt(hdr[:min(int64(walSyncHeaderSize), size-pos)], pos)
		if err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
		h := hdr[:n]
		typ, length := h[6], int64(binary.LittleEndian.Uint16(h[4:]))
		logNum := binary.LittleEndian.Uint32(h[7:])
		if step > 0 && typ == chunkFullRecyclable && length == 0 && logNum == num+1 && binary.LittleEndian.Uint32(h) == 0 {
			return true, nil
		}
		if typ < chunkFullWALSync || typ > chunkLastWALSync || n < walSyncHeaderSize {
			return false, nil
		}
		end := pos + walSyncHeaderSize + length
		if end > size || end > pos/logBlockSize*logBlockSize+logBlockSize {
			return false, nil
		}
		if step > 0 { // after the damaged chunk, only valid chunks of this log
			chunk := make([]byte, end-pos)
			if _, err := f.ReadAt(chunk, pos); err != nil {
				return false, err
			}
			if logNum != num || maskedCRC(chunk[6:]) != binary.LittleEndian.Uint32(chunk) {
				return false, nil
			}
		}
		pos = end
	}
}

// provesDurable reports whether a chunk that proves durability starts at
// b[i:] (b is one block): a valid chunk starting a MANIFEST record, or a
// valid WAL sync chunk of this log recording a synced offset past bad.
func provesDurable(b []byte, i int, bad int64, kind logKind, num uint32) bool {
	typ := b[i+6]
	length := int(binary.LittleEndian.Uint16(b[i+4:]))
	crc := binary.LittleEndian.Uint32(b[i:])
	if kind == logManifest {
		if typ != chunkFullLegacy && typ != chunkFirstLegacy {
			return false
		}
		end := i + legacyHeaderSize + length
		return end <= len(b) && maskedCRC(b[i+6:end]) == crc
	}
	if i+walSyncHeaderSize > len(b) {
		return false
	}
	logNum := binary.LittleEndian.Uint32(b[i+7:])
	if typ < chunkFullWALSync || typ > chunkLastWALSync || logNum != num {
		return false
	}
	end := i + walSyncHeaderSize + length
	if end > len(b) || maskedCRC(b[i+6:end]) != crc {
		return false
	}
	return int64(binary.LittleEndian.Uint64(b[i+11:])) > bad
}

// newRecordReader calls record.NewReader, whose log number parameter has a
// type internal to Pebble (base.DiskFileNum): inference names it for us.
func newRecordReader[N ~uint64](newReader func(io.Reader, N) *record.Reader, r io.Reader, num uint32) *record.Reader {
	return newReader(r, N(num))
}

// maskedCRC is the record format's checksum: CRC-32C, rotated and offset
// (pebble/internal/crc).
func maskedCRC(b []byte) uint32 {
	c := checksum.CRC32C(b)
	return (c>>15 | c<<17) + 0xa282ead8
}

// checkRecordLogFile opens path on fs and checks it.
func checkRecordLogFile(fs vfs.FS, path string, kind logKind, num uint32) error {
	f, err := fs.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	return checkRecordLog(f, st.Size(), path, kind, num)
}
