//go:build race

package hot

// raceEnabled thins out the randomized tests: the race detector slows them
// about 30x and they exercise no concurrency.
const raceEnabled = true
