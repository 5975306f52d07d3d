package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The one shape of a service (docs/architecture.md "The anatomy of a
// service"), read from the sources so that a change that breaks it fails
// here rather than in a reader's head.

// services are the modules with a service's lifecycle.
var services = []string{"gateway", "messaging", "webhook-dispatcher", "flow-runner", "console"}

// infrastructure are the libraries the rules of a service stay free of:
// only adapters, ports and main may import them.
var infrastructure = []string{
	"github.com/labstack/echo",
	"gorm.io/",
	"github.com/jackc/pgx",
	"github.com/nats-io/",
	"github.com/redis/go-redis",
	"go.uber.org/zap",
	"github.com/prometheus/",
}

// imports are the import paths of each non-test Go file under dir, by the
// file's path relative to the repository's root.
func imports(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		for _, spec := range f.Imports {
			p, _ := strconv.Unquote(spec.Path.Value)
			out[filepath.ToSlash(rel)] = append(out[filepath.ToSlash(rel)], p)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

func importsAny(paths []string, prefixes []string) string {
	for _, p := range paths {
		for _, prefix := range prefixes {
			if strings.HasPrefix(p, prefix) {
				return p
			}
		}
	}
	return ""
}

// A service's domain and use cases import no web framework, database,
// broker, cache, logger or metrics library: they declare the interfaces
// they need (observers among them), and adapters implement them.
func TestRulesImportNoInfrastructure(t *testing.T) {
	t.Parallel()
	for _, s := range services {
		for _, layer := range []string{"domain", "app"} {
			dir := filepath.Join("..", "services", s, "internal", layer)
			if _, err := os.Stat(dir); err != nil {
				t.Fatalf("%s has no internal/%s: has its layout moved?", s, layer)
			}
			for file, paths := range imports(t, dir) {
				if p := importsAny(paths, infrastructure); p != "" {
					t.Errorf("%s imports %s, which belongs in an adapter or a port, behind an interface the layer declares", file, p)
				}
			}
		}
	}
}

// Metrics live in one layer: in each service, only internal/adapters/observe
// imports Prometheus.
func TestOnlyObserveImportsPrometheus(t *testing.T) {
	t.Parallel()
	for _, s := range services {
		root := filepath.Join("..", "services", s)
		for file, paths := range imports(t, root) {
			if p := importsAny(paths, []string{"github.com/prometheus/"}); p != "" &&
				!strings.HasPrefix(file, "services/"+s+"/internal/adapters/observe/") {
				t.Errorf("%s imports %s: a service's metrics live in internal/adapters/observe", file, p)
			}
		}
	}
}

// Every main.go has the same steps: main -> run -> serve(ctx, cfg, log,
// seams) -> wire, returning service.Ports; every use-case constructor and
// every port constructor takes one Deps struct.
func TestEveryServiceHasTheOneShape(t *testing.T) {
	t.Parallel()
	for _, s := range services {
		mainFile := filepath.Join("..", "services", s, "main.go")
		f, err := parser.ParseFile(token.NewFileSet(), mainFile, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		funcs := map[string]*ast.FuncDecl{}
		types := map[string]bool{}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				funcs[d.Name.Name] = d
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok {
						types[ts.Name.Name] = true
					}
				}
			}
		}
		for _, name := range []string{"main", "run", "serve", "wire"} {
			if funcs[name] == nil {
				t.Errorf("services/%s/main.go has no func %s: main -> run -> serve -> wire", s, name)
			}
		}
		if !types["seams"] {
			t.Errorf("services/%s/main.go declares no seams (what tests replace in the wiring)", s)
		}
		if fn := funcs["serve"]; fn != nil {
			if p := paramTypes(fn); len(p) != 4 || p[0] != "context.Context" || !strings.HasSuffix(p[1], ".Config") || p[2] != "*zap.Logger" || p[3] != "seams" {
				t.Errorf("services/%s/main.go: serve(%s), want serve(ctx, cfg, log, seams)", s, strings.Join(p, ", "))
			}
		}
		if fn := funcs["wire"]; fn != nil {
			if results := resultTypes(fn); !slices.Equal(results, []string{"service.Ports", "error"}) {
				t.Errorf("services/%s/main.go: wire returns (%s), want (service.Ports, error)", s, strings.Join(results, ", "))
			}
		}

		for _, dir := range []string{"internal/app", "internal/ports/http"} {
			checkConstructors(t, filepath.Join("..", "services", s, dir))
		}
	}
}

// checkConstructors fails t for each exported New... function in dir that
// builds a use case or a port from anything but one ...Deps struct.
func checkConstructors(t *testing.T, dir string) {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, pkg := range pkgs {
		for name, file := range pkg.Files {
			for _, d := range file.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "New") || !fn.Name.IsExported() {
					continue
				}
				// Constructors return the use case or the echo server they
				// build; helpers such as NewID return a value.
				if results := resultTypes(fn); len(results) != 1 || !strings.HasPrefix(results[0], "*") {
					continue
				}
				found++
				if params := paramTypes(fn); len(params) != 1 || !strings.HasSuffix(params[0], "Deps") {
					rel, _ := filepath.Rel("..", name)
					t.Errorf("%s: %s(%s), want one ...Deps struct", filepath.ToSlash(rel), fn.Name.Name, strings.Join(params, ", "))
				}
			}
		}
	}
	if found == 0 {
		t.Errorf("%s: no constructor found; has the layout moved?", dir)
	}
}

func paramTypes(fn *ast.FuncDecl) []string { return fieldTypes(fn.Type.Params) }

func resultTypes(fn *ast.FuncDecl) []string { return fieldTypes(fn.Type.Results) }

func fieldTypes(fl *ast.FieldList) []string {
	if fl == nil {
		return nil
	}
	var out []string
	for _, f := range fl.List {
		n := max(len(f.Names), 1)
		for range n {
			out = append(out, exprString(f.Type))
		}
	}
	return out
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	default:
		return "?"
	}
}
