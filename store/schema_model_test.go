package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tallydb/tally/internal/limits"
	"github.com/tallydb/tally/internal/testutil"
)

// The schema model test (issue 12, "Tests that would have caught them"):
// random CreateCounter and AddColumn with options at and just past every
// limit, interleaved with writes, loads, seals, merges, checkpoints, clean
// reopens and crashes. After every step the store's invariants hold
// (Check) and its schema equals the model's; every refused change returned
// the named error the documented rules predict and left the schema, the
// data and the log as they were; every accepted change survives reopen and
// crash; and the store always reopens.
//
// The model decides acceptance from the documented limits on its own
// (modelCreate, modelAddColumn), so a rule the store forgets or invents is
// a failure, not a silently shared bug.

// chooser drives the simulation: a seeded RNG in TestSchemaModel, the
// fuzzer's bytes in FuzzSchemaOps.
type chooser interface {
	intn(n int) int
	exhausted() bool
}

type rngChooser struct{ r *rand.Rand }

func (c rngChooser) intn(n int) int  { return c.r.IntN(n) }
func (c rngChooser) exhausted() bool { return false }

// byteChooser takes each choice from the next byte (two for n > 256);
// once the bytes run out every choice is 0 and exhausted reports true.
type byteChooser struct{ b []byte }

func (c *byteChooser) intn(n int) int {
	v := 0
	for k := 0; k < 1 || k < 2 && n > 256; k++ {
		if len(c.b) > 0 {
			v = v<<8 | int(c.b[0])
			c.b = c.b[1:]
		}
	}
	return v % n
}

func (c *byteChooser) exhausted() bool { return len(c.b) == 0 }

// Edge values the simulation draws from: at and just past every limit.
// oneOf takes one of the first nValid (the accepted values) two times in
// three, so accepted changes are common enough to reach 16 columns.
var (
	schemaRangeBits = []uint8{0, limits.MinRangeBits, 12, 32, limits.MaxRangeBits, limits.MinRangeBits - 1, limits.MaxRangeBits + 1, 255}
	simHints        = []uint8{0, 8, 16, 32, 7, 12, 64}
	simMaxes        = []uint8{0, 32, 64, 16, 48, 65}
	simAges         = []time.Duration{time.Millisecond, time.Hour, time.Duration(math.MaxInt64).Truncate(time.Millisecond),
		0, 500 * time.Microsecond, time.Nanosecond, 1500 * time.Microsecond, math.MaxInt64, -time.Millisecond}
	simShifts = []uint8{0, 22, limits.MaxIDTimeShift, limits.MaxIDTimeShift + 1, 255}
	simEpochs = []int64{0, 1288834974657, limits.MaxIDTimeMs, limits.MaxIDTimeMs + 1, -1, math.MinInt64}
	simHot    = []int{1, 2, 0, -1}
)

func oneOf[T any](ch chooser, vals []T, nValid int) T {
	if ch.intn(3) != 0 {
		return vals[ch.intn(nValid)]
	}
	return vals[ch.intn(len(vals))]
}

// simName draws a counter or column name: mostly valid ones from a small
// set (so names repeat), else one at or past a rule.
func simName(ch chooser, prefix string, names int) string {
	switch ch.intn(24) {
	case 0:
		return ""
	case 1:
		return prefix[:1] // 1 byte
	case 2:
		return strings.Repeat(prefix[:1], limits.MaxNameLen) // 64 bytes
	case 3:
		return strings.Repeat(prefix[:1], limits.MaxNameLen+1) // 65 bytes
	case 4:
		return []string{prefix + ".x", "-" + prefix, prefix + " x", "é", prefix + "\x00", strings.Repeat("z", 10<<10)}[ch.intn(6)]
	}
	return prefix + strconv.Itoa(ch.intn(names))
}

// modelValidName is the documented name rule, written independently of
// validName.
func modelValidName(s string) bool {
	if len(s) < 1 || len(s) > 64 || s[0] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

type schemaSim struct {
	t    testing.TB
	ch   chooser
	fs   *vfs.MemFS
	opts *Options
	db   *DB
	ctx  context.Context

	infos  []CounterInfo                  // what Counters() must return
	rows   map[string]map[uint64][]uint64 // non-zero rows, by counter
	nextID uint32
	trace  []string // the steps so far, for failure messages
	stats  map[string]int
}

func newSchemaSim(t testing.TB, ch chooser) *schemaSim {
	s := &schemaSim{t: t, ch: ch, fs: vfs.NewCrashableMem(), ctx: context.Background(),
		rows: map[string]map[uint64][]uint64{}, stats: map[string]int{}}
	s.opts = testOptions(s.fs)
	s.opts.ColdBlockSize = 64
	s.opts.CheckpointChunkRows = 5
	db, err := Open("s", s.opts)
	if err != nil {
		t.Fatal(err)
	}
	s.db = db
	return s
}

func (s *schemaSim) fatalf(format string, args ...any) {
	s.t.Helper()
	n := len(s.trace)
	tail := s.trace[max(0, n-12):]
	s.t.Fatalf("step %d: %s\nlast steps:\n  %s", n, fmt.Sprintf(format, args...), strings.Join(tail, "\n  "))
}

func (s *schemaSim) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	s.trace = append(s.trace, msg)
}

func (s *schemaSim) info(name string) *CounterInfo {
	for i := range s.infos {
		if s.infos[i].Name == name {
			return &s.infos[i]
		}
	}
	return nil
}

// refused checks that a change the model refuses fails with want and
// changes neither the schema nor the log.
func (s *schemaSim) refused(what string, want error, do func() error) {
	s.t.Helper()
	before, seq := s.db.Counters(), s.db.Stats().LastSeq
	err := do()
	switch {
	case err == nil:
		s.fatalf("%s accepted, want %v", what, want)
	case !errors.Is(err, want):
		s.fatalf("%s: got %v, want %v", what, err, want)
	case errors.Is(err, ErrCorrupt) || errors.Is(err, ErrFailed):
		s.fatalf("%s: refusal marked as damage or failure: %v", what, err)
	}
	if !slices.EqualFunc(before, s.db.Counters(), counterInfoEqual) {
		s.fatalf("refused %s changed the schema", what)
	}
	if after := s.db.Stats().LastSeq; after != seq {
		s.fatalf("refused %s wrote log records (seq %d -> %d)", what, seq, after)
	}
	s.stats["refused"]++
	s.stats["refused: "+want.Error()]++
}

func (s *schemaSim) accepted(what string, err error) {
	s.t.Helper()
	if err != nil {
		s.fatalf("%s refused: %v", what, err)
	}
}

// modelCreate predicts CreateCounter: the stored schema, or the error.
// The store checks the name, then the options, then that the name is free.
func (s *schemaSim) modelCreate(name string, o CounterOptions) (CounterInfo, error) {
	if !modelValidName(name) {
		return CounterInfo{}, ErrInvalidName
	}
	if o.RangeBits == 0 {
		o.RangeBits = 32
	}
	a := o.Age
	ok := o.RangeBits >= 8 && o.RangeBits <= 48
	switch a.Kind {
	case KeepHot:
		a = AgePolicy{Kind: KeepHot}
	case KeepNewest:
		ok = ok && a.HotRanges >= 1
		a = AgePolicy{Kind: KeepNewest, HotRanges: a.HotRanges}
	case AgeByTime:
		ok = ok && a.MaxAge > 0 && a.MaxAge%time.Millisecond == 0 && a.IDTimeShift <= 40 && a.IDEpochMs >= 0 && a.IDEpochMs <= 1<<50
	default:
		ok = false
	}
	if !ok {
		return CounterInfo{}, ErrInvalidOption
	}
	if s.info(name) != nil {
		return CounterInfo{}, ErrExists
	}
	return CounterInfo{ID: s.nextID, Name: name, RangeBits: o.RangeBits, Age: a}, nil
}

func (s *schemaSim) create() {
	name := simName(s.ch, "c", 6)
	o := CounterOptions{RangeBits: oneOf(s.ch, schemaRangeBits, 5)}
	switch k := s.ch.intn(8); k {
	case 0, 1, 2:
	case 3:
		o.Age = AgePolicy{Kind: KeepNewest, HotRanges: oneOf(s.ch, simHot, 2), MaxAge: time.Nanosecond}
	case 4, 5, 6:
		o.Age = AgePolicy{Kind: AgeByTime, MaxAge: oneOf(s.ch, simAges, 3),
			IDTimeShift: oneOf(s.ch, simShifts, 3), IDEpochMs: oneOf(s.ch, simEpochs, 3)}
	default:
		o.Age = AgePolicy{Kind: AgeKind(3 + s.ch.intn(250)), MaxAge: time.Hour}
	}
	s.note("CreateCounter(%q, %+v)", name, o)
	want, wantErr := s.modelCreate(name, o)
	if wantErr != nil {
		s.refused("CreateCounter", wantErr, func() error { return s.db.CreateCounter(name, o) })
		return
	}
	s.accepted("CreateCounter", s.db.CreateCounter(name, o))
	s.infos = append(s.infos, want)
	s.rows[name] = map[uint64][]uint64{}
	s.nextID++
	s.stats["create"]++
}

// pickCounter returns a counter name: half the time the one with the most
// columns (so 16 and 17 columns are reached), else any, else an unknown or
// impossible one.
func (s *schemaSim) pickCounter() string {
	if len(s.infos) == 0 || s.ch.intn(10) == 0 {
		return simName(s.ch, "c", 6)
	}
	if s.ch.intn(2) == 0 {
		best := &s.infos[0]
		for i := range s.infos {
			if len(s.infos[i].Columns) > len(best.Columns) {
				best = &s.infos[i]
			}
		}
		return best.Name
	}
	return s.infos[s.ch.intn(len(s.infos))].Name
}

func (s *schemaSim) addColumn() {
	counter := s.pickCounter()
	column := simName(s.ch, "k", 3*limits.MaxColumns)
	o := ColumnOptions{HintBits: oneOf(s.ch, simHints, 4), MaxBits: oneOf(s.ch, simMaxes, 3)}
	s.note("AddColumn(%q, %q, %+v)", counter, column, o)
	hint, maxb := o.HintBits, o.MaxBits
	if hint == 0 {
		hint = 16
	}
	if maxb == 0 {
		maxb = 32
	}
	ci := s.info(counter)
	var wantErr error
	switch {
	case !modelValidName(column):
		wantErr = ErrInvalidName
	case hint != 8 && hint != 16 && hint != 32 || maxb != 32 && maxb != 64:
		wantErr = ErrInvalidOption
	case ci == nil:
		wantErr = ErrCounterNotFound
	case slices.ContainsFunc(ci.Columns, func(c Column) bool { return c.Name == column }):
		wantErr = ErrExists
	case len(ci.Columns) >= 16:
		wantErr = ErrTooManyColumns
	}
	if wantErr != nil {
		s.refused("AddColumn", wantErr, func() error { return s.db.AddColumn(counter, column, o) })
		return
	}
	s.accepted("AddColumn", s.db.AddColumn(counter, column, o))
	ci.Columns = append(ci.Columns, Column{Name: column, HintBits: hint, MaxBits: maxb})
	s.stats["addColumn"]++
	if len(ci.Columns) == 16 {
		s.stats["16 columns"]++
	}
	if c, _ := s.db.Counter(counter); c != nil {
		for _, rs := range c.cs.ranges.Load().m {
			if rs.delta != nil || rs.frozen != nil {
				s.stats["addColumn over a delta"]++
				break
			}
		}
	}
}

// randID returns an id in one of the first ranges of ci, or a far one.
func (s *schemaSim) randID(ci *CounterInfo) uint64 {
	if s.ch.intn(16) == 0 {
		return uint64(s.ch.intn(1<<16)) << 40
	}
	return uint64(s.ch.intn(4))<<ci.RangeBits | uint64(s.ch.intn(40))
}

func (s *schemaSim) randVal(c Column) uint64 {
	switch s.ch.intn(6) {
	case 0:
		return 0
	case 1:
		return c.Max()
	case 2:
		return uint64(s.ch.intn(1 << 17))
	}
	return uint64(s.ch.intn(20))
}

func (s *schemaSim) get(ci *CounterInfo, id uint64) []uint64 {
	out := make([]uint64, len(ci.Columns))
	copy(out, s.rows[ci.Name][id])
	return out
}

func (s *schemaSim) put(ci *CounterInfo, id uint64, vals []uint64) {
	if allZero(vals) {
		delete(s.rows[ci.Name], id)
		return
	}
	s.rows[ci.Name][id] = slices.Clone(vals)
}

func (s *schemaSim) write() {
	if len(s.infos) == 0 {
		return
	}
	ci := &s.infos[s.ch.intn(len(s.infos))]
	c, err := s.db.Counter(ci.Name)
	if err != nil {
		s.fatalf("counter %s: %v", ci.Name, err)
	}
	id := s.randID(ci)
	n := len(ci.Columns)
	switch k := s.ch.intn(10); {
	case n == 0 || k == 0: // wrong number of values
		vals := make([]uint64, n+1+s.ch.intn(2))
		s.note("Set(%s, %d, %d values) of %d columns", ci.Name, id, len(vals), n)
		s.refused("Set with the wrong arity", ErrColumnCount, func() error { return c.Set(id, vals...) })
	case k < 6:
		vals := make([]uint64, n)
		for i := range vals {
			vals[i] = s.randVal(ci.Columns[i])
		}
		if s.ch.intn(5) == 0 {
			clear(vals)
		}
		s.note("Set(%s, %d, %v)", ci.Name, id, vals)
		s.accepted("Set", c.Set(id, vals...))
		s.put(ci, id, vals)
	case k < 9:
		col := s.ch.intn(n)
		delta := int64(s.ch.intn(40)) - 15
		cur := s.get(ci, id)
		s.note("Incr(%s, %d, %s, %d)", ci.Name, id, ci.Columns[col].Name, delta)
		got, err := c.Incr(id, ci.Columns[col].Name, delta)
		want := cur[col]
		switch {
		case delta < 0 && uint64(-delta) >= want:
			want = 0
		case delta < 0:
			want -= uint64(-delta)
		case uint64(delta) > ci.Columns[col].Max()-want:
			if !errors.Is(err, ErrValueRange) {
				s.fatalf("Incr past max: %v", err)
			}
			return
		default:
			want += uint64(delta)
		}
		s.accepted("Incr", err)
		if got != want {
			s.fatalf("Incr returned %d, want %d", got, want)
		}
		cur[col] = want
		s.put(ci, id, cur)
	default:
		s.note("Delete(%s, %d)", ci.Name, id)
		s.accepted("Delete", c.Delete(id))
		delete(s.rows[ci.Name], id)
	}
	s.stats["write"]++
}

func (s *schemaSim) load() {
	if len(s.infos) == 0 {
		return
	}
	ci := &s.infos[s.ch.intn(len(s.infos))]
	n := len(ci.Columns)
	var in LoadRows
	last := map[uint64][]uint64{}
	for k := 0; k < 1+s.ch.intn(8); k++ {
		id := s.randID(ci)
		if k > 0 && s.ch.intn(3) == 0 {
			id = in.IDs[s.ch.intn(len(in.IDs))] // a repeat
		}
		vals := make([]uint64, n)
		if s.ch.intn(3) != 0 {
			for i := range vals {
				vals[i] = s.randVal(ci.Columns[i])
			}
		}
		in.IDs = append(in.IDs, id)
		in.Vals = append(in.Vals, vals...)
		last[id] = vals
	}
	s.note("Load(%s, %d rows)", ci.Name, len(in.IDs))
	if n == 0 {
		s.refused("Load into a counter without columns", ErrColumnCount, func() error {
			_, err := s.db.Load(s.ctx, ci.Name, in, nil)
			return err
		})
		return
	}
	_, err := s.db.Load(s.ctx, ci.Name, in, nil)
	s.accepted("Load", err)
	for id, vals := range last {
		s.put(ci, id, vals)
	}
	s.stats["load"]++
}

func (s *schemaSim) seal() {
	if len(s.infos) == 0 {
		return
	}
	ci := &s.infos[s.ch.intn(len(s.infos))]
	rid := uint64(s.ch.intn(4))
	s.note("SealRange(%s, %d)", ci.Name, rid)
	s.accepted("SealRange", s.db.SealRange(s.ctx, ci.Name, rid))
	s.stats["seal"]++
}

func (s *schemaSim) reopen(crash bool) {
	s.note("reopen (crash %v)", crash)
	if crash {
		crashed := s.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: s.ch.intn(100), RNG: rand.New(rand.NewPCG(uint64(len(s.trace)), 7))})
		s.db.Close()
		s.fs = crashed
		s.opts.FS = crashed
	} else if err := s.db.Close(); err != nil {
		s.fatalf("close: %v", err)
	}
	db, err := Open("s", s.opts)
	if err != nil {
		s.fatalf("the store does not reopen: %v", err)
	}
	s.db = db
	s.stats["reopen"]++
	s.verifyData()
}

func (s *schemaSim) step() {
	switch p := s.ch.intn(100); {
	case p < 14:
		s.create()
	case p < 38:
		s.addColumn()
	case p < 62:
		s.write()
	case p < 66:
		s.load()
	case p < 76:
		s.seal()
	case p < 82:
		s.note("Compact")
		s.accepted("Compact", s.db.Compact(s.ctx))
		s.stats["compact"]++
	case p < 85:
		s.note("Checkpoint")
		s.accepted("Checkpoint", s.db.Checkpoint())
	case p < 93:
		s.reopen(false)
	default:
		s.reopen(true)
	}
	s.verifySchema()
	if len(s.trace)%16 == 0 {
		s.verifyData()
	}
}

func (s *schemaSim) verifySchema() {
	s.t.Helper()
	if err := s.db.Check(); err != nil {
		s.fatalf("Check: %v", err)
	}
	if got := s.db.Counters(); !slices.EqualFunc(got, s.infos, counterInfoEqual) {
		s.fatalf("schema\n got %+v\nwant %+v", got, s.infos)
	}
}

func (s *schemaSim) verifyData() {
	s.t.Helper()
	for i := range s.infos {
		ci := &s.infos[i]
		c, err := s.db.Counter(ci.Name)
		if err != nil {
			s.fatalf("counter %s: %v", ci.Name, err)
		}
		ids := []uint64{1, 1 << 40} // absent rows read as zeros
		for id := range s.rows[ci.Name] {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		got, err := c.MultiGet(ids, nil)
		if err != nil {
			s.fatalf("MultiGet %s: %v", ci.Name, err)
		}
		n := len(ci.Columns)
		for k, id := range ids {
			if want := s.get(ci, id); !slices.Equal(got[k*n:k*n+n], want) {
				s.fatalf("%s %d = %v, want %v", ci.Name, id, got[k*n:k*n+n], want)
			}
		}
	}
}

func (s *schemaSim) close() {
	s.verifyData()
	if err := s.db.Close(); err != nil {
		s.t.Fatalf("close: %v", err)
	}
}

// TestSchemaModel runs the schema simulation for a few seeds. Heavier runs:
// TALLY_SCHEMA_SEEDS and TALLY_SCHEMA_STEPS (defaults 6 and 500).
func TestSchemaModel(t *testing.T) {
	seeds, steps := testutil.EnvInt(t, "TALLY_SCHEMA_SEEDS", 6), testutil.EnvInt(t, "TALLY_SCHEMA_STEPS", 500)
	if testing.Short() || raceEnabled {
		seeds, steps = 3, min(steps, 300) // -race makes each step ~10× slower
	}
	total := map[string]int{}
	for seed := 0; seed < seeds; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			s := newSchemaSim(t, rngChooser{rand.New(rand.NewPCG(uint64(seed), 12))})
			for range steps {
				s.step()
			}
			s.close()
			for k, v := range s.stats {
				total[k] += v
			}
		})
	}
	t.Logf("steps by kind: %v", total)
	// The interesting paths must have been reached, or the test proves
	// little.
	for _, k := range []string{"refused", "create", "addColumn", "16 columns", "addColumn over a delta", "seal", "compact", "load", "reopen",
		"refused: " + ErrTooManyColumns.Error(), "refused: " + ErrInvalidOption.Error(), "refused: " + ErrInvalidName.Error(),
		"refused: " + ErrExists.Error(), "refused: " + ErrColumnCount.Error(), "refused: " + ErrCounterNotFound.Error()} {
		if total[k] == 0 && !t.Failed() {
			t.Errorf("no %q step in %d seeds × %d steps", k, seeds, steps)
		}
	}
}

// FuzzSchemaOps drives the schema simulation with the fuzzer's bytes as
// its choices (go test -fuzz=FuzzSchemaOps ./store/).
func FuzzSchemaOps(f *testing.F) {
	// Seeds: a counter with a sub-millisecond age; 16 columns over a cold
	// delta, then a 17th; a random stream.
	f.Add([]byte{0, 5, 3, 2, 2, 1, 0, 0})
	wide := []byte{0, 11, 1, 0} // CreateCounter("c1", range bits 7→…)
	for k := 0; k < 16; k++ {
		wide = append(wide, 20, 0, 11, byte(k), 1, 1) // AddColumn
	}
	wide = append(wide, 70, 0, 0, 50, 0, 3, 0, 0, 20, 0, 11, 17, 1, 1, 90)
	f.Add(wide)
	r := rand.New(rand.NewPCG(1, 1))
	seed := make([]byte, 400)
	for i := range seed {
		seed[i] = byte(r.UintN(256))
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 2000 {
			data = data[:2000]
		}
		ch := &byteChooser{b: data}
		s := newSchemaSim(t, ch)
		for !ch.exhausted() {
			s.step()
		}
		s.close()
	})
}
