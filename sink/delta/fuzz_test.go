package delta

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/internal/localstore"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
)

// fuzzCommit is a table's first commit, as this package writes it.
const fuzzCommit = `{"commitInfo":{"timestamp":1,"operation":"WRITE","userMetadata":"{\"snapshot\":\"dbo_t\",\"lsn\":\"0x0000002A00000F380003\"}"}}
{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}
{"metaData":{"id":"a","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[{\"name\":\"id\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}}]}","partitionColumns":[],"configuration":{},"createdTime":1}}
{"txn":{"appId":"cdcsnap/snapshot/dbo_t/0x0000002A00000F380003/1767225600000000/2","version":0,"lastUpdated":1}}
{"add":{"path":"part-00000-x-c000.snappy.parquet","partitionValues":{},"size":10,"modificationTime":1,"dataChange":true,"stats":"{\"numRecords\":2}"}}
`

// FuzzSnapshotTxn: the durable snapshot record survives any capture
// instance name (], quotes, ;, /, %, unicode), LSN, commit time and row
// count: it parses back to exactly what was written. Any appId at all
// parses or is refused without a panic, and what parses re-encodes to
// itself.
func FuzzSnapshotTxn(f *testing.F) {
	f.Add("dbo_orders", []byte{0, 0, 0, 0x2A, 0, 0, 0x0F, 0x38, 0, 3}, int64(1767225600000000), int64(10), "cdcsnap/snapshot/dbo_t/0x0000002A00000F380003/1/2")
	f.Add("dbo_o]'; DROP--/%2F", []byte{1}, int64(-1), int64(0), "cdcsnap/snapshot/a%2Fb/0x00000000000000000000/0/0")
	f.Add("ünï/%代", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, int64(0), int64(-5), "cdcsnap/snapshot///")
	f.Fuzz(func(t *testing.T, ci string, l []byte, micros, rows int64, appID string) {
		var b [10]byte
		copy(b[:], l)
		ls, err := lsn.FromBytes(b[:])
		if err != nil {
			t.Skip()
		}
		ts := time.UnixMicro(micros).UTC()
		id := snapshotAppID(sink.Info{CaptureInstance: ci, LSN: ls, CommitTS: ts}, rows)
		sn, ok := parseSnapshotTxn(deltalog.Txn{AppID: id, Version: 7})
		if !ok {
			t.Fatalf("snapshot record %q of %q does not parse", id, ci)
		}
		if micros == 0 || micros == goZeroMicros {
			ts = time.Time{} // 0 is no time; the Unix epoch itself is no SQL Server commit's
		}
		if sn.CaptureInstance != ci || sn.LSN != ls || !sn.CommitTS.Equal(ts) || sn.Rows != rows || sn.Version != 7 {
			t.Fatalf("record %q parsed as %+v, wrote ci %q lsn %s ts %v rows %d", id, sn, ci, ls, ts, rows)
		}
		if sn, ok := parseSnapshotTxn(deltalog.Txn{AppID: appID}); ok {
			back := snapshotAppID(sink.Info{CaptureInstance: sn.CaptureInstance, LSN: sn.LSN, CommitTS: sn.CommitTS}, sn.Rows)
			if again, ok := parseSnapshotTxn(deltalog.Txn{AppID: back}); !ok || again != sn {
				t.Fatalf("appId %q parsed as %+v, re-encoded as %q, parsed again as %+v", appID, sn, back, again)
			}
		}
	})
}

// FuzzLogReplay: any bytes as the second commit of a table (after a real
// first one) make the table's reads fail with a typed error (corrupt log,
// unsupported protocol, not found) or succeed, never panic or hang.
func FuzzLogReplay(f *testing.F) {
	f.Add([]byte(`{"txn":{"appId":"cdcsnap/snapshot/dbo_x/0x0000002A00000F380009/1/0","version":1}}`))
	f.Add([]byte(`{"protocol":{"minReaderVersion":1,"minWriterVersion":7,"writerFeatures":["rowTracking"]}}`))
	f.Add([]byte(`{"remove":{"path":"part-00000-x-c000.snappy.parquet","dataChange":true}}`))
	f.Add([]byte(`{"metaData":{"id":"b","schemaString":"not json"}}`))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ctx := context.Background()
		mem := localstore.NewMem()
		if err := deltalog.WriteAll(ctx, mem, deltalog.CommitKey(0), []byte(fuzzCommit)); err != nil {
			t.Fatal(err)
		}
		if err := deltalog.WriteAll(ctx, mem, deltalog.CommitKey(1), b); err != nil {
			t.Fatal(err)
		}
		tb, err := OpenStore(mem, "mem://fuzz", Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer tb.Close()
		typed := func(err error) bool {
			var c *deltalog.CorruptLogError
			var p *deltalog.UnsupportedProtocolError
			var s *deltalog.SchemaError
			return err == nil || errors.As(err, &c) || errors.As(err, &p) || errors.As(err, &s) || errors.Is(err, sink.ErrNotFound) ||
				strings.Contains(err.Error(), "schema")
		}
		if _, err := tb.FindSnapshot(ctx, "dbo_t"); !typed(err) {
			t.Fatalf("FindSnapshot: untyped error %T: %v", err, err)
		}
		if _, err := tb.Snapshots(ctx); !typed(err) {
			t.Fatalf("Snapshots: untyped error %T: %v", err, err)
		}
		_, _ = tb.files(ctx)
		_, _ = tb.schema(ctx)
	})
}
