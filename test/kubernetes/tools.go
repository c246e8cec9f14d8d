//go:build tools

// Package tools pins the commands that `npm run kube:build` builds, so that `go mod tidy` keeps their
// dependencies in go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
