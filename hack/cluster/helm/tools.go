//go:build tools

// Package tools pins the Helm command that hack/cluster builds: the chart's lint and template
// tests and `helm install` on the local cluster use it. Build tooling only, not product code.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
