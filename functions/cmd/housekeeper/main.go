// Command housekeeper runs housekeeper's functions with every object store provider linked,
// and the operators' tools: setup, replay, resync and dead letters. See package cli.
package main

import (
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/providers"
)

func main() { cli.Run(providers.All...) }
