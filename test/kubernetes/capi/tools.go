//go:build tools

// Package tools pins the Cluster API commands that `npm run kube:build` builds, so that `go mod tidy` keeps
// their dependencies in go.sum.
package tools

import (
	_ "sigs.k8s.io/cluster-api/bootstrap/kubeadm"
	_ "sigs.k8s.io/cluster-api/cmd/clusterctl"
	_ "sigs.k8s.io/cluster-api/core"
)
