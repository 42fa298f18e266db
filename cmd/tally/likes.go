package main

import (
	"fmt"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/internal/quote"
	"github.com/tallydb/tally/likes"
	"github.com/tallydb/tally/store"
)

// The likes commands (like, likes, liked, likers, top, rank, ...) are
// entries of the one command table (internal/commands, table.go); this
// file keeps what the loads and the business commands share.

// openLikes opens the database through tally.Open. A command that only
// reads passes create=false: the packages whose data exists are opened,
// and l is nil when the store holds no likes (so reading creates
// nothing); one that writes creates the store and the packages if needed.
func (e *env) openLikes(create bool) (db *tallydb.DB, l *likes.Likes, err error) {
	mode := openExisting
	if create {
		mode = openCreate
	}
	if db, err = e.openDB(mode); err != nil {
		return nil, nil, err
	}
	return db, db.Likes(), nil
}

// parseBusiness checks a business name before anything is opened.
func parseBusiness(s string) (string, error) {
	if len(s) > likes.MaxBusinessLen || store.ValidateName(s) != nil {
		return "", fmt.Errorf("%w: %s (want 1 to %d letters, digits, '_' or '-', not starting with '-')",
			likes.ErrInvalidBusiness, quote.Input(s), likes.MaxBusinessLen)
	}
	return s, nil
}
