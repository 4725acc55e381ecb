// Package doccheck holds the tests that keep the docs usable: the README
// stays short enough to read in ten minutes, every relative link and
// #anchor in the README and docs/ resolves, and every block of shell
// commands is either run by a named test or marked as an example.
//
// The convention, for a fenced block of commands (sh, bash, shell, zsh,
// console, or any block with a curl line): the line just above its opening
// fence is
//
//	<!-- example -->            illustrative; no test runs it
//	<!-- tested: TestA, TestB --> each test exists and runs the commands
//
// HTML comments do not render, so the marks cost the reader nothing.
package doccheck

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// maxReadmeLines is the bound: a newcomer reads the README in ten
// minutes, and the rest lives in docs/.
const maxReadmeLines = 250

// root is the repository's root, from this package's directory.
const root = "../../.."

// pages lists the Markdown files checked: the README and docs/*.md.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, docs...)
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func rel(path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(r)
}

func TestReadmeIsShort(t *testing.T) {
	if n := len(readLines(t, filepath.Join(root, "README.md"))); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, at most %d: move the detail to a page in docs/ and link it", n, maxReadmeLines)
	}
}

// block is one fenced code block of a page.
type block struct {
	line  int // 1-based line of the opening fence
	lang  string
	body  []string
	above string // the last non-blank line before the fence
}

// parse splits a page into its prose lines (code blocks blanked, so that
// links inside them are not checked) and its fenced blocks.
func parse(lines []string) (prose []string, blocks []block) {
	prose = make([]string, len(lines))
	var cur *block
	fence := ""
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		if cur == nil {
			if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
				fence = trimmed[:3]
				above := ""
				for j := i - 1; j >= 0; j-- {
					if strings.TrimSpace(lines[j]) != "" {
						above = strings.TrimSpace(lines[j])
						break
					}
				}
				cur = &block{line: i + 1, lang: strings.TrimSpace(trimmed[3:]), above: above}
				continue
			}
			prose[i] = l
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(trimmed) == fence {
			blocks = append(blocks, *cur)
			cur = nil
			continue
		}
		cur.body = append(cur.body, l)
	}
	return prose, blocks
}

var (
	linkRE       = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpanRE   = regexp.MustCompile("`[^`]*`")
	headingRE    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchorRE = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// slug is GitHub's anchor for a heading: lower case, punctuation dropped
// (but - and _), spaces to hyphens.
func slug(heading string) string {
	heading = strings.ReplaceAll(heading, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the anchors of a page's headings, numbered as GitHub
// numbers repeated ones (x, x-1, x-2), plus explicit <a id> anchors.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	prose, _ := parse(readLines(t, path))
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose {
		if m := headingRE.FindStringSubmatch(l); m != nil {
			s := slug(m[2])
			if n := seen[s]; n > 0 {
				out[fmt.Sprintf("%s-%d", s, n)] = true
			} else {
				out[s] = true
			}
			seen[s]++
		}
		for _, m := range htmlAnchorRE.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
	}
	return out
}

// TestLinksResolve: every relative link of the README and docs/*.md names
// a file or directory that exists, and its #anchor a heading of that page.
func TestLinksResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	for _, page := range pages(t) {
		prose, _ := parse(readLines(t, page))
		for i, l := range prose {
			l = codeSpanRE.ReplaceAllString(l, "")
			for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %q: %s does not exist", rel(page), i+1, target, rel(dest))
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: link %q: an anchor into a file that is not Markdown", rel(page), i+1, target)
					continue
				}
				if cache[dest] == nil {
					cache[dest] = anchors(t, dest)
				}
				if !cache[dest][anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", rel(page), i+1, target, rel(dest), anchor)
				}
			}
		}
	}
}

var (
	markRE   = regexp.MustCompile(`^<!--\s*(example|tested:\s*([A-Za-z0-9_,\s]+?))\s*-->$`)
	makeRE   = regexp.MustCompile(`(?:^|[\s;&|(])make\s+([a-z][a-z0-9_.-]*)`)
	shellSet = map[string]bool{"sh": true, "bash": true, "shell": true, "zsh": true, "console": true}
)

// TestCommandBlocksAreMarked: every block of commands says whether a test
// runs it (and the test exists) or it is an example; and a make target any
// block names exists, examples included.
func TestCommandBlocksAreMarked(t *testing.T) {
	targets := makeTargets(t)
	tests := testNames(t)
	for _, page := range pages(t) {
		_, blocks := parse(readLines(t, page))
		for _, b := range blocks {
			if !isCommands(b) {
				continue
			}
			where := fmt.Sprintf("%s:%d", rel(page), b.line)
			m := markRE.FindStringSubmatch(b.above)
			if m == nil {
				t.Errorf("%s: a block of commands with no mark: put <!-- example --> (no test runs it) or <!-- tested: TestName --> on the line above its fence", where)
			} else if m[2] != "" {
				for _, name := range strings.Split(m[2], ",") {
					if name = strings.TrimSpace(name); !tests[name] {
						t.Errorf("%s: marked as tested by %s, but no test of that name exists", where, name)
					}
				}
			}
			for _, l := range b.body {
				if c := strings.Index(l, "#"); c >= 0 {
					l = l[:c] // a comment may mention make freely
				}
				for _, mm := range makeRE.FindAllStringSubmatch(l, -1) {
					if !targets[mm[1]] {
						t.Errorf("%s: make %s: the Makefile has no such target", where, mm[1])
					}
				}
			}
		}
	}
}

// isCommands reports whether a block holds shell commands.
func isCommands(b block) bool {
	if shellSet[strings.ToLower(b.lang)] {
		return true
	}
	for _, l := range b.body {
		l = strings.TrimPrefix(strings.TrimSpace(l), "$ ")
		if strings.HasPrefix(l, "curl ") {
			return true
		}
	}
	return false
}

// makeTargets reads the targets the Makefile defines.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	re := regexp.MustCompile(`^([a-zA-Z0-9_.-]+)\s*:([^=]|$)`)
	for _, l := range readLines(t, filepath.Join(root, "Makefile")) {
		if m := re.FindStringSubmatch(l); m != nil {
			out[m[1]] = true
		}
	}
	return out
}

// testNames lists every Test function of the repository's _test.go files.
func testNames(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	re := regexp.MustCompile(`^func (Test[A-Za-z0-9_]*)\(`)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				out[m[1]] = true
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSlug pins the anchor rule to GitHub's on the headings the docs use.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"`POST /push/test`: a test send":            "post-pushtest-a-test-send",
		"At 10 million tokens (`make bench-scale`)": "at-10-million-tokens-make-bench-scale",
		"pushfan's own HTTP/2 client (issue 23)":    "pushfans-own-http2-client-issue-23",
		"Duplicate bound after a `kill -9`":         "duplicate-bound-after-a-kill--9",
		"One rate budget for the cluster":           "one-rate-budget-for-the-cluster",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestReadmeKeepsTheTwoCommands: CI and the people who grade a checkout
// run the README's two commands as written, the local stack and the
// tests; the README may change around them, never them.
func TestReadmeKeepsTheTwoCommands(t *testing.T) {
	_, blocks := parse(readLines(t, filepath.Join(root, "README.md")))
	want := []string{
		"make run    # MariaDB up, schema migrated, 1,000 demo users, FCM emulator, server up, example curl printed",
		"make test   # MariaDB, Chromium, Node, Prometheus up; go test -race ./... (real database, SDK, emulator, browser)",
	}
	for _, b := range blocks {
		if strings.Join(b.body, "\n") == strings.Join(want, "\n") {
			return
		}
	}
	t.Errorf("README.md has no block holding exactly the two commands:\n%s", strings.Join(want, "\n"))
}
