package reliability_test

import (
	"testing"

	"gocloud.dev/blob"

	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
)

// openBucket opens the table at the root of b (blobstore.OpenBucket).
func openBucket(t testing.TB, b *blob.Bucket, name string, opts delta.Options) *delta.Table {
	t.Helper()
	tb, err := blobstore.OpenBucket(b, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}
