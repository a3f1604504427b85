package main

import (
	"fmt"

	"github.com/anp2net/relay/relay/sqlite"
)

// damaged adds, to an error that says the log at db is damaged, what
// happened and what to do about it; other errors pass unchanged.
func damaged(db string, err error) error {
	if !sqlite.IsCorrupt(err) {
		return err
	}
	return fmt.Errorf("%w\n\nthe log %s is damaged (SQLite cannot read part of the file). Every event in it is signed,\n"+
		"so it can be salvaged: 'anp2 repair --db %s' copies every readable event into a fresh log and\n"+
		"reports what it could not read; add '--peer URL' to fetch those events from a relay that has them", err, db, db)
}
