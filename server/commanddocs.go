package server

// COMMAND, COMMAND INFO, COMMAND COUNT, COMMAND LIST and COMMAND DOCS, in
// Redis 7's RESP2 shapes (redis-cli builds its hints from COMMAND DOCS).

// commandHandler is COMMAND without a subcommand: every command's entry.
func commandHandler(c *Conn, args [][]byte) {
	c.WriteArray(len(c.s.cmds.sorted))
	for _, cmd := range c.s.cmds.sorted {
		c.writeCommandInfo(cmd)
	}
}

func commandCountHandler(c *Conn, args [][]byte) { c.WriteInt(int64(len(c.s.cmds.sorted))) }

func commandListHandler(c *Conn, args [][]byte) {
	c.WriteArray(len(c.s.cmds.sorted))
	for _, cmd := range c.s.cmds.sorted {
		c.WriteBulkString(cmd.fullName)
	}
}

func commandInfoHandler(c *Conn, args [][]byte) {
	if len(args) == 2 {
		commandHandler(c, args)
		return
	}
	c.WriteArray(len(args) - 2)
	for _, name := range args[2:] {
		if cmd := c.s.lookupFull(name); cmd != nil {
			c.writeCommandInfo(cmd)
		} else {
			c.WriteNull()
		}
	}
}

// lookupFull finds "name" or "container|sub".
func (s *Server) lookupFull(name []byte) *Command {
	for i, ch := range name {
		if ch == '|' {
			parent := lookupIn(s.cmds.byName, name[:i])
			if parent == nil || parent.subs == nil {
				return nil
			}
			return lookupIn(parent.subs, name[i+1:])
		}
	}
	return lookupIn(s.cmds.byName, name)
}

// writeCommandInfo writes one COMMAND entry: name, arity, flags, first key,
// last key, key step, ACL categories, tips, key specs, subcommands.
func (c *Conn) writeCommandInfo(cmd *Command) {
	c.WriteArray(10)
	c.WriteBulkString(cmd.fullName)
	c.WriteInt(int64(cmd.Arity))
	var flags []string
	for _, f := range redisFlagNames {
		if cmd.Flags&f.f != 0 {
			flags = append(flags, f.name)
		}
	}
	if cmd.Keys != nil {
		flags = append(flags, "movablekeys")
	}
	c.WriteArray(len(flags))
	for _, f := range flags {
		c.WriteSimple(f)
	}
	c.WriteInt(int64(cmd.FirstKey))
	c.WriteInt(int64(cmd.LastKey))
	c.WriteInt(int64(cmd.KeyStep))
	cats := aclCategories(cmd)
	c.WriteArray(len(cats))
	for _, cat := range cats {
		c.WriteSimple(cat)
	}
	c.WriteArray(0) // tips
	c.WriteArray(0) // key specs
	c.WriteArray(len(cmd.Subcommands))
	for i := range cmd.Subcommands {
		c.writeCommandInfo(&cmd.Subcommands[i])
	}
}

// aclCategories derives Redis's ACL categories from the flags and group.
func aclCategories(cmd *Command) []string {
	var cats []string
	if cmd.Flags&FlagWrite != 0 {
		cats = append(cats, "@write")
	}
	if cmd.Flags&FlagReadOnly != 0 {
		cats = append(cats, "@read")
	}
	if cmd.Flags&FlagAdmin != 0 {
		cats = append(cats, "@admin", "@dangerous")
	}
	if cmd.Group != "" {
		cats = append(cats, "@"+cmd.Group)
	}
	if cmd.Flags&FlagFast != 0 {
		cats = append(cats, "@fast")
	} else {
		cats = append(cats, "@slow")
	}
	return cats
}

// commandDocsHandler is COMMAND DOCS [name ...]: a flat map from command
// name to its documentation map. Unknown names are left out.
func commandDocsHandler(c *Conn, args [][]byte) {
	var cmds []*Command
	if len(args) == 2 {
		cmds = c.s.cmds.sorted
	} else {
		for _, name := range args[2:] {
			if cmd := c.s.lookupFull(name); cmd != nil {
				cmds = append(cmds, cmd)
			}
		}
	}
	c.WriteArray(2 * len(cmds))
	for _, cmd := range cmds {
		c.WriteBulkString(cmd.fullName)
		c.writeCommandDoc(cmd)
	}
}

func (c *Conn) writeCommandDoc(cmd *Command) {
	n := 3 // summary, since, group
	if cmd.Complexity != "" {
		n++
	}
	if len(cmd.Args) > 0 {
		n++
	}
	if len(cmd.Subcommands) > 0 {
		n++
	}
	c.WriteArray(2 * n)
	c.WriteBulkString("summary")
	c.WriteBulkString(cmd.Summary)
	c.WriteBulkString("since")
	c.WriteBulkString(cmd.Since)
	c.WriteBulkString("group")
	c.WriteBulkString(cmd.Group)
	if cmd.Complexity != "" {
		c.WriteBulkString("complexity")
		c.WriteBulkString(cmd.Complexity)
	}
	if len(cmd.Args) > 0 {
		c.WriteBulkString("arguments")
		c.writeArgDocs(cmd.Args)
	}
	if len(cmd.Subcommands) > 0 {
		c.WriteBulkString("subcommands")
		c.WriteArray(2 * len(cmd.Subcommands))
		for i := range cmd.Subcommands {
			sc := &cmd.Subcommands[i]
			c.WriteBulkString(sc.fullName)
			c.writeCommandDoc(sc)
		}
	}
}

func (c *Conn) writeArgDocs(args []Arg) {
	c.WriteArray(len(args))
	for _, a := range args {
		n := 2 // name, type
		if a.Token != "" {
			n++
		}
		var flags []string
		if a.Optional {
			flags = append(flags, "optional")
		}
		if a.Multiple {
			flags = append(flags, "multiple")
		}
		if len(flags) > 0 {
			n++
		}
		if len(a.Args) > 0 {
			n++
		}
		c.WriteArray(2 * n)
		c.WriteBulkString("name")
		c.WriteBulkString(a.Name)
		c.WriteBulkString("type")
		c.WriteBulkString(a.Type)
		if a.Token != "" {
			c.WriteBulkString("token")
			c.WriteBulkString(a.Token)
		}
		if len(flags) > 0 {
			c.WriteBulkString("flags")
			c.WriteArray(len(flags))
			for _, f := range flags {
				c.WriteSimple(f)
			}
		}
		if len(a.Args) > 0 {
			c.WriteBulkString("arguments")
			c.writeArgDocs(a.Args)
		}
	}
}
