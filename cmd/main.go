// Command manager runs the ml-operator controller manager: the TrainingJob
// and ModelDeployment reconcilers and the admission webhooks.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ml-operator/ml-operator/internal/manager"
)

func main() {
	// Every flag also reads its ML_OPERATOR_* environment form when the
	// command line does not set it (internal/manager/env.go).
	opts, err := manager.ParseArgs(flag.CommandLine, os.Args[1:], os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	ctrl.SetLogger(opts.Logger())
	if err := manager.Run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), opts); err != nil {
		ctrl.Log.WithName("setup").Error(err, "manager exited with an error")
		os.Exit(1)
	}
}
