// Package examples holds the example objects `make run` applies, embedded for the local stack.
package examples

import "embed"

// Files are the example manifests, applied in name order.
//
//go:embed *.yaml
var Files embed.FS
