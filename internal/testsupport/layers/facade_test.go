package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxServiceMethods bounds broadcast.Service's exported methods: it is the
// write side (submit, cancel, release, resend, job fires, start and stop),
// and the reads, the test sends and the request rules are packages of
// their own beside it.
const maxServiceMethods = 15

func TestBroadcastServiceStaysTheWriteSide(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "broadcast", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var methods []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || !fn.Name.IsExported() || len(fn.Recv.List) != 1 {
				continue
			}
			recv := fn.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			if id, ok := recv.(*ast.Ident); ok && id.Name == "Service" {
				methods = append(methods, fn.Name.Name)
			}
		}
	}
	if len(methods) == 0 {
		t.Fatal("found no method of broadcast.Service: has it moved?")
	}
	if len(methods) > maxServiceMethods {
		t.Errorf("broadcast.Service has %d exported methods (%v); at most %d: put reads in broadcast/reads, test sends in broadcast/testsend, request rules in broadcast/rules", len(methods), methods, maxServiceMethods)
	}
}
