package delta

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/internal/faultblob"
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

// TestRefusesStoreWithoutConditionalWrites: on a store that ignores
// put-if-absent, the first write is refused with ErrNoConditionalWrites
// and no commit is written; on one that honours it, the probe leaves
// nothing behind.
func TestRefusesStoreWithoutConditionalWrites(t *testing.T) {
	ctx := context.Background()
	schema := bronze(t, capturedSchema())
	for _, honours := range []bool{false, true} {
		mem := memblob.OpenBucket(nil)
		fb := faultblob.New(mem, false)
		if !honours {
			fb.IgnoreIfNotExist()
		}
		b := fb.Bucket()
		tb := OpenBucket(b, "mem://probe", Options{})
		_, err := takeSnapshot(ctx, t, tb, snapshotInfo(t, schema, "dbo_Orders", "0x0000002A000000100001"), 2, 10)
		if honours != (err == nil) || !honours && !errors.Is(err, deltalog.ErrNoConditionalWrites) {
			t.Fatalf("honours %v: %v", honours, err)
		}
		logs, _ := mem.List(&blob.ListOptions{Prefix: "_delta_log/"}).Next(ctx)
		probes, _ := mem.List(&blob.ListOptions{Prefix: "_cdcsnap/probe/"}).Next(ctx)
		if honours != (logs != nil) || probes != nil {
			t.Fatalf("honours %v: log %v, probe left %v", honours, logs, probes)
		}
		if n := fb.Count(faultblob.OpWrite, "^_cdcsnap/probe/"); n != 2 {
			t.Fatalf("honours %v: %d probe writes, want 2 (once per table)", honours, n)
		}
		_ = b.Close()
		_ = mem.Close()
	}
}

// TestOpenNamesTheDriverImport: sink/delta registers no cloud driver, so a
// cloud URL whose driver the program did not import is refused before
// any I/O, with the import line to add.
func TestOpenNamesTheDriverImport(t *testing.T) {
	for _, tc := range []struct{ url, imp string }{
		{"s3://lake/bronze/orders?region=eu-west-1", `_ "gocloud.dev/blob/s3blob"`},
		{"gs://lake/bronze/orders", `_ "gocloud.dev/blob/gcsblob"`},
		{"azblob://lake/bronze/orders", `_ "gocloud.dev/blob/azureblob"`},
	} {
		tb, err := Open(context.Background(), tc.url, Options{})
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
	if _, err := Open(context.Background(), "ftp://host/t", Options{}); err == nil || !strings.Contains(err.Error(), "no gocloud.dev/blob driver is registered for ftp://") {
		t.Errorf("Open(ftp://host/t): %v", err)
	}
	tb, err := Open(context.Background(), "mem://", Options{})
	if err != nil {
		t.Fatalf("Open(mem://): %v", err)
	}
	tb.Close()
}
