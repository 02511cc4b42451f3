package blobstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
)

// Open a table in a bucket. The program imports the store's driver
// (here none is imported, so Open says which import s3:// needs).
func ExampleOpen() {
	ctx := context.Background()
	table, err := blobstore.Open(ctx, "s3://my-lake/bronze/orders?region=eu-west-1", delta.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer table.Close()
	// Output:
	// delta: table s3://my-lake/bronze/orders?region=eu-west-1: no gocloud.dev/blob driver is registered for s3://: add the import _ "gocloud.dev/blob/s3blob" to your program (or _ "github.com/cdcsnap/cdcsnap/sink/delta/alldrivers" for every cloud store)
}

// Open a table in a folder of a bucket the program opened itself (with
// its own credentials or client options); the bucket stays the
// program's to close.
func ExampleOpenBucket() {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil) // or s3blob.OpenBucket(ctx, client, "my-lake", nil)
	defer bucket.Close()
	table, err := blobstore.OpenBucket(blob.PrefixedBucket(bucket, "bronze/orders/"), "s3://my-lake/bronze/orders", delta.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer table.Close()
	_, err = table.FindSnapshot(ctx, "dbo_orders")
	fmt.Println(errors.Is(err, sink.ErrNotFound)) // a new table: no snapshot yet
	// Output: true
}
