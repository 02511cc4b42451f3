package alldrivers_test

import (
	"testing"

	"gocloud.dev/blob"

	_ "github.com/cdcsnap/cdcsnap/sink/delta/alldrivers"
)

// TestRegistersEveryCloud: importing the package registers the drivers of
// the three clouds sink/delta writes to (the scheme is checked, not a
// store: opening one would look for credentials).
func TestRegistersEveryCloud(t *testing.T) {
	for _, scheme := range []string{"s3", "gs", "azblob"} {
		if !blob.DefaultURLMux().ValidBucketScheme(scheme) {
			t.Errorf("no driver registered for %s://", scheme)
		}
	}
}
