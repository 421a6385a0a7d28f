package s3

import "github.com/housekeeper-dev/housekeeper/functions/objectstore"

// Plugin links the S3 provider into a binary.
var Plugin = objectstore.Plugin{Type: Type, Bind: objectstore.NoFlags(func() objectstore.Provider { return New() })}
