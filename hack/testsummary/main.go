// Command testsummary reads `go test -json` on stdin and prints what plain
// `go test` prints (a line per package, the output of failing tests), then a
// summary of the tests that did not run, each with what they need:
//
//	skipped: 2 tests need python3-torch (apt-get install python3-torch python3-prometheus-client)
//
// With CI set in the environment, a skipped test is a failure: CI must run
// everything. Inputs a fuzz target skips (FuzzX/seed#3) are not tests.
// The exit code is non-zero when a test or package failed, or when a test
// skipped in CI.
package main

import "os"

func main() {
	res := summarize(os.Stdin, os.Stdout)
	ci := os.Getenv("CI") != ""
	os.Exit(res.report(os.Stdout, ci))
}
