package blobstore

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/cdcsnap/cdcsnap/sink/delta"
)

func TestBucketURL(t *testing.T) {
	for in, want := range map[string]string{
		"s3://bucket/bronze/orders?region=eu-west-1": "s3://bucket?prefix=bronze%2Forders%2F&region=eu-west-1",
		"gs://bucket/a/b/":                           "gs://bucket?prefix=a%2Fb%2F",
		"azblob://container":                         "azblob://container",
		"s3://bucket/x?prefix=y/":                    "s3://bucket?prefix=y%2F",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := bucketURL(u); got != want {
			t.Errorf("bucketURL(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestOpenNamesTheDriverImport: a cloud URL whose driver the program did
// not import is refused before any I/O, with the import line to add (this
// test's binary imports no driver).
func TestOpenNamesTheDriverImport(t *testing.T) {
	for _, tc := range []struct{ url, imp string }{
		{"s3://lake/bronze/orders?region=eu-west-1", `_ "gocloud.dev/blob/s3blob"`},
		{"gs://lake/bronze/orders", `_ "gocloud.dev/blob/gcsblob"`},
		{"azblob://lake/bronze/orders", `_ "gocloud.dev/blob/azureblob"`},
	} {
		tb, err := Open(context.Background(), tc.url, delta.Options{})
		if err == nil {
			tb.Close()
			t.Fatalf("Open(%s) succeeded without the driver", tc.url)
		}
		for _, want := range []string{tc.imp, `_ "github.com/cdcsnap/cdcsnap/sink/delta/alldrivers"`, tc.url} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Open(%s): %v; want it to name %s", tc.url, err, want)
			}
		}
	}
	if _, err := Open(context.Background(), "ftp://host/t", delta.Options{}); err == nil || !strings.Contains(err.Error(), "no gocloud.dev/blob driver is registered for ftp://") {
		t.Errorf("Open(ftp://host/t): %v", err)
	}
}

// TestSparkADLSURLNamesTheAzblobURL: Spark's abfss:// (and wasbs://) URL
// of an Azure storage account, which no gocloud.dev driver takes, is
// answered with the azblob:// URL and account that reach the same table.
func TestSparkADLSURLNamesTheAzblobURL(t *testing.T) {
	for in, want := range map[string]string{
		"abfss://bronze@mylake.dfs.core.windows.net/sales/orders": "here it is azblob://bronze/sales/orders with AZURE_STORAGE_ACCOUNT=mylake",
		"wasbs://bronze@mylake.blob.core.windows.net/orders":      "here it is azblob://bronze/orders with AZURE_STORAGE_ACCOUNT=mylake",
	} {
		_, err := Open(context.Background(), in, delta.Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s) = %v, want %q", in, err, want)
		}
	}
}

// TestOpenHandsLocalURLsToDelta: a folder, file:// and mem:// open as
// delta.Open opens them, and an invalid Options.Create is refused.
func TestOpenHandsLocalURLsToDelta(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, u := range []string{filepath.Join(dir, "a"), "file://" + filepath.Join(dir, "b"), "mem://"} {
		tb, err := Open(ctx, u, delta.Options{})
		if err != nil {
			t.Fatalf("Open(%s): %v", u, err)
		}
		if v, err := tb.Version(ctx); err != nil || v != -1 {
			t.Errorf("Open(%s): version %d, %v; want -1", u, v, err)
		}
		if err := tb.Close(); err != nil {
			t.Error(err)
		}
	}
	bad := delta.Options{Create: delta.CreateOptions{PartitionBy: []string{""}}}
	if _, err := Open(ctx, "mem://", bad); err == nil {
		t.Error("Open(mem://) took an empty partition column")
	}
	if _, err := OpenBucket(memblob.OpenBucket(nil), "mem://b", bad); err == nil {
		t.Error("OpenBucket took an empty partition column")
	}
}

// TestOpenBucketLeavesTheBucketOpen: the table's Close does not close a
// bucket its caller opened, and an empty bucket is a new table.
func TestOpenBucketLeavesTheBucketOpen(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	tb, err := OpenBucket(b, "mem://b", delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := tb.Version(ctx); err != nil || v != -1 {
		t.Fatalf("version %d, %v; want -1", v, err)
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteAll(ctx, "x", []byte("x"), nil); err != nil {
		t.Errorf("the bucket was closed with the table: %v", err)
	}
	if _, err := tb.Version(ctx); !errors.Is(err, delta.ErrClosed) {
		t.Errorf("Version after Close: %v, want ErrClosed", err)
	}
}
