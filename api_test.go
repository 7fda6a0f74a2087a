package tickbus_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listedPkg is the part of `go list -json` the API walk needs.
type listedPkg struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Export     string
	Standard   bool
	DepOnly    bool
	ImportMap  map[string]string
}

// goList runs `go list -e -export -deps -json` on patterns in dir: every
// package with the path of its compiled export data.
func goList(t *testing.T, dir string, patterns ...string) []listedPkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-export", "-deps", "-json"}, patterns...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	var pkgs []listedPkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// isInternal reports whether an import path is an internal package of
// this module (one no other module can import).
func isInternal(path string) bool {
	return strings.HasSuffix(path, "/internal") || strings.Contains(path, "/internal/")
}

// exportedAPI type-checks one package from its source (the imports from
// their export data) and returns, for every exported identifier that names
// an internal type somewhere in its signature, "ident: type".
func exportedAPI(fset *token.FileSet, p listedPkg, exports map[string]string) ([]string, error) {
	var files []*ast.File
	for _, name := range append(append([]string{}, p.GoFiles...), p.CgoFiles...) {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if e, ok := exports[path]; ok && e != "" {
			return os.Open(e)
		}
		return nil, fmt.Errorf("no export data for %s", path)
	})
	conf := types.Config{
		Importer: importerFunc(func(path string) (*types.Package, error) {
			if m, ok := p.ImportMap[path]; ok {
				path = m
			}
			return imp.Import(path)
		}),
		FakeImportC: true,
		Error:       func(error) {}, // cgo files: C.x is unknown; the exported API is still typed
	}
	pkg, _ := conf.Check(p.ImportPath, fset, files, nil)
	if pkg == nil {
		return nil, fmt.Errorf("type-check %s failed", p.ImportPath)
	}
	var bad []string
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		w := walker{seen: map[types.Type]bool{}}
		switch o := obj.(type) {
		case *types.TypeName:
			if o.IsAlias() {
				w.walk(types.Unalias(o.Type()), name)
			} else {
				w.walkNamed(o.Type().(*types.Named), name)
			}
		default:
			w.walk(obj.Type(), name)
		}
		bad = append(bad, w.bad...)
	}
	return bad, nil
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// walker follows a type through everything a caller can name: signatures,
// exported fields, exported methods, element and key types, type
// arguments and constraints.
type walker struct {
	seen map[types.Type]bool
	bad  []string
}

func (w *walker) walkNamed(n *types.Named, where string) {
	w.walk(n.Underlying(), where)
	for i := range n.NumMethods() {
		m := n.Method(i)
		if m.Exported() {
			w.walk(m.Type(), where+"."+m.Name())
		}
	}
	if tp := n.TypeParams(); tp != nil {
		for i := range tp.Len() {
			w.walk(tp.At(i).Constraint(), where)
		}
	}
}

func (w *walker) walk(t types.Type, where string) {
	if t == nil || w.seen[t] {
		return
	}
	w.seen[t] = true
	switch t := t.(type) {
	case *types.Alias:
		w.walk(types.Unalias(t), where)
	case *types.Named:
		obj := t.Obj()
		if obj.Pkg() != nil && isInternal(obj.Pkg().Path()) {
			w.bad = append(w.bad, fmt.Sprintf("%s: %s.%s", where, obj.Pkg().Path(), obj.Name()))
			return
		}
		if args := t.TypeArgs(); args != nil {
			for i := range args.Len() {
				w.walk(args.At(i), where)
			}
		}
		// A named type of another public package is that package's own
		// API: checked when that package is walked. One of this package
		// is walked here, once.
		w.walkNamed(t, where)
	case *types.Pointer:
		w.walk(t.Elem(), where)
	case *types.Slice:
		w.walk(t.Elem(), where)
	case *types.Array:
		w.walk(t.Elem(), where)
	case *types.Chan:
		w.walk(t.Elem(), where)
	case *types.Map:
		w.walk(t.Key(), where)
		w.walk(t.Elem(), where)
	case *types.Signature:
		for i := range t.Params().Len() {
			w.walk(t.Params().At(i).Type(), where)
		}
		for i := range t.Results().Len() {
			w.walk(t.Results().At(i).Type(), where)
		}
	case *types.Struct:
		for i := range t.NumFields() {
			f := t.Field(i)
			if f.Exported() || f.Embedded() {
				w.walk(f.Type(), where+"."+f.Name())
			}
		}
	case *types.Interface:
		for i := range t.NumMethods() {
			if m := t.Method(i); m.Exported() {
				w.walk(m.Type(), where+"."+m.Name())
			}
		}
		for i := range t.NumEmbeddeds() {
			w.walk(t.EmbeddedType(i), where)
		}
	case *types.Union:
		for i := range t.Len() {
			w.walk(t.Term(i).Type(), where)
		}
	case *types.TypeParam:
		w.walk(t.Constraint(), where)
	}
}

// TestAPI_NoExportedIdentifierNamesAnInternalType walks the exported API of
// every importable package of the module (not internal, not main) and
// fails on each exported identifier whose signature, fields or methods
// name a type from an internal package: a program in another module could
// not name that type, so it could not call what uses it.
func TestAPI_NoExportedIdentifierNamesAnInternalType(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the export data of every package (slow on a loaded machine); run without -short")
	}
	pkgs := goList(t, ".", "./...")
	exports := map[string]string{}
	for _, p := range pkgs {
		exports[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	var bad []string
	walked := 0
	for _, p := range pkgs {
		if p.Standard || p.DepOnly || p.Name == "main" || isInternal(p.ImportPath) ||
			!strings.HasPrefix(p.ImportPath, "github.com/tickbus/tickbus") {
			continue
		}
		got, err := exportedAPI(fset, p, exports)
		require.NoError(t, err, p.ImportPath)
		for _, b := range got {
			bad = append(bad, p.ImportPath+"."+b)
		}
		walked++
	}
	sort.Strings(bad)
	assert.Greater(t, walked, 8, "the walk saw the module's public packages")
	assert.Empty(t, bad, "exported identifiers that name internal types (a user's module cannot use them)")
}

// TestAPI_WalkerFindsAnInternalType proves the walker fails where it
// should: a throwaway module with an internal type reachable through a
// field, a method result, a func parameter, a map and an alias.
func TestAPI_WalkerFindsAnInternalType(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, s string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, rel), []byte(s), 0o644))
	}
	write("go.mod", "module example.com/m\n\ngo 1.22\n")
	write("internal/x/x.go", "package x\n\ntype Secret struct{}\n")
	write("pub/pub.go", `package pub

import "example.com/m/internal/x"

type Config struct {
	Hook func(*x.Secret)
	ok   *x.Secret // unexported: fine
}
type T struct{}

func (T) Get() map[string][]x.Secret { return nil }
func (T) hidden() x.Secret          { return x.Secret{} }
func New(s *x.Secret) *T            { return nil }

type Alias = x.Secret

var Fine = 3
`)
	cmd := exec.Command("go", "list", "-export", "-deps", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	pkgs := goList(t, dir, "./...")
	exports := map[string]string{}
	for _, p := range pkgs {
		exports[p.ImportPath] = p.Export
	}
	var bad []string
	for _, p := range pkgs {
		if p.ImportPath == "example.com/m/pub" {
			bad, err = exportedAPI(token.NewFileSet(), p, exports)
			require.NoError(t, err)
		}
	}
	sort.Strings(bad)
	assert.Equal(t, []string{
		"Alias: example.com/m/internal/x.Secret",
		"Config.Hook: example.com/m/internal/x.Secret",
		"New: example.com/m/internal/x.Secret",
		"T.Get: example.com/m/internal/x.Secret",
	}, bad)
}
