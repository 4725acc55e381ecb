package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxServerFields bounds server.Server: it holds its settings, the domain
// behind interfaces, and a few groups (auth, the console, the extra
// routes), not a field per dependency.
const maxServerFields = 12

func TestServerHasFewFields(t *testing.T) {
	dir, err := filepath.Abs("../../../server")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != "Server" {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			found = true
			fields := 0
			for _, fl := range st.Fields.List {
				fields += max(1, len(fl.Names))
			}
			if fields > maxServerFields {
				t.Errorf("server.Server has %d fields; at most %d (group related ones into a small struct)", fields, maxServerFields)
			}
			return false
		})
	}
	if !found {
		t.Fatal("no type Server in package server")
	}
}
