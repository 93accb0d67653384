//go:build tools

// Package tools pins the etcd server that hack/cluster builds for the local test cluster.
package tools

import _ "go.etcd.io/etcd/server/v3"
