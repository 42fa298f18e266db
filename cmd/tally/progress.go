package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// isTerminal reports whether w is a terminal (a character device), the only
// place a progress bar is drawn: redirected output stays clean.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressBar is one line redrawn with \r: "label [####----] 52% 2.6M/5.0M
// rows 1.3s". It draws nothing when its writer is not a terminal. It is not
// safe for concurrent use.
type progressBar struct {
	w     io.Writer // nil: draw nothing
	label string
	unit  string // "rows", "B"
	total int64  // 0: unknown, no bar
	start time.Time
	last  time.Time
	width int // of the last line drawn, to blank it
}

const progressEvery = 100 * time.Millisecond

func newProgress(w io.Writer, label, unit string, total int64) *progressBar {
	p := &progressBar{label: label, unit: unit, total: total, start: time.Now()}
	if isTerminal(w) {
		p.w = w
	}
	return p
}

// update redraws the line, at most every progressEvery.
func (p *progressBar) update(done int64) {
	if p.w == nil {
		return
	}
	now := time.Now()
	if now.Sub(p.last) < progressEvery {
		return
	}
	p.last = now
	var b strings.Builder
	fmt.Fprintf(&b, "\r%-9s", p.label)
	if p.total > 0 {
		frac := min(float64(done)/float64(p.total), 1)
		const cells = 30
		n := int(frac * cells)
		fmt.Fprintf(&b, " [%s%s] %3.0f%% %s/%s", strings.Repeat("#", n), strings.Repeat("-", cells-n),
			100*frac, humanCount(done), humanCount(p.total))
	} else {
		fmt.Fprintf(&b, " %s", humanCount(done))
	}
	fmt.Fprintf(&b, " %s %.1fs", p.unit, now.Sub(p.start).Seconds())
	if pad := p.width - b.Len(); pad > 0 {
		b.WriteString(strings.Repeat(" ", pad))
	}
	p.width = b.Len()
	io.WriteString(p.w, b.String())
}

// finish blanks the line so the next output starts clean.
func (p *progressBar) finish() {
	if p.w != nil && p.width > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
		p.width = 0
	}
}

// humanCount formats n with a k/M/G suffix.
func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fG", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e4:
		return fmt.Sprintf("%.0fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
