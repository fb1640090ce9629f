// Command manager runs the ml-operator controller manager: the TrainingJob
// and ModelDeployment reconcilers and the admission webhooks.
package main

import (
	"flag"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ml-operator/ml-operator/internal/manager"
)

func main() {
	opts := manager.NewOptions()
	opts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(opts.Logger())
	if err := manager.Run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), opts); err != nil {
		ctrl.Log.WithName("setup").Error(err, "manager exited with an error")
		os.Exit(1)
	}
}
