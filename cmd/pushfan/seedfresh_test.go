package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"pushfan/internal/testsupport/testdb"
)

// TestSeedFreshStartsTheDemoOver: a second seed finds every demo user there
// ("seeded 0 users"); `seed --fresh` (what `make demo-reset` runs) drops
// the database with what earlier tours left in it, migrates it again and
// seeds every user anew. A database on another machine is refused.
func TestSeedFreshStartsTheDemoOver(t *testing.T) {
	tdb := testdb.New(t)
	setEnv(t, map[string]string{"PUSHFAN_MYSQL_DSN": tdb.DSN, "PUSHFAN_LOG_FORMAT": "text"})
	seedOut := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := run(context.Background(), append([]string{"seed", "-users", "7"}, args...), &out, &errOut); err != nil {
			t.Fatalf("seed %v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	if out := seedOut(); !strings.Contains(out, "seeded 7 users") {
		t.Fatalf("first seed: %s", out)
	}
	if out := seedOut(); !strings.Contains(out, "seeded 0 users") {
		t.Fatalf("second seed: %s, want the users found there already", out)
	}
	// Something an earlier tour left: a broadcast.
	if _, err := tdb.SQL.Exec(`INSERT INTO broadcasts (message, audience, status) VALUES ('{}', '{}', 'completed')`); err != nil {
		t.Fatal(err)
	}
	out := seedOut("-fresh")
	if !strings.Contains(out, "dropped the demo database") || !strings.Contains(out, "seeded 7 users") {
		t.Fatalf("seed -fresh: %s", out)
	}
	// A new pool: the test's own connections had the dropped database
	// selected.
	fresh, err := sqlx.Open("mysql", tdb.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	var left int
	if err := fresh.Get(&left, `SELECT COUNT(*) FROM broadcasts`); err != nil || left != 0 {
		t.Fatalf("broadcasts after a fresh start: %d (%v), want none", left, err)
	}

	// A database on this machine that is not the demo's (a single-host
	// production database, a tunnel to one): refused, and kept.
	other := testdb.New(t)
	setEnv(t, map[string]string{"PUSHFAN_MYSQL_DSN": other.DSN})
	var o, e bytes.Buffer
	err = run(context.Background(), []string{"seed", "-fresh"}, &o, &e)
	if err == nil || !strings.Contains(err.Error(), "not a demo database") {
		t.Fatalf("seed -fresh of a database without the demo's users: %v, want a refusal", err)
	}
	if err := other.SQL.Get(&left, `SELECT COUNT(*) FROM broadcasts`); err != nil {
		t.Fatalf("the refused database: %v", err)
	}

	remote := strings.Replace(tdb.DSN, "127.0.0.1", "192.0.2.1", 1)
	setEnv(t, map[string]string{"PUSHFAN_MYSQL_DSN": remote})
	o.Reset()
	err = run(context.Background(), []string{"seed", "-fresh"}, &o, &e)
	if err == nil || !strings.Contains(err.Error(), "only a database on this machine") {
		t.Fatalf("seed -fresh at 192.0.2.1: %v, want a refusal", err)
	}
}
