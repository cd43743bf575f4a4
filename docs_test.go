package dlgate_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The map at the top of docs/design.md names files and code: every file
// it names exists, and every name it gives in backticks (Func,
// Type.Method, an interface's method) is declared in the repository's
// code, so the map cannot drift from the house it describes.
func TestTheMapOfTheDesignNoteNamesWhatExists(t *testing.T) {
	doc, err := os.ReadFile("docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "## The map")
	if start < 0 {
		t.Fatal(`docs/design.md has no "## The map" section`)
	}
	section := text[start+len("## The map"):]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	names := declaredNames(t)
	// Backticked words that are neither files nor declarations (a metric, an
	// option value) are not on this page; those that look like code must be.
	ident := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)
	var files, code int
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(section, -1) {
		ref := m[1]
		switch {
		case (strings.Contains(ref, "/") || strings.HasSuffix(ref, ".go")) && !strings.Contains(ref, " "):
			files++
			if strings.Count(ref, "/") == 1 && !strings.Contains(ref, ".") {
				// A package path such as gorilla/mux or ledger/sqlcore: a
				// folder of this repository, or an import path.
				if _, err := os.Stat(ref); err != nil && !strings.Contains(ref, "mux") {
					t.Errorf("the map names the folder %s, which does not exist", ref)
				}
				continue
			}
			if _, err := os.Stat(ref); err != nil {
				t.Errorf("the map names %s, which does not exist", ref)
			}
		case ident.MatchString(ref):
			if fi, err := os.Stat(ref); err == nil && fi.IsDir() {
				continue // a package of the repository: config, ledger
			}
			code++
			if !names[ref] {
				t.Errorf("the map names %s, which no Go file of the repository declares", ref)
			}
		}
	}
	if files < 20 || code < 20 {
		t.Errorf("the map names %d files and %d declarations; the section was not read as meant", files, code)
	}
}

// declaredNames are the repository's top-level functions and types (also
// as pkg.Name, the way the map writes what another package holds),
// methods as Recv.Name, and interface methods, from its non-test files.
func declaredNames(t *testing.T) map[string]bool {
	names := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bin" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					names[d.Name.Name] = true
					names[pkg+"."+d.Name.Name] = true
					continue
				}
				recv := d.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					names[id.Name+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok {
						continue
					}
					names[ts.Name.Name] = true
					names[pkg+"."+ts.Name.Name] = true
					if it, ok := ts.Type.(*ast.InterfaceType); ok {
						for _, m := range it.Methods.List {
							for _, n := range m.Names {
								names[n.Name] = true
								names[ts.Name.Name+"."+n.Name] = true
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
