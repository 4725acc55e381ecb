package audience

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"pushfan/internal/testsupport/testdb"
	"pushfan/model"
	"pushfan/repository"
)

// subscriptionsDDL is the deployment's own table the renewal audience reads.
const subscriptionsDDL = `CREATE TABLE subscriptions (
	user_id   BIGINT UNSIGNED NOT NULL PRIMARY KEY,
	plan      VARCHAR(32)     NULL,
	amount    DECIMAL(10,2)   NOT NULL,
	renews_on DATE            NOT NULL,
	reminders TINYINT(1)      NOT NULL DEFAULT 1
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`

// newDB returns a fresh migrated database with the subscriptions table.
func newDB(t *testing.T) (*repository.Store, *sqlx.DB, string) {
	t.Helper()
	tdb := testdb.New(t)
	store, dsn := tdb.Store, tdb.DSN
	db := tdb.SQL
	mustExec(t, db, subscriptionsDDL)
	return store, db, dsn
}

func mustExec(t *testing.T, db *sqlx.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// seedRenewals fills users, device_tokens and subscriptions with a mix the
// renewal audience must filter: locales, push_enabled, invalidated tokens,
// reminders off, renewal in 0..3 days, a NULL plan, and users whose tokens
// are interleaved with other users' (token ids are not grouped by user).
func seedRenewals(t *testing.T, db *sqlx.DB, users int) {
	t.Helper()
	for u := 1; u <= users; u++ {
		locale := "en"
		if u%3 == 0 {
			locale = "ko"
		}
		mustExec(t, db, "INSERT INTO users (id, push_enabled, locale) VALUES (?, ?, ?)", u, u%7 != 0, locale)
		var plan any = "basic"
		switch {
		case u == 10:
			plan = nil
		case u%2 == 0:
			plan = "pro"
		}
		mustExec(t, db, "INSERT INTO subscriptions (user_id, plan, amount, renews_on, reminders) VALUES (?, ?, ?, CURRENT_DATE + INTERVAL ? DAY, ?)",
			u, plan, fmt.Sprintf("%d.%02d", 5+u%3*5, u%100), u%4, u%11 != 0)
	}
	for k := range 3 {
		for u := 1; u <= users; u++ {
			if k > u%3 {
				continue // users own 1 to 3 tokens
			}
			mustExec(t, db, "INSERT INTO device_tokens (user_id, token, platform) VALUES (?, ?, 'android')", u, fmt.Sprintf("tok-%d-%d", u, k))
		}
	}
	mustExec(t, db, "UPDATE device_tokens SET invalidated_at = NOW(6) WHERE user_id % 5 = 0 AND token LIKE '%-1'")
	// An orphan token: no user row, so never targeted.
	mustExec(t, db, "INSERT INTO device_tokens (user_id, token) VALUES (999999, 'orphan')")
}

func mustCompile(t *testing.T, d Definition) *Audience {
	t.Helper()
	auds, err := Compile([]Definition{d})
	if err != nil {
		t.Fatal(err)
	}
	return auds[0]
}

func mustBind(t *testing.T, a *Audience, params map[string]any) Bound {
	t.Helper()
	b, err := a.Bind(params)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pageAll pages the whole audience with the given page size.
func pageAll(t *testing.T, db *sqlx.DB, b Bound, size int) []Row {
	t.Helper()
	var all, buf []Row
	var after uint64
	for {
		var err error
		buf, err = b.Page(context.Background(), db, after, size, buf)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, buf...)
		if len(buf) < size {
			return all
		}
		after = buf[len(buf)-1].Cursor
	}
}

func TestCheck(t *testing.T) {
	_, db, _ := newDB(t)
	ctx := context.Background()
	a := mustCompile(t, renewalDef())
	if err := a.Check(ctx, db); err != nil {
		t.Fatal(err)
	}
	if got := a.Vars(); !slices.Equal(got, []string{"plan", "amount", "renews_on"}) {
		t.Errorf("Vars = %q", got)
	}
	noVars := mustCompile(t, Definition{Name: "plain", SQL: "SELECT id AS `Cursor`, user_id AS USER_ID, token FROM device_tokens WHERE id > :after ORDER BY id LIMIT :limit"})
	if err := noVars.Check(ctx, db); err != nil {
		t.Fatal(err)
	}
	if got := noVars.Vars(); got == nil || len(got) != 0 {
		t.Errorf("Vars of an audience without extra columns = %#v, want empty non-nil", got)
	}
}

func TestCheckErrors(t *testing.T) {
	_, db, _ := newDB(t)
	const where = " FROM device_tokens t JOIN users u ON u.id = t.user_id WHERE t.id > :after ORDER BY t.id LIMIT :limit"
	tests := []struct {
		name, sql string
		params    map[string]string
		want      []string
	}{
		{"no such table", "SELECT t.id AS `cursor`, t.user_id, t.token FROM no_such_table t WHERE t.id > :after ORDER BY t.id LIMIT :limit", nil,
			[]string{`audience "bad": sql does not prepare`, "no_such_table"}},
		{"no such column", "SELECT t.id AS `cursor`, t.user_id, t.tokn AS token" + where, nil,
			[]string{`audience "bad": sql does not prepare`, "tokn"}},
		{"syntax error", "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after ORDER t.id LIMIT :limit", nil,
			[]string{`audience "bad": sql does not prepare`, "syntax"}},
		{"unquoted cursor", "SELECT t.id AS cursor, t.user_id, t.token" + where, nil,
			[]string{`audience "bad": sql does not prepare (note: CURSOR is a reserved word, write AS ` + "`cursor`)"}},
		{"missing cursor and token", "SELECT t.id, t.user_id" + where, nil,
			[]string{`audience "bad": sql returns no cursor, token column (it returns: id, user_id)`}},
		{"missing user_id", "SELECT t.id AS `cursor`, t.token, u.locale" + where, nil,
			[]string{`audience "bad": sql returns no user_id column`}},
		{"cursor not an integer", "SELECT t.token AS `cursor`, t.user_id, t.token AS token" + where, nil,
			[]string{`audience "bad": column cursor is VARCHAR, want an unsigned integer`}},
		{"several problems, each named", "SELECT t.token AS `cursor`, t.token, t.token AS x, t.id AS X, UPPER(t.token)" + where, nil,
			[]string{`audience "bad": sql returns no user_id column`, "\naudience \"bad\": column cursor is VARCHAR",
				"\naudience \"bad\": column \"X\" appears twice", "\naudience \"bad\": column \"UPPER(t.token)\" is not a usable"}},
		{"duplicate column", "SELECT t.id AS `cursor`, t.user_id, t.token, u.locale, t.platform AS LOCALE" + where, nil,
			[]string{`audience "bad": column "LOCALE" appears twice`}},
		{"variable needs an alias", "SELECT t.id AS `cursor`, t.user_id, t.token, UPPER(u.locale)" + where, nil,
			[]string{`audience "bad": column "UPPER(u.locale)" is not a usable template variable name`}},
		{"limit ignored", "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after OR :limit = 0 ORDER BY t.id", nil,
			[]string{`audience "bad": sql returned a row with :limit 0`}},
		{"int param against an int column is fine", "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t WHERE t.id > :after AND t.user_id = :d ORDER BY t.id LIMIT :limit",
			map[string]string{"d": "int"}, nil}, // fine: an int param compared to an int column
	}
	mustExec(t, db, "INSERT INTO device_tokens (user_id, token) VALUES (1, 'a')") // for "limit ignored"
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := mustCompile(t, Definition{Name: "bad", SQL: tc.sql, Params: tc.params})
			err := a.Check(context.Background(), db)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("Check succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			if a.Vars() != nil {
				t.Errorf("Vars after a failed Check = %q", a.Vars())
			}
		})
	}
}

// TestCheckIsReadOnly: Check runs the query in a read-only transaction, so
// even a SELECT that writes through a stored function cannot change anything
// at start-up. (Compile's SELECT-only rule is the first line of defence.)
func TestCheckIsReadOnly(t *testing.T) {
	_, db, _ := newDB(t)
	ctx := context.Background()
	mustExec(t, db, "CREATE TABLE side_effects (n INT NOT NULL)")
	mustExec(t, db, `CREATE FUNCTION bump() RETURNS INT MODIFIES SQL DATA BEGIN INSERT INTO side_effects VALUES (1); RETURN 1; END`)
	mustExec(t, db, "INSERT INTO users (id) VALUES (1)")
	mustExec(t, db, "INSERT INTO device_tokens (user_id, token) VALUES (1, 'a')")
	a := mustCompile(t, Definition{Name: "sneaky", SQL: "SELECT id AS `cursor`, user_id, token, bump() AS b FROM device_tokens WHERE id > :after ORDER BY id LIMIT :limit"})
	err := a.Check(ctx, db)
	if err == nil || !strings.Contains(err.Error(), `audience "sneaky"`) || !strings.Contains(err.Error(), "READ ONLY") {
		t.Errorf("Check = %v, want a read-only refusal naming the audience", err)
	}
	var n int
	if err := db.GetContext(ctx, &n, "SELECT COUNT(*) FROM side_effects"); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("Check wrote %d rows", n)
	}
}

func TestPageEqualsDirectQuery(t *testing.T) {
	_, db, _ := newDB(t)
	seedRenewals(t, db, 200)
	ctx := context.Background()
	a := mustCompile(t, renewalDef())
	if err := a.Check(ctx, db); err != nil {
		t.Fatal(err)
	}

	for _, days := range []int{1, 3} {
		for _, locale := range []string{"en", "ko"} {
			t.Run(fmt.Sprintf("%d days %s", days, locale), func(t *testing.T) {
				// The same selection written by hand, values as arguments.
				var want []Row
				rows, err := db.QueryContext(ctx, `SELECT t.id, t.user_id, t.token, COALESCE(s.plan, ''), s.amount, DATE_FORMAT(s.renews_on, '%Y-%m-%d')
					FROM device_tokens t JOIN users u ON u.id = t.user_id JOIN subscriptions s ON s.user_id = t.user_id
					WHERE t.invalidated_at IS NULL AND u.push_enabled = 1 AND s.reminders = 1 AND u.locale = ?
					  AND s.renews_on = CURRENT_DATE + INTERVAL ? DAY ORDER BY t.id`, locale, days)
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var r Row
					var plan, amount, renews string
					if err := rows.Scan(&r.Cursor, &r.UserID, &r.Token, &plan, &amount, &renews); err != nil {
						t.Fatal(err)
					}
					r.Vars = map[string]string{"plan": plan, "amount": amount, "renews_on": renews}
					want = append(want, r)
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				rows.Close()
				if len(want) < 8 {
					t.Fatalf("seed gives only %d rows; want several pages", len(want))
				}

				b := mustBind(t, a, map[string]any{"days_before": float64(days), "locale": locale})
				for _, size := range []int{1, 3, 4, len(want), len(want) + 1, 1000} {
					got := pageAll(t, db, b, size)
					if len(got) != len(want) {
						t.Fatalf("page size %d: %d rows, want %d", size, len(got), len(want))
					}
					for i := range want {
						g, w := got[i], want[i]
						if g.Cursor != w.Cursor || g.UserID != w.UserID || g.Token != w.Token || !mapsEqual(g.Vars, w.Vars) {
							t.Fatalf("page size %d, row %d = %+v, want %+v", size, i, g, w)
						}
					}
				}
			})
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// TestPageValueFormats: extra columns come out as MySQL prints them, NULL as
// "", both through the driver's client-side interpolation (repository.Open's
// default, text protocol) and through server-side prepared statements
// (binary protocol).
func TestPageValueFormats(t *testing.T) {
	_, db, dsn := newDB(t)
	ctx := context.Background()
	mustExec(t, db, "INSERT INTO users (id) VALUES (1)")
	mustExec(t, db, "INSERT INTO device_tokens (user_id, token) VALUES (1, 'tok')")
	a := mustCompile(t, Definition{Name: "formats", Params: map[string]string{"d": "date", "b": "bool", "s": "string", "n": "int"}, SQL: "SELECT id AS `cursor`, user_id, token, " +
		"CAST('2030-01-31' AS DATE) AS a_date, CAST('2030-01-31 10:20:30.5' AS DATETIME(6)) AS a_datetime, CAST('2030-01-31 10:20:30' AS DATETIME) AS a_datetime0, " +
		"CAST(19.9 AS DECIMAL(10,2)) AS a_decimal, 1.5e0 AS a_double, -7 AS a_int, NULL AS a_null, 'héllo' AS a_text, " +
		":d AS p_date, :b AS p_bool, :s AS p_string, :n AS p_int " +
		"FROM device_tokens WHERE id > :after ORDER BY id LIMIT :limit"})
	if err := a.Check(ctx, db); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a_date": "2030-01-31", "a_datetime": "2030-01-31 10:20:30.5", "a_datetime0": "2030-01-31 10:20:30",
		"a_decimal": "19.90", "a_double": "1.5", "a_int": "-7", "a_null": "", "a_text": "héllo",
		"p_date": "2024-02-29", "p_bool": "1", "p_string": `it's "quoted" \ 한`, "p_int": "-12"}
	b := mustBind(t, a, map[string]any{"d": "2024-02-29", "b": true, "s": `it's "quoted" \ 한`, "n": -12.0})

	prepared, err := sqlx.Open("mysql", dsn) // no interpolateParams: server-side prepared statements
	if err != nil {
		t.Fatal(err)
	}
	defer prepared.Close()
	for name, db := range map[string]*sqlx.DB{"interpolated": db, "prepared": prepared} {
		rows, err := b.Page(ctx, db, 0, 10, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(rows) != 1 || rows[0].Token != "tok" || rows[0].UserID != 1 {
			t.Fatalf("%s: rows = %+v", name, rows)
		}
		for k, w := range want {
			if g := rows[0].Vars[k]; g != w {
				t.Errorf("%s: %s = %q, want %q", name, k, g, w)
			}
		}
	}
}

func TestPageRejectsBrokenKeyset(t *testing.T) {
	_, db, _ := newDB(t)
	ctx := context.Background()
	for u := 1; u <= 5; u++ {
		mustExec(t, db, "INSERT INTO users (id) VALUES (?)", u)
		mustExec(t, db, "INSERT INTO device_tokens (user_id, token) VALUES (?, ?)", u, fmt.Sprint("t", u))
	}
	tests := []struct{ name, sql, want string }{
		{"descending", "SELECT id AS `cursor`, user_id, token FROM device_tokens WHERE id > :after ORDER BY id DESC LIMIT :limit",
			"cursor 4 follows 5: cursors must be strictly increasing"},
		{"after ignored", "SELECT id AS `cursor`, user_id, token FROM device_tokens WHERE id > 0 * :after ORDER BY id LIMIT :limit",
			"cursor 1 follows 2: cursors must be strictly increasing"},
		{"not unique", "SELECT d.id AS `cursor`, d.user_id, d.token FROM device_tokens d JOIN device_tokens x ON x.id <= 2 WHERE d.id > :after ORDER BY d.id LIMIT :limit",
			"cursor 1 follows 1"},
		{"limit ignored", "SELECT id AS `cursor`, user_id, token FROM device_tokens WHERE id > :after AND :limit > 0 ORDER BY id",
			"returned more than 2 rows"},
		{"negative cursor", "SELECT -id AS `cursor`, user_id, token FROM device_tokens WHERE id > :after ORDER BY id LIMIT :limit",
			"cursor: -1 is negative"},
		{"null token", "SELECT id AS `cursor`, user_id, NULL AS token FROM device_tokens WHERE id > :after ORDER BY id LIMIT :limit",
			"token is NULL (cursor 1)"},
		{"missing column", "SELECT id AS `cursor`, user_id FROM device_tokens WHERE id > :after ORDER BY id LIMIT :limit",
			"no token column"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBind(t, mustCompile(t, Definition{Name: "broken", SQL: tc.sql}), nil)
			after := uint64(0)
			if tc.name == "after ignored" {
				after = 2 // the first page is fine; the one after 2 is not
			}
			got, err := b.Page(ctx, db, after, 2, make([]Row, 0, 4))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `audience "broken"`) {
				t.Fatalf("Page = %v, want an error naming the audience and containing %q", err, tc.want)
			}
			if len(got) != 0 {
				t.Errorf("Page returned %d rows with an error", len(got))
			}
		})
	}
	if _, err := (Bound{}).Page(ctx, db, 0, 10, nil); err == nil {
		t.Error("Page of the zero Bound succeeded")
	}
	b := mustBind(t, mustCompile(t, Definition{Name: "ok", SQL: "SELECT id AS `cursor`, user_id, token FROM device_tokens WHERE id > :after ORDER BY id LIMIT :limit"}), nil)
	if _, err := b.Page(ctx, db, 0, 0, nil); err == nil {
		t.Error("Page with limit 0 succeeded")
	}
}

func TestPreview(t *testing.T) {
	store, db, _ := newDB(t)
	ctx := context.Background()
	// 2,600 users: user 1 has the first three tokens (so the first rows
	// repeat a user id), every 13th user has push off, every 17th token is
	// invalidated: more than two preview pages of 1,000.
	const users = 2600
	insertMany(t, db, "INSERT INTO users (id, push_enabled) VALUES ", users, func(i int) []any { return []any{i + 1, (i+1)%13 != 0} })
	insertMany(t, db, "INSERT INTO device_tokens (user_id, token) VALUES ", 3, func(i int) []any { return []any{1, fmt.Sprint("first-", i)} })
	insertMany(t, db, "INSERT INTO device_tokens (user_id, token) VALUES ", users, func(i int) []any { return []any{i + 1, fmt.Sprint("tok-", i)} })
	mustExec(t, db, "UPDATE device_tokens SET invalidated_at = NOW(6) WHERE id % 17 = 0")

	a := mustCompile(t, Definition{Name: "everyone", SQL: "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t JOIN users u ON u.id = t.user_id " +
		"WHERE t.id > :after AND t.invalidated_at IS NULL AND u.push_enabled = 1 ORDER BY t.id LIMIT :limit"})
	if err := a.Check(ctx, db); err != nil {
		t.Fatal(err)
	}
	b := mustBind(t, a, map[string]any{})

	count, sample, err := b.Preview(ctx, db, 5)
	if err != nil {
		t.Fatal(err)
	}
	// The built-in "all" audience selects the same tokens.
	builtin, err := store.CountAudience(ctx, model.Audience{All: true})
	if err != nil {
		t.Fatal(err)
	}
	paged := int64(len(pageAll(t, db, b, 250)))
	if count != builtin || count != paged || count <= 2*PreviewPageSize {
		t.Errorf("Preview count = %d, built-in count = %d, paged = %d (want equal, > %d)", count, builtin, paged, 2*PreviewPageSize)
	}
	if !slices.Equal(sample, []uint64{1, 2, 3, 4, 5}) {
		t.Errorf("sample = %v, want the first five distinct users [1 2 3 4 5]", sample)
	}
	if _, s, _ := b.Preview(ctx, db, 0); s == nil || len(s) != 0 {
		t.Errorf("sample of 0 = %#v, want empty non-nil", s)
	}

	// Fewer distinct users than asked for: all of them, once each.
	small := mustBind(t, mustCompile(t, Definition{Name: "first", SQL: "SELECT t.id AS `cursor`, t.user_id, t.token FROM device_tokens t " +
		"WHERE t.id > :after AND t.user_id IN (1, 2) ORDER BY t.id LIMIT :limit"}), nil)
	count, sample, err = small.Preview(ctx, db, 10)
	if err != nil {
		t.Fatal(err)
	}
	if count != 5 || !slices.Equal(sample, []uint64{1, 2}) {
		t.Errorf("small preview = %d %v, want 5 [1 2]", count, sample)
	}
}

// insertMany inserts n rows built by row(i) with multi-row INSERTs.
func insertMany(t *testing.T, db *sqlx.DB, prefix string, n int, row func(i int) []any) {
	t.Helper()
	const batch = 500
	for start := 0; start < n; start += batch {
		end := min(start+batch, n)
		var sb strings.Builder
		sb.WriteString(prefix)
		var args []any
		for i := start; i < end; i++ {
			vals := row(i)
			if i > start {
				sb.WriteByte(',')
			}
			sb.WriteString("(" + strings.TrimSuffix(strings.Repeat("?,", len(vals)), ",") + ")")
			args = append(args, vals...)
		}
		mustExec(t, db, sb.String(), args...)
	}
}

// TestInjectionStaysInert: a string parameter holding SQL is a value, never
// SQL. Through both the driver's interpolation and server-side prepared
// statements, it matches nothing and every table is intact.
func TestInjectionStaysInert(t *testing.T) {
	_, db, dsn := newDB(t)
	ctx := context.Background()
	seedRenewals(t, db, 30)
	a := mustCompile(t, renewalDef())
	if err := a.Check(ctx, db); err != nil {
		t.Fatal(err)
	}
	echo := mustCompile(t, Definition{Name: "echo", Params: map[string]string{"s": "string"},
		SQL: "SELECT id AS `cursor`, user_id, token, :s AS echoed FROM device_tokens WHERE id > :after ORDER BY id LIMIT :limit"})

	counts := func() [3]int {
		var c [3]int
		for i, tbl := range []string{"users", "device_tokens", "subscriptions"} {
			if err := db.GetContext(ctx, &c[i], "SELECT COUNT(*) FROM "+tbl); err != nil {
				t.Fatalf("count %s: %v", tbl, err)
			}
		}
		return c
	}
	before := counts()
	// Sanity: the honest parameter matches someone.
	if n, _, err := mustBind(t, a, map[string]any{"days_before": 3.0, "locale": "en"}).Preview(ctx, db, 1); err != nil || n == 0 {
		t.Fatalf("honest preview = %d, %v", n, err)
	}

	prepared, err := sqlx.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer prepared.Close()
	attacks := []string{
		"x' OR '1'='1",
		"en' OR '1'='1",
		"1; DROP TABLE users",
		"en'; DROP TABLE users; -- ",
		`en\' OR 1=1 -- `,
		"en\" OR \"1\"=\"1",
		"en` OR 1=1 #",
	}
	for name, conn := range map[string]*sqlx.DB{"interpolated": db, "prepared": prepared} {
		for _, s := range attacks {
			b := mustBind(t, a, map[string]any{"days_before": 3.0, "locale": s})
			n, sample, err := b.Preview(ctx, conn, 10)
			if err != nil {
				t.Fatalf("%s %q: %v", name, s, err)
			}
			if n != 0 || len(sample) != 0 {
				t.Errorf("%s: locale %q matched %d rows", name, s, n)
			}
			// The value arrives byte for byte.
			rows, err := mustBind(t, echo, map[string]any{"s": s}).Page(ctx, conn, 0, 1, nil)
			if err != nil || len(rows) != 1 || rows[0].Vars["echoed"] != s {
				t.Errorf("%s: echo of %q = %+v, %v", name, s, rows, err)
			}
		}
	}
	if after := counts(); after != before {
		t.Errorf("row counts changed: %v -> %v", before, after)
	}
	var tables int
	if err := db.GetContext(ctx, &tables, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name IN ('users', 'device_tokens', 'subscriptions')"); err != nil {
		t.Fatal(err)
	}
	if tables != 3 {
		t.Errorf("%d of the 3 tables left", tables)
	}
}
