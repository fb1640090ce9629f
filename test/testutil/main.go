package testutil

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// Main is the TestMain of every envtest suite:
//
//	func TestMain(m *testing.M) {
//		os.Exit(testutil.Main(m, testutil.EnvOptions{...}, setup))
//	}
//
// It starts kube-apiserver and etcd with o (StartEnv), calls setup (nil for
// none) with the running Env, runs the tests, calls the teardown setup
// returned (nil for none) and stops the control plane. It returns the exit
// code: 1 when the control plane or setup fails, else the tests'.
//
// A -fuzz run (coordinator and workers) runs only its fuzz target, which
// needs no API server: Main starts none for it, since one per worker process
// would only slow fuzzing down and outlive a killed run.
func Main(m *testing.M, o EnvOptions, setup func(*Env) (teardown func(), err error)) int {
	flag.Parse()
	if fuzzing() {
		return m.Run()
	}
	env, err := StartEnv(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()
	if setup != nil {
		teardown, err := setup(env)
		if err != nil {
			fmt.Fprintln(os.Stderr, "setting up the suite:", err)
			return 1
		}
		if teardown != nil {
			defer teardown()
		}
	}
	return m.Run()
}

// fuzzing reports whether go test runs with -fuzz (as coordinator or worker).
func fuzzing() bool {
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		return true
	}
	f := flag.Lookup("test.fuzzworker")
	return f != nil && f.Value.String() == "true"
}
