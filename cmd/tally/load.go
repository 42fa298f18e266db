package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/store"
)

var cmdLoad = &command{
	keyValues: true,
	name:      "load",
	synopsis:  "bulk-load rows from a CSV file (old ranges straight into cold blocks)",
	help: `Usage: tally -d DIR load NAME FILE [--skip-bad]

Loads the rows of FILE into counter NAME, replacing the loaded rows' values
(like "set"). FILE is CSV without a header, one row per line:
  ID,V1,V2,...
with exactly one value per column of NAME, in column order (see "counter
list"); "-" reads standard input. Lines need not be sorted; when an id
repeats, its last line wins. A line of all zeros sets the row to zeros
(deletes it), like "set" with zeros. Blank lines and lines starting with #
are ignored. Ranges that the counter's age policy would age are built straight
into cold blocks, recent ranges into memory (made durable by a checkpoint),
rows of ranges already cold go through the log.

Bad lines (wrong number of fields, a value that is not a decimal number, is
negative or exceeds its column's maximum, an id above 2^64-1) are reported on
stderr as "tally: FILE:LINE: what is wrong", the first 20 of them, then a
count. Without --skip-bad any bad line means nothing is loaded (exit 1); with
it the good lines are loaded.

On a terminal a progress bar shows parsing, then loading. At the end prints
"key value" lines:
  rows          distinct rows loaded (after repeats collapse)
  zero_rows     of those, all-zero rows (each deletes its row)
  cold_rows     rows written straight into cold blocks
  hot_rows      rows put into hot tables
  logged_rows   rows written through the log (their range was already cold)
  cold_ranges   ranges built as cold
  hot_ranges    ranges loaded hot
  input_rows    good lines read
  bad_lines     lines skipped as bad
  seconds       wall time from the first byte read to durable, 3 decimals
  rows_per_sec  input_rows / seconds

Flags:
  --skip-bad    load the good lines even if some are bad

Example:
  $ tally -d /var/lib/tally load posts posts.csv
  rows 4500000
  zero_rows 0
  cold_rows 3800000
  hot_rows 700000
  logged_rows 0
  cold_ranges 8
  hot_ranges 2
  input_rows 5000000
  bad_lines 0
  seconds 2.104
  rows_per_sec 2376425
`,
}

func init() { cmdLoad.run = runLoad }

// stdin is what FILE "-" reads; tests replace it.
var stdin io.Reader = os.Stdin

// input is a load command's FILE argument, opened: a file or, for "-",
// stdin.
type input struct {
	r    io.Reader
	name string   // what messages call it: the path, or "stdin"
	size int64    // a regular file's size in bytes, else 0
	f    *os.File // nil for stdin
}

func openInput(path string) (*input, error) {
	if path == "-" {
		return &input{r: stdin, name: "stdin"}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	in := &input{r: f, name: path, f: f}
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		in.size = fi.Size()
	}
	return in, nil
}

func (in *input) Close() {
	if in.f != nil {
		in.f.Close()
	}
}

// maxBadShown is how many bad lines load prints before it only counts.
const maxBadShown = 20

func runLoad(e *env, args []string) error {
	fs := e.flags(cmdLoad)
	skipBad := fs.Bool("skip-bad", false, "")
	pos, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want counter NAME and FILE (or - for stdin), got %d arguments", len(pos))
	}
	name := pos[0]
	src, err := e.openInput(pos[1])
	if err != nil {
		return err
	}
	defer src.Close()
	in, size, shown := src.r, src.size, src.name
	db, err := e.open(false)
	if err != nil {
		return err
	}
	c, err := tallydb.UserCounter(db, name)
	if err != nil {
		return closeDB(db, err)
	}
	info := c.Info()
	if len(info.Columns) == 0 {
		return closeDB(db, fmt.Errorf("%w: counter %s has no columns (add them with: tally column add %s COLUMN)", store.ErrColumnCount, name, name))
	}
	ctx, stop := e.interruptContext()
	defer stop()

	start := time.Now()
	bar := newProgress(e.stdout, "parsing", "bytes", size)
	res, err := parseInput(e, in, size, info.Columns, bar.update)
	bar.finish()
	if err != nil {
		return closeDB(db, fmt.Errorf("read %s: %w", shown, err))
	}
	if err := res.report(e, shown, "load "+name, *skipBad); err != nil {
		return closeDB(db, err)
	}
	var st store.LoadStats
	input := len(res.ids)
	if input > 0 {
		// store.Load sorts (radix; nothing to do for sorted input) and
		// keeps the last of repeated ids, as the CSV's rule says.
		bar = newProgress(e.stdout, "loading", "rows", int64(input))
		st, err = db.Load(ctx, name, store.LoadRows{IDs: res.ids, Vals: res.vals}, func(done int) { bar.update(int64(done)) })
		bar.finish()
		if err != nil {
			return closeDB(db, err)
		}
	}
	el := time.Since(start).Seconds()
	w := e.stdout
	fmt.Fprintf(w, "rows %d\n", st.Rows)
	fmt.Fprintf(w, "zero_rows %d\n", st.ZeroRows)
	fmt.Fprintf(w, "cold_rows %d\n", st.ColdRows)
	fmt.Fprintf(w, "hot_rows %d\n", st.HotRows)
	fmt.Fprintf(w, "logged_rows %d\n", st.LoggedRows)
	fmt.Fprintf(w, "cold_ranges %d\n", st.ColdRanges)
	fmt.Fprintf(w, "hot_ranges %d\n", st.HotRanges)
	fmt.Fprintf(w, "input_rows %d\n", input)
	fmt.Fprintf(w, "bad_lines %d\n", res.nbad)
	fmt.Fprintf(w, "seconds %.3f\n", el)
	fmt.Fprintf(w, "rows_per_sec %.0f\n", float64(input)/max(el, 1e-9))
	return closeDB(db, nil)
}

// parseInput parses in, which holds size bytes if size > 0. A large
// regular file is cut at line boundaries into one part per core, parsed in
// parallel, and the parts joined in file order (line numbers included);
// progress is called with the bytes parsed so far, from this goroutine.
func parseInput(e *env, in io.Reader, size int64, cols []store.Column, progress func(int64)) (*csvParser, error) {
	starts := []int64{0}
	if f, ok := in.(*os.File); ok && size >= parallelMin {
		for i := 1; i < runtime.GOMAXPROCS(0); i++ {
			b, err := lineStart(f, size*int64(i)/int64(runtime.GOMAXPROCS(0)))
			if err != nil {
				return nil, err
			}
			if b > starts[len(starts)-1] && b < size {
				starts = append(starts, b)
			}
		}
	}
	parts := make([]*csvParser, len(starts))
	read := make([]atomic.Int64, len(starts))
	errs := make([]error, len(starts))
	var wg sync.WaitGroup
	for i, off := range starts {
		parts[i] = newCSVParser(cols)
		r, n := in, size
		if len(starts) > 1 {
			end := size
			if i+1 < len(starts) {
				end = starts[i+1]
			}
			r, n = io.NewSectionReader(in.(*os.File), off, end-off), end-off
		}
		wg.Add(1)
		e.goSafe(func() {
			defer wg.Done()
			errs[i] = parts[i].parse(r, n, read[i].Store)
		})
	}
	done := make(chan struct{})
	e.goSafe(func() { wg.Wait(); close(done) })
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	sum := func() (n int64) {
		for i := range read {
			n += read[i].Load()
		}
		return n
	}
wait:
	for {
		select {
		case <-done:
			break wait
		case <-tick.C:
			progress(sum())
		}
	}
	progress(sum())
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	p := parts[0]
	if len(parts) == 1 {
		return p, nil
	}
	rows, nvals := 0, 0
	for _, q := range parts {
		rows, nvals = rows+len(q.ids), nvals+len(q.vals)
	}
	all := &csvParser{cols: cols, ids: make([]uint64, 0, rows), vals: make([]uint64, 0, nvals)}
	for _, q := range parts {
		all.ids = append(all.ids, q.ids...)
		all.vals = append(all.vals, q.vals...)
		for _, b := range q.shown {
			if len(all.shown) < maxBadShown {
				all.shown = append(all.shown, badLine{all.line + b.line, b.msg})
			}
		}
		all.line += q.line
		all.nbad += q.nbad
	}
	return all, nil
}

// parallelMin is the smallest file parsed in parallel; tests lower it.
var parallelMin int64 = 16 << 20

// lineStart returns the offset of the first line starting at or after off.
func lineStart(f *os.File, off int64) (int64, error) {
	if off == 0 {
		return 0, nil
	}
	buf := make([]byte, 64<<10)
	pos := off - 1 // a line starts at off if the byte before it is '\n'
	for {
		n, err := f.ReadAt(buf, pos)
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			return pos + int64(i) + 1, nil
		}
		pos += int64(n)
		if err == io.EOF {
			return pos, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// csvParser reads "id,v1,...,vn" lines into ids and vals (row-major) with
// no allocation per good line: the target is several million lines per
// second, which encoding/csv and strconv on strings cannot reach.
type csvParser struct {
	cols []store.Column
	max  []uint64
	ids  []uint64
	vals []uint64
	row  []uint64 // the values of the line being parsed
	badLines
}

// badLine is a bad line kept for the report.
type badLine struct {
	line int
	msg  string
}

// badLines numbers an input's lines and counts its bad ones, keeping the
// first maxBadShown for the report.
type badLines struct {
	line  int       // lines read, blank and comment lines included
	nbad  int       // bad lines
	shown []badLine // the first maxBadShown of them
}

// report prints the bad lines kept (and how many more there were) to
// stderr, naming the input; with bad lines and without --skip-bad it
// returns the error that refuses the load (cmd names the command).
func (b *badLines) report(e *env, input, cmd string, skipBad bool) error {
	for _, l := range b.shown {
		fmt.Fprintf(e.stderr, "tally: %s:%d: %s\n", input, l.line, l.msg)
	}
	if b.nbad > len(b.shown) {
		fmt.Fprintf(e.stderr, "tally: %s: %d more bad lines not shown\n", input, b.nbad-len(b.shown))
	}
	if b.nbad > 0 && !skipBad {
		return fmt.Errorf("%s: %d bad lines in %s; nothing loaded (--skip-bad loads the good lines)", cmd, b.nbad, input)
	}
	return nil
}

func (b *badLines) badf(format string, args ...any) {
	b.nbad++
	if len(b.shown) < maxBadShown {
		b.shown = append(b.shown, badLine{b.line, fmt.Sprintf(format, args...)})
	}
}

// scan calls parse with every line of br (its newline included), counting
// lines; a line longer than br's buffer is skipped and counted bad.
// progress gets the bytes read every 65,536 lines and at the end.
func (b *badLines) scan(br *bufio.Reader, progress func(int64), parse func(line []byte)) error {
	var read int64
	for {
		line, err := br.ReadSlice('\n')
		read += int64(len(line))
		if errors.Is(err, bufio.ErrBufferFull) {
			// Skip the rest of an absurdly long line; it is bad.
			for errors.Is(err, bufio.ErrBufferFull) {
				var more []byte
				more, err = br.ReadSlice('\n')
				read += int64(len(more))
			}
			b.line++
			b.badf("line longer than %d bytes", br.Size())
		} else if len(line) > 0 {
			b.line++
			parse(line)
		}
		if err == io.EOF {
			progress(read)
			return nil
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
		if b.line&0xffff == 0 {
			progress(read)
		}
	}
}

func newCSVParser(cols []store.Column) *csvParser {
	p := &csvParser{cols: cols, row: make([]uint64, len(cols))}
	for _, c := range cols {
		p.max = append(p.max, c.Max())
	}
	return p
}

// parse reads every line of r, which holds size bytes if size > 0;
// progress is called now and then with the bytes read so far.
func (p *csvParser) parse(r io.Reader, size int64, progress func(int64)) error {
	br := bufio.NewReaderSize(r, 1<<20)
	if size > 0 {
		// Size the slices from the line length at the head of the file:
		// growing them by appends would copy every row about twice.
		head, _ := br.Peek(64 << 10)
		if nl := bytes.Count(head, []byte("\n")); nl > 0 {
			rows := int(float64(size)*float64(nl)/float64(len(head))*1.05) + 16
			p.ids = make([]uint64, 0, rows)
			p.vals = make([]uint64, 0, rows*len(p.cols))
		}
	}
	return p.scan(br, progress, p.parseLine)
}

// isSpace is the whitespace allowed around fields and at line ends.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// parseLine parses one line (with its newline) and appends it when good.
func (p *csvParser) parseLine(line []byte) {
	i := 0
	for i < len(line) && isSpace(line[i]) {
		i++
	}
	if i == len(line) || line[i] == '#' {
		return // blank or comment
	}
	var id uint64
	for f := 0; f <= len(p.cols); f++ {
		// One field: spaces, digits, spaces, then ',' or the end.
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		start := i
		var v uint64
		overflow := false
		for ; i < len(line); i++ {
			d := line[i] - '0'
			if d > 9 {
				break
			}
			if v > (math.MaxUint64-uint64(d))/10 {
				overflow = true
			}
			v = v*10 + uint64(d)
		}
		digits := line[start:i]
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		last := f == len(p.cols)
		ok := len(digits) > 0 && (i == len(line) && last || i < len(line) && line[i] == ',' && !last)
		if !ok || overflow || f > 0 && v > p.max[f-1] {
			p.badField(line, f, start, digits, overflow)
			return
		}
		i++ // the ','
		if f == 0 {
			id = v
		} else {
			p.row[f-1] = v
		}
	}
	p.ids = append(p.ids, id)
	p.vals = append(p.vals, p.row...)
}

// badField reports why field f (starting at byte start) of line is bad. It
// runs only for bad lines, so it may allocate.
func (p *csvParser) badField(line []byte, f, start int, digits []byte, overflow bool) {
	want := len(p.cols) + 1
	text := bytes.TrimRight(line, " \t\r\n")
	if got := bytes.Count(text, []byte(",")) + 1; got != want {
		names := make([]string, len(p.cols))
		for i, c := range p.cols {
			names[i] = c.Name
		}
		p.badf("want %d fields (id,%s), got %d", want, strings.Join(names, ","), got)
		return
	}
	what := "id"
	if f > 0 {
		what = "column " + p.cols[f-1].Name
	}
	field := line[start:]
	if j := bytes.IndexByte(field, ','); j >= 0 {
		field = field[:j]
	}
	field = bytes.TrimRight(field, " \t\r\n")
	switch {
	case len(field) == 0:
		p.badf("%s: empty field", what)
	case len(digits) == 0 && field[0] == '-' && len(field) > 1 && field[1] >= '0' && field[1] <= '9':
		p.badf("%s: %s is negative", what, quote.Input(string(field)))
	case len(digits) != len(field):
		p.badf("%s: %s is not an unsigned decimal number", what, quote.Input(string(field)))
	case overflow && f == 0:
		p.badf("id: %s exceeds 2^64-1", quote.Clip(string(field)))
	default:
		p.badf("%s: %s exceeds the column's max %d", what, quote.Clip(string(field)), p.max[f-1])
	}
}
