//go:build tools

// Package tools pins the containerd commands (daemon, runc shim, ctr) that hack/cluster builds for
// the local test nodes. This is build tooling for tests, not product code.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
