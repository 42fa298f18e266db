package main

import (
	"net/http"
	"net/http/pprof"
	"runtime"
)

// The --pprof handlers of serve: Go's net/http/pprof on the --metrics-addr
// listener, under /debug/pprof/, behind the same address rules and
// password as /metrics (server.Server.Guard). They are how a served tail
// is profiled (bench/RESULTS.md, issue 18):
//
//	go tool pprof http://HOST:PORT/debug/pprof/profile?seconds=10
//	curl -o trace.out 'http://HOST:PORT/debug/pprof/trace?seconds=5'
//	go tool pprof http://HOST:PORT/debug/pprof/mutex?seconds=10
//
// The mutex and block profiles record nothing unless their rates are set,
// so --pprof sets them, at rates cheap enough to leave on while serving:
// one mutex contention event in pprofMutexFraction, and blocking events
// sampled one per pprofBlockRate nanoseconds spent blocked (every event
// longer than that is recorded).

const (
	pprofMutexFraction = 100
	pprofBlockRate     = 10_000 // 10 µs
)

// metricsMux returns the handler of --metrics-addr: metrics at /metrics
// and, with withPprof, the pprof index and profiles under /debug/pprof/,
// each passed through guard (the server's authentication).
func metricsMux(metrics http.Handler, withPprof bool, guard func(http.Handler) http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	if !withPprof {
		return mux
	}
	runtime.SetMutexProfileFraction(pprofMutexFraction)
	runtime.SetBlockProfileRate(pprofBlockRate)
	// pprof.Index serves every named profile (heap, goroutine, mutex,
	// block, allocs, threadcreate) under /debug/pprof/NAME; the other four
	// are handlers of their own, as in net/http/pprof's init.
	mux.Handle("/debug/pprof/", guard(http.HandlerFunc(pprof.Index)))
	mux.Handle("/debug/pprof/cmdline", guard(http.HandlerFunc(pprof.Cmdline)))
	mux.Handle("/debug/pprof/profile", guard(http.HandlerFunc(pprof.Profile)))
	mux.Handle("/debug/pprof/symbol", guard(http.HandlerFunc(pprof.Symbol)))
	mux.Handle("/debug/pprof/trace", guard(http.HandlerFunc(pprof.Trace)))
	return mux
}
