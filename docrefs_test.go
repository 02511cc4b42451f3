package cdcsnap_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestDocReferencesExist: every "see X" in a doc comment of the module's
// public packages names something that exists, so a rename cannot leave a
// reader looking for a name that is gone.
func TestDocReferencesExist(t *testing.T) {
	mod, err := indexModule(".")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range mod.byDir {
		if !p.public {
			continue
		}
		stale, n := mod.staleReferences(p)
		checked += n
		for _, s := range stale {
			t.Error(s)
		}
	}
	// A floor, so that a regexp that stopped matching fails too.
	if checked < 30 {
		t.Fatalf("checked %d references, want at least 30", checked)
	}
}

// TestDocReferencesFindsStaleNames: the check reports the references planted
// in testdata/docrefs (a name, a method, a package member, a file that do not
// exist) and nothing else there.
func TestDocReferencesFindsStaleNames(t *testing.T) {
	mod, err := indexModule(".")
	if err != nil {
		t.Fatal(err)
	}
	p, err := indexPackage(mod, filepath.Join("testdata", "docrefs"))
	if err != nil {
		t.Fatal(err)
	}
	stale, n := mod.staleReferences(p)
	var got []string
	for _, s := range stale {
		got = append(got, s[strings.LastIndex(s, "see "):])
	}
	want := []string{
		"see LatestImage: no such name, file or folder",
		"see Order.Merge: no such name, file or folder",
		"see sameValu: no such name, file or folder",
		"see snapshot.LatestImage: no such name, file or folder",
		"see nosuch.go: no such name, file or folder",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("reported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n != 13 {
		t.Fatalf("checked %d references, want 13", n)
	}
}

// sectionRef is a citation of a section of one of the repository's
// Markdown files, `FILE.md, "Heading"`, and ruleRef one of DESIGN.md's
// rules, `DESIGN.md R3` (or `DESIGN.md R2, R7`).
var (
	sectionRef = regexp.MustCompile(`([A-Za-z0-9_./-]+\.md)[,:]? *\(?"([^"\n]{1,100})"`)
	ruleRef    = regexp.MustCompile(`DESIGN\.md,? (R[0-9]+(?:(?:, | and )R[0-9]+)*)`)
	ruleNum    = regexp.MustCompile(`R[0-9]+`)
	commentNL  = regexp.MustCompile(`\n[ \t]*(?://|#)?[ \t]*`)
)

// TestDocSectionReferencesExist: every `FILE.md, "Heading"` in the
// repository's Go, Python and Markdown files names a heading that FILE.md
// (beside the citing file, or at the root) has, and every `DESIGN.md R<n>`
// a rule DESIGN.md states. Files that are not in the repository (Delta's
// PROTOCOL.md) are not checked.
func TestDocSectionReferencesExist(t *testing.T) {
	headings := map[string][]string{} // file -> its headings, read on first use
	headingsOf := func(file string) []string {
		if h, ok := headings[file]; ok {
			return h
		}
		b, _ := os.ReadFile(file)
		var h []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "#") {
				h = append(h, strings.TrimSpace(strings.TrimLeft(l, "#")))
			}
		}
		headings[file] = h
		return h
	}
	design, err := os.ReadFile("DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != "." && strings.HasPrefix(n, ".") || p == filepath.Join("testdata", "docrefs") {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(p); ext != ".go" && ext != ".md" && ext != ".py" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		text := string(b)
		if filepath.Ext(p) == ".go" { // its comments only
			f, err := parser.ParseFile(token.NewFileSet(), p, b, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			var cs []string
			for _, cg := range f.Comments {
				cs = append(cs, cg.Text())
			}
			text = strings.Join(cs, "\n")
		}
		text = commentNL.ReplaceAllString(text, " ")
		for _, m := range sectionRef.FindAllStringSubmatch(text, -1) {
			file := filepath.Join(filepath.Dir(p), m[1])
			if _, err := os.Stat(file); err != nil {
				file = m[1]
				if _, err := os.Stat(file); err != nil {
					continue // not a file of this repository
				}
			}
			checked++
			if !slices.ContainsFunc(headingsOf(file), func(h string) bool { return strings.HasPrefix(h, m[2]) }) {
				t.Errorf("%s: %s, %q: no such heading in %s", p, m[1], m[2], file)
			}
		}
		for _, m := range ruleRef.FindAllStringSubmatch(text, -1) {
			for _, r := range ruleNum.FindAllString(m[1], -1) {
				checked++
				if !strings.Contains(string(design), "**"+r+". ") {
					t.Errorf("%s: DESIGN.md %s: DESIGN.md states no rule %s", p, r, r)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 15 {
		t.Fatalf("checked %d section and rule references, want at least 15", checked)
	}
}

// provenBy finds, in a row of DESIGN.md's "What is proven where", a package
// in backquotes and the text up to the next package, semicolon or cell;
// testName the tests named in that text.
var (
	provenBy = regexp.MustCompile("`([a-z][a-z0-9/]*)` ([^`;|]*)")
	testName = regexp.MustCompile(`\b(?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*`)
)

// TestDesignNamesTestsThatExist: every test DESIGN.md cites as a proof
// exists in the package it names, so moving or renaming a test cannot
// leave the design pointing at nothing.
func TestDesignNamesTestsThatExist(t *testing.T) {
	mod, err := indexModule(".")
	if err != nil {
		t.Fatal(err)
	}
	design, err := os.ReadFile("DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	_, proven, ok := strings.Cut(string(design), "## What is proven where")
	if !ok {
		t.Fatal(`DESIGN.md has no section "What is proven where"`)
	}
	checked := 0
	for _, m := range provenBy.FindAllStringSubmatch(proven, -1) {
		p := mod.byDir[m[1]]
		for _, name := range testName.FindAllString(m[2], -1) {
			checked++
			if p == nil || !p.all[name] {
				t.Errorf("DESIGN.md cites %s in %s, which does not declare it", name, m[1])
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d tests, want at least 50", checked)
	}
}

// modIndex is what the module declares, per package folder.
type modIndex struct {
	root   string // module root
	path   string // module path
	byDir  map[string]*pkgIndex
	byName map[string][]*pkgIndex
}

// pkgIndex is what one package declares, and the doc comments to check.
type pkgIndex struct {
	dir     string
	name    string
	public  bool                       // not internal, not a command
	names   map[string]bool            // package-level names
	members map[string]map[string]bool // type -> its methods and fields
	all     map[string]bool            // every name above, members included
	imports map[string]string          // import name -> path, all files
	docs    []docComment               // of the non-test files
}

type docComment struct {
	pos  token.Position
	text string
}

func indexModule(root string) (*modIndex, error) {
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	m := &modIndex{root: root, byDir: map[string]*pkgIndex{}, byName: map[string][]*pkgIndex{}}
	for _, l := range strings.Split(string(gomod), "\n") {
		if p, ok := strings.CutPrefix(l, "module "); ok {
			m.path = strings.TrimSpace(p)
		}
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") || n == "testdata") {
			return filepath.SkipDir
		}
		pkg, err := indexPackage(m, p)
		if err != nil || pkg == nil {
			return err
		}
		m.byDir[filepath.ToSlash(p)] = pkg
		m.byName[pkg.name] = append(m.byName[pkg.name], pkg)
		return nil
	})
	return m, err
}

// indexPackage parses the Go files of dir (nil when there are none).
func indexPackage(m *modIndex, dir string) (*pkgIndex, error) {
	fset := token.NewFileSet()
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	p := &pkgIndex{dir: dir, names: map[string]bool{}, members: map[string]map[string]bool{}, all: map[string]bool{}, imports: map[string]string{}}
	for _, e := range es {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		test := strings.HasSuffix(e.Name(), "_test.go")
		if !test {
			p.name = f.Name.Name
		}
		p.declare(f, fset, !test)
	}
	if len(p.all) == 0 && p.name == "" {
		return nil, nil
	}
	rel := filepath.ToSlash(dir)
	p.public = p.name != "main" && p.name != "" && !strings.HasPrefix(rel, "internal/") && !strings.Contains(rel, "/internal/") && rel != "internal"
	return p, nil
}

func (p *pkgIndex) declare(f *ast.File, fset *token.FileSet, collectDocs bool) {
	doc := func(cgs ...*ast.CommentGroup) {
		for _, cg := range cgs {
			if collectDocs && cg != nil {
				p.docs = append(p.docs, docComment{fset.Position(cg.Pos()), cg.Text()})
			}
		}
	}
	member := func(typ, name string) {
		if p.members[typ] == nil {
			p.members[typ] = map[string]bool{}
		}
		p.members[typ][name] = true
		p.all[name] = true
	}
	doc(f.Doc)
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		name := filepath.Base(path)
		if im.Name != nil {
			name = im.Name.Name
		}
		p.imports[name] = path
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			doc(d.Doc)
			if d.Recv == nil {
				p.names[d.Name.Name], p.all[d.Name.Name] = true, true
				continue
			}
			member(receiverType(d.Recv.List[0].Type), d.Name.Name)
		case *ast.GenDecl:
			doc(d.Doc)
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					doc(s.Doc, s.Comment)
					p.names[s.Name.Name], p.all[s.Name.Name] = true, true
					var fields *ast.FieldList
					switch t := s.Type.(type) {
					case *ast.StructType:
						fields = t.Fields
					case *ast.InterfaceType:
						fields = t.Methods
					}
					if fields == nil {
						continue
					}
					for _, fd := range fields.List {
						doc(fd.Doc, fd.Comment)
						for _, n := range fd.Names {
							member(s.Name.Name, n.Name)
						}
						if len(fd.Names) == 0 { // embedded
							member(s.Name.Name, receiverType(fd.Type))
						}
					}
				case *ast.ValueSpec:
					doc(s.Doc, s.Comment)
					for _, n := range s.Names {
						p.names[n.Name], p.all[n.Name] = true, true
					}
				}
			}
		}
	}
}

// receiverType is the name of a receiver's (or an embedded field's) type.
func receiverType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.SelectorExpr:
			return t.Sel.Name
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// seeRef finds "see X" and "See X"; X is then classified by staleReferences.
var seeRef = regexp.MustCompile(`\b[Ss]ee\s+([A-Za-z_][A-Za-z0-9_./-]*)`)

// fileExt are the extensions that make a reference a file name.
var fileExt = []string{".go", ".md", ".sql", ".py", ".txt", ".json", ".yaml", ".yml", ".sh"}

// staleReferences returns one line per reference in p's doc comments that
// names nothing, and how many references it checked. A reference is
//
//   - a path with a slash (source/sqlserver): a folder or file of the module;
//   - a file name (features.go, FACTS.md): beside the package or at the root;
//   - X.Y or X.Y.Z: X a type of p and Y its method or field, or X a package
//     of the module (by import name or package name) declaring Y, Z a member
//     of any of its types; packages outside the module are not checked;
//   - a name with an upper-case letter (Prepare, sameValue): declared in p,
//     at package level or as a method or field.
//
// A plain lower-case word ("see below", "see the") is English, not checked.
func (m *modIndex) staleReferences(p *pkgIndex) (stale []string, checked int) {
	for _, d := range p.docs {
		for _, sm := range seeRef.FindAllStringSubmatchIndex(d.text, -1) {
			ref := strings.TrimRight(d.text[sm[2]:sm[3]], ".-/")
			ok, isRef := m.resolve(p, ref)
			if !isRef {
				continue
			}
			checked++
			if !ok {
				line := d.pos.Line + strings.Count(d.text[:sm[0]], "\n")
				stale = append(stale, fmt.Sprintf("%s:%d: see %s: no such name, file or folder", d.pos.Filename, line, ref))
			}
		}
	}
	return stale, checked
}

// resolve says whether ref exists, and whether it is a reference at all.
func (m *modIndex) resolve(p *pkgIndex, ref string) (ok, isRef bool) {
	exists := func(paths ...string) bool {
		for _, q := range paths {
			if _, err := os.Stat(q); err == nil {
				return true
			}
		}
		return false
	}
	for _, ext := range fileExt {
		if strings.HasSuffix(ref, ext) {
			return exists(filepath.Join(p.dir, ref), filepath.Join(m.root, ref)), true
		}
	}
	if strings.Contains(ref, "/") {
		return exists(filepath.Join(m.root, ref), filepath.Join(p.dir, ref)), true
	}
	parts := strings.Split(ref, ".")
	if len(parts) == 1 {
		if !strings.ContainsFunc(ref, unicode.IsUpper) {
			return false, false
		}
		return p.all[ref], true
	}
	x, rest := parts[0], parts[1:]
	if mem, isType := p.members[x]; isType {
		for embedded := range mem { // one level of promoted members
			if p.members[embedded][rest[0]] {
				return true, true
			}
		}
		return mem[rest[0]], true
	}
	if p.names[x] {
		return p.all[rest[0]], true
	}
	var pkgs []*pkgIndex
	if path, ok := p.imports[x]; ok {
		rel, inModule := strings.CutPrefix(path, m.path)
		if !inModule {
			return true, true // outside the module: not checked
		}
		if q := m.byDir[strings.TrimPrefix(rel, "/")]; q != nil {
			pkgs = append(pkgs, q)
		} else if rel == "" {
			pkgs = append(pkgs, m.byDir["."])
		}
	} else {
		pkgs = m.byName[x]
	}
	if len(pkgs) == 0 {
		if !strings.ContainsFunc(x, unicode.IsUpper) {
			return false, false // "e.g.", "i.e.": not a reference
		}
		return false, true
	}
	for _, q := range pkgs {
		if q.names[rest[0]] && (len(rest) == 1 || q.all[rest[1]]) {
			return true, true
		}
	}
	return false, true
}
