// Command etcd is the etcd server, built from the Go module proxy for the
// project's envtest and local-cluster harnesses.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
