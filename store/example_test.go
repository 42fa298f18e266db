package store_test

import (
	"fmt"
	"log"
	"os"

	"github.com/tallydb/tally/store"
)

// A counter of per-post figures: one row per post id, one column per
// figure; a row never written reads as zeros.
func Example() {
	dir, err := os.MkdirTemp("", "store-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	if err := db.CreateCounter("posts", store.CounterOptions{}); err != nil {
		log.Fatal(err)
	}
	for _, col := range []string{"reposts", "likes"} {
		if err := db.AddColumn("posts", col, store.ColumnOptions{}); err != nil {
			log.Fatal(err)
		}
	}
	posts, err := db.Counter("posts")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := posts.Incr(1861392847362048, "likes", 3); err != nil {
		log.Fatal(err)
	}
	n, err := posts.Incr(1861392847362048, "likes", -1)
	if err != nil {
		log.Fatal(err)
	}
	row, err := posts.Get(1861392847362048, nil)
	if err != nil {
		log.Fatal(err)
	}
	unseen, err := posts.Get(42, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, posts.Columns(), row, unseen)
	// Output: 2 [reposts likes] [0 2] [0 0]
}
