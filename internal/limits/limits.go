// Package limits is the one set of schema limits every tier checks against:
// store validates a schema change with them before it becomes durable, and
// hot and cold size their layouts from them; the command line quotes them in
// its help. Keeping them in one place is what makes "validated before
// durable" true for every tier at once: a counter that store accepts always
// fits a hot table, a cold delta and a cold block.
package limits

const (
	// MaxColumns is the most columns a counter may have. Cold blocks hold
	// at most this many columns.
	MaxColumns = 16
	// MaxTableColumns is the most columns a hot table may have: a cold
	// range's delta table carries one deletion-marker column before the
	// counter's MaxColumns.
	MaxTableColumns = MaxColumns + 1

	// MinRangeBits and MaxRangeBits bound a counter's range bits (the low
	// id bits kept per row; a hot table's key bits).
	MinRangeBits = 8
	MaxRangeBits = 48

	// MaxNameLen is the longest counter or column name, in bytes.
	MaxNameLen = 64

	// MaxIDTimeShift is the largest number of id bits below the timestamp
	// of a time-aged counter's snowflake ids (Twitter's layout uses 22).
	MaxIDTimeShift = 40
	// MaxIDTimeMs bounds both the snowflake epoch of a time-aged counter
	// (Unix milliseconds) and the milliseconds an id can carry above it:
	// 2^50 ms is about 35,700 years, and the sum of two such values cannot
	// overflow an int64.
	MaxIDTimeMs = 1 << 50
)
