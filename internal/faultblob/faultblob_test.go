package faultblob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"go.uber.org/goleak"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/cdcsnap/cdcsnap/internal/faultblob"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func buckets(t *testing.T) map[string]*blob.Bucket {
	fb, err := fileblob.OpenBucket(t.TempDir(), &fileblob.Options{Metadata: fileblob.MetadataDontWrite})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fb.Close() })
	mb := memblob.OpenBucket(nil)
	t.Cleanup(func() { mb.Close() })
	return map[string]*blob.Bucket{"mem": mb, "file": fb}
}

func exists(t *testing.T, b *blob.Bucket, key string) bool {
	ok, err := b.Exists(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func write(ctx context.Context, b *blob.Bucket, key string, data []byte, opts *blob.WriterOptions) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := b.NewWriter(wctx, key, opts)
	if err != nil {
		return err
	}
	for i := 0; i < len(data); i += 100 {
		if _, err := w.Write(data[i:min(i+100, len(data))]); err != nil {
			cancel()
			_ = w.Close()
			return err
		}
	}
	return w.Close()
}

// TestWriteFaults: the Nth write of a matching key fails half-way, and
// what the store holds afterwards follows the mode: nothing (Abort), the
// bytes written (Torn), the whole object (AckLost on close).
func TestWriteFaults(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789"), 100)
	for name, inner := range buckets(t) {
		t.Run(name, func(t *testing.T) {
			fb := faultblob.New(inner, false)
			b := fb.Bucket()
			defer b.Close()

			fb.Inject(faultblob.Fault{Op: faultblob.OpWrite, Key: `^log/.*\.json$`, Nth: 2, After: -1})
			if err := write(ctx, b, "log/1.json", data, nil); err != nil {
				t.Fatalf("first write failed: %v", err)
			}
			if err := write(ctx, b, "data/x.parquet", data, nil); err != nil {
				t.Fatalf("a write of a key that does not match failed: %v", err)
			}
			err := write(ctx, b, "log/2.json", data, nil)
			if !errors.Is(err, faultblob.ErrInjected) {
				t.Fatalf("second matching write: got %v, want the injected fault", err)
			}
			if exists(t, inner, "log/2.json") {
				t.Fatal("an aborted write left an object")
			}
			if err := write(ctx, b, "log/3.json", data, nil); err != nil {
				t.Fatalf("the fault fired twice: %v", err)
			}
			if fb.Fired() != 1 {
				t.Fatalf("fired %d times, want 1", fb.Fired())
			}

			fb.Inject(faultblob.Fault{Op: faultblob.OpWrite, Key: `torn`, After: 250, Mode: faultblob.Torn})
			if err := write(ctx, b, "torn", data, nil); !errors.Is(err, faultblob.ErrInjected) {
				t.Fatalf("torn write: %v", err)
			}
			got, err := inner.ReadAll(ctx, "torn")
			if err != nil || !bytes.Equal(got, data[:250]) {
				t.Fatalf("torn write left %d bytes (%v), want the first 250", len(got), err)
			}

			fb.Inject(faultblob.Fault{Op: faultblob.OpClose, Key: `acklost`, Mode: faultblob.AckLost})
			if err := write(ctx, b, "acklost", data, nil); !errors.Is(err, faultblob.ErrInjected) {
				t.Fatalf("ack-lost write: %v", err)
			}
			if got, err := inner.ReadAll(ctx, "acklost"); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("ack-lost write stored %d bytes (%v), want the whole object", len(got), err)
			}

			fb.Inject(faultblob.Fault{Op: faultblob.OpClose, Key: `closefail`})
			if err := write(ctx, b, "closefail", data, nil); !errors.Is(err, faultblob.ErrInjected) {
				t.Fatalf("close fault: %v", err)
			}
			if exists(t, inner, "closefail") {
				t.Fatal("a failed close left an object")
			}
		})
	}
}

// TestIfNotExistPassesThrough: put-if-absent keeps its meaning through the
// wrapper, with the FailedPrecondition code the Delta sink looks for.
func TestIfNotExistPassesThrough(t *testing.T) {
	ctx := context.Background()
	inner := memblob.OpenBucket(nil)
	defer inner.Close()
	b := faultblob.New(inner, false).Bucket()
	defer b.Close()
	opts := &blob.WriterOptions{IfNotExist: true, ContentType: "application/json"}
	if err := write(ctx, b, "k", []byte("one"), opts); err != nil {
		t.Fatal(err)
	}
	err := write(ctx, b, "k", []byte("two"), opts)
	if c := gcerrors.Code(err); c != gcerrors.FailedPrecondition {
		t.Fatalf("second put-if-absent: %v (code %v), want FailedPrecondition", err, c)
	}
	if got, _ := inner.ReadAll(ctx, "k"); string(got) != "one" {
		t.Fatalf("k = %q, want the first write", got)
	}
}

// TestReadAndListFaults: reads fail on open or part-way through, listings
// fail on the Nth page, and the code given is what gcerrors reports.
func TestReadAndListFaults(t *testing.T) {
	ctx := context.Background()
	inner := memblob.OpenBucket(nil)
	defer inner.Close()
	fb := faultblob.New(inner, false)
	b := fb.Bucket()
	defer b.Close()
	data := bytes.Repeat([]byte("x"), 1000)
	for _, k := range []string{"a/1", "a/2", "b/1"} {
		if err := b.WriteAll(ctx, k, data, nil); err != nil {
			t.Fatal(err)
		}
	}
	fb.Inject(faultblob.Fault{Op: faultblob.OpOpenRead, Key: `^a/2$`, Code: gcerrors.NotFound})
	if _, err := b.ReadAll(ctx, "a/2"); gcerrors.Code(err) != gcerrors.NotFound || !errors.Is(err, faultblob.ErrInjected) {
		t.Fatalf("open-read fault: %v (code %v)", err, gcerrors.Code(err))
	}
	if _, err := b.ReadAll(ctx, "a/2"); err != nil {
		t.Fatalf("second read: %v", err)
	}
	fb.Inject(faultblob.Fault{Op: faultblob.OpRead, Key: `^b/`, After: 300})
	r, err := b.NewReader(ctx, "b/1", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if len(got) != 300 || !errors.Is(err, faultblob.ErrInjected) {
		t.Fatalf("read fault: read %d bytes, err %v; want 300 and the fault", len(got), err)
	}
	fb.Inject(faultblob.Fault{Op: faultblob.OpList, Key: `^a/`})
	it := b.List(&blob.ListOptions{Prefix: "a/"})
	if _, err := it.Next(ctx); !errors.Is(err, faultblob.ErrInjected) {
		t.Fatalf("list fault: %v", err)
	}
	var keys []string
	it = b.List(&blob.ListOptions{Prefix: "a/"})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, o.Key)
	}
	if len(keys) != 2 {
		t.Fatalf("listed %v, want a/1 and a/2", keys)
	}
	if n := fb.Count(faultblob.OpList, `^a/`); n != 2 {
		t.Fatalf("counted %d listings of a/, want 2", n)
	}
	fb.Inject(faultblob.Fault{Op: faultblob.OpDelete, Times: -1})
	for range 3 {
		if err := b.Delete(ctx, "a/1"); !errors.Is(err, faultblob.ErrInjected) {
			t.Fatalf("delete fault: %v", err)
		}
	}
	fb.Clear()
	if err := b.Delete(ctx, "a/1"); err != nil {
		t.Fatalf("after Clear: %v", err)
	}
}
