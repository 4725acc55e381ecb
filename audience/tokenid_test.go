package audience

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestCheckHoldsTokenIDToTheCursor: an audience that returns token_id says
// its cursor is the app's token id. Check accepts it when the sampled rows
// agree (and records TokenCursor), refuses it naming the audience and the
// rule when one differs, and refuses a token_id that is not an integer.
// The pages hold every row to it at send time, failing the page as a
// cursor out of order does.
func TestCheckHoldsTokenIDToTheCursor(t *testing.T) {
	_, db, _ := newDB(t)
	ctx := context.Background()
	for u := 1; u <= 5; u++ {
		mustExec(t, db, "INSERT INTO users (id) VALUES (?)", u)
		mustExec(t, db, "INSERT INTO device_tokens (user_id, token, platform) VALUES (?, ?, 'ios')", u, fmt.Sprint("t", u))
	}
	const from = " FROM device_tokens t WHERE t.id > :after ORDER BY t.id LIMIT :limit"

	good := mustCompile(t, Definition{Name: "by_token", SQL: "SELECT t.id AS `cursor`, t.id AS token_id, t.user_id, t.token, t.platform" + from})
	if good.TokenCursor() {
		t.Error("TokenCursor before Check = true")
	}
	if err := good.Check(ctx, db); err != nil {
		t.Fatal(err)
	}
	if !good.TokenCursor() {
		t.Error("TokenCursor of an audience returning token_id = cursor is false")
	}
	// token_id is a variable as any extra column is, no more.
	if got := strings.Join(good.Vars(), ","); got != "token_id,platform" {
		t.Errorf("Vars = %q, want token_id,platform", got)
	}
	rows := pageAll(t, db, mustBind(t, good, nil), 2)
	if len(rows) != 5 {
		t.Fatalf("paged %d rows, want 5", len(rows))
	}
	for _, r := range rows {
		if r.Vars["token_id"] != fmt.Sprint(r.Cursor) {
			t.Errorf("row %d: token_id var %q", r.Cursor, r.Vars["token_id"])
		}
	}

	plain := mustCompile(t, Definition{Name: "plain", SQL: "SELECT t.id AS `cursor`, t.user_id, t.token" + from})
	if err := plain.Check(ctx, db); err != nil {
		t.Fatal(err)
	}
	if plain.TokenCursor() {
		t.Error("TokenCursor of an audience without token_id = true")
	}

	refused := []struct{ name, sql, want string }{
		{"differs", "SELECT t.id AS `cursor`, t.id + 1000 AS token_id, t.user_id, t.token" + from,
			"token_id 1001 differs from cursor 1: a query that returns token_id says its cursor is the app's token id"},
		{"differs on a later row", "SELECT t.id AS `cursor`, IF(t.id = 4, t.id * 10, t.id) AS token_id, t.user_id, t.token" + from,
			"sample row 4: token_id 40 differs from cursor 4"},
		{"null", "SELECT t.id AS `cursor`, NULLIF(t.id, 2) AS token_id, t.user_id, t.token" + from,
			"sample row 2: token_id: is NULL, want an unsigned integer (cursor 2)"},
		{"not an integer", "SELECT t.id AS `cursor`, t.token AS token_id, t.user_id, t.token" + from,
			"column token_id is VARCHAR, want an unsigned integer"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			a := mustCompile(t, Definition{Name: "liar", SQL: tc.sql})
			err := a.Check(ctx, db)
			if err == nil || !strings.Contains(err.Error(), `audience "liar"`) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check = %v, want an error naming the audience and containing %q", err, tc.want)
			}
			if a.TokenCursor() || a.Vars() != nil {
				t.Errorf("after a refused Check: TokenCursor %v, Vars %q", a.TokenCursor(), a.Vars())
			}
		})
	}

	// At send time: a row whose token_id differs fails its page (rows
	// added after the check are held to the rule too).
	mustExec(t, db, "INSERT INTO users (id) VALUES (6)")
	mustExec(t, db, "INSERT INTO device_tokens (id, user_id, token) VALUES (100, 6, 't6')")
	drift := mustCompile(t, Definition{Name: "drift", SQL: "SELECT t.id AS `cursor`, IF(t.id = 100, t.id - 1, t.id) AS token_id, t.user_id, t.token FROM device_tokens t WHERE t.id > :after AND t.id < 100 + :n ORDER BY t.id LIMIT :limit",
		Params: map[string]string{"n": "int"}})
	if err := drift.Check(ctx, db); err != nil {
		t.Fatal(err) // zero params select ids below 100 only
	}
	got, err := mustBind(t, drift, map[string]any{"n": 1}).Page(ctx, db, 5, 10, nil)
	if err == nil || len(got) != 0 || !strings.Contains(err.Error(), `audience "drift": page after 5, row 1: token_id 99 differs from cursor 100`) {
		t.Fatalf("Page = %d rows, %v; want the page failed naming the row", len(got), err)
	}
}
