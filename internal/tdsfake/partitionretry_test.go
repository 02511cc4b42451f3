package tdsfake_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/internal/tdsserver"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// rereads counts the snapshot's log records of partitions read again.
type rereads struct{ n atomic.Int64 }

func (c *rereads) Enabled(context.Context, slog.Level) bool { return true }
func (c *rereads) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *rereads) WithGroup(string) slog.Handler            { return c }
func (c *rereads) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "reading the partition") && strings.Contains(r.Message, "again from its start") {
		c.n.Add(1)
	}
	return nil
}

// TestPartitionsWithoutResumableOrderAreReadAgain: a table whose key index
// is nonclustered gives a range no order to resume by (its reads have no
// ORDER BY), so a range read cut after it handed out batches cannot go on
// in place: the source fails it as source.ErrTransient and the snapshot
// reads the partition again from its start into new files. Every
// partition's first read is cut (a deadlock victim), every snapshot row is
// written once, and the snapshot holds the table.
func TestPartitionsWithoutResumableOrderAreReadAgain(t *testing.T) {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "t", Key: []string{"id"}, KeyNonclustered: true, Columns: []fake.ColumnDef{
		{Name: "id", Type: "int"}, {Name: "v", Type: "varchar(10)", Nullable: true}}}); err != nil {
		t.Fatal(err)
	}
	var rows []fake.Row
	for i := range 300 {
		rows = append(rows, fake.Row{int64(i), fmt.Sprint(i)})
	}
	if _, err := db.Load("dbo", "t", rows...); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EnableCDC("dbo", "t", "dbo_t"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	cut := map[string]bool{}
	inject := func(req *tdsserver.Request) (tdsserver.Fault, bool) {
		if !strings.HasPrefix(req.SQL, "SELECT [id], CAST(CAST([v] AS nvarchar(10)) AS varbinary(20)) AS [v] FROM [dbo].[t]") || strings.Contains(req.SQL, "ORDER BY") {
			return tdsserver.Fault{}, false
		}
		mu.Lock()
		defer mu.Unlock()
		key := req.SQL + fmt.Sprint(req.Params)
		if cut[key] {
			return tdsserver.Fault{}, false
		}
		cut[key] = true
		return tdsserver.TransientFault(1205, 25), true
	}
	var logged rereads
	src, srv, _ := serve(t, db, tdsfake.Options{Inject: inject, PageRows: 5}, sqlserver.Options{Retry: sqlserver.Retry{Initial: time.Millisecond, Max: time.Millisecond}})
	dst := fake.NewMemSink()
	defer dst.Close()
	_, res, err := snapshot.Bootstrap(ctx, src, dst, snapshot.Options{CaptureInstance: "dbo_t", Partitions: 3, MinPartitionRows: -1, Parallelism: 1, ReadOptions: snapshot.ReadOptions{BatchRows: 10}, RunOptions: snapshot.RunOptions{Logger: slog.New(&logged)}})
	if err != nil {
		t.Fatalf("Bootstrap: %v", err)
	}
	got, err := dst.Rows()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[any]int{}
	for _, r := range got {
		if r[sink.ColOperation] == int64(sink.OperationSnapshot) {
			ids[r["id"]]++
		}
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("key %v written %d times", id, n)
		}
	}
	if len(ids) != 300 || res.Rows != 300 {
		t.Errorf("%d keys, %d rows committed; want 300", len(ids), res.Rows)
	}
	if srv.Faults() < int64(res.Partitions) || logged.n.Load() != srv.Faults() {
		t.Errorf("%d faults struck, %d partitions read again, %d partitions: want a fault and a reread per partition", srv.Faults(), logged.n.Load(), res.Partitions)
	}
}
