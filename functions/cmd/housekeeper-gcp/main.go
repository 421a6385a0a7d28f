// Command housekeeper-gcp is housekeeper with only the gcp object store provider linked: the
// image of a seed whose backups are on gcp. See package cli.
package main

import (
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
)

func main() { cli.Run(gcs.Plugin) }
