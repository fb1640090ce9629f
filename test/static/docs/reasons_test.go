package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// modulePath is the import path prefix of this repository's packages.
const modulePath = "github.com/ml-operator/ml-operator"

// kindOfController maps a directory directly under controllers/ to the kind
// whose section of docs/operations.md documents its reasons. A new
// controller package must be added here (the test says so).
var kindOfController = map[string]string{
	"trainingjob":     "TrainingJob",
	"modeldeployment": "ModelDeployment",
}

// sharedPackages are the directories directly under controllers/ that hold
// no controller but code the controllers share. They may set no reason of
// their own (the test says so): a reason belongs to a kind's table.
var sharedPackages = map[string]bool{
	"namespaces": true,
}

// TestOperationsDocumentsEveryReason keeps the reason tables of
// docs/operations.md equal to the reasons the controllers can set: every
// reason found in controllers/ (see reasonsIn for the rule) must appear in a
// table's "reason" column under a "### <Kind> ..." heading of its kind, and
// every reason in those columns must still exist in the code.
func TestOperationsDocumentsEveryReason(t *testing.T) {
	root := testutil.RepoRoot()
	code, err := controllerReasons(root)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := documentedReasons(string(doc))

	for kind, reasons := range code {
		for reason, where := range reasons {
			if !documented[kind][reason] {
				t.Errorf("%s reason %q (set at %s) is not in a reason table under a \"### %s\" heading of docs/operations.md: add a row saying what it means and what to do",
					kind, reason, where, kind)
			}
		}
	}
	for kind, reasons := range documented {
		for reason := range reasons {
			if _, ok := code[kind][reason]; !ok {
				t.Errorf("docs/operations.md documents %s reason %q, which no code under controllers/ sets any more: remove or rename its row", kind, reason)
			}
		}
	}
	if t.Failed() {
		for _, kind := range sortedKeys(code) {
			t.Logf("%s reasons in the code: %s", kind, strings.Join(sortedKeys(code[kind]), ", "))
		}
	}
}

// TestReasonExtractionRule checks each part of the rule on a small package,
// so that a change to the extractor cannot silently stop finding reasons.
func TestReasonExtractionRule(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("api/v1/types.go", `package v1
const (
	CondRestarting = "Restarting"
	aliasOf = CondRestarting
	ReasonHandedOn = "HandedOn"
	ReasonNeverNamed = "NeverNamed"
)
type State string
const StateX State = "TypedConst"
`)
	write("controllers/thing/a.go", `package thing
import (
	"fmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mlv1 "`+modulePath+`/api/v1"
)
const (
	ReasonFromConst = "FromConst"
	ReasonAlias = ReasonFromConst
	EventSomething = "OnlyEventConst"
	notAReason = "NotAReason"
)
type decision struct{ reason string }
type cond struct{ Reason string }
func event(eventType, reason, note string) {}
func (d decision) emit(kind int, reason string) {}
func f(c *cond, d decision) {
	_ = metav1.Condition{Reason: "LiteralInCondition"}
	_ = decision{reason: "LiteralInDecision"}
	c.Reason = mlv1.CondRestarting
	c.Reason, c.Reason = notAReason, "SecondOfTuple"
	reason := "LocalReasonVar"
	_ = reason
	var reason2 = "NotCaptured"
	_ = reason2
	event("Normal", "EventLiteral", fmt.Sprint(1))
	event("Normal", EventSomething, "")
	d.emit(0, mlv1.StateX)
	if c.Reason == "ComparedOnly" {
	}
	failure := mlv1.ReasonHandedOn
	_ = failure
	c.Reason = ""
	c.Reason = d.reason
}
`)
	got, err := reasonsIn(filepath.Join(dir, "controllers", "thing"), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"EventLiteral", "FromConst", "HandedOn", "LiteralInCondition", "LiteralInDecision",
		"LocalReasonVar", "NotAReason", "OnlyEventConst", "Restarting", "SecondOfTuple", "TypedConst"}
	if g := sortedKeys(got); strings.Join(g, ",") != strings.Join(want, ",") {
		t.Errorf("reasons found = %v, want %v", g, want)
	}
}

// TestDocumentedReasonsParsing checks how reason columns are read.
func TestDocumentedReasonsParsing(t *testing.T) {
	doc := "## x\n| reason | y |\n|---|---|\n| `Outside` | a |\n" +
		"### TrainingJob conditions\n\n| condition | reason | meaning |\n|---|---|---|\n" +
		"| `Running` | `A`, `B` | see `NotAReason` |\n| `Created` | `C` | x |\n\n" +
		"### ModelDeployment events\n| reason | type |\n|---|---|\n| `D` | Normal |\n" +
		"## Other\n| reason |\n|---|\n| `E` |\n"
	got := documentedReasons(doc)
	if g := strings.Join(sortedKeys(got["TrainingJob"]), ","); g != "A,B,C" {
		t.Errorf("TrainingJob reasons = %s, want A,B,C", g)
	}
	if g := strings.Join(sortedKeys(got["ModelDeployment"]), ","); g != "D" {
		t.Errorf("ModelDeployment reasons = %s, want D", g)
	}
}

// controllerReasons returns, per kind, every reason found in the non-test Go
// files under controllers/, with where it was first found.
func controllerReasons(root string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	base := filepath.Join(root, "controllers")
	entries, err := os.ReadDir(base)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if sharedPackages[e.Name()] {
			found, err := reasonsIn(filepath.Join(base, e.Name()), root)
			if err != nil {
				return nil, err
			}
			for r, where := range found {
				return nil, fmt.Errorf("controllers/%s is a shared package (sharedPackages in test/static/docs/reasons_test.go) but sets reason %q at %s: set it in a controller package", e.Name(), r, where)
			}
			continue
		}
		kind, ok := kindOfController[e.Name()]
		if !ok {
			return nil, fmt.Errorf("controllers/%s has no kind in kindOfController (test/static/docs/reasons_test.go): add it and a \"### <Kind> conditions\" table to docs/operations.md", e.Name())
		}
		err := filepath.WalkDir(filepath.Join(base, e.Name()), func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			found, err := reasonsIn(path, root)
			if err != nil {
				return err
			}
			if out[kind] == nil {
				out[kind] = map[string]string{}
			}
			for r, where := range found {
				if _, seen := out[kind][r]; !seen {
					out[kind][r] = where
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// goPackage is the parsed non-test files of one directory.
type goPackage struct {
	fset  *token.FileSet
	files []*ast.File
	// consts are the package-level constant expressions by name.
	consts map[string]ast.Expr
	// reasonParams: function or method name -> indexes of parameters named reason.
	reasonParams map[string][]int
}

func parseDir(dir string) (*goPackage, error) {
	p := &goPackage{fset: token.NewFileSet(), consts: map[string]ast.Expr{}, reasonParams: map[string][]int{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(p.fset, filepath.Join(dir, n), nil, 0)
		if err != nil {
			return nil, err
		}
		p.files = append(p.files, f)
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				if d.Tok != token.CONST {
					continue
				}
				for _, s := range d.Specs {
					vs := s.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							p.consts[name.Name] = vs.Values[i]
						}
					}
				}
			case *ast.FuncDecl:
				i := 0
				for _, field := range d.Type.Params.List {
					names := field.Names
					if len(names) == 0 {
						i++
						continue
					}
					for _, name := range names {
						if name.Name == "reason" {
							p.reasonParams[d.Name.Name] = append(p.reasonParams[d.Name.Name], i)
						}
						i++
					}
				}
			}
		}
	}
	return p, nil
}

// resolver evaluates string constant expressions across this module's packages.
type resolver struct {
	root string
	pkgs map[string]*goPackage
}

func (r *resolver) pkg(dir string) (*goPackage, error) {
	if p, ok := r.pkgs[dir]; ok {
		return p, nil
	}
	p, err := parseDir(dir)
	if err != nil {
		return nil, err
	}
	r.pkgs[dir] = p
	return p, nil
}

// value is the string value of e in file f of package p, if it is a string
// literal or a constant of this module (followed through other constants).
func (r *resolver) value(p *goPackage, f *ast.File, e ast.Expr, depth int) (string, bool) {
	if depth > 10 {
		return "", false
	}
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.ParenExpr:
		return r.value(p, f, x.X, depth+1)
	case *ast.Ident:
		if c, ok := p.consts[x.Name]; ok {
			return r.value(p, f, c, depth+1)
		}
	case *ast.SelectorExpr:
		id, ok := x.X.(*ast.Ident)
		if !ok || f == nil {
			return "", false
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := filepath.Base(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			if name != id.Name || !strings.HasPrefix(path, modulePath+"/") {
				continue
			}
			q, err := r.pkg(filepath.Join(r.root, strings.TrimPrefix(path, modulePath+"/")))
			if err != nil {
				return "", false
			}
			if c, ok := q.consts[x.Sel.Name]; ok {
				return r.value(q, nil, c, depth+1)
			}
		}
	}
	return "", false
}

// isReasonName says whether an assignment target or struct key is a reason.
func isReasonName(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name == "reason" || x.Name == "Reason"
	case *ast.SelectorExpr:
		return x.Sel.Name == "reason" || x.Sel.Name == "Reason"
	}
	return false
}

// reasonsIn finds the reasons the package in dir can set, with file:line.
// The rule: the value of
//   - every package-level constant whose name starts with "Reason";
//   - every constant of another package of this module whose name starts
//     with "Reason" that the package names (mlv1.ReasonCrashLoop: the
//     reasons live in api/v1, and a controller may hand one on through a
//     field or a return value that no rule below sees);
//   - every struct literal field named Reason or reason (metav1.Condition,
//     the gang decision, failed versions);
//   - every assignment to x.Reason, x.reason or a variable named reason;
//   - every argument passed for a parameter named reason of a function or
//     method of the package (finish, failedCondition, condition, event, ...),
//
// when that value is a string literal or a string constant of this module.
// Values computed at run time (a variable, a field) are skipped: they carry
// one of the values found above. The empty string is not a reason.
func reasonsIn(dir, root string) (map[string]string, error) {
	r := &resolver{root: root, pkgs: map[string]*goPackage{}}
	p, err := r.pkg(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	add := func(f *ast.File, e ast.Expr) {
		if v, ok := r.value(p, f, e, 0); ok && v != "" {
			if _, seen := out[v]; !seen {
				pos := p.fset.Position(e.Pos())
				rel, _ := filepath.Rel(root, pos.Filename)
				out[v] = fmt.Sprintf("%s:%d", rel, pos.Line)
			}
		}
	}
	for _, f := range p.files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.GenDecl:
				if x.Tok == token.CONST {
					for _, s := range x.Specs {
						vs := s.(*ast.ValueSpec)
						for i, name := range vs.Names {
							if strings.HasPrefix(name.Name, "Reason") && i < len(vs.Values) {
								add(f, vs.Values[i])
							}
						}
					}
				}
			case *ast.SelectorExpr:
				if strings.HasPrefix(x.Sel.Name, "Reason") {
					add(f, x)
				}
			case *ast.KeyValueExpr:
				if isReasonName(x.Key) {
					add(f, x.Value)
				}
			case *ast.AssignStmt:
				if len(x.Lhs) == len(x.Rhs) {
					for i, lhs := range x.Lhs {
						if isReasonName(lhs) {
							add(f, x.Rhs[i])
						}
					}
				}
			case *ast.CallExpr:
				var name string
				switch fn := x.Fun.(type) {
				case *ast.Ident:
					name = fn.Name
				case *ast.SelectorExpr:
					name = fn.Sel.Name
				}
				for _, i := range p.reasonParams[name] {
					if i < len(x.Args) {
						add(f, x.Args[i])
					}
				}
			}
			return true
		})
	}
	return out, nil
}

var (
	kindHeading = regexp.MustCompile(`^###\s+(\w+)\b`)
	backticked  = regexp.MustCompile("`([^`]+)`")
)

// documentedReasons reads, per kind, the backticked names in the "reason"
// column of every table under a "### <Kind> ..." heading (up to the next
// heading of level 2 or 3).
func documentedReasons(doc string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	kind := ""
	col, inTable := -1, false
	for _, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "## ") || strings.HasPrefix(trimmed, "### ") {
			kind, col, inTable = "", -1, false
			if m := kindHeading.FindStringSubmatch(trimmed); m != nil {
				for _, k := range kindOfController {
					if m[1] == k {
						kind = k
					}
				}
			}
			continue
		}
		if kind == "" {
			continue
		}
		if !strings.HasPrefix(trimmed, "|") {
			col, inTable = -1, false // a table ends at the first non-table line
			continue
		}
		cells := strings.Split(strings.Trim(trimmed, "|"), "|")
		if !inTable { // the header row
			inTable = true
			for i, c := range cells {
				if strings.EqualFold(strings.TrimSpace(c), "reason") {
					col = i
				}
			}
			continue
		}
		if col < 0 || col >= len(cells) || strings.Trim(strings.TrimSpace(cells[col]), "-:") == "" {
			continue
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[col], -1) {
			if out[kind] == nil {
				out[kind] = map[string]bool{}
			}
			out[kind][m[1]] = true
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
