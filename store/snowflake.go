package store

// Snowflake defaults for AgeByTime, the id scheme of Twitter (and of the
// README's examples): the tools (tally counter add --age, TALLY.COUNTER
// ADD ... AGE) use them when the user gives no epoch or shift.
const (
	// DefaultIDEpochMs is Twitter's snowflake epoch, in Unix milliseconds
	// (2010-11-04 01:42:54.657 UTC).
	DefaultIDEpochMs = 1288834974657
	// DefaultIDTimeShift is the number of id bits below the timestamp in
	// a snowflake id: 10 bits of machine and 12 of sequence.
	DefaultIDTimeShift = 22
)
