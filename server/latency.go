package server

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Redis's latency monitor (LATENCY LATEST, HISTORY, RESET, HELP) for the
// one kind of event tally has: a command that ran at least
// latency-monitor-threshold milliseconds ("command", or "fast-command" for
// a command flagged fast). Off by default, as in Redis (threshold 0);
// CONFIG SET latency-monitor-threshold turns it on. Each event keeps, per
// second, the largest latency seen, for the last latencyHistory seconds
// with an event.

const latencyHistory = 160 // samples per event, as Redis

type latencySample struct {
	at int64 // Unix seconds
	ms int64
}

type latencyEvent struct {
	samples []latencySample // oldest first
	max     int64
}

type latencyMonitor struct {
	threshold atomic.Int64 // ms; 0: off
	mu        sync.Mutex
	events    map[string]*latencyEvent
}

// record adds a command's latency d if it is over the threshold.
func (m *latencyMonitor) record(cmd *Command, d time.Duration) {
	thr := m.threshold.Load()
	if thr <= 0 || d.Milliseconds() < thr {
		return
	}
	name := "command"
	if cmd.Flags&FlagFast != 0 {
		name = "fast-command"
	}
	ms, now := d.Milliseconds(), time.Now().Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.events == nil {
		m.events = map[string]*latencyEvent{}
	}
	e := m.events[name]
	if e == nil {
		e = &latencyEvent{}
		m.events[name] = e
	}
	if n := len(e.samples); n > 0 && e.samples[n-1].at == now {
		e.samples[n-1].ms = max(e.samples[n-1].ms, ms)
	} else {
		e.samples = append(e.samples, latencySample{at: now, ms: ms})
		if len(e.samples) > latencyHistory {
			e.samples = e.samples[1:]
		}
	}
	e.max = max(e.max, ms)
}

func latencyLatestHandler(c *Conn, _ [][]byte) {
	m := &c.s.latency
	m.mu.Lock()
	names := make([]string, 0, len(m.events))
	for n := range m.events {
		names = append(names, n)
	}
	sort.Strings(names)
	type row struct {
		name         string
		at, last, mx int64
	}
	rows := make([]row, 0, len(names))
	for _, n := range names {
		e := m.events[n]
		s := e.samples[len(e.samples)-1]
		rows = append(rows, row{n, s.at, s.ms, e.max})
	}
	m.mu.Unlock()
	c.WriteArray(len(rows))
	for _, r := range rows {
		c.WriteArray(4)
		c.WriteBulkString(r.name)
		c.WriteInt(r.at)
		c.WriteInt(r.last)
		c.WriteInt(r.mx)
	}
}

func latencyHistoryHandler(c *Conn, args [][]byte) {
	m := &c.s.latency
	m.mu.Lock()
	var samples []latencySample
	if e := m.events[strings.ToLower(string(args[2]))]; e != nil {
		samples = append(samples, e.samples...)
	}
	m.mu.Unlock()
	c.WriteArray(len(samples))
	for _, s := range samples {
		c.WriteArray(2)
		c.WriteInt(s.at)
		c.WriteInt(s.ms)
	}
}

func latencyResetHandler(c *Conn, args [][]byte) {
	m := &c.s.latency
	m.mu.Lock()
	n := 0
	if len(args) == 2 {
		n = len(m.events)
		m.events = nil
	} else {
		for _, a := range args[2:] {
			name := strings.ToLower(string(a))
			if m.events[name] != nil {
				delete(m.events, name)
				n++
			}
		}
	}
	m.mu.Unlock()
	c.WriteInt(int64(n))
}

// setLatencyThreshold is CONFIG SET latency-monitor-threshold's check.
func parseLatencyThreshold(v []byte) (int64, error) {
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("argument must be between 0 and 9223372036854775807 inclusive")
	}
	return n, nil
}

func latencyCommand() Command {
	return Command{Name: "LATENCY", Arity: -2, Group: "server", Since: "2.8.13", Summary: "Latency monitor commands.",
		Subcommands: []Command{
			{Name: "LATEST", Arity: 2, Flags: FlagAdmin | FlagLocal, Group: "server", Since: "2.8.13", Complexity: "O(1)",
				Summary: "Returns, per event (command, fast-command), its latest sample's time and milliseconds and the largest since reset.",
				Handler: latencyLatestHandler},
			{Name: "HISTORY", Arity: 3, Flags: FlagAdmin | FlagLocal, Group: "server", Since: "2.8.13", Complexity: "O(N) where N is the number of samples",
				Summary: "Returns an event's samples: [time, milliseconds], the largest of each second, the last 160.",
				Args:    []Arg{{Name: "event", Type: "string"}}, Handler: latencyHistoryHandler},
			{Name: "RESET", Arity: -2, Flags: FlagAdmin | FlagLocal, Group: "server", Since: "2.8.13", Complexity: "O(N) where N is the number of events",
				Summary: "Drops the samples of the given events, or of all; replies how many events were reset.",
				Args:    []Arg{{Name: "event", Type: "string", Optional: true, Multiple: true}}, Handler: latencyResetHandler},
		}}
}
