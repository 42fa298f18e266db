package store

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/prometheus/client_golang/prometheus"
)

// memLog is an in-memory file for Pebble's LogWriter.
type memLog struct{ bytes.Buffer }

func (m *memLog) Sync() error  { return nil }
func (m *memLog) Close() error { return nil }

// newLogWriter calls record.NewLogWriter, whose log number parameter has a
// type internal to Pebble: inference names it for us (as newRecordReader).
func newLogWriter[N ~uint64](newWriter func(io.Writer, N, record.LogWriterConfig) *record.LogWriter,
	w io.Writer, num uint32) *record.LogWriter {
	return newWriter(w, N(num), record.LogWriterConfig{
		WriteWALSyncOffsets: func() bool { return true },
		WALFsyncLatency:     prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x"}),
	})
}

// writeWAL writes records of the given payload sizes, each synced, and
// closes the log cleanly (its EOF trailer) if close.
func writeWAL(t *testing.T, num uint32, sizes []int, close bool) []byte {
	t.Helper()
	var f memLog
	w := newLogWriter(record.NewLogWriter, &f, num)
	for i, n := range sizes {
		var wg sync.WaitGroup
		var err error
		wg.Add(1)
		if _, e := w.SyncRecord(bytes.Repeat([]byte{byte('a' + i)}, n), &wg, &err); e != nil {
			t.Fatal(e)
		}
		wg.Wait()
		must(t, err)
	}
	if close {
		must(t, w.Close())
	}
	return bytes.Clone(f.Bytes())
}

// A log closed cleanly whose last chunk leaves fewer bytes than a chunk
// header in its block has its EOF trailer at the next block: that is a
// clean end, not damage proven by the trailer (found by a crash loop:
// every such store failed to open). A byte flipped in the last record is
// still damage the trailer proves.
func TestLogCheckTrailerAfterPadding(t *testing.T) {
	const num = 120
	b := writeWAL(t, num, []int{100, logBlockSize - 2*walSyncHeaderSize - 100 - 2}, true)
	if len(b) != logBlockSize+recyclableHdrSize {
		t.Fatalf("log of %d bytes: the trailer did not move to the next block", len(b))
	}
	if err := checkRecordLog(bytes.NewReader(b), int64(len(b)), "x", logWAL, num); err != nil {
		t.Fatalf("clean log: %v", err)
	}
	bad := bytes.Clone(b)
	bad[logBlockSize-100] ^= 1
	if err := checkRecordLog(bytes.NewReader(bad), int64(len(bad)), "x", logWAL, num); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged last record of a cleanly closed log: %v", err)
	}
}

// Bytes shaped like an EOF trailer inside stale data (a recycled WAL holds
// older logs' bytes past its end) prove nothing: a torn end followed by
// such bytes is a crash, and replay stops there.
func TestLogCheckStaleTrailerBytes(t *testing.T) {
	const num = 24
	b := writeWAL(t, num, []int{50, 60}, false)
	torn := len(b)
	b = append(b, make([]byte, 300)...) // the crash dropped what came next
	fake := []byte{0, 0, 0, 0, 0, 0, chunkFullRecyclable, num + 1, 0, 0, 0}
	copy(b[torn+37:], fake) // stale bytes, at no chunk boundary
	copy(b[torn+150:], fake)
	if err := checkRecordLog(bytes.NewReader(b), int64(len(b)), "x", logWAL, num); err != nil {
		t.Fatalf("torn log with trailer-shaped stale bytes: %v", err)
	}
}
