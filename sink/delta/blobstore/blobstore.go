// Package blobstore opens Delta tables in any store gocloud.dev/blob has
// a driver for: s3://, gs://, azblob://, each with its driver imported by
// the program, as gocloud.dev's convention is:
//
//	import _ "gocloud.dev/blob/s3blob" // or gcsblob, azureblob
//
// or _ "github.com/cdcsnap/cdcsnap/sink/delta/alldrivers" for all three.
// Package delta itself imports nothing of gocloud.dev, so a program that
// writes to a local folder or mem:// with delta.Open links no cloud SDK.
package blobstore

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"gocloud.dev/blob"

	"github.com/cdcsnap/cdcsnap/internal/bucketstore"
	"github.com/cdcsnap/cdcsnap/internal/storehints"
	"github.com/cdcsnap/cdcsnap/sink/delta"
)

// Open opens the Delta table at rawURL, which need not exist yet (the
// first write creates it). A cloud URL's path is the table's folder in
// the bucket (s3://bucket/path, gs://bucket/path,
// azblob://container/path), its query the gocloud.dev driver's
// parameters (region=..., and so on); without the driver imported Open
// returns an error naming the import. A local folder, file:// or mem://
// goes to delta.Open. The table's Close closes the bucket.
func Open(ctx context.Context, rawURL string, opts delta.Options) (*delta.Table, error) {
	u, local, mem := storehints.LocalOrMem(rawURL)
	if local || mem {
		return delta.Open(ctx, rawURL, opts)
	}
	if storehints.IsADLS(u.Scheme) {
		return nil, storehints.ADLSURLError(rawURL)
	}
	if !blob.DefaultURLMux().ValidBucketScheme(u.Scheme) {
		return nil, noDriverError(rawURL, u.Scheme)
	}
	b, err := blob.OpenBucket(ctx, bucketURL(u))
	if err != nil {
		return nil, storehints.Wrap(rawURL, fmt.Errorf("delta: opening bucket for table %s: %w", rawURL, err))
	}
	t, err := delta.OpenStore(bucketstore.New(b, rawURL, true), rawURL, opts)
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	return t, nil
}

// noDriverError says which import registers the driver of scheme: the
// program links only the drivers it imports.
func noDriverError(rawURL, scheme string) error {
	imp := storehints.DriverImport(scheme)
	if imp == "" {
		return fmt.Errorf("delta: table %s: no gocloud.dev/blob driver is registered for %s://: import the driver of that store", rawURL, scheme)
	}
	return fmt.Errorf("delta: table %s: no gocloud.dev/blob driver is registered for %s://: add the import _ %q to your program (or _ %q for every cloud store)", rawURL, scheme, imp, storehints.AllDrivers)
}

// bucketURL turns a table URL into the gocloud bucket URL: the path
// becomes the bucket's prefix.
func bucketURL(u *url.URL) string {
	c := *u
	p := strings.Trim(c.Path, "/")
	if p == "" {
		return c.String()
	}
	q := c.Query()
	if q.Get("prefix") == "" {
		q.Set("prefix", p+"/")
	}
	c.Path, c.RawPath, c.RawQuery = "", "", q.Encode()
	return c.String()
}

// OpenBucket opens the Delta table at the root of an open bucket (use
// blob.PrefixedBucket for a folder in it); name names it in errors and
// logs. The table's Close leaves the bucket open. Commits use the
// bucket's IfNotExist writes, which are atomic across processes on S3,
// GCS and Azure but only within one process on fileblob: use delta.Open
// for a local folder shared by processes.
func OpenBucket(b *blob.Bucket, name string, opts delta.Options) (*delta.Table, error) {
	return delta.OpenStore(bucketstore.New(b, name, false), name, opts)
}
