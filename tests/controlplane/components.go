package main

// The same binary also runs kube-scheduler and kube-controller-manager from the same
// k8s.io/kubernetes module as the apiserver (one build, one cache entry, one version):
//
//	rayshare-controlplane kube-scheduler [KUBE-SCHEDULER-FLAGS...]
//	rayshare-controlplane kube-controller-manager [KUBE-CONTROLLER-MANAGER-FLAGS...]
//
// Each runs as its own process (the commands keep global state: flags, feature gates,
// metrics registries), exactly as the upstream binaries' main functions do.

import (
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // as in cmd/kube-scheduler and cmd/kube-controller-manager
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

// components maps a first argument to the upstream command it runs.
var components = map[string]func() *cobra.Command{
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
}

// runComponent runs the component named by os.Args[1], if any, and reports whether it did
// (with its exit code).
func runComponent() (int, bool) {
	if len(os.Args) < 2 {
		return 0, false
	}
	newCommand, ok := components[os.Args[1]]
	if !ok {
		return 0, false
	}
	cmd := newCommand()
	cmd.SetArgs(os.Args[2:])
	return cli.Run(cmd), true
}
