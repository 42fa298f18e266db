//go:build !race

package hot

const raceEnabled = false
