package server

import (
	"github.com/tallydb/tally/likes"
)

// Likes commands (LIKE.*): the API of package likes and the likes commands
// of the CLI, over RESP. Registered by "tally serve":
//
//	srv.Register(server.LikesCommands(l)...)
//
//	command                                        reply
//	---------------------------------------------  ---------------------------------------------
//	LIKE.LIKE biz item user [owner]                array: likes, dislikes, changed (1 or 0)
//	LIKE.UNLIKE | LIKE.DISLIKE | LIKE.UNDISLIKE    array: likes, dislikes, changed
//	    biz item user
//	LIKE.SETOWNER biz item owner                   array: likes, dislikes, changed
//	LIKE.COUNTS biz item [item ...]                array of arrays: likes, dislikes per item
//	LIKE.STATES biz user item [item ...]           array of "like", "dislike" or "none"
//	LIKE.LIKERS biz item [LIMIT n] [CURSOR c]      array: next cursor (nil at the end), array
//	    [DISLIKES]                                 of user ids
//	LIKE.USERLIKES biz user [LIMIT n] [CURSOR c]   array: next cursor (nil at the end), array
//	                                               of item ids, newest like first
//	LIKE.TOP biz [n] [DAY yyyy-mm-dd]              array of arrays: rank, item, likes
//	LIKE.RANK biz item [DAY yyyy-mm-dd]            array: rank, likes; nil when not ranked
//	LIKE.RECEIVED owner                            integer: likes received
//	LIKE.BUSINESS ADD biz                          OK: declares a business
//	LIKE.BUSINESS LIST                             array of business names
//
// A write (LIKE.LIKE, LIKE.DISLIKE, LIKE.SETOWNER) to a business nobody
// declared is refused ("ERR likes: unknown business ...") and changes
// nothing; reads of one return nothing.
//
// Ids are unsigned decimals; an id above 2^63-1 is replied as a bulk
// string (RESP integers are signed). Errors of package likes are sent as
// "ERR likes: ..." (an invalid business name, a limit out of range, a bad
// or stale cursor, an owner mismatch, a day not kept).

const likeGroup = "likes"

// LikesCommands returns the LIKE.BUSINESS commands over l; the other LIKE.*
// commands are entries of the one command table (DBCommands).
func LikesCommands(l *likes.Likes) []Command {
	biz := Arg{Name: "business", Type: "string"}
	h := &likeHandlers{l: l}
	return []Command{
		{
			Name: "LIKE.BUSINESS", Arity: -2, Group: likeGroup, Since: "1.0.0",
			Summary: "Business declaration commands.",
			Subcommands: []Command{
				{
					Name: "ADD", Arity: 3, Flags: FlagWrite | FlagAdmin, Group: likeGroup, Since: "1.0.0",
					Summary: "Declares a business (as \"tally business add\", with the default counter shape): LIKE.LIKE " +
						"and LIKE.DISLIKE refuse businesses nobody declared. Declaring one again changes nothing.",
					Complexity: "O(1)", Args: []Arg{biz}, Handler: h.businessAdd,
				},
				{
					Name: "LIST", Arity: 2, Flags: FlagReadOnly, Group: likeGroup, Since: "1.0.0",
					Summary:    "Returns the declared businesses, sorted (as \"tally business list\").",
					Complexity: "O(B) where B is the number of businesses", Handler: h.businessList,
				},
			},
		},
	}
}

func (h *likeHandlers) businessAdd(c *Conn, a [][]byte) {
	if err := h.l.AddBusiness(string(a[2]), likes.BusinessOptions{}); err != nil {
		c.WriteErr(err)
		return
	}
	c.WriteOK()
}

func (h *likeHandlers) businessList(c *Conn, _ [][]byte) {
	names := h.l.Businesses()
	c.WriteArray(len(names))
	for _, n := range names {
		c.WriteBulkString(n)
	}
}

type likeHandlers struct {
	l *likes.Likes
}
