// Command etcd is the etcd server built from go.etcd.io/etcd/server/v3, the same entry point as etcd's own
// binary (its root module's main.go calls etcdmain.Main too).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
