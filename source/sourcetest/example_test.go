package sourcetest_test

import (
	"context"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source/sourcetest"
)

// A source's own tests run the whole suite in one line, giving the source
// and the hooks that write to the database behind it. (An example has no
// *testing.T, so this one only shows the call; TestFake in this package
// runs it against the fake CDC database, hooks and all.)
func ExampleRun() {
	db := fake.New(fake.Options{})
	conformance := func(t *testing.T) {
		sourcetest.Run(t, sourcetest.Harness{
			Source: db,
			CreateTable: func(ctx context.Context, tb sourcetest.Table, instance string, rows []sourcetest.Row) error {
				// CREATE TABLE, INSERT rows, sp_cdc_enable_table ... (see TestFake)
				return nil
			},
			Commit: func(ctx context.Context, tb sourcetest.Table, changes []sourcetest.Change) (lsn.LSN, error) {
				// BEGIN TRAN; INSERT/UPDATE/DELETE; COMMIT; wait for the capture job
				return db.NextLSN(), nil
			},
		})
	}
	_ = conformance // func TestConformance(t *testing.T) { ...the call above... }
}
