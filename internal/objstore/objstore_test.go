package objstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"

	"github.com/cdcsnap/cdcsnap/internal/testenv"
)

// start starts the store of kind, skipping t when its package cannot be
// installed, sets its environment and stops it at the end.
func start(t *testing.T, kind string, s3 S3Options) *Store {
	t.Helper()
	ctx := context.Background()
	var st *Store
	var err error
	switch kind {
	case "s3":
		st, err = StartS3(ctx, s3)
	case "azure":
		st, err = StartAzure(ctx, t.TempDir())
	case "gcs":
		st, err = StartGCS(ctx)
	}
	testenv.SkipUnavailable(t, "object store "+kind, err)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	for _, kv := range st.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return st
}

// putIfAbsent writes key with IfNotExist.
func putIfAbsent(ctx context.Context, b *blob.Bucket, key, body string) error {
	return b.WriteAll(ctx, key, []byte(body), &blob.WriterOptions{IfNotExist: true})
}

// TestPutIfAbsent checks each server's handling of a conditional write
// through gocloud.dev: the first put-if-absent of a key lands, a second
// one fails with FailedPrecondition and leaves the first body, and of
// several racing ones exactly one lands (counted over many keys).
func TestPutIfAbsent(t *testing.T) {
	for _, c := range []struct {
		kind string
		s3   S3Options
	}{{"s3", S3Options{Serial: true}}, {"s3", S3Options{}}, {"azure", S3Options{}}, {"gcs", S3Options{}}} {
		name := c.kind
		if c.kind == "s3" && !c.s3.Serial {
			name = "s3-threaded"
		}
		t.Run(name, func(t *testing.T) {
			st := start(t, c.kind, c.s3)
			ctx := context.Background()
			b, err := blob.OpenBucket(ctx, st.URL("probe"))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			b = blob.PrefixedBucket(b, "probe/")
			defer b.Close()
			if err := putIfAbsent(ctx, b, "k", "first"); err != nil {
				t.Fatalf("first put-if-absent: %v", err)
			}
			refused := putIfAbsent(ctx, b, "k", "second")
			if gcerrors.Code(refused) != gcerrors.FailedPrecondition {
				t.Fatalf("second put-if-absent of one key: %v (code %v), want FailedPrecondition", refused, gcerrors.Code(refused))
			}
			got, err := b.ReadAll(ctx, "k")
			if err != nil || string(got) != "first" {
				t.Fatalf("after the refused put: %q, %v", got, err)
			}
			t.Logf("%s: second put-if-absent refused: %v", name, refused)

			const keys, racers = 40, 8
			var doubled atomic.Int64
			for k := range keys {
				var wins atomic.Int64
				var wg sync.WaitGroup
				for r := range racers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						err := putIfAbsent(ctx, b, fmt.Sprint("race-", k), fmt.Sprint(r))
						switch {
						case err == nil:
							wins.Add(1)
						case gcerrors.Code(err) != gcerrors.FailedPrecondition:
							t.Errorf("racing put: %v", err)
						}
					}()
				}
				wg.Wait()
				if wins.Load() != 1 {
					doubled.Add(1)
					t.Logf("%s: key race-%d: %d of %d racing put-if-absent succeeded", name, k, wins.Load(), racers)
				}
			}
			if n := doubled.Load(); n > 0 {
				if c.kind == "s3" && !c.s3.Serial {
					t.Logf("%s: %d of %d keys had more than one racing put-if-absent succeed (moto's check-then-put is not atomic under its threaded server)", name, n, keys)
					return
				}
				t.Fatalf("%s: %d of %d keys had more than one racing put-if-absent succeed", name, n, keys)
			}
			t.Logf("%s: %d keys raced by %d writers: exactly one put-if-absent landed each", name, keys, racers)
		})
	}
}
