// Command housekeeper-aws is housekeeper with only the aws object store provider linked: the
// image of a seed whose backups are on aws. See package cli.
package main

import (
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
)

func main() { cli.Run(s3.Plugin) }
