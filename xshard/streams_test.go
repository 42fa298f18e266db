package xshard

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tallydb/tally/store"
)

// env is one shard's store with its streams, and the entry index its
// applies use (each call is one replicated entry).
type env struct {
	t     *testing.T
	dir   string
	db    *store.DB
	s     *Streams
	entry uint64
}

func newEnv(t *testing.T, self uint32) *env {
	t.Helper()
	e := &env{t: t, dir: filepath.Join(t.TempDir(), "db")}
	e.open(self)
	t.Cleanup(func() { e.db.Close() })
	return e
}

func (e *env) open(self uint32) {
	e.t.Helper()
	db, err := store.Open(e.dir, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := db.Counter("msgs"); err != nil {
		if err := db.CreateCounter("msgs", store.CounterOptions{}); err != nil {
			e.t.Fatal(err)
		}
		if err := db.AddColumn("msgs", "n", store.ColumnOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	s, err := Open(db, self, &Options{Now: func() time.Time { return time.UnixMilli(1000) }, MaxPending: 8})
	if err != nil {
		e.t.Fatal(err)
	}
	e.db, e.s = db, s
	e.entry = max(e.entry, db.AppliedIndex())
}

// reopen closes the store and opens it again (a restart).
func (e *env) reopen() {
	e.t.Helper()
	self := e.s.Self()
	if err := e.db.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.open(self)
}

// apply runs fn as the next replicated entry.
func (e *env) apply(fn func() error) error {
	e.entry++
	return e.db.ApplyEntry(e.entry, fn)
}

// applyAt runs fn as entry index (a re-apply after a restart).
func (e *env) applyAt(index uint64, fn func() error) error {
	return e.db.ApplyEntry(index, fn)
}

// incr is a message's nested apply: it adds 1 to row id of "msgs" (argv
// is INCR id), in a commit of its own.
func (e *env) incr(_ int, argv [][]byte) error {
	id, err := strconv.ParseUint(string(argv[1]), 10, 64)
	if err != nil {
		return err
	}
	b := e.db.NewBatch()
	defer b.Close()
	if err := b.Incr("msgs", id, "n", 1); err != nil {
		return err
	}
	return b.Commit()
}

func (e *env) count(id uint64) uint64 {
	e.t.Helper()
	c, err := e.db.Counter("msgs")
	if err != nil {
		e.t.Fatal(err)
	}
	v, err := c.GetColumn(id, "n")
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

func msgsFor(from, n int) [][][]byte {
	var out [][][]byte
	for i := range n {
		out = append(out, [][]byte{[]byte("INCR"), []byte(fmt.Sprint(from + i))})
	}
	return out
}

func (e *env) receive(src uint32, first uint64, msgs [][][]byte) (uint64, error) {
	var last uint64
	err := e.apply(func() (err error) {
		last, err = e.s.Receive(src, first, msgs, e.incr)
		return err
	})
	return last, err
}

func TestReceiveOrderDedupeGap(t *testing.T) {
	e := newEnv(t, 2)
	if last, err := e.receive(1, 1, msgsFor(1, 3)); err != nil || last != 3 {
		t.Fatalf("first batch: %d, %v", last, err)
	}
	// A resend overlapping what was applied applies only the new tail.
	if last, err := e.receive(1, 2, msgsFor(2, 4)); err != nil || last != 5 {
		t.Fatalf("overlap: %d, %v", last, err)
	}
	// A resend of old messages only applies nothing.
	if last, err := e.receive(1, 1, msgsFor(1, 2)); err != nil || last != 5 {
		t.Fatalf("old: %d, %v", last, err)
	}
	// A gap is refused, with the last applied.
	last, err := e.receive(1, 7, msgsFor(7, 1))
	if !errors.Is(err, ErrGap) || last != 5 {
		t.Fatalf("gap: %d, %v", last, err)
	}
	for id := uint64(1); id <= 7; id++ {
		want := uint64(1)
		if id > 5 {
			want = 0
		}
		if got := e.count(id); got != want {
			t.Errorf("message %d applied %d times, want %d", id, got, want)
		}
	}
	// Sources are independent.
	if last, err := e.receive(3, 1, msgsFor(100, 1)); err != nil || last != 1 {
		t.Fatalf("other source: %d, %v", last, err)
	}
	if got, _ := e.s.LastApplied(1); got != 5 {
		t.Fatalf("LastApplied(1) = %d", got)
	}
	e.reopen()
	if got, _ := e.s.LastApplied(1); got != 5 {
		t.Fatalf("after reopen LastApplied(1) = %d", got)
	}
	if last, err := e.receive(1, 6, msgsFor(6, 1)); err != nil || last != 6 {
		t.Fatalf("after reopen: %d, %v", last, err)
	}
	if e.count(6) != 1 {
		t.Fatal("message 6 not applied once")
	}
}

func TestReceiveBadInputChangesNothing(t *testing.T) {
	e := newEnv(t, 2)
	big := make([]byte, MaxMessageBytes+1)
	cases := []struct {
		name  string
		src   uint32
		first uint64
		msgs  [][][]byte
		want  error
	}{
		{"source 0", 0, 1, msgsFor(1, 1), ErrBadShard},
		{"own shard", 2, 1, msgsFor(1, 1), ErrBadShard},
		{"first 0", 1, 0, msgsFor(1, 1), ErrBadMessage},
		{"no messages", 1, 1, nil, ErrBadMessage},
		{"empty argv", 1, 1, [][][]byte{{}}, ErrBadMessage},
		{"empty name", 1, 1, [][][]byte{{{}}}, ErrBadMessage},
		{"too big", 1, 1, [][][]byte{{[]byte("X"), big}}, ErrBadMessage},
		{"too many", 1, 1, msgsFor(1, MaxBatchMessages+1), ErrBadMessage},
		{"wraps", 1, ^uint64(0), msgsFor(1, 2), ErrBadMessage},
	}
	for _, c := range cases {
		applied := e.db.AppliedIndex()
		_, err := e.receive(c.src, c.first, c.msgs)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if e.db.AppliedIndex() != applied {
			t.Errorf("%s: committed something", c.name)
		}
	}
	if st, err := e.s.Status(time.Now()); err != nil || len(st.Sources) != 0 || len(st.Targets) != 0 {
		t.Fatalf("status after bad input: %+v, %v", st, err)
	}
}

func TestReceiveTwicePerEntryRefused(t *testing.T) {
	e := newEnv(t, 2)
	var err2 error
	err := e.apply(func() error {
		if _, err := e.s.Receive(1, 1, msgsFor(1, 2), e.incr); err != nil {
			return err
		}
		_, err2 = e.s.Receive(1, 3, msgsFor(3, 1), e.incr)
		// Another source in the same entry is fine.
		_, err := e.s.Receive(3, 1, msgsFor(10, 1), e.incr)
		return err
	})
	if err != nil || !errors.Is(err2, ErrRepeated) {
		t.Fatalf("got %v, %v", err, err2)
	}
	if e.count(3) != 0 || e.count(10) != 1 {
		t.Fatal("refused receive applied, or the other source did not")
	}
}

var errCrash = errors.New("crash")

// TestReceiveReapplyAfterCrash stops an XRECV entry after each number of
// its messages (as a crash would: the commits made so far are in the
// store, the rest are not), restarts the store and applies the entry
// again, as a replica does from AppliedIndex: every message must apply
// exactly once, including those the entry had already applied and those
// an earlier entry had.
func TestReceiveReapplyAfterCrash(t *testing.T) {
	const n = 6
	for crashAfter := 0; crashAfter <= n; crashAfter++ {
		t.Run(fmt.Sprint(crashAfter), func(t *testing.T) {
			e := newEnv(t, 2)
			// Messages 1-2 were applied by an earlier entry; this one
			// resends them with 3-6.
			if _, err := e.receive(1, 1, msgsFor(1, 2)); err != nil {
				t.Fatal(err)
			}
			e.entry++
			index := e.entry
			ran := 0
			err := e.applyAt(index, func() error {
				_, err := e.s.Receive(1, 1, msgsFor(1, n), func(i int, argv [][]byte) error {
					if ran == crashAfter {
						return errCrash
					}
					ran++
					return e.incr(i, argv)
				})
				return err
			})
			if crashAfter < n-2 && !errors.Is(err, errCrash) {
				t.Fatalf("first apply: %v", err)
			}
			e.reopen()
			var last uint64
			if err := e.applyAt(index, func() (err error) {
				last, err = e.s.Receive(1, 1, msgsFor(1, n), e.incr)
				return err
			}); err != nil || last != n {
				t.Fatalf("re-apply: %d, %v", last, err)
			}
			for id := uint64(1); id <= n; id++ {
				if got := e.count(id); got != 1 {
					t.Errorf("message %d applied %d times", id, got)
				}
			}
			// And a later entry continues the stream.
			if last, err := e.receive(1, n+1, msgsFor(n+1, 1)); err != nil || last != n+1 || e.count(n+1) != 1 {
				t.Fatalf("next: %d, %v", last, err)
			}
		})
	}
}

func TestOutboxAppendAckPending(t *testing.T) {
	e := newEnv(t, 1)
	var seqs []uint64
	if err := e.apply(func() error {
		b := e.db.NewBatch()
		defer b.Close()
		st := e.s.Stage(b)
		for i := range 3 {
			seq, err := st.Append(2, [][]byte{[]byte("INCR"), []byte(fmt.Sprint(i))})
			if err != nil {
				return err
			}
			seqs = append(seqs, seq)
		}
		seq, err := st.Append(3, [][]byte{[]byte("INCR"), []byte("9")})
		seqs = append(seqs, seq)
		if err != nil {
			return err
		}
		return b.Commit()
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seqs) != "[1 2 3 1]" {
		t.Fatalf("sequences %v", seqs)
	}
	first, msgs, err := e.s.Pending(2, 2, 1<<20)
	if err != nil || first != 1 || len(msgs) != 2 || string(msgs[1][1]) != "1" {
		t.Fatalf("pending: %d %q %v", first, msgs, err)
	}
	if err := e.apply(func() error { return e.s.Ack(2, 2) }); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	first, msgs, err = e.s.Pending(2, 10, 1<<20)
	if err != nil || first != 3 || len(msgs) != 1 || string(msgs[0][1]) != "2" {
		t.Fatalf("pending after ack: %d %q %v", first, msgs, err)
	}
	// An old ack changes nothing; one past the last is refused.
	if err := e.apply(func() error { return e.s.Ack(2, 1) }); err != nil {
		t.Fatal(err)
	}
	if err := e.apply(func() error { return e.s.Ack(2, 4) }); !errors.Is(err, ErrBadAck) {
		t.Fatalf("ack past last: %v", err)
	}
	st, err := e.s.Status(time.UnixMilli(3000))
	if err != nil {
		t.Fatal(err)
	}
	want := "{Targets:[{Target:2 Pending:1 LastAppended:3 LastAcked:2 OldestAge:2s} {Target:3 Pending:1 LastAppended:1 LastAcked:0 OldestAge:2s}] Sources:[]}"
	if got := fmt.Sprintf("%+v", st); got != want {
		t.Fatalf("status\n got %s\nwant %s", got, want)
	}
	if err := e.apply(func() error { return e.s.Ack(2, 3) }); err != nil {
		t.Fatal(err)
	}
	if first, msgs, err := e.s.Pending(2, 10, 1<<20); err != nil || first != 4 || len(msgs) != 0 {
		t.Fatalf("pending after full ack: %d %q %v", first, msgs, err)
	}
	// The next append continues the numbering.
	if seq, err := e.s.Append(2, [][]byte{[]byte("X")}); err != nil || seq != 4 {
		t.Fatalf("append after ack: %d, %v", seq, err)
	}
}

func TestOutboxBadInputAndBound(t *testing.T) {
	e := newEnv(t, 1)
	bad := []struct {
		target uint32
		argv   [][]byte
		want   error
	}{
		{0, [][]byte{[]byte("X")}, ErrBadShard},
		{1, [][]byte{[]byte("X")}, ErrBadShard},
		{2, nil, ErrBadMessage},
		{2, [][]byte{{}}, ErrBadMessage},
		{2, [][]byte{[]byte("X"), make([]byte, MaxMessageBytes)}, ErrBadMessage},
		{2, make([][]byte, MaxArgs+1), ErrBadMessage},
	}
	for _, c := range bad {
		b := e.db.NewBatch()
		if _, err := e.s.Stage(b).Append(c.target, c.argv); !errors.Is(err, c.want) {
			t.Errorf("Append(%d, %d args): %v, want %v", c.target, len(c.argv), err, c.want)
		}
		if !b.Empty() {
			t.Errorf("Append(%d) left writes in the batch", c.target)
		}
		b.Close()
	}
	for i := range 8 {
		if _, err := e.s.Append(2, [][]byte{[]byte("X"), []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.s.Append(2, [][]byte{[]byte("X")}); !errors.Is(err, ErrOutboxFull) {
		t.Fatalf("append past MaxPending: %v", err)
	}
	st, _ := e.s.Status(time.UnixMilli(1000))
	if len(st.Targets) != 1 || st.Targets[0].Pending != 8 {
		t.Fatalf("status %+v", st)
	}
}

func TestBatchEncoding(t *testing.T) {
	msgs := [][][]byte{{[]byte("HINCRBY"), []byte("k"), []byte("f"), []byte("1")}, {[]byte("X"), {}}}
	enc := AppendBatch([]byte("pre"), msgs)
	got, err := DecodeBatch(enc[3:])
	if err != nil || fmt.Sprintf("%q", got) != fmt.Sprintf("%q", msgs) {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	// Golden: a format change must be deliberate.
	if g := fmt.Sprintf("%x", enc[3:]); g != "0102040748494e43524259016b016601310201580014c70bd9" {
		t.Errorf("encoding changed: %s", g)
	}
	for i := range len(enc) - 3 {
		damaged := append([]byte(nil), enc[3:]...)
		damaged[i] ^= 0x40
		if _, err := DecodeBatch(damaged); !errors.Is(err, ErrBadMessage) {
			t.Errorf("flip at %d: %v", i, err)
		}
		if _, err := DecodeBatch(enc[3 : 3+i]); !errors.Is(err, ErrBadMessage) {
			t.Errorf("truncated to %d: %v", i, err)
		}
	}
}
