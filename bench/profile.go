package bench

import (
	"errors"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// startProfile starts profiling the process for one phase of a run and
// returns the function that ends it: a CPU profile in prefix.cpu, a heap
// profile at the start (prefix.allocs-base) and at the end
// (prefix.allocs; `go tool pprof -sample_index=alloc_space -diff_base
// prefix.allocs-base prefix.allocs` is the phase's allocations), and the
// block and mutex profiles of the phase (prefix.block, prefix.mutex;
// every blocking event of 10 µs or more, every 10th mutex contention).
func startProfile(prefix string) (func() error, error) {
	if err := writeProfile("allocs", prefix+".allocs-base"); err != nil {
		return nil, err
	}
	cpu, err := os.Create(prefix + ".cpu")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		return nil, err
	}
	runtime.SetBlockProfileRate(10_000)
	runtime.SetMutexProfileFraction(10)
	return func() error {
		pprof.StopCPUProfile()
		errs := []error{cpu.Close()}
		for _, k := range []string{"allocs", "block", "mutex"} {
			errs = append(errs, writeProfile(k, prefix+"."+k))
		}
		runtime.SetBlockProfileRate(0)
		runtime.SetMutexProfileFraction(0)
		return errors.Join(errs...)
	}, nil
}

func writeProfile(kind, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = pprof.Lookup(kind).WriteTo(f, 0)
	return errors.Join(err, f.Close())
}

// startTracedProfile is startProfile with an execution trace of the phase
// in prefix.trace, for tails: `go tool trace -pprof=sync prefix.trace`
// (where goroutines waited on locks and channels) and `-pprof=sched`
// (runnable but not running).
func startTracedProfile(prefix string) (func() error, error) {
	f, err := os.Create(prefix + ".trace")
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, err
	}
	stop, err := startProfile(prefix)
	if err != nil {
		trace.Stop()
		return nil, errors.Join(err, f.Close())
	}
	return func() error {
		err := stop()
		trace.Stop()
		return errors.Join(err, f.Close())
	}, nil
}
