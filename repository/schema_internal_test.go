package repository

import (
	"slices"
	"strings"
	"testing"

	"pushfan/model"
)

func goodMapping() model.SchemaMapping {
	return model.SchemaMapping{
		Users: &model.UsersMapping{Table: "appdb.members", ID: "member_id", PushEnabled: "push_agree = 'Y'", Locale: "lang"},
		Tokens: &model.TokensMapping{Table: "appdb.push_devices", ID: "device_seq", UserID: "member_id", Token: "fcm_token",
			Valid: "deleted_yn = 'N'", OnDead: "UPDATE appdb.push_devices SET deleted_yn = 'Y', why = ':code' WHERE device_seq = :id AND code <> :code"},
	}
}

// Without a schema section the SQL is the bundled tables' as it always was.
func TestCompileSchemaAbsentIsBundled(t *testing.T) {
	sc, err := CompileSchema(model.SchemaMapping{})
	if err != nil || sc.Mapped() {
		t.Fatalf("empty mapping: %v, mapped %v", err, sc.Mapped())
	}
	if got, want := "SELECT "+sc.pageCols+sc.from+sc.pageRange+sc.base+sc.pageTail,
		"SELECT t.id, t.user_id, t.token, u.locale, t.platform FROM device_tokens t JOIN users u ON u.id = t.user_id WHERE t.id > ? AND t.id <= ? AND t.invalidated_at IS NULL AND u.push_enabled = 1 ORDER BY t.id LIMIT ?"; got != want {
		t.Fatalf("bundled SQL changed:\n got %s\nwant %s", got, want)
	}
}

func TestCompileSchemaQuotesAndRewrites(t *testing.T) {
	sc, err := CompileSchema(goodMapping())
	if err != nil {
		t.Fatal(err)
	}
	if want := "`appdb`.`push_devices` t JOIN `appdb`.`members` u ON u.`member_id` = t.`member_id`"; sc.from != want {
		t.Errorf("from = %s, want %s", sc.from, want)
	}
	if sc.uLocale != "u.`lang`" || sc.uTimezone != "NULL" {
		t.Errorf("locale %s, timezone %s", sc.uLocale, sc.uTimezone)
	}
	// The quoted ':code' is a string, not a parameter.
	if want := "UPDATE appdb.push_devices SET deleted_yn = 'Y', why = ':code' WHERE device_seq = ? AND code <> ?"; sc.onDead != want ||
		!slices.Equal(sc.onDeadArgs, []string{"id", "code"}) {
		t.Errorf("on_dead = %s %v", sc.onDead, sc.onDeadArgs)
	}
}

// Every shape problem is reported at once, each naming its key.
func TestCompileSchemaNamesEveryKey(t *testing.T) {
	m := goodMapping()
	m.Users.Table = "a.b.c"
	m.Users.PushEnabled = " "
	m.Tokens.Token = "fcm token"
	m.Tokens.ID = ""
	m.Tokens.OnDead = "UPDATE x SET y = 1 WHERE id = ?"
	_, err := CompileSchema(m)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, key := range []string{"schema.users.table:", "schema.users.push_enabled:", "schema.tokens.token:", "schema.tokens.id: required", "schema.tokens.on_dead: positional"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error does not name %s:\n%v", key, err)
		}
	}
	for _, tc := range []struct {
		change func(*model.SchemaMapping)
		want   string
	}{
		{func(m *model.SchemaMapping) { m.Users = nil }, "schema.users: required"},
		{func(m *model.SchemaMapping) { m.Tokens.OnDead = "" }, "schema.tokens.on_dead: required"},
		{func(m *model.SchemaMapping) { m.Tokens.OnDead = "UPDATE t SET a = 1" }, "schema.tokens.on_dead: names no dead token"},
		{func(m *model.SchemaMapping) { m.Tokens.OnDead = "UPDATE t SET a = 1 WHERE id = :id; DROP TABLE t" }, "more than one statement"},
		{func(m *model.SchemaMapping) { m.Users.Timezone = "tz`" }, "schema.users.timezone:"},
	} {
		m := goodMapping()
		tc.change(&m)
		if _, err := CompileSchema(m); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want %q, got %v", tc.want, err)
		}
	}
}
