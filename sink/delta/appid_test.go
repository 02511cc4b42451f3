package delta

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
)

// TestAppIDNoCommitTime: a snapshot or chunked snapshot whose LSN has no
// commit time (the zero time.Time) is recorded with 0 in its appId, never
// Go's zero time (-62135596800000000), and reads back as no time; records
// older versions wrote with Go's zero time read back the same.
func TestAppIDNoCommitTime(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tb := openLocal(t, dir, Options{})
	schema := bronze(t, capturedSchema())
	info := snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F380003")
	info.CommitTS = time.Time{}
	if _, err := takeSnapshot(ctx, t, tb, info, 1, 5); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "_delta_log", "00000000000000000000.json"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("-62135596800000000")) || !bytes.Contains(raw, []byte(`"appId":"cdcsnap/snapshot/dbo_Orders/0x0000002A00000F380003/0/5"`)) {
		t.Fatalf("the commit's txn:\n%s", raw)
	}
	reopened := openLocal(t, dir, Options{})
	sn, err := reopened.FindSnapshot(ctx, "dbo_Orders")
	if err != nil || !sn.CommitTS.IsZero() {
		t.Fatalf("FindSnapshot: %+v, %v; want no commit time", sn, err)
	}
	if id := chunkedAppID(info, 3); strings.Contains(id, "-62135596800000000") || !strings.Contains(id, "/0/3/") {
		t.Fatalf("chunked appId %q", id)
	}
	for _, legacy := range []deltalog.Txn{
		{AppID: "cdcsnap/snapshot/dbo_Orders/0x0000002A00000F380003/-62135596800000000/5", Version: 0},
	} {
		if sn, ok := parseSnapshotTxn(legacy); !ok || !sn.CommitTS.IsZero() || sn.Rows != 5 {
			t.Fatalf("legacy %q: %+v %v", legacy.AppID, sn, ok)
		}
	}
	if c, ok := parseChunkedTxn(deltalog.Txn{AppID: "cdcsnap/chunked/dbo_Orders/0x0000002A00000F380003/-62135596800000000/3/plan1"}); !ok || !c.CommitTS.IsZero() {
		t.Fatalf("legacy chunked: %+v %v", c, ok)
	}
}
