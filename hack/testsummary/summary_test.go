package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Recorded from `go test -json` (Go 1.26), trimmed.
const run = `{"Action":"start","Package":"example.com/a"}
{"Action":"run","Package":"example.com/a","Test":"TestOK"}
{"Action":"output","Package":"example.com/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"example.com/a","Test":"TestOK","Output":"    a_test.go:9: chatter nobody needs\n"}
{"Action":"pass","Package":"example.com/a","Test":"TestOK","Elapsed":0}
{"Action":"run","Package":"example.com/a","Test":"TestTorch"}
{"Action":"output","Package":"example.com/a","Test":"TestTorch","Output":"=== RUN   TestTorch\n"}
{"Action":"output","Package":"example.com/a","Test":"TestTorch","Output":"    a_test.go:20: needs python3-torch (apt-get install python3-torch python3-prometheus-client)\n"}
{"Action":"output","Package":"example.com/a","Test":"TestTorch","Output":"--- SKIP: TestTorch (0.00s)\n"}
{"Action":"skip","Package":"example.com/a","Test":"TestTorch","Elapsed":0}
{"Action":"run","Package":"example.com/a","Test":"FuzzParse/seed#1"}
{"Action":"output","Package":"example.com/a","Test":"FuzzParse/seed#1","Output":"--- SKIP: FuzzParse/seed#1 (0.00s)\n"}
{"Action":"skip","Package":"example.com/a","Test":"FuzzParse/seed#1","Elapsed":0}
{"Action":"output","Package":"example.com/a","Output":"PASS\n"}
{"Action":"output","Package":"example.com/a","Output":"coverage: 81.0% of statements\n"}
{"Action":"output","Package":"example.com/a","Output":"ok  \texample.com/a\t0.012s\tcoverage: 81.0% of statements\n"}
{"Action":"pass","Package":"example.com/a","Elapsed":0.012}
{"Action":"run","Package":"example.com/b","Test":"TestTrainer"}
{"Action":"output","Package":"example.com/b","Test":"TestTrainer","Output":"    b_test.go:5: needs python3-torch (apt-get install python3-torch python3-prometheus-client)\n"}
{"Action":"skip","Package":"example.com/b","Test":"TestTrainer","Elapsed":0}
{"Action":"output","Package":"example.com/b","Output":"ok  \texample.com/b\t0.010s\n"}
{"Action":"pass","Package":"example.com/b","Elapsed":0.01}
`

const failing = `{"Action":"run","Package":"example.com/c","Test":"TestBroken"}
{"Action":"output","Package":"example.com/c","Test":"TestBroken","Output":"    c_test.go:7: want 2, got 3\n"}
{"Action":"output","Package":"example.com/c","Test":"TestBroken","Output":"--- FAIL: TestBroken (0.00s)\n"}
{"Action":"fail","Package":"example.com/c","Test":"TestBroken","Elapsed":0}
{"Action":"output","Package":"example.com/c","Output":"FAIL\texample.com/c\t0.01s\n"}
{"Action":"fail","Package":"example.com/c","Elapsed":0.01}
`

func TestSummaryListsWhatDidNotRunWithTheCommandThatRunsIt(t *testing.T) {
	var out bytes.Buffer
	res := summarize(strings.NewReader(run), &out)
	code := res.report(&out, false)
	assert.Equal(t, 0, code, "skips outside CI do not fail the run")
	text := out.String()
	assert.Contains(t, text, "ok  \texample.com/a\t0.012s\tcoverage: 81.0% of statements\n", "package lines as go test prints them")
	assert.NotContains(t, text, "chatter nobody needs", "passing tests stay quiet")
	assert.NotContains(t, text, "\ncoverage:", "the coverage figure once, on the ok line")
	assert.NotContains(t, text, "PASS\n")
	assert.Contains(t, text, "skipped: 2 tests: needs python3-torch (apt-get install python3-torch python3-prometheus-client)\n")
	assert.Contains(t, text, "  example.com/a TestTorch\n")
	assert.Contains(t, text, "  example.com/b TestTrainer\n")
	assert.NotContains(t, text, "FuzzParse", "a fuzz target skipping one of its inputs is not a skipped test")
}

func TestSummaryInCIFailsOnAnySkip(t *testing.T) {
	var out bytes.Buffer
	code := summarize(strings.NewReader(run), &out).report(&out, true)
	assert.Equal(t, 1, code)
	assert.Contains(t, out.String(), "CI is set: a skipped test is a failure")
}

func TestSummaryShowsFailuresAndFails(t *testing.T) {
	var out bytes.Buffer
	code := summarize(strings.NewReader(run+failing), &out).report(&out, false)
	assert.Equal(t, 1, code)
	assert.Contains(t, out.String(), "c_test.go:7: want 2, got 3", "a failing test's output is shown")
	assert.Contains(t, out.String(), "FAIL\texample.com/c\t0.01s")

	out.Reset()
	code = summarize(strings.NewReader(run[:strings.Index(run, `{"Action":"run","Package":"example.com/a","Test":"TestTorch"}`)]), &out).report(&out, false)
	assert.Equal(t, 0, code)
	assert.Contains(t, out.String(), "skipped: none")
}
