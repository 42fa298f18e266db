package replica

import (
	"sync/atomic"
	"time"
)

// Clock is the time the replicated packages see: the host wires their
// Options.Now to Clock.Now. The apply loop sets it to each entry's
// timestamp (the leader's clock when it proposed the entry) before
// applying it, so every replica applies an entry at the same time, and
// between entries it keeps the last applied entry's time. It never goes
// back. Before the first entry applies it reads the zero time's Unix
// epoch (1970-01-01 UTC), on every replica alike.
type Clock struct {
	millis atomic.Int64
}

// NewClock returns a clock at the Unix epoch.
func NewClock() *Clock { return &Clock{} }

// Now returns the time of the entry being applied, or of the last one.
func (c *Clock) Now() time.Time { return time.UnixMilli(c.millis.Load()) }

// advance moves the clock to ms unless it is already later.
func (c *Clock) advance(ms int64) {
	for {
		cur := c.millis.Load()
		if ms <= cur || c.millis.CompareAndSwap(cur, ms) {
			return
		}
	}
}
