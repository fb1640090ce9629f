package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type result struct {
	failed bool
	// skips maps a skip reason to the tests that gave it.
	skips map[string][]string
}

// summarize copies what plain go test would print to out and collects the
// failures and skips.
func summarize(in io.Reader, out io.Writer) result {
	res := result{skips: map[string][]string{}}
	// Output of a test, kept until it is known to fail (or skip).
	pending := map[string][]string{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not JSON: the build's own output (compile errors).
			fmt.Fprintln(out, string(line))
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch e.Action {
		case "output", "build-output":
			if e.Test == "" {
				if packageLine(e.Output) {
					fmt.Fprint(out, e.Output)
				}
				if strings.HasPrefix(e.Output, "FAIL") || strings.HasPrefix(e.Output, "panic:") {
					res.failed = true
				}
				continue
			}
			pending[key] = append(pending[key], e.Output)
		case "fail":
			if e.Test != "" {
				res.failed = true
				fmt.Fprint(out, strings.Join(pending[key], ""))
			} else {
				res.failed = true
			}
			delete(pending, key)
		case "skip":
			if e.Test != "" && !fuzzInput(e.Test) {
				reason := skipReason(pending[key])
				res.skips[reason] = append(res.skips[reason], e.Package+" "+e.Test)
			}
			delete(pending, key)
		case "pass":
			delete(pending, key)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(out, "reading go test -json:", err)
		res.failed = true
	}
	return res
}

// packageLine is a line plain go test prints for a package: ok, FAIL, "no
// test files", a panic outside any test (the coverage figure is on the ok line).
func packageLine(s string) bool {
	for _, p := range []string{"ok ", "ok\t", "FAIL", "?", "---", "panic:"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// fuzzInput is a seed-corpus input of a fuzz target, which may skip inputs
// that do not apply.
func fuzzInput(test string) bool {
	return strings.HasPrefix(test, "Fuzz") && strings.Contains(test, "/")
}

// skipReason is the message the test gave to t.Skip, without the file:line.
func skipReason(output []string) string {
	for i := len(output) - 1; i >= 0; i-- {
		line := strings.TrimSpace(output[i])
		if line == "" || strings.HasPrefix(line, "--- SKIP") || strings.HasPrefix(line, "=== ") {
			continue
		}
		if j := strings.Index(line, ": "); j > 0 && strings.Contains(line[:j], ".go:") {
			line = line[j+2:]
		}
		return line
	}
	return "no reason given"
}

// report prints the skip summary and returns the exit code.
func (r result) report(out io.Writer, ci bool) int {
	code := 0
	if r.failed {
		code = 1
	}
	if len(r.skips) == 0 {
		fmt.Fprintln(out, "skipped: none (every test ran)")
		return code
	}
	reasons := make([]string, 0, len(r.skips))
	for reason := range r.skips {
		reasons = append(reasons, reason)
	}
	sort.Strings(reasons)
	for _, reason := range reasons {
		tests := r.skips[reason]
		noun := "tests"
		if len(tests) == 1 {
			noun = "test"
		}
		fmt.Fprintf(out, "skipped: %d %s: %s\n", len(tests), noun, reason)
		for _, t := range tests {
			fmt.Fprintf(out, "  %s\n", t)
		}
	}
	if ci {
		fmt.Fprintln(out, "CI is set: a skipped test is a failure (CI runs everything)")
		code = 1
	}
	return code
}
