package audience

import (
	"slices"
	"strings"
	"testing"
)

func TestScanSQL(t *testing.T) {
	tests := []struct {
		name, in, query string
		names           []string
	}{
		{"plain", "SELECT a FROM t WHERE id > :after LIMIT :limit",
			"SELECT a FROM t WHERE id > ? LIMIT ?", []string{"after", "limit"}},
		{"repeated and adjacent", "SELECT :x+:x, :y_2,(:z)",
			"SELECT ?+?, ?,(?)", []string{"x", "x", "y_2", "z"}},
		{"single quotes", `SELECT ':no', 'it''s :no', 'a\':no' , :yes`,
			`SELECT ':no', 'it''s :no', 'a\':no' , ?`, []string{"yes"}},
		{"double quotes", `SELECT ":no", "say ""hi"" :no", :yes`,
			`SELECT ":no", "say ""hi"" :no", ?`, []string{"yes"}},
		{"backticks", "SELECT `a:no`, `x``:no`, :yes",
			"SELECT `a:no`, `x``:no`, ?", []string{"yes"}},
		{"double colon", "SELECT a::b, :yes", "SELECT a::b, ?", []string{"yes"}},
		{"colon not before a name", "SELECT @v := 1, ':' , : x, :1", "SELECT @v := 1, ':' , : x, :1", nil},
		{"line comments", "SELECT 1 -- :no\n, 2 # :no\n, :yes",
			"SELECT 1 -- :no\n, 2 # :no\n, ?", []string{"yes"}},
		{"double dash without space is not a comment", "SELECT 1--:yes",
			"SELECT 1--?", []string{"yes"}},
		{"block comment", "SELECT /* :no ? ; */ :yes", "SELECT /* :no ? ; */ ?", []string{"yes"}},
		{"question mark in a string", "SELECT '?', :yes", "SELECT '?', ?", []string{"yes"}},
		{"trailing semicolon", "SELECT :a ;  \n-- done\n", "SELECT ?", []string{"a"}},
		{"date format", "SELECT DATE_FORMAT(d, '%Y-%m-%d %H:%i:%s') AS d, :a", "SELECT DATE_FORMAT(d, '%Y-%m-%d %H:%i:%s') AS d, ?", []string{"a"}},
		{"utf8", "SELECT '한국어 :no', :한 ,:ok", "SELECT '한국어 :no', :한 ,?", []string{"ok"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := scanSQL(tc.in)
			if err != nil {
				t.Fatalf("scanSQL(%q): %v", tc.in, err)
			}
			if got.query != tc.query {
				t.Errorf("query = %q, want %q", got.query, tc.query)
			}
			if !slices.Equal(got.names, tc.names) {
				t.Errorf("names = %q, want %q", got.names, tc.names)
			}
		})
	}
}

func TestScanSQLErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"SELECT 'abc", "unterminated ' quote"},
		{`SELECT "abc\"`, `unterminated " quote`},
		{"SELECT `abc", "unterminated ` quote"},
		{"SELECT /* abc", "unterminated /* comment"},
		{"SELECT a FROM t WHERE id > ?", "positional ?"},
		{"SELECT 1; DROP TABLE users", "more than one statement"},
	}
	for _, tc := range tests {
		_, err := scanSQL(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("scanSQL(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestFirstKeyword(t *testing.T) {
	for in, want := range map[string]string{
		"select 1":                    "SELECT",
		"  -- c\n /* x */ (WITH a AS": "WITH",
		"# c\nDELETE FROM t":          "DELETE",
		"":                            "",
	} {
		if got := firstKeyword(in); got != want {
			t.Errorf("firstKeyword(%q) = %q, want %q", in, got, want)
		}
	}
}
