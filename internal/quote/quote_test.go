package quote

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestInput(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"posts", `"posts"`},
		{"a\nb", `"a\nb"`},
		{strings.Repeat("x", MaxEcho), `"` + strings.Repeat("x", MaxEcho) + `"`},
		{strings.Repeat("x", MaxEcho+1), `"` + strings.Repeat("x", MaxEcho) + `"… (65 bytes)`},
		{strings.Repeat("y", 10<<10), `"` + strings.Repeat("y", MaxEcho) + `"… (10240 bytes)`},
	} {
		if got := Input(tc.in); got != tc.want {
			t.Errorf("Input(%.20q…) = %s, want %s", tc.in, got, tc.want)
		}
	}
	// A multi-byte character straddling the cut is dropped whole.
	s := strings.Repeat("x", MaxEcho-1) + "é" + strings.Repeat("z", 100)
	got := Input(s)
	if !utf8.ValidString(got) || strings.Contains(got, `\x`) || !strings.HasPrefix(got, `"`+strings.Repeat("x", MaxEcho-1)+`"…`) {
		t.Errorf("cut inside a character: %s", got)
	}
}

func TestClip(t *testing.T) {
	if got := Clip("12345"); got != "12345" {
		t.Errorf("Clip short = %s", got)
	}
	if got, want := Clip(strings.Repeat("9", 1000)), strings.Repeat("9", MaxEcho)+"… (1000 bytes)"; got != want {
		t.Errorf("Clip long = %s, want %s", got, want)
	}
}
