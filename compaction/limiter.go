package compaction

import (
	"context"
	"sync"
	"time"
)

// Limiter is a token bucket in bytes per second, shared by all jobs. A nil
// *Limiter or a zero rate does not limit.
type Limiter struct {
	rate  float64 // bytes per second
	burst float64

	mu struct {
		sync.Mutex
		tokens float64
		last   time.Time
	}
}

// NewLimiter returns a limiter of bytesPerSec (≤ 0 means unlimited) with a
// burst of a quarter second's worth (at least 1 MiB).
func NewLimiter(bytesPerSec int64) *Limiter {
	if bytesPerSec <= 0 {
		return nil
	}
	l := &Limiter{rate: float64(bytesPerSec), burst: max(float64(bytesPerSec)/4, 1<<20)}
	l.mu.tokens = l.burst
	l.mu.last = time.Now()
	return l
}

// Wait blocks until n bytes may be written, or ctx is done.
func (l *Limiter) Wait(ctx context.Context, n int) error {
	if l == nil {
		return ctx.Err()
	}
	l.mu.Lock()
	now := time.Now()
	l.mu.tokens = min(l.burst, l.mu.tokens+now.Sub(l.mu.last).Seconds()*l.rate)
	l.mu.last = now
	l.mu.tokens -= float64(n)
	deficit := -l.mu.tokens
	l.mu.Unlock()
	if deficit <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(time.Duration(deficit / l.rate * float64(time.Second)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
