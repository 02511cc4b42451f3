package reliability_test

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"gocloud.dev/gcerrors"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/objstore"
	"github.com/cdcsnap/cdcsnap/internal/testenv"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// bucketRow is one store's row of README.md's "Your bucket" table.
type bucketRow struct {
	url, driver, credentials string
}

// readmeBucketRow returns the row of store ("S3", "GCS", "Azure Blob").
func readmeBucketRow(t *testing.T, store string) bucketRow {
	t.Helper()
	block := testenv.READMEBlock(t, "bucketcheck")
	code := regexp.MustCompile("`([^`]*)`")
	for _, line := range strings.Split(block, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 6 || strings.TrimSpace(cells[1]) != store {
			continue
		}
		u, d := code.FindStringSubmatch(cells[2]), code.FindStringSubmatch(cells[3])
		if u == nil || d == nil {
			t.Fatalf("README's %s row has no URL or import: %q", store, line)
		}
		return bucketRow{url: u[1], driver: d[1], credentials: cells[4]}
	}
	t.Fatalf("README's bucket table has no %s row", store)
	return bucketRow{}
}

// storeREADMEExample runs README's "Your bucket" example of st's store
// against the server: the row's import is the driver gocloud.dev registers
// for its URL's scheme, the credentials it names first are the ones the
// server takes, and a table at its URL (moved to the server's bucket, its
// endpoint parameters added, the row's own parameters kept) takes a
// snapshot that a rerun finds.
func storeREADMEExample(t *testing.T, st *objstore.Store) {
	ctx := context.Background()
	store := map[string]string{"s3": "S3", "gcs": "GCS", "azure": "Azure Blob"}[st.Kind]
	row := readmeBucketRow(t, store)
	ru, err := url.Parse(row.url)
	if err != nil {
		t.Fatal(err)
	}
	// Each package's doc: "For blob.OpenBucket, s3blob registers for the
	// scheme "s3"" (gcsblob "gs", azureblob "azblob"), gocloud.dev v0.49.0.
	drivers := map[string]string{"s3": `_ "gocloud.dev/blob/s3blob"`, "gs": `_ "gocloud.dev/blob/gcsblob"`, "azblob": `_ "gocloud.dev/blob/azureblob"`}
	if row.driver != drivers[ru.Scheme] {
		t.Errorf("README's %s row imports %s for %s://, gocloud.dev registers that scheme in %s", store, row.driver, ru.Scheme, drivers[ru.Scheme])
	}
	credentials := map[string]bool{"AWS_ACCESS_KEY_ID": true, "AWS_SECRET_ACCESS_KEY": true, "AZURE_STORAGE_ACCOUNT": true, "AZURE_STORAGE_KEY": true}
	for _, kv := range st.Env() {
		name, value, _ := strings.Cut(kv, "=")
		if credentials[name] && value != "" && !strings.Contains(row.credentials, "`"+name+"`") {
			t.Errorf("the server takes %s, which README's %s row does not name", name, store)
		}
	}
	// The row's path below its bucket (or container), in the server's.
	table := "readme/" + strings.Trim(ru.Path, "/")
	server, err := url.Parse(st.URL(table))
	if err != nil {
		t.Fatal(err)
	}
	q := server.Query()
	for k, v := range ru.Query() {
		q[k] = v
	}
	server.RawQuery = q.Encode()

	db := fake.New(fake.Options{})
	var rows []fake.Row
	for i := range 100 {
		rows = append(rows, fake.Row{int64(i), "item"})
	}
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "orders", Key: []string{"id"}, Rows: rows, CaptureInstance: "dbo_orders",
		Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "item", Type: "nvarchar(40)"}}}); err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		tb, err := blobstore.Open(ctx, server.String(), delta.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, res, err := snapshot.Bootstrap(ctx, db, tb, snapshot.Options{CaptureInstance: "dbo_orders"})
		tb.Close()
		if err != nil {
			t.Fatalf("run %d at %s: %v", run+1, server.Redacted(), err)
		}
		if res.Existing != (run == 1) || (run == 0 && res.Rows != 100) {
			t.Fatalf("run %d: %+v", run+1, res)
		}
	}
}

// storeMissingBucket opens a table in a bucket (container) the server does
// not have: the error says so first, with what to do, and keeps the
// store's own answer (NoSuchBucket, ContainerNotFound, bucket doesn't
// exist) and its gocloud.dev code.
func storeMissingBucket(t *testing.T, st *objstore.Store) {
	ctx := context.Background()
	u := strings.Replace(st.URL("t"), "://"+objstore.Bucket+"/", "://no-such-"+objstore.Bucket+"/", 1)
	tb, err := blobstore.Open(ctx, u, delta.Options{})
	if err == nil {
		_, err = tb.Version(ctx)
		tb.Close()
	}
	want := map[string]struct{ what, said string }{
		"s3":    {"the bucket does not exist: create it", "NoSuchBucket"},
		"azure": {"the container does not exist: create it", "ContainerNotFound"},
		"gcs":   {"the bucket does not exist: create it", "storage: bucket doesn't exist"},
	}[st.Kind]
	what, said := want.what, want.said
	if err == nil || !strings.HasPrefix(err.Error(), "delta: table "+u+": "+what) || !strings.Contains(err.Error(), said) || gcerrors.Code(err) != gcerrors.NotFound {
		t.Fatalf("got %v (code %v)\nwant it to start with %q, keep %q and code NotFound", err, gcerrors.Code(err), what, said)
	}
}
