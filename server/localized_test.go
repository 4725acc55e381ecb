package server_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"pushfan/audience"
	"pushfan/config"
	"pushfan/cron"
	"pushfan/fcmemu"
	"pushfan/internal/testsupport/teststack"
)

// The variants of the localized tests: three languages and a base one.
var localized = map[string]any{
	"ko":    map[string]any{"title": "안녕하세요", "body": "세일 시작"},
	"ja":    map[string]any{"title": "こんにちは", "body": "セール開始"},
	"pt-BR": map[string]any{"title": "Olá", "body": "A liquidação começou"},
	"pt":    map[string]any{"body": "Começou a promoção"}, // no title: it stays empty, never English
}

// seedLocales inserts one user and one token per entry; the user's
// locale is the entry's ("" leaves the column's default, en).
func seedLocales(s *teststack.Stack, firstUID int, prefix string, locales []string) []string {
	s.T.Helper()
	toks := make([]string, len(locales))
	var users, rows []string
	for i, l := range locales {
		uid := firstUID + i
		toks[i] = fmt.Sprintf("%s%d", prefix, uid)
		if l == "" {
			users = append(users, fmt.Sprintf("(%d,1,DEFAULT)", uid))
		} else {
			users = append(users, fmt.Sprintf("(%d,1,'%s')", uid, l))
		}
		rows = append(rows, fmt.Sprintf("(%d,'%s')", uid, toks[i]))
	}
	for len(users) > 0 {
		n := min(len(users), 1000)
		s.MustExec("INSERT INTO users (id, push_enabled, locale) VALUES " + strings.Join(users[:n], ","))
		s.MustExec("INSERT INTO device_tokens (user_id, token) VALUES " + strings.Join(rows[:n], ","))
		users, rows = users[n:], rows[n:]
	}
	return toks
}

// wantMessage asserts the emulator's last message for token.
func wantMessage(t *testing.T, s *teststack.Stack, token, title, body string) {
	t.Helper()
	got, ok, err := s.Emu.LastNotification(token)
	switch {
	case err != nil:
		t.Fatal(err)
	case !ok:
		t.Fatalf("%s received nothing", token)
	case got.Title != title || got.Body != body:
		t.Fatalf("%s received %q / %q, want %q / %q", token, got.Title, got.Body, title, body)
	}
}

// Users in Korean, Japanese and Brazilian Portuguese (spelled as user
// tables spell them), in Portuguese of Portugal (the base "pt" variant),
// and in German and the column's default (no variant: the top-level text).
// Each device got its language, exactly once, and the counts per variant
// add up to the targets.
func TestLocalizedBroadcastSendsEachUserItsLanguage(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	s.Emu.RecordMessages()
	locales := []string{"ko", "ko-KR", "KO_kr", "ja", "ja-JP", "pt-BR", "pt_br", "pt-PT", "de", "", "en-US"}
	toks := seedLocales(s, 1, "loc-", locales)
	var b teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast", map[string]any{
		"title": "Hello", "body": "The sale started", "data": map[string]string{"campaign": "sale"},
		"localized": localized, "audience": map[string]any{"all": true},
	}, &b)
	if resp.StatusCode != 200 || b.Status != "completed" || b.Targeted != int64(len(toks)) || b.Succeeded != int64(len(toks)) {
		t.Fatalf("broadcast: %d %+v", resp.StatusCode, b)
	}
	want := map[string]int64{"ko": 3, "ja": 2, "pt-BR": 2, "pt": 1, "default": 3}
	if !maps.Equal(b.Variants, want) {
		t.Fatalf("variants %v, want %v", b.Variants, want)
	}
	text := map[string][2]string{
		"ko": {"안녕하세요", "세일 시작"}, "ja": {"こんにちは", "セール開始"},
		"pt-BR": {"Olá", "A liquidação começou"}, "pt": {"", "Começou a promoção"}, "default": {"Hello", "The sale started"},
	}
	variantOf := []string{"ko", "ko", "ko", "ja", "ja", "pt-BR", "pt-BR", "pt", "default", "default", "default"}
	for i, tk := range toks {
		tb := text[variantOf[i]]
		wantMessage(t, s, tk, tb[0], tb[1])
		if got, _, _ := s.Emu.LastNotification(tk); got.Data["campaign"] != "sale" {
			t.Fatalf("%s lost the shared data: %v", tk, got.Data)
		}
		if c := s.Emu.Counts(tk); c.Accepted != 1 {
			t.Fatalf("%s accepted %d times", tk, c.Accepted)
		}
	}
	// A broadcast without localized has no variants at all.
	var plain map[string]any
	s.Do("POST", "/push/broadcast", map[string]any{"title": "x", "audience": map[string]any{"all": true}}, &plain)
	if _, has := plain["variants"]; has || plain["status"] != "completed" {
		t.Fatalf("plain broadcast: %v", plain)
	}
}

// Several chunks (width 1000), some failed targets, and a proxy that
// faults every 5th COMMIT (its answer lost, or the COMMIT never arriving):
// the counts per variant are exactly the audience's by language, and add
// up to succeeded + failed = targeted.
func TestLocalizedVariantCountsExactAcrossChunksAndLostCommits(t *testing.T) {
	s := teststack.New(t, teststack.Options{
		DBProxy:  true,
		Emulator: fcmemu.Config{Latency: 2 * time.Millisecond},
		Configure: func(c *config.Config) {
			c.Engine.FlushInterval = 50 * time.Millisecond
		},
	})
	s.Emu.RecordMessages()
	const n = 6000
	cycle := []string{"ko-KR", "ja", "pt_BR", "de"}
	names := []string{"ko", "ja", "pt-BR", "default"}
	locales := make([]string, n)
	for i := range locales {
		locales[i] = cycle[i%4]
	}
	toks := seedLocales(s, 1, "ck-", locales)
	// Every 50th user's token is dead: a failed target is a sent one.
	for i := 0; i < n; i += 50 {
		s.MustExec("UPDATE device_tokens SET token = ? WHERE token = ?", "unregistered-"+toks[i], toks[i])
		toks[i] = "unregistered-" + toks[i]
	}
	s.MustExec("UPDATE device_tokens SET platform = ELT(id % 3 + 1, 'android', 'ios', 'web')")
	s.Proxy.FaultCommits(5)
	var b teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast?wait=0", map[string]any{
		"title": "Hello", "body": "sale", "localized": localized, "audience": map[string]any{"all": true},
	}, &b)
	if resp.StatusCode != 202 && resp.StatusCode != 200 {
		t.Fatalf("submit: %d", resp.StatusCode)
	}
	final := s.WaitFinished(b.ID, 3*time.Minute)
	s.Proxy.FaultCommits(0)
	const dead = n / 50
	if final.Status != "completed" || final.Targeted != n || final.Succeeded != n-dead || final.Failed != dead || final.Errors["UNREGISTERED"] != dead {
		t.Fatalf("final %+v", final)
	}
	if final.Chunks == nil || final.Chunks.Chunks < 5 {
		t.Fatalf("chunks %+v: the test needs several", final.Chunks)
	}
	want := map[string]int64{}
	for i := range n {
		want[names[i%4]]++
	}
	if !maps.Equal(final.Variants, want) {
		t.Fatalf("variants %v, want %v (lost commit answers %d, dropped commits %d)", final.Variants, want, s.Proxy.AppliedLost.Load(), s.Proxy.NotForwarded.Load())
	}
	if lost, dropped := s.Proxy.AppliedLost.Load(), s.Proxy.NotForwarded.Load(); lost == 0 || dropped == 0 {
		t.Fatalf("%d lost answers and %d dropped commits: the test did not exercise the checkpoint protocol", lost, dropped)
	}
	// Succeeded and failed apart, per variant and per platform, once
	// each however many checkpoints were retried.
	platformOf := map[string]string{}
	rows, err := s.SQL.Query("SELECT token, platform FROM device_tokens")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tk, p string
		if err := rows.Scan(&tk, &p); err != nil {
			t.Fatal(err)
		}
		platformOf[tk] = p
	}
	rows.Close()
	wantSplit := map[string]string{}
	count := func(k string, ok bool) {
		var a, f int
		fmt.Sscanf(wantSplit[k], "%d/%d", &a, &f)
		if ok {
			a++
		} else {
			f++
		}
		wantSplit[k] = fmt.Sprintf("%d/%d", a, f)
	}
	for i, tk := range toks {
		count(names[i%4], i%50 != 0)
		count("platform "+platformOf[tk], i%50 != 0)
	}
	gotSplit := map[string]string{}
	rows, err = s.SQL.Query(`SELECT variant, CONCAT(succeeded, '/', failed) FROM broadcast_variants WHERE broadcast_id = ? AND targets = succeeded + failed
		UNION ALL SELECT 'platform android', CONCAT(android_succeeded, '/', android_failed) FROM broadcasts WHERE id = ?
		UNION ALL SELECT 'platform ios', CONCAT(ios_succeeded, '/', ios_failed) FROM broadcasts WHERE id = ?
		UNION ALL SELECT 'platform web', CONCAT(web_succeeded, '/', web_failed) FROM broadcasts WHERE id = ?`, b.ID, b.ID, b.ID, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		gotSplit[k] = v
	}
	rows.Close()
	if !maps.Equal(gotSplit, wantSplit) {
		t.Fatalf("succeeded/failed per variant and platform %v, want %v", gotSplit, wantSplit)
	}
	title := map[string]string{"ko": "안녕하세요", "ja": "こんにちは", "pt-BR": "Olá", "default": "Hello"}
	for i, tk := range toks {
		if got, ok, err := s.Emu.LastNotification(tk); err != nil || !ok || got.Title != title[names[i%4]] {
			t.Fatalf("%s (%s) received %+v %v %v", tk, locales[i], got, ok, err)
		}
	}
	t.Logf("%d targets in %d chunks, %d claims: variants %v", n, final.Chunks.Chunks, final.Chunks.Claims, final.Variants)
}

func TestLocalizedValidationNamesTheField(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	big := strings.Repeat("가", 1400) // 4200 bytes of UTF-8
	for _, tc := range []struct {
		name        string
		loc         any
		code, field string
	}{
		{"malformed tag", map[string]any{"korean": map[string]any{"title": "x"}}, "invalid_locale", "localized.korean"},
		{"empty variant", map[string]any{"ja": map[string]any{}}, "empty_message", "localized.ja"},
		{"null variant", map[string]any{"ja": nil}, "empty_message", "localized.ja"},
		{"same tag twice", map[string]any{"pt-BR": map[string]any{"title": "a"}, "pt_br": map[string]any{"title": "b"}}, "duplicate_locale", "localized.pt_br"},
		{"template variable", map[string]any{"ko": map[string]any{"title": "{{.name}}님"}}, "template_error", "localized.ko.title"},
		{"largest variant too large", map[string]any{"ko": map[string]any{"title": "짧다"}, "ja": map[string]any{"body": big}}, "payload_too_large", "localized.ja"},
		{"not an object", []string{"ko"}, "invalid_type", "localized"},
		{"unknown variant field", map[string]any{"ko": map[string]any{"title": "x", "image": "https://x/y.png"}}, "unknown_field", "image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e teststack.ErrorBody
			resp := s.Do("POST", "/push/broadcast", map[string]any{"title": "hi", "localized": tc.loc, "audience": map[string]any{"all": true}}, &e)
			if resp.StatusCode != 400 || e.Error.Code != tc.code || e.Error.Field != tc.field {
				t.Fatalf("%d %+v, want 400 %s at %s", resp.StatusCode, e.Error, tc.code, tc.field)
			}
		})
	}
	if st := s.Emu.Stats(); st.Requests != 0 {
		t.Fatalf("a refused request sent %d messages", st.Requests)
	}
}

// A named audience's locale column (here from a table of its own, not
// users.locale) picks the variant, and variants are templates over the
// audience's columns like the top-level title and body.
func TestNamedAudienceLocaleColumnPicksVariants(t *testing.T) {
	t.Parallel()
	defs := []audience.Definition{{
		Name: "profiles",
		SQL: "SELECT t.id AS `cursor`, t.user_id, t.token, p.lang AS locale, p.name FROM device_tokens t " +
			"JOIN users u ON u.id = t.user_id JOIN profiles p ON p.user_id = t.user_id " +
			"WHERE t.id > :after AND t.invalidated_at IS NULL AND u.push_enabled = 1 ORDER BY t.id LIMIT :limit",
	}}
	var toks []string
	langs := []string{"ko", "ja", "pt-BR", "de", "ko_KR", "pt-PT"}
	s := teststack.New(t, teststack.Options{
		Prepare: func(s *teststack.Stack) {
			s.MustExec("CREATE TABLE profiles (user_id BIGINT UNSIGNED PRIMARY KEY, lang VARCHAR(16) NOT NULL, name VARCHAR(32) NOT NULL)")
			// users.locale says en for everyone: only the audience's column counts.
			toks = seedLocales(s, 1, "named-", make([]string, len(langs)))
			for i, l := range langs {
				s.MustExec("INSERT INTO profiles VALUES (?, ?, ?)", i+1, l, fmt.Sprintf("u%d", i+1))
			}
		},
		Configure: func(c *config.Config) { c.Audiences = defs },
	})
	s.Emu.RecordMessages()
	var b teststack.Broadcast
	resp := s.Do("POST", "/push/broadcast", map[string]any{
		"title": "Hi {{.name}}", "body": "sale",
		"localized": map[string]any{
			"ko":    map[string]any{"title": "{{.name}}님 안녕하세요", "body": "세일"},
			"ja":    map[string]any{"title": "{{.name}}さん", "body": "セール"},
			"pt-BR": map[string]any{"title": "Olá {{.name}}"},
		},
		"audience": map[string]any{"name": "profiles"},
	}, &b)
	want := map[string]int64{"ko": 2, "ja": 1, "pt-BR": 1, "default": 2}
	if resp.StatusCode != 200 || b.Status != "completed" || b.Succeeded != int64(len(langs)) || !maps.Equal(b.Variants, want) {
		t.Fatalf("broadcast: %d %+v, want variants %v", resp.StatusCode, b, want)
	}
	for i, w := range [][2]string{
		{"u1님 안녕하세요", "세일"}, {"u2さん", "セール"}, {"Olá u3", ""}, {"Hi u4", "sale"}, {"u5님 안녕하세요", "세일"}, {"Hi u6", "sale"},
	} {
		wantMessage(t, s, toks[i], w[0], w[1])
	}
}

// A cron job's message carries localized variants through the same rules
// and the same run as an API request's.
func TestCronJobLocalized(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Configure: func(c *config.Config) {
		c.InternalToken = internalToken
		c.Jobs = []cron.Job{{Name: "hello", Schedule: "0 9 * * MON", Audience: map[string]any{"all": true},
			Message: cron.JobMessage{Title: "Hello", Localized: map[string]cron.JobLocalized{"ko": {Title: "안녕하세요"}, "ja": {Title: "こんにちは"}}}}}
	}})
	s.Emu.RecordMessages()
	toks := seedLocales(s, 1, "cron-", []string{"ko_KR", "ja", "de"})
	var fired struct {
		ID uint64 `json:"id"`
	}
	if resp := s.DoAuth("POST", "/internal/cron/hello", internalToken, nil, &fired); resp.StatusCode != 200 || fired.ID == 0 {
		t.Fatalf("trigger: %d %+v", resp.StatusCode, fired)
	}
	b := s.WaitFinished(fired.ID, 30*time.Second)
	if want := map[string]int64{"ko": 1, "ja": 1, "default": 1}; b.Succeeded != 3 || !maps.Equal(b.Variants, want) {
		t.Fatalf("job broadcast %+v, want variants %v", b, want)
	}
	for i, title := range []string{"안녕하세요", "こんにちは", "Hello"} {
		wantMessage(t, s, toks[i], title, "")
	}
}
