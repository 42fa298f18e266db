package commands

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestTable checks every entry, and that no two share a name in either
// front end.
func TestTable(t *testing.T) {
	cli, resp := map[string]bool{}, map[string]bool{}
	for _, c := range All() {
		if err := c.Validate(); err != nil {
			t.Error(err)
		}
		for _, n := range []string{c.RESP, c.RESPOne} {
			if n == "" {
				continue
			}
			if resp[n] {
				t.Errorf("RESP name %s twice", n)
			}
			resp[n] = true
		}
		if cli[c.CLI] {
			t.Errorf("CLI name %s twice", c.CLI)
		}
		cli[c.CLI] = true
		if c.RESPOne != "" && c.Repeats() == nil {
			t.Errorf("%s: RESPOne without a repeated parameter", c.CLI)
		}
		h := c.CLIHelp()
		if !strings.HasPrefix(h, "Usage: tally -d DIR "+c.CLI) || !strings.Contains(h, c.RESPSynopsis()) {
			t.Errorf("%s: help lacks the usage line or the RESP form:\n%s", c.CLI, h)
		}
	}
}

// respArgs turns CLI-style words into RESP arguments.
func respArgs(words ...string) [][]byte {
	out := make([][]byte, len(words))
	for i, w := range words {
		out[i] = []byte(w)
	}
	return out
}

// TestBothFrontEnds parses the same request as a command line and as a
// RESP request: the same values, or the same error.
func TestBothFrontEnds(t *testing.T) {
	cmd := &Command{CLI: "x", RESP: "X", Params: []Param{
		{Name: "biz", Kind: String},
		{Name: "item", Kind: Uint, Multiple: true, Max: 3},
		{Name: "limit", Kind: Int, Option: true},
		{Name: "range-bits", Kind: Uint, Option: true},
		{Name: "wait", Kind: Flag, Option: true},
	}}
	for _, tc := range []struct {
		cli, resp []string
		err       string
	}{
		{[]string{"v", "1", "2"}, []string{"v", "1", "2"}, ""},
		{[]string{"v", "1", "--limit", "-5", "--wait"}, []string{"v", "1", "LIMIT", "-5", "wait"}, ""},
		{[]string{"--range-bits=40", "v", "7"}, []string{"v", "7", "RANGEBITS", "40"}, ""},
		{[]string{"v", "x"}, []string{"v", "x"}, `bad item "x"`},
		{[]string{"v", "-1"}, []string{"v", "-1"}, `bad item "-1"`},
		{[]string{"v"}, []string{"v"}, "missing ITEM"},
		{[]string{"v", "1", "2", "3", "4"}, []string{"v", "1", "2", "3", "4"}, "too many item: at most 3"},
		{[]string{"v", "1", "--limit", "z"}, []string{"v", "1", "LIMIT", "z"}, `bad limit "z"`},
		{[]string{"v", "1", "--limit"}, []string{"v", "1", "LIMIT"}, "limit needs a value"},
		{[]string{"v", "1", "--limit", "1", "--limit", "2"}, []string{"v", "1", "LIMIT", "1", "LIMIT", "2"}, "limit given twice"},
	} {
		a, errA := cmd.ParseCLI(tc.cli)
		b, errB := cmd.ParseRESP(respArgs(tc.resp...))
		if tc.err != "" {
			for _, err := range []error{errA, errB} {
				if err == nil || !errors.Is(err, ErrUsage) || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.err)) {
					t.Errorf("%v / %v: %v, want a usage error with %q", tc.cli, tc.resp, err, tc.err)
				}
			}
			continue
		}
		if errA != nil || errB != nil {
			t.Errorf("%v / %v: %v, %v", tc.cli, tc.resp, errA, errB)
			continue
		}
		if !reflect.DeepEqual(a.vals, b.vals) {
			t.Errorf("%v / %v: %+v != %+v", tc.cli, tc.resp, a.vals, b.vals)
		}
		// The request RESPArgs makes of the command line parses the same.
		req := a.RESPArgs()
		if req[0] != "X" {
			t.Fatalf("RESPArgs %q", req)
		}
		if c, err := cmd.ParseRESP(respArgs(req[1:]...)); err != nil || !reflect.DeepEqual(c.vals, a.vals) {
			t.Errorf("%v: RESPArgs %q parses to %+v, %v", tc.cli, req, c, err)
		}
	}
	if _, err := cmd.ParseCLI([]string{"v", "1", "--bogus"}); err == nil || !strings.Contains(err.Error(), "unknown flag -bogus") {
		t.Error(err)
	}
	if _, err := cmd.ParseRESP(respArgs("v", "1", "BOGUS")); err == nil || !strings.Contains(err.Error(), `bad item "BOGUS"`) {
		t.Error(err)
	}
	one := &Command{CLI: "y", RESP: "Y", Params: []Param{{Name: "a", Kind: Uint}, {Name: "wait", Kind: Flag, Option: true}}}
	if _, err := one.ParseRESP(respArgs("1", "BOGUS")); err == nil || !strings.Contains(err.Error(), `unknown option "BOGUS"`) {
		t.Error(err)
	}
}

// TestJSON renders a nested reply.
func TestJSON(t *testing.T) {
	cmd := &Command{CLI: "x", RESP: "X", Reply: func(w Replier, _ *Input, _ any) {
		w.WriteArray(3)
		w.WriteNull()
		w.WriteArray(2)
		w.WriteUint(1 << 63)
		w.WriteInt(-1)
		w.WriteArray(0)
	}}
	var b strings.Builder
	if err := JSON(&b, cmd, nil, nil); err != nil || b.String() != "[null,[9223372036854775808,-1],[]]\n" {
		t.Fatalf("%q, %v", b.String(), err)
	}
}

// TestAliases: an option's old name works in both front ends, and counts as
// the option.
func TestAliases(t *testing.T) {
	cmd := &Command{CLI: "x", RESP: "X", Params: []Param{{Name: "id-epoch-ms", Aliases: []string{"epoch-ms"}, Kind: Int, Option: true}}}
	a, err := cmd.ParseCLI([]string{"--epoch-ms", "5"})
	if err != nil || a.Int("id-epoch-ms") != 5 {
		t.Fatalf("--epoch-ms: %v", err)
	}
	b, err := cmd.ParseRESP(respArgs("EPOCHMS", "5"))
	if err != nil || b.Int("id-epoch-ms") != 5 {
		t.Fatalf("EPOCHMS: %v", err)
	}
	if _, err := cmd.ParseCLI([]string{"--epoch-ms", "5", "--id-epoch-ms", "6"}); err == nil {
		t.Fatal("a name and its alias both given: no error")
	}
}
