package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"pushfan/audience"
	"pushfan/cmd/pushfan/app"
	"pushfan/config"
	"pushfan/internal/platform/sqldb"
	"pushfan/internal/testsupport/teststack"
	"pushfan/model"
)

// The app's own tables, in a database of their own, with names that share
// nothing with pushfan's bundled users/device_tokens.
const (
	appMembersDDL = `CREATE TABLE %s.members (
		member_id  BIGINT UNSIGNED NOT NULL PRIMARY KEY,
		push_agree CHAR(1) NOT NULL DEFAULT 'Y',
		lang       VARCHAR(16) NULL,
		tz         VARCHAR(64) NULL,
		ad_agree   TINYINT(1) NOT NULL DEFAULT 0,
		night_ad_agree TINYINT(1) NOT NULL DEFAULT 0)`
	appDevicesDDL = `CREATE TABLE %s.push_devices (
		device_seq BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
		member_id  BIGINT UNSIGNED NOT NULL,
		fcm_token  VARCHAR(512) CHARACTER SET ascii COLLATE ascii_bin NOT NULL UNIQUE,
		os_type    VARCHAR(16) NULL,
		deleted_yn CHAR(1) NOT NULL DEFAULT 'N',
		dead_code  VARCHAR(64) NULL,
		KEY (member_id))`
)

// mapping is the example mapping over db.
func mapping(db string) model.SchemaMapping {
	return model.SchemaMapping{
		Users: &model.UsersMapping{Table: db + ".members", ID: "member_id", PushEnabled: "push_agree = 'Y'", Locale: "lang", Timezone: "tz"},
		Tokens: &model.TokensMapping{Table: db + ".push_devices", ID: "device_seq", UserID: "member_id", Token: "fcm_token",
			Valid: "deleted_yn = 'N'", Platform: "os_type",
			OnDead: "UPDATE " + db + ".push_devices SET deleted_yn = 'Y', dead_code = :code WHERE device_seq = :id AND deleted_yn = 'N'"},
	}
}

// appDB names the app database of the stack whose DSN is dsn.
func appDB(t *testing.T, dsn string) string {
	t.Helper()
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return c.DBName + "_app"
}

// mappedStack starts a stack whose built-in audiences read an app
// database (created here, dropped at the end) through the mapping, and
// returns it with the app database's name.
func mappedStack(t *testing.T, configure func(c *config.Config, db string)) (*teststack.Stack, string) {
	return mappedStackWith(t, teststack.Options{}, configure)
}

// mappedStackWith is mappedStack with more of the stack's options (its
// Configure and Prepare are mappedStack's).
func mappedStackWith(t *testing.T, o teststack.Options, configure func(c *config.Config, db string)) (*teststack.Stack, string) {
	var db string
	o.Configure = func(c *config.Config) {
		db = appDB(t, c.MySQLDSN)
		c.Schema = mapping(db)
		if configure != nil {
			configure(c, db)
		}
	}
	o.Prepare = func(s *teststack.Stack) {
		s.MustExec("CREATE DATABASE " + db)
		t.Cleanup(func() { _, _ = s.SQL.Exec("DROP DATABASE IF EXISTS " + db) })
		s.MustExec(fmt.Sprintf(appMembersDDL, db))
		s.MustExec(fmt.Sprintf(appDevicesDDL, db))
	}
	s := teststack.New(t, o)
	return s, db
}

// appPopulation seeds n members, one token each (member i has token
// prefix-i): members divisible by 5 refuse pushes, tokens divisible by 7
// are already deleted, and the tokens of dead members (by the predicate)
// get the emulator's unregistered- prefix. It returns the tokens by member
// and which of them the audience rule selects.
func appPopulation(s *teststack.Stack, db, prefix string, n int, dead func(i int) bool) (toks map[int]string, eligible map[int]bool) {
	toks, eligible = map[int]string{}, map[int]bool{}
	for i := 1; i <= n; i++ {
		agree, deleted := "Y", "N"
		if i%5 == 0 {
			agree = "N"
		}
		if i%7 == 0 {
			deleted = "Y"
		}
		tok := fmt.Sprintf("%s%d", prefix, i)
		if dead != nil && dead(i) {
			tok = "unregistered-" + tok
		}
		s.MustExec("INSERT INTO "+db+".members (member_id, push_agree, lang) VALUES (?, ?, 'ko')", i, agree)
		s.MustExec("INSERT INTO "+db+".push_devices (member_id, fcm_token, os_type, deleted_yn) VALUES (?, ?, 'android', ?)", i, tok, deleted)
		toks[i] = tok
		eligible[i] = agree == "Y" && deleted == "N"
	}
	return toks, eligible
}

func countTrue(m map[int]bool) int64 {
	var n int64
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

// all and user_ids select from the mapped tables, by the mapped
// conditions, in several chunks, and never from pushfan's bundled tables.
func TestSchemaMappingAllAndUserIDs(t *testing.T) {
	t.Parallel()
	s, db := mappedStack(t, func(c *config.Config, _ string) { c.Engine.ChunkWidth = 10 })
	toks, eligible := appPopulation(s, db, "mapped-", 60, nil)
	s.SeedTokens(1, []string{"bundled-1", "bundled-2"}) // pushfan's own tables: not the audience

	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "t", "body": "b", "audience": map[string]any{"all": true}}, &b); resp.StatusCode != 200 {
		t.Fatalf("submit all: %d", resp.StatusCode)
	}
	b = s.WaitFinished(b.ID, 30*time.Second)
	want := countTrue(eligible)
	if b.Status != "completed" || b.Targeted != want || b.Succeeded != want || b.Failed != 0 {
		t.Fatalf("all: %+v, want %d targeted and succeeded", b, want)
	}
	if b.Chunks.Chunks < 5 {
		t.Fatalf("all over 60 mapped tokens at chunk width 10: %d chunks, want at least 5", b.Chunks.Chunks)
	}
	for i, tok := range toks {
		if got, w := s.Emu.Counts(tok).Accepted, map[bool]int64{true: 1}[eligible[i]]; got != w {
			t.Errorf("all: member %d (%s) accepted %d, want %d", i, tok, got, w)
		}
	}
	for _, tok := range []string{"bundled-1", "bundled-2"} {
		if got := s.Emu.Counts(tok).Attempts; got != 0 {
			t.Errorf("bundled token %s got %d sends under a mapping", tok, got)
		}
	}

	// user_ids: 1..4 eligible, 5 refuses pushes, 7 has a deleted token,
	// 999 does not exist.
	ids := []int{1, 2, 3, 4, 5, 7, 999}
	if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "t", "body": "b", "audience": map[string]any{"user_ids": ids}}, &b); resp.StatusCode != 200 {
		t.Fatalf("submit user_ids: %d", resp.StatusCode)
	}
	b = s.WaitFinished(b.ID, 30*time.Second)
	if b.Status != "completed" || b.Targeted != 4 || b.Succeeded != 4 {
		t.Fatalf("user_ids: %+v, want 4 targeted and succeeded", b)
	}
	for i, tok := range toks {
		w := map[bool]int64{true: 1}[eligible[i]]
		if i <= 4 {
			w++
		}
		if got := s.Emu.Counts(tok).Accepted; got != w {
			t.Errorf("after user_ids: member %d accepted %d, want %d", i, got, w)
		}
	}
}

// Dead tokens are written back to the app's table by on_dead (with the
// code), counted as invalidated, listed as failures by their mapped ids,
// and skipped by the next broadcast.
func TestSchemaMappingDeadTokensWrittenBack(t *testing.T) {
	t.Parallel()
	s, db := mappedStack(t, nil)
	dead := func(i int) bool { return i%3 == 0 }
	toks, eligible := appPopulation(s, db, "wb-", 30, dead)
	var wantDead, wantAlive int64
	for i := range toks {
		if eligible[i] && dead(i) {
			wantDead++
		} else if eligible[i] {
			wantAlive++
		}
	}
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "t", "body": "b", "audience": map[string]any{"all": true}}, &b)
	b = s.WaitFinished(b.ID, 30*time.Second)
	if b.Status != "completed" || b.Targeted != wantDead+wantAlive || b.Succeeded != wantAlive || b.Failed != wantDead ||
		b.Errors["UNREGISTERED"] != wantDead || b.InvalidatedTokens != wantDead {
		t.Fatalf("first broadcast: %+v, want %d dead of %d, all invalidated", b, wantDead, wantDead+wantAlive)
	}
	var written int64
	if err := s.SQL.Get(&written, "SELECT COUNT(*) FROM "+db+".push_devices WHERE deleted_yn = 'Y' AND dead_code = 'UNREGISTERED'"); err != nil {
		t.Fatal(err)
	}
	if written != wantDead {
		t.Fatalf("on_dead wrote back %d rows, want %d", written, wantDead)
	}
	var bundled int64
	if err := s.SQL.Get(&bundled, "SELECT COUNT(*) FROM device_tokens"); err != nil || bundled != 0 {
		t.Fatalf("pushfan's own device_tokens holds %d rows (%v): the mapping must not touch it", bundled, err)
	}

	// The failures list names the app's ids.
	var page struct {
		Failures []struct {
			TokenID uint64 `json:"token_id"`
			UserID  uint64 `json:"user_id"`
			Code    string `json:"code"`
		} `json:"failures"`
	}
	if resp := s.Do("GET", fmt.Sprintf("/push/broadcasts/%d/failures", b.ID), nil, &page); resp.StatusCode != 200 || int64(len(page.Failures)) != wantDead {
		t.Fatalf("failures: %d, %d rows, want %d", resp.StatusCode, len(page.Failures), wantDead)
	}
	for _, f := range page.Failures {
		var seq uint64
		if err := s.SQL.Get(&seq, "SELECT device_seq FROM "+db+".push_devices WHERE member_id = ?", f.UserID); err != nil || seq != f.TokenID || f.Code != "UNREGISTERED" || !dead(int(f.UserID)) {
			t.Errorf("failure %+v: the member's device_seq is %d (%v)", f, seq, err)
		}
	}

	// The next broadcast skips the written-back tokens.
	s.Do("POST", "/push/broadcast", map[string]any{"title": "t", "body": "b", "audience": map[string]any{"all": true}}, &b)
	b = s.WaitFinished(b.ID, 30*time.Second)
	if b.Status != "completed" || b.Targeted != wantAlive || b.Succeeded != wantAlive || b.Failed != 0 {
		t.Fatalf("second broadcast: %+v, want %d targeted, all succeeded", b, wantAlive)
	}
	for i, tok := range toks {
		if eligible[i] && dead(i) {
			if got := s.Emu.Counts(tok).Attempts; got != 1 {
				t.Errorf("dead token of member %d: %d attempts, want 1 (the second broadcast must skip it)", i, got)
			}
		}
	}
}

// A named audience over the same app tables writes its dead tokens back
// through the mapping's on_dead, though it selects no token ids.
func TestSchemaMappingNamedAudienceWriteBack(t *testing.T) {
	t.Parallel()
	s, db := mappedStack(t, func(c *config.Config, db string) {
		c.Audiences = []audience.Definition{{
			Name: "android_members",
			SQL: "SELECT d.device_seq AS `cursor`, d.member_id AS user_id, d.fcm_token AS token FROM " + db + ".push_devices d " +
				"JOIN " + db + ".members m ON m.member_id = d.member_id " +
				"WHERE d.device_seq > :after AND d.device_seq <= :upto AND d.deleted_yn = 'N' AND m.push_agree = 'Y' AND d.os_type = 'android' " +
				"ORDER BY d.device_seq LIMIT :limit",
		}}
	})
	dead := func(i int) bool { return i%4 == 0 }
	toks, eligible := appPopulation(s, db, "named-", 24, dead)
	var wantDead, total int64
	for i := range toks {
		if eligible[i] {
			total++
			if dead(i) {
				wantDead++
			}
		}
	}
	var b teststack.Broadcast
	if resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "t", "body": "b", "audience": map[string]any{"name": "android_members"}}, &b); resp.StatusCode != 200 {
		t.Fatalf("submit: %d", resp.StatusCode)
	}
	b = s.WaitFinished(b.ID, 30*time.Second)
	if b.Status != "completed" || b.Targeted != total || b.Failed != wantDead || b.InvalidatedTokens != wantDead {
		t.Fatalf("named audience: %+v, want %d targeted, %d dead and invalidated", b, total, wantDead)
	}
	var written int64
	if err := s.SQL.Get(&written, "SELECT COUNT(*) FROM "+db+".push_devices WHERE dead_code = 'UNREGISTERED' AND deleted_yn = 'Y'"); err != nil || written != wantDead {
		t.Fatalf("on_dead wrote back %d rows (%v), want %d", written, err, wantDead)
	}
	s.Do("POST", "/push/broadcast", map[string]any{"title": "t", "body": "b", "audience": map[string]any{"name": "android_members"}}, &b)
	b = s.WaitFinished(b.ID, 30*time.Second)
	if b.Status != "completed" || b.Targeted != total-wantDead || b.Failed != 0 {
		t.Fatalf("second named broadcast: %+v, want %d targeted and no failure", b, total-wantDead)
	}
}

// A mistyped column, a missing table and a broken condition stop start-up,
// each problem naming its key.
func TestSchemaMappingCheckedAtStartUp(t *testing.T) {
	t.Parallel()
	s, db := mappedStack(t, nil)
	cases := []struct {
		name   string
		change func(m *model.SchemaMapping)
		want   string
		stale  time.Duration // PUSHFAN_STALE_AFTER
	}{
		{"last_seen for the stale rule", func(m *model.SchemaMapping) {},
			"schema.tokens.last_seen: required when PUSHFAN_STALE_AFTER is set", 30 * 24 * time.Hour},
		{"last_seen type", func(m *model.SchemaMapping) { m.Tokens.LastSeen = "os_type" },
			"schema.tokens.last_seen: column os_type of " + db + ".push_devices is varchar, not a date/time", 0},
		{"last_seen column", func(m *model.SchemaMapping) { m.Tokens.LastSeen = "seen_at" },
			"schema.tokens.last_seen: column seen_at not found in " + db + ".push_devices", 30 * 24 * time.Hour},
		{"column", func(m *model.SchemaMapping) { m.Tokens.Token = "fcm_tokn" },
			"schema.tokens.token: column fcm_tokn not found in " + db + ".push_devices", 0},
		{"table", func(m *model.SchemaMapping) { m.Users.Table = db + ".member" },
			"schema.users.table: table " + db + ".member not found", 0},
		{"condition", func(m *model.SchemaMapping) { m.Tokens.Valid = "deleted = 'N'" },
			"schema.tokens.valid: ", 0},
		{"ambiguous", func(m *model.SchemaMapping) { m.Tokens.Valid = "member_id > 0" }, // both tables have member_id
			"schema.users.push_enabled and schema.tokens.valid (joined): ", 0},
		{"id type", func(m *model.SchemaMapping) { m.Tokens.ID = "fcm_token" },
			"schema.tokens.id: column fcm_token of " + db + ".push_devices is varchar, not an integer", 0},
		{"locale", func(m *model.SchemaMapping) { m.Users.Locale = "language" },
			"schema.users.locale: column language not found in " + db + ".members", 0},
		{"timezone", func(m *model.SchemaMapping) { m.Users.Timezone = "zone" },
			"schema.users.timezone: column zone not found in " + db + ".members", 0},
		{"on_dead", func(m *model.SchemaMapping) {
			m.Tokens.OnDead = "UPDATE " + db + ".push_devices SET gone = 1 WHERE device_seq = :id"
		}, "schema.tokens.on_dead: ", 0},
		{"on_dead param", func(m *model.SchemaMapping) {
			m.Tokens.OnDead = "UPDATE " + db + ".push_devices SET deleted_yn = 'Y' WHERE device_seq = :device"
		}, "schema.tokens.on_dead: unknown parameter :device", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := s.Config
			m := mapping(db)
			tc.change(&m)
			cfg.Schema = m
			cfg.Engine.StaleAfter = tc.stale
			pool, err := sqldb.Open(context.Background(), cfg.MySQLDSN, 2, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			inst, err := app.New(context.Background(), cfg, pool, slog.New(slog.DiscardHandler))
			if err == nil {
				inst.Sender.Close()
				t.Fatalf("start-up accepted a broken mapping")
			}
			t.Logf("start-up refused: %v", err)
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("start-up error %q does not say %q", err, tc.want)
			}
		})
	}
}

// A test send resolves user ids and tokens through the mapping too, and
// writes a dead token it finds back with on_dead.
func TestSchemaMappingTestSend(t *testing.T) {
	t.Parallel()
	s, db := mappedStack(t, nil)
	toks, _ := appPopulation(s, db, "ts-", 7, func(i int) bool { return i == 3 })
	var got testSendAnswer
	// member 1: one live token; 3: a dead one; 7: only a deleted token.
	if resp := s.Do("POST", "/push/test", map[string]any{"title": "t", "body": "b", "user_ids": []int{1, 3, 7}}, &got); resp.StatusCode != 200 {
		t.Fatalf("test send: %d %+v", resp.StatusCode, got)
	}
	if len(got.Results) != 2 || got.Succeeded != 1 || got.Failed != 1 {
		t.Fatalf("test send: %+v, want member 1 sent and member 3 dead", got)
	}
	for _, r := range got.Results {
		if r.UserID == nil || (*r.UserID == 3) != r.Invalidated {
			t.Errorf("result %+v: only member 3's token is dead and written back", r)
		}
	}
	if n := s.Emu.Counts(toks[1]).Accepted; n != 1 {
		t.Errorf("member 1 accepted %d test sends, want 1", n)
	}
	if n := s.Emu.Counts(toks[7]).Attempts; n != 0 {
		t.Errorf("member 7's deleted token got %d sends", n)
	}
	var deleted string
	if err := s.SQL.Get(&deleted, "SELECT deleted_yn FROM "+db+".push_devices WHERE member_id = 3"); err != nil || deleted != "Y" {
		t.Errorf("member 3's token: deleted_yn %q (%v), want Y", deleted, err)
	}
}

// The mapped locale column picks a localized message's variant.
func TestSchemaMappingLocale(t *testing.T) {
	t.Parallel()
	s, db := mappedStack(t, nil)
	_, eligible := appPopulation(s, db, "loc-", 12, nil) // every member's lang is ko
	s.MustExec("UPDATE " + db + ".members SET lang = NULL WHERE member_id IN (1, 2)")
	var b teststack.Broadcast
	s.Do("POST", "/push/broadcast", map[string]any{"title": "Hi", "body": "sale",
		"localized": map[string]any{"ko": map[string]any{"title": "안녕하세요"}},
		"audience":  map[string]any{"all": true}}, &b)
	b = s.WaitFinished(b.ID, 30*time.Second)
	want := map[string]int64{"ko": countTrue(eligible) - 2, "default": 2}
	if b.Status != "completed" || b.Variants["ko"] != want["ko"] || b.Variants["default"] != want["default"] {
		t.Fatalf("localized over the mapping: %+v, want variants %v", b, want)
	}
}
