package main

import (
	"strings"
	"testing"
)

func TestDBForms(t *testing.T) {
	for _, c := range []struct {
		db, sqlite, label string
		pg                bool
	}{
		{"./anp2.db", "./anp2.db", "./anp2.db", false},
		{"sqlite:/var/lib/anp2.db", "/var/lib/anp2.db", "sqlite:/var/lib/anp2.db", false},
		{"sqlite://rel/a.db", "rel/a.db", "sqlite://rel/a.db", false},
		{"postgres://u:secret@db:5432/anp2", "", "postgres://u:xxxxx@db:5432/anp2", true},
		{"postgresql://u@db/anp2?sslmode=disable", "", "postgresql://u@db/anp2?sslmode=disable", true},
		{"postgres://u:p@ss:w@rd@db/anp2", "", "postgres://u:xxxxx@db/anp2", true},
	} {
		if isPostgres(c.db) != c.pg || !c.pg && sqlitePath(c.db) != c.sqlite || dbLabel(c.db) != c.label {
			t.Errorf("%q: postgres %v path %q label %q", c.db, isPostgres(c.db), sqlitePath(c.db), dbLabel(c.db))
		}
	}
	if relayKeyDefault("./a.db") != "./a.db.relay-key" || relayKeyDefault("postgres://h/d") != "anp2.relay-key" {
		t.Error("relay key defaults")
	}
}

// FuzzDBLabel: a logged --db value never shows a URL's password.
func FuzzDBLabel(f *testing.F) {
	for _, s := range []string{"postgres://u:secret@h/d", "postgresql://:secret@h", "postgres://u@h", "./x.db", "postgres://a:b@c@d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, db string) {
		got := dbLabel(db)
		if !isPostgres(db) {
			if got != db {
				t.Fatalf("%q relabelled %q", db, got)
			}
			return
		}
		_, rest, _ := strings.Cut(db, "://")
		at := strings.LastIndex(rest, "@")
		if at < 0 {
			return
		}
		if _, pass, ok := strings.Cut(rest[:at], ":"); ok && pass != "xxxxx" && pass != "" && strings.Contains(got, ":"+pass+"@") {
			t.Fatalf("%q labelled %q: password shown", db, got)
		}
	})
}
