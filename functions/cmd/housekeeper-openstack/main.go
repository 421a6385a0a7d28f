// Command housekeeper-openstack is housekeeper with only the openstack object store provider linked: the
// image of a seed whose backups are on openstack. See package cli.
package main

import (
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/swift"
)

func main() { cli.Run(swift.Plugin) }
