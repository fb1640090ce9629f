// Command doctor checks this machine before the first run: `make doctor`
// prints the whole report, `make run` runs it first (internal/doctor).
//
//	doctor [-for test|run|real] [-repo DIR] [-quiet]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/ml-operator/ml-operator/internal/doctor"
)

func main() {
	purpose := flag.String("for", "run", "what to check for: test, run (the kwok cluster) or real (the real node)")
	root := flag.String("repo", ".", "the repository root")
	quiet := flag.Bool("quiet", false, "print the report only when something needed is missing")
	flag.Parse()
	minGo, err := doctor.MinGoVersion(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doctor:", err)
		os.Exit(2)
	}
	checks := doctor.Checks(doctor.Real(*root), minGo)
	var report bytes.Buffer
	ok := doctor.Report(&report, checks, doctor.Purpose(*purpose))
	if !ok || !*quiet {
		_, _ = os.Stdout.Write(report.Bytes())
	}
	if !ok {
		os.Exit(1)
	}
}
