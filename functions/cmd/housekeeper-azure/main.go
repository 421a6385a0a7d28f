// Command housekeeper-azure is housekeeper with only the azure object store provider linked: the
// image of a seed whose backups are on azure. See package cli.
package main

import (
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
)

func main() { cli.Run(azure.Plugin) }
