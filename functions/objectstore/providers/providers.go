// Package providers links every object store provider: the housekeeper binary's list (make
// run, docker compose, an installation serving several types) and the tests'. An image for one
// cloud links its provider alone (functions/cmd/housekeeper-<type>).
package providers

import (
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/swift"
)

// All are every provider, local's included.
var All = []objectstore.Plugin{azure.Plugin, s3.Plugin, gcs.Plugin, swift.Plugin, local.Plugin}
