package manager

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update", false, "rewrite the generated manager flag tables in docs/install.md and docs/operations.md")

// generatedFlagDocs are the docs that carry a table generated from the
// manager's flags, between their markers.
var generatedFlagDocs = []struct {
	path, begin, end string
	render           func() string
}{
	{
		path:   "../../docs/install.md",
		begin:  "<!-- BEGIN GENERATED: manager flags (go test ./internal/manager -run TestFlagsTableIsFresh -update) -->",
		end:    "<!-- END GENERATED: manager flags -->",
		render: flagsTable,
	},
	{
		path:   "../../docs/operations.md",
		begin:  "<!-- BEGIN GENERATED: manager environment (go test ./internal/manager -run TestFlagsTableIsFresh -update) -->",
		end:    "<!-- END GENERATED: manager environment -->",
		render: envTable,
	},
}

func visitFlags(fn func(*flag.Flag)) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	NewOptions().BindFlags(fs)
	fs.VisitAll(fn)
}

// flagsTable renders every manager flag with its environment form and
// default, as BindFlags registers it.
func flagsTable() string {
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	visitFlags(func(f *flag.Flag) {
		def := "(empty)"
		if f.DefValue != "" {
			def = "`" + f.DefValue + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | %s |\n", f.Name, EnvName(f.Name), def, strings.ReplaceAll(f.Usage, "|", `\|`))
	})
	return b.String()
}

// envTable lists every environment variable and the flag it stands for.
func envTable() string {
	var b strings.Builder
	b.WriteString("| environment variable | flag |\n|---|---|\n")
	visitFlags(func(f *flag.Flag) {
		fmt.Fprintf(&b, "| `%s` | [`--%s`](install.md#manager-flags) |\n", EnvName(f.Name), f.Name)
	})
	return b.String()
}

// TestFlagsTableIsFresh keeps the documented manager flags, their
// environment forms and defaults (docs/install.md, docs/operations.md)
// equal to what the binary accepts.
func TestFlagsTableIsFresh(t *testing.T) {
	for _, d := range generatedFlagDocs {
		raw, err := os.ReadFile(d.path)
		if err != nil {
			t.Fatal(err)
		}
		doc := string(raw)
		begin, end := strings.Index(doc, d.begin), strings.Index(doc, d.end)
		if begin < 0 || end < begin {
			t.Errorf("%s lacks the %q ... %q markers", d.path, d.begin, d.end)
			continue
		}
		want := d.begin + "\n" + d.render() + d.end
		got := doc[begin : end+len(d.end)]
		if got == want {
			continue
		}
		if *updateDocs {
			if err := os.WriteFile(d.path, []byte(doc[:begin]+want+doc[end+len(d.end):]), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("the generated table in %s is stale; run: go test ./internal/manager -run TestFlagsTableIsFresh -update", d.path)
	}
}
