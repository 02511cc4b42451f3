package delta

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/cdcsnap/cdcsnap/internal/bucketstore"
	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/internal/faultblob"
)

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
		tb, err := OpenStore(bucketstore.New(b, "mem://probe", false), "mem://probe", Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = takeSnapshot(ctx, t, tb, snapshotInfo(t, schema, "dbo_Orders", "0x0000002A000000100001"), 2, 10)
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

// TestOpenRefusesStoreURLs: Open takes a folder, file:// and mem://
// only (package delta links no cloud SDK); any other URL is refused
// before any I/O with the call that opens it and, for a cloud store, the
// driver's import.
func TestOpenRefusesStoreURLs(t *testing.T) {
	const call = "blobstore.Open (package github.com/cdcsnap/cdcsnap/sink/delta/blobstore)"
	for _, tc := range []struct{ url, imp string }{
		{"s3://lake/bronze/orders?region=eu-west-1", `_ "gocloud.dev/blob/s3blob"`},
		{"gs://lake/bronze/orders", `_ "gocloud.dev/blob/gcsblob"`},
		{"azblob://lake/bronze/orders", `_ "gocloud.dev/blob/azureblob"`},
		{"abfss://bronze@mylake.dfs.core.windows.net/orders", `_ "gocloud.dev/blob/azureblob"`},
		{"ftp://host/t", "OpenStore"},
	} {
		tb, err := Open(context.Background(), tc.url, Options{})
		if err == nil {
			tb.Close()
			t.Fatalf("Open(%s) succeeded", tc.url)
		}
		for _, want := range []string{"delta: table " + tc.url + ": ", call, tc.imp} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Open(%s): %v; want it to name %s", tc.url, err, want)
			}
		}
	}
}

// TestMemURLIsANewTablePerOpen: each Open of mem:// is its own empty
// table in memory, gone with it.
func TestMemURLIsANewTablePerOpen(t *testing.T) {
	ctx := context.Background()
	schema := bronze(t, capturedSchema())
	first, err := Open(ctx, "mem://", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := takeSnapshot(ctx, t, first, snapshotInfo(t, schema, "a", "0x0000002A00000F380003"), 1, 3); err != nil {
		t.Fatal(err)
	}
	second, err := Open(ctx, "mem://", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	for tb, want := range map[*Table]int64{first: 0, second: -1} {
		if v, err := tb.Version(ctx); err != nil || v != want {
			t.Errorf("Version = %d, %v; want %d", v, err, want)
		}
	}
}
