package sqldb

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClampRunes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"", 3, ""},
		{"abc", 3, "abc"},
		{"abcd", 3, "abc"},
		{"héllo", 2, "hé"},
		{"日本語テキスト", 3, "日本語"},
		{"a\xffb", 10, "a\uFFFDb"},
	} {
		if got := ClampRunes(tc.in, tc.max); got != tc.want {
			t.Errorf("ClampRunes(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

func TestClampBytes(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("é", 10) // 20 bytes
	got := ClampBytes(s, 7)
	if got != "ééé" || !utf8.ValidString(got) {
		t.Fatalf("ClampBytes = %q", got)
	}
	if ClampBytes("abc", 7) != "abc" {
		t.Fatal("short string changed")
	}
	if got := ClampBytes("a\xffb", 7); got != "a\uFFFDb" {
		t.Fatalf("ClampBytes of invalid UTF-8 = %q", got)
	}
}
