package layers

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The limits the layer test keeps from now on (issue 40): a file a reader
// takes in at once, a package a newcomer can hold in mind in an
// afternoon, a domain facade that does not grow back into a god object,
// a server that holds small interfaces rather than the whole stack, and
// settings that reach a package as its own struct rather than as the
// whole config.
const (
	maxFileLines      = 500  // a non-test Go file
	maxPackageLines   = 2800 // a package's non-test Go files together
	maxServiceMethods = 15   // exported methods of broadcast.Service
	maxServerFields   = 12   // fields of server.Server
)

// largePackages may pass maxPackageLines: repository holds one file per
// entity (its size is the schema's), and cmd/pushfan-bench is a tool of
// many benchmark drivers that nothing imports. Generated files (a "Code
// generated ... DO NOT EDIT." comment before the package clause, as
// go/ast.IsGenerated reads it) count towards no limit anywhere.
var largePackages = []string{"repository", "cmd/pushfan-bench"}

// configNames is the rule for importing config below the wiring (every
// package whose layer is under cmd/pushfan/app's, config itself aside).
// Such a package may import config only to read its own settings: it
// may use, of config's exported names, only those listed here for it
// (its settings struct and that struct's parse and format helpers).
// Everything else config holds (the whole Config, another package's
// settings, a domain constant it re-exports) is the wiring's to read and
// to hand down, so that a package's inputs are what it takes, and a
// change to one setting does not reach every package that holds Config.
// A package not listed may use no name of config.
var configNames = map[string][]string{
	"audience": {"Audience"},                                                  // a named audience's definition
	"cron":     {"Job", "JobMessage", "JobLocalized", "JobQuietHours"},        // a scheduled job's definition
	"caps":     {"FrequencyCap", "ParseFrequencyCaps", "FormatFrequencyCaps"}, // a frequency cap
}

// pending is the ratchet: the limits broken on the day they were set,
// each with its figure then. TestLimitsHold fails when a figure not
// listed here breaks its limit, when a listed one grows, and when a
// listed one comes within its limit (delete the entry then, so that it
// cannot grow back). Nothing is added here: code is split instead.
var pending = map[string]int{}

// The repository keeps its limits, or breaks only those pending, no
// further than it did.
func TestLimitsHold(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	figures, err := measure(root, configNames, belowTheWiring)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range figures {
		if f.value > f.max {
			t.Logf("over its limit: %s is %d (limit %d)", f.key, f.value, f.max)
		}
	}
	for _, p := range ratchet(figures, pending) {
		t.Error(p)
	}
}

// belowTheWiring is true of the packages the config rule holds for:
// those the layer map puts under cmd/pushfan/app (a package not on the
// map too: the layer test asks for its place). The wiring, the binaries,
// the demo data and the test support build whole configurations.
func belowTheWiring(pkg string) bool {
	l, ok := layer[pkg]
	return pkg != "config" && (!ok || l < layer["cmd/pushfan/app"])
}

// figure is one measure against its limit.
type figure struct {
	key        string
	value, max int
}

func fileKey(rel string) string    { return "lines of file " + rel }
func packageKey(pkg string) string { return "lines of package " + pkg }
func configKey(pkg string) string  { return "config names " + pkg + " uses beyond its own settings" }
func serviceKey() string           { return "exported methods of broadcast.Service" }
func serverKey() string            { return "fields of server.Server" }

// ratchet compares figures with the pending table and returns what is
// wrong, one line each: a limit broken and not pending, a pending figure
// that grew, a pending entry whose figure now meets its limit (or that
// measures nothing any more).
func ratchet(figures []figure, pending map[string]int) []string {
	var problems []string
	measured := map[string]bool{}
	for _, f := range figures {
		measured[f.key] = true
		was, listed := pending[f.key]
		switch {
		case f.value > f.max && !listed:
			problems = append(problems, fmt.Sprintf("%s is %d, over its limit of %d: split it", f.key, f.value, f.max))
		case f.value > f.max && f.value > was:
			problems = append(problems, fmt.Sprintf("%s grew from %d to %d (limit %d): pending entries only shrink", f.key, was, f.value, f.max))
		case f.value <= f.max && listed:
			problems = append(problems, fmt.Sprintf("%s is %d, within its limit of %d: delete its entry from pending", f.key, f.value, f.max))
		}
	}
	for key, was := range pending {
		if !measured[key] {
			problems = append(problems, fmt.Sprintf("pending lists %s at %d, which measures nothing any more: delete its entry", key, was))
		}
	}
	sort.Strings(problems)
	return problems
}

// overOf returns the figures over their limits, by key.
func overOf(fs []figure) map[string]int {
	out := map[string]int{}
	for _, f := range fs {
		if f.value > f.max {
			out[f.key] = f.value
		}
	}
	return out
}

// goFile is one non-test Go file of the tree.
type goFile struct {
	rel       string // slash path from the root
	lines     int
	generated bool
	ast       *ast.File
}

// measure reads every non-test Go file under root (skipping hidden
// directories, testdata and bin, as the layer test does) and returns
// every figure the limits hold: each file's and each package's lines,
// broadcast.Service's exported methods, server.Server's fields, and
// the config names each package below the wiring uses beyond its own.
func measure(root string, names map[string][]string, below func(pkg string) bool) ([]figure, error) {
	pkgs, err := readTree(root)
	if err != nil {
		return nil, err
	}
	var fs []figure
	for pkg, files := range pkgs {
		total := 0
		for _, f := range files {
			if f.generated {
				continue
			}
			total += f.lines
			fs = append(fs, figure{fileKey(f.rel), f.lines, maxFileLines})
		}
		if !slices.Contains(largePackages, pkg) {
			fs = append(fs, figure{packageKey(pkg), total, maxPackageLines})
		}
		if below(pkg) {
			if n, imports := configUses(files, names[pkg]); imports {
				fs = append(fs, figure{configKey(pkg), n, 0})
			}
		}
	}
	methods, err := exportedMethods(pkgs["broadcast"], "Service")
	if err != nil {
		return nil, fmt.Errorf("broadcast: %w", err)
	}
	fields, err := structFields(pkgs["server"], "Server")
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	fs = append(fs, figure{serviceKey(), methods, maxServiceMethods}, figure{serverKey(), fields, maxServerFields})
	sort.Slice(fs, func(i, j int) bool { return fs[i].key < fs[j].key })
	return fs, nil
}

// readTree parses root's non-test Go files, by package (a slash path
// from root; "." for root itself).
func readTree(root string) (map[string][]goFile, error) {
	pkgs := map[string][]goFile{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		pkg := filepath.ToSlash(filepath.Dir(rel))
		pkgs[pkg] = append(pkgs[pkg], goFile{rel: rel, lines: countLines(src), generated: ast.IsGenerated(f), ast: f})
		return nil
	})
	return pkgs, err
}

// countLines counts lines as wc -l does, and a last line without its
// newline too.
func countLines(src []byte) int {
	n := bytes.Count(src, []byte("\n"))
	if len(src) > 0 && src[len(src)-1] != '\n' {
		n++
	}
	return n
}

// exportedMethods counts the exported methods declared on typ (receiver
// typ or *typ) in files; it is an error if no file declares typ.
func exportedMethods(files []goFile, typ string) (int, error) {
	if _, err := structType(files, typ); err != nil {
		return 0, err
	}
	n := 0
	for _, f := range files {
		for _, d := range f.ast.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 || !fn.Name.IsExported() {
				continue
			}
			recv := fn.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			if id, ok := recv.(*ast.Ident); ok && id.Name == typ {
				n++
			}
		}
	}
	return n, nil
}

// structFields counts the fields of the struct type typ (each name of
// "a, b T" one, an embedded field one).
func structFields(files []goFile, typ string) (int, error) {
	st, err := structType(files, typ)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, field := range st.Fields.List {
		n += max(len(field.Names), 1)
	}
	return n, nil
}

func structType(files []goFile, typ string) (*ast.StructType, error) {
	for _, f := range files {
		for _, d := range f.ast.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				if ts.Name.Name != typ {
					continue
				}
				if st, ok := ts.Type.(*ast.StructType); ok {
					return st, nil
				}
				return nil, fmt.Errorf("type %s is not a struct", typ)
			}
		}
	}
	return nil, fmt.Errorf("no type %s: the limits test measures it (update internal/testsupport/layers/limits_test.go if it moved)", typ)
}

// configUses counts, over files, the uses of config's names that mayUse
// does not list (a dot or blank import counts one), and says whether
// any file imports config at all.
func configUses(files []goFile, mayUse []string) (n int, imports bool) {
	for _, f := range files {
		local := ""
		for _, imp := range f.ast.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p != "pushfan/config" {
				continue
			}
			imports = true
			local = "config"
			if imp.Name != nil {
				local = imp.Name.Name
			}
		}
		switch local {
		case "":
			continue
		case ".", "_":
			n++
			continue
		}
		ast.Inspect(f.ast, func(node ast.Node) bool {
			sel, ok := node.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && !slices.Contains(mayUse, sel.Sel.Name) {
				n++
			}
			return true
		})
	}
	return n, imports
}
