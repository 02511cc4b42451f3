package delta

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

func TestBucketURL(t *testing.T) {
	for in, want := range map[string]string{
		"s3://bucket/bronze/orders?region=eu-west-1": "s3://bucket?prefix=bronze%2Forders%2F&region=eu-west-1",
		"gs://bucket/a/b/":                           "gs://bucket?prefix=a%2Fb%2F",
		"azblob://container":                         "azblob://container",
		"s3://bucket/x?prefix=y/":                    "s3://bucket?prefix=y%2F",
		"mem://anything":                             "mem://",
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

func TestOpenFileURL(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "nested", "table")
	tb, err := Open(ctx, "file://"+dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	schema := bronze(t, capturedSchema())
	if _, err := takeSnapshot(ctx, t, tb, snapshotInfo(t, schema, "a", "0x0000002A00000F380003"), 1, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "_delta_log", "00000000000000000000.json")); err != nil {
		t.Fatal(err)
	}
	es, _ := os.ReadDir(filepath.Join(dir, "_delta_log"))
	for _, e := range es {
		if filepath.Ext(e.Name()) == ".attrs" || filepath.Ext(e.Name()) == ".tmp" {
			t.Errorf("stray file %s in the log", e.Name())
		}
	}
}
