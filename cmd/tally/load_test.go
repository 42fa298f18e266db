package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// newLoadStore creates a store with counter c (8 range bits, the newest
// range kept hot) with columns a (max 2^32-1) and b (max 2^64-1).
func newLoadStore(t *testing.T) string {
	t.Helper()
	t.Setenv("TALLY_DIR", "")
	dir := filepath.Join(t.TempDir(), "db")
	mustTally(t, "-d", dir, "counter", "add", "c", "--range-bits", "8", "--hot-ranges", "1")
	mustTally(t, "-d", dir, "column", "add", "c", "a")
	mustTally(t, "-d", dir, "column", "add", "c", "b", "--hint", "8", "--max", "64")
	return dir
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in.csv")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// summary parses load's "key value" lines.
func summary(t *testing.T, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, ok := strings.Cut(l, " ")
		if !ok {
			t.Fatalf("summary line %q is not \"key value\"", l)
		}
		m[k] = v
	}
	return m
}

const loadInput = `# id,a,b — unsorted, with repeats, blanks, spaces and CRLF
600,1,2
5,3,4

 300 , 7 , 8 
5,30,40
1000,4294967295,18446744073709551615
601,0,0
602,0,9` + "\r\n" + `
`

func TestLoad(t *testing.T) {
	for _, viaStdin := range []bool{false, true} {
		t.Run(fmt.Sprint("stdin=", viaStdin), func(t *testing.T) {
			dir := newLoadStore(t)
			file := writeFile(t, loadInput)
			if viaStdin {
				stdin = strings.NewReader(loadInput)
				t.Cleanup(func() { stdin = os.Stdin })
				file = "-"
			}
			out, errOut, code := tally(t, "-d", dir, "load", "c", file)
			if code != 0 || errOut != "" {
				t.Fatalf("load: exit %d, stderr %q", code, errOut)
			}
			// Ids 5..1000 span ranges 0, 1, 2 and 3: the newest (3) is hot,
			// the older ones are built cold. 601 is all zero: counted, and
			// not stored (its range is new, so it reads 0 already).
			want := map[string]string{"rows": "6", "zero_rows": "1", "cold_rows": "5", "hot_rows": "1", "logged_rows": "0",
				"cold_ranges": "3", "hot_ranges": "1", "input_rows": "7", "bad_lines": "0"}
			got := summary(t, out)
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q (summary:\n%s)", k, got[k], v, out)
				}
			}
			for _, k := range []string{"seconds", "rows_per_sec"} {
				if !regexp.MustCompile(`^\d+(\.\d+)?$`).MatchString(got[k]) {
					t.Errorf("%s = %q", k, got[k])
				}
			}
			if len(got) != 11 {
				t.Errorf("summary has %d keys, want 11:\n%s", len(got), out)
			}
			const rows = `5 a=30 b=40
300 a=7 b=8
600 a=1 b=2
601 a=0 b=0
602 a=0 b=9
1000 a=4294967295 b=18446744073709551615
`
			if got := mustTally(t, "-d", dir, "get", "c", "5", "300", "600", "601", "602", "1000"); got != rows {
				t.Errorf("get after load:\n%s\nwant:\n%s", got, rows)
			}
			// A second load of the same rows goes through the log for the
			// ranges that are cold now, and converges.
			out = mustTally(t, "-d", dir, "load", "c", writeFile(t, "5,1,1\n1000,2,2\n"))
			if got := summary(t, out); got["logged_rows"] != "1" || got["rows"] != "2" {
				t.Errorf("second load:\n%s", out)
			}
			if got := mustTally(t, "-d", dir, "get", "c", "5", "1000"); got != "5 a=1 b=1\n1000 a=2 b=2\n" {
				t.Errorf("get after second load:\n%s", got)
			}
		})
	}
}

func TestLoadBadLines(t *testing.T) {
	cases := []struct {
		line   string
		stderr string
	}{
		{"7,1", "want 3 fields (id,a,b), got 2"},
		{"7,1,2,3", "want 3 fields (id,a,b), got 4"},
		{"7", "want 3 fields (id,a,b), got 1"},
		{"x,1,2", `id: "x" is not an unsigned decimal number`},
		{"7,1x,2", `column a: "1x" is not an unsigned decimal number`},
		{"7,1.5,2", `column a: "1.5" is not an unsigned decimal number`},
		{"7,1 2,2", `column a: "1 2" is not an unsigned decimal number`},
		{"7,+1,2", `column a: "+1" is not an unsigned decimal number`},
		{"7,,2", "column a: empty field"},
		{"7,1,", "column b: empty field"},
		{"7,-3,2", `column a: "-3" is negative`},
		{"-7,1,2", `id: "-7" is negative`},
		{"7,4294967296,2", "column a: 4294967296 exceeds the column's max 4294967295"},
		{"7,1,18446744073709551616", "column b: 18446744073709551616 exceeds the column's max 18446744073709551615"},
		{"18446744073709551616,1,2", "id: 18446744073709551616 exceeds 2^64-1"},
		{"99999999999999999999999,1,2", "id: 99999999999999999999999 exceeds 2^64-1"},
	}
	for _, c := range cases {
		t.Run(c.line, func(t *testing.T) {
			dir := newLoadStore(t)
			file := writeFile(t, "5,1,1\n# comment\n"+c.line+"\n700,2,2\n")
			out, errOut, code := tally(t, "-d", dir, "load", "c", file)
			wantErr := fmt.Sprintf("tally: %s:3: %s\n", file, c.stderr)
			if code != exitError || !strings.HasPrefix(errOut, wantErr) || !strings.Contains(errOut, "1 bad lines") || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and stderr starting %q", code, out, errOut, wantErr)
			}
			if got := mustTally(t, "-d", dir, "get", "c", "5", "700"); got != "5 a=0 b=0\n700 a=0 b=0\n" {
				t.Errorf("a failed load loaded rows:\n%s", got)
			}
			out, errOut, code = tally(t, "-d", dir, "load", "c", file, "--skip-bad")
			if code != 0 || errOut != wantErr {
				t.Errorf("--skip-bad: exit %d, stderr %q, want %q", code, errOut, wantErr)
			}
			if got := summary(t, out); got["rows"] != "2" || got["bad_lines"] != "1" {
				t.Errorf("--skip-bad summary:\n%s", out)
			}
			if got := mustTally(t, "-d", dir, "get", "c", "5", "700"); got != "5 a=1 b=1\n700 a=2 b=2\n" {
				t.Errorf("--skip-bad did not load the good lines:\n%s", got)
			}
		})
	}
}

func TestLoadManyBadLines(t *testing.T) {
	dir := newLoadStore(t)
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "%d,x,1\n%d,1,1\n", i, i)
	}
	stdin = strings.NewReader(b.String())
	t.Cleanup(func() { stdin = os.Stdin })
	out, errOut, code := tally(t, "-d", dir, "load", "c", "-", "--skip-bad")
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != 0 || len(lines) != maxBadShown+1 || lines[0] != `tally: stdin:1: column a: "x" is not an unsigned decimal number` ||
		lines[maxBadShown] != "tally: stdin: 30 more bad lines not shown" {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	if got := summary(t, out); got["rows"] != "50" || got["bad_lines"] != "50" || got["input_rows"] != "50" {
		t.Fatalf("summary:\n%s", out)
	}
}

func TestLoadRefuses(t *testing.T) {
	dir := newLoadStore(t)
	mustTally(t, "-d", dir, "counter", "add", "empty")
	file := writeFile(t, "1,2,3\n")
	cases := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"load", "c"}, exitUsage, "want counter NAME and FILE"},
		{[]string{"load", "c", file, "extra"}, exitUsage, "want counter NAME and FILE"},
		{[]string{"load", "c", file, "--frob"}, exitUsage, "flag provided but not defined"},
		{[]string{"load", "c", filepath.Join(dir, "missing.csv")}, exitError, "no such file"},
		{[]string{"load", "nope", file}, exitError, "counter not found"},
		{[]string{"load", "empty", file}, exitError, "has no columns"},
	}
	for _, c := range cases {
		out, errOut, code := tally(t, append([]string{"-d", dir}, c.args...)...)
		if code != c.code || !strings.HasPrefix(errOut, "tally: ") || !strings.Contains(errOut, c.stderr) || out != "" {
			t.Errorf("tally %s: exit %d, stdout %q, stderr %q", strings.Join(c.args, " "), code, out, errOut)
		}
	}
	if got := mustTally(t, "-d", dir, "get", "c", "1"); got != "1 a=0 b=0\n" {
		t.Errorf("store changed: %s", got)
	}
}

// TestLoadParallel parses a file in several parts and checks rows and the
// line numbers of bad lines come out as a single pass would give them.
func TestLoadParallel(t *testing.T) {
	defer func(n int64, procs int) { parallelMin = n; runtime.GOMAXPROCS(procs) }(parallelMin, runtime.GOMAXPROCS(4))
	parallelMin = 1
	var b strings.Builder
	var want []int
	for i := 1; i <= 3000; i++ {
		switch {
		case i%700 == 0:
			fmt.Fprintf(&b, "%d,bad,1\n", i)
			want = append(want, i)
		case i%301 == 0:
			b.WriteString("# comment\n")
		default:
			fmt.Fprintf(&b, "%d,%d,%d\n", 3001-i, i, i%7)
		}
	}
	file := writeFile(t, b.String())
	parts, err := func() ([]int64, error) {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		var starts []int64
		for i := range 4 {
			s, err := lineStart(f, int64(b.Len()*i/4))
			if err != nil {
				return nil, err
			}
			starts = append(starts, s)
		}
		return starts, nil
	}()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range parts {
		if s != 0 && b.String()[s-1] != '\n' {
			t.Fatalf("part start %d is not a line start", s)
		}
	}
	dir := newLoadStore(t)
	out, errOut, code := tally(t, "-d", dir, "load", "c", file, "--skip-bad")
	var wantErr strings.Builder
	for _, l := range want {
		fmt.Fprintf(&wantErr, "tally: %s:%d: column a: \"bad\" is not an unsigned decimal number\n", file, l)
	}
	if code != 0 || errOut != wantErr.String() {
		t.Fatalf("exit %d, stderr:\n%s\nwant:\n%s", code, errOut, wantErr.String())
	}
	if got := summary(t, out); got["input_rows"] != fmt.Sprint(3000-len(want)-9) || got["bad_lines"] != "4" {
		t.Fatalf("summary:\n%s", out)
	}
	if got := mustTally(t, "-d", dir, "get", "c", "3000", "1", "2900"); got != "3000 a=1 b=1\n1 a=3000 b=4\n2900 a=101 b=3\n" {
		t.Fatalf("get:\n%s", got)
	}
}

// TestLoadZeroLines is issue 12's reproduction through the command line: an
// all-zero line left the old value, and a repeated id whose last line was
// all zeros kept an earlier value, unlike "set". The last line wins,
// including zeros, for a range already cold (through the log), a new old
// range (built straight into blocks) and the hot range.
func TestLoadZeroLines(t *testing.T) {
	dir := newLoadStore(t) // ranges of 256 ids, the newest kept hot
	d := "-d=" + dir
	mustTally(t, d, "set", "c", "1", "7", "7")   // range 0
	mustTally(t, d, "set", "c", "2", "7", "7")   // range 0
	mustTally(t, d, "set", "c", "769", "7", "7") // range 3, the newest: hot
	mustTally(t, d, "set", "c", "770", "7", "7")
	mustTally(t, d, "compact") // range 0 is now cold
	out := mustTally(t, d, "load", "c", writeFile(t, `1,0,0
2,5,5
2,0,0
257,1,1
257,0,0
258,3,3
769,0,0
770,9,9
770,0,0
`))
	got := summary(t, out)
	for k, v := range map[string]string{"rows": "6", "zero_rows": "5", "logged_rows": "2", "cold_rows": "2", "hot_rows": "2"} {
		if got[k] != v {
			t.Errorf("%s = %s, want %s:\n%s", k, got[k], v, out)
		}
	}
	want := `1 a=0 b=0
2 a=0 b=0
257 a=0 b=0
258 a=3 b=3
769 a=0 b=0
770 a=0 b=0
`
	if got := mustTally(t, d, "get", "c", "1", "2", "257", "258", "769", "770"); got != want {
		t.Errorf("after load:\n%s\nwant:\n%s", got, want)
	}
	if out := mustTally(t, d, "verify"); !strings.HasPrefix(out, "ok") {
		t.Errorf("verify: %s", out)
	}
}
