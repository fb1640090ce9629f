package docs

import (
	"iter"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// TestDocLinksResolve checks every relative link in README.md and docs/:
// the file must exist, and a #fragment must name a heading of the target
// (GitHub's anchor for it) or an explicit <a id="..."> in it. Links inside
// code spans and code blocks are not links and are skipped.
func TestDocLinksResolve(t *testing.T) {
	root := testutil.RepoRoot()
	pages := markdownPages(t, root)
	anchorCache := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchorCache[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := markdownAnchors(string(b))
		anchorCache[path] = a
		return a
	}
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for _, l := range relativeLinks(string(b)) {
			path, frag, _ := strings.Cut(l.target, "#")
			target := page
			if path != "" {
				target = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s:%d: link %q: %s does not exist", rel, l.line, l.target, path)
				continue
			}
			if frag != "" && strings.HasSuffix(target, ".md") && !anchorsOf(target)[frag] {
				t.Errorf("%s:%d: link %q: no heading or anchor %q in %s", rel, l.line, l.target, frag, path)
			}
		}
	}
}

// TestREADMELinksEveryDocPage: every page under docs/ is reachable from the
// README in one click.
func TestREADMELinksEveryDocPage(t *testing.T) {
	root := testutil.RepoRoot()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, l := range relativeLinks(string(b)) {
		path, _, _ := strings.Cut(l.target, "#")
		linked[filepath.Clean(filepath.FromSlash(path))] = true
	}
	for _, page := range markdownPages(t, root) {
		rel, _ := filepath.Rel(root, page)
		if rel == "README.md" {
			continue
		}
		if !linked[rel] {
			t.Errorf("README.md does not link %s: add it to the documentation table", filepath.ToSlash(rel))
		}
	}
}

// TestMarkdownHelpers pins the link and anchor rules the tests above use.
func TestMarkdownHelpers(t *testing.T) {
	doc := "# Operating ml-operator\n## 3. A lost node\n### In `kubectl apply -k config/samples`\n## Status\n## Status\n" +
		"<a id=\"what-youll-see\"></a>\n" +
		"See [a](x.md#y), `[not](a-link.md)`, [web](https://example.com) and [self](#status-1).\n" +
		"```\n[also not](code.md)\n```\n"
	anchors := markdownAnchors(doc)
	for _, want := range []string{"operating-ml-operator", "3-a-lost-node", "in-kubectl-apply--k-configsamples", "status", "status-1", "what-youll-see"} {
		if !anchors[want] {
			t.Errorf("anchor %q missing; have %v", want, sortedKeys(anchors))
		}
	}
	var got []string
	for _, l := range relativeLinks(doc) {
		got = append(got, l.target)
	}
	if strings.Join(got, " ") != "x.md#y #status-1" {
		t.Errorf("links = %v, want [x.md#y #status-1]", got)
	}
}

// markdownPages are README.md and every .md file under docs/.
func markdownPages(t *testing.T, root string) []string {
	t.Helper()
	pages := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(pages)
	return pages
}

type link struct {
	target string
	line   int
}

var (
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	urlScheme  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	headingRe  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// proseLines yields doc's lines outside fenced code blocks, with their
// 0-based line index.
func proseLines(doc string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		inFence := false
		for i, line := range strings.Split(doc, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
				continue
			}
			if !inFence && !yield(i, line) {
				return
			}
		}
	}
}

// relativeLinks are the [text](target) links outside code that are not URLs.
func relativeLinks(doc string) []link {
	var out []link
	for i, line := range proseLines(doc) {
		for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			if !urlScheme.MatchString(m[1]) {
				out = append(out, link{target: m[1], line: i + 1})
			}
		}
	}
	return out
}

// markdownAnchors are GitHub's heading anchors (lower case; letters, digits,
// '-' and '_' kept, spaces to '-', others dropped; repeats get -1, -2, ...)
// and explicit <a id> / <a name> anchors.
func markdownAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(doc) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := headingRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		text := inlineLink.ReplaceAllString(m[1], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}
