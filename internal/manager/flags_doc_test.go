package manager

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update", false, "rewrite the manager flags table in docs/install.md")

const (
	flagsDocPath  = "../../docs/install.md"
	flagsDocBegin = "<!-- BEGIN GENERATED: manager flags (go test ./internal/manager -run TestFlagsTableIsFresh -update) -->"
	flagsDocEnd   = "<!-- END GENERATED: manager flags -->"
)

// flagsTable renders every manager flag with its default, as BindFlags
// registers it.
func flagsTable() string {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	NewOptions().BindFlags(fs)
	var b strings.Builder
	b.WriteString("| flag | default | meaning |\n|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		def := "(empty)"
		if f.DefValue != "" {
			def = "`" + f.DefValue + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s |\n", f.Name, def, strings.ReplaceAll(f.Usage, "|", `\|`))
	})
	return b.String()
}

// TestFlagsTableIsFresh keeps the documented manager flags and defaults
// (docs/install.md) equal to what the binary accepts.
func TestFlagsTableIsFresh(t *testing.T) {
	raw, err := os.ReadFile(flagsDocPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	begin, end := strings.Index(doc, flagsDocBegin), strings.Index(doc, flagsDocEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s lacks the %q ... %q markers", flagsDocPath, flagsDocBegin, flagsDocEnd)
	}
	want := flagsDocBegin + "\n" + flagsTable() + flagsDocEnd
	got := doc[begin : end+len(flagsDocEnd)]
	if got == want {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(flagsDocPath, []byte(doc[:begin]+want+doc[end+len(flagsDocEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the manager flags table in %s is stale; run: go test ./internal/manager -run TestFlagsTableIsFresh -update", flagsDocPath)
}
