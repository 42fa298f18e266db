package commands

// All returns the table: every command, in the order "tally help" lists
// them. Each call builds it anew (the table holds no state).
func All() []*Command {
	var t []*Command
	t = append(t, counterCommands()...)
	t = append(t, timelineCommands()...)
	t = append(t, tlshardCommands()...)
	t = append(t, likesCommands()...)
	t = append(t, unreadCommands()...)
	t = append(t, adminCommands()...)
	return t
}
