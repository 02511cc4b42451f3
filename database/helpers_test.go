package database

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"go.uber.org/goleak"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests (0: from the clock)")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// errBroken is the permanent failure of probe.fail's reads.
var errBroken = errors.New("injected: this table cannot be read")

// probe is the fake database as Bootstrap sees it, with what the tests
// need around it: it counts source operations in flight (calls, and
// readers until released) and keeps the most seen at once, fails every
// read of the instance fail, and calls onOp before every operation.
type probe struct {
	db   *fake.DB
	fail string
	onOp atomic.Pointer[func()]

	inUse, peak atomic.Int64
	ops         atomic.Int64
}

var (
	_ source.Source = (*probe)(nil)
	_ Lister        = (*probe)(nil)
)

func newProbe(db *fake.DB) *probe { return &probe{db: db} }

func (p *probe) enter() {
	p.ops.Add(1)
	if f := p.onOp.Load(); f != nil {
		(*f)()
	}
	n := p.inUse.Add(1)
	for {
		old := p.peak.Load()
		if n <= old || p.peak.CompareAndSwap(old, n) {
			return
		}
	}
}

func (p *probe) exit() { p.inUse.Add(-1) }

func (p *probe) hold(rr array.RecordReader, err error) (array.RecordReader, error) {
	if err != nil {
		p.exit()
		return nil, err
	}
	return &slotReader{RecordReader: rr, release: p.exit, refs: 1}, nil
}

func (p *probe) ListCaptureInstances(ctx context.Context) ([]source.CaptureInstance, error) {
	p.enter()
	defer p.exit()
	return p.db.ListCaptureInstances(ctx)
}

func (p *probe) CaptureInstance(ctx context.Context, name string) (*source.CaptureInstance, error) {
	p.enter()
	defer p.exit()
	return p.db.CaptureInstance(ctx, name)
}

func (p *probe) MaxLSN(ctx context.Context) (lsn.LSN, error) {
	p.enter()
	defer p.exit()
	return p.db.MaxLSN(ctx)
}

func (p *probe) MinLSN(ctx context.Context, ci string) (lsn.LSN, bool, error) {
	p.enter()
	defer p.exit()
	return p.db.MinLSN(ctx, ci)
}

func (p *probe) LSNTime(ctx context.Context, l lsn.LSN) (time.Time, error) {
	p.enter()
	defer p.exit()
	return p.db.LSNTime(ctx, l)
}

func (p *probe) IntKeyBounds(ctx context.Context, ci *source.CaptureInstance) (int64, int64, bool, error) {
	p.enter()
	defer p.exit()
	return p.db.IntKeyBounds(ctx, ci)
}

func (p *probe) RowCount(ctx context.Context, ci *source.CaptureInstance) (int64, error) {
	p.enter()
	defer p.exit()
	return p.db.RowCount(ctx, ci)
}

func (p *probe) SeekKey(ctx context.Context, ci *source.CaptureInstance, iso source.Isolation, from keyrange.Tuple, k int64) (keyrange.Tuple, bool, error) {
	p.enter()
	defer p.exit()
	return p.db.SeekKey(ctx, ci, iso, from, k)
}

func (p *probe) ReadRange(ctx context.Context, ci *source.CaptureInstance, r keyrange.Range, opts source.ReadOptions) (array.RecordReader, error) {
	p.enter()
	if strings.EqualFold(ci.Name, p.fail) {
		return p.hold(nil, errBroken)
	}
	return p.hold(p.db.ReadRange(ctx, ci, r, opts))
}

func (p *probe) ReadChanges(ctx context.Context, ci *source.CaptureInstance, from, to lsn.LSN) (array.RecordReader, error) {
	p.enter()
	return p.hold(p.db.ReadChanges(ctx, ci, from, to))
}

// keptSink is a memory sink that outlives a run, as a Delta table on disk
// does: Bootstrap closes what it opened, and Close does nothing here.
type keptSink struct{ *fake.MemSink }

func (keptSink) Close() error { return nil }

// sinks opens one memory sink per target and keeps it.
type sinks struct {
	mu sync.Mutex
	m  map[string]*fake.MemSink
}

func newSinks(t *testing.T) *sinks {
	s := &sinks{m: map[string]*fake.MemSink{}}
	t.Cleanup(func() {
		for _, m := range s.m {
			m.Close()
		}
	})
	return s
}

func (s *sinks) open(ctx context.Context, target string) (sink.Sink, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.m[target]
	if !ok {
		m = fake.NewMemSink()
		s.m[target] = m
	}
	return keptSink{m}, nil
}

func (s *sinks) get(target string) *fake.MemSink {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[target]
}

// snapshotCommits counts dst's snapshot commits.
func snapshotCommits(dst *fake.MemSink) int {
	n := 0
	for _, c := range dst.Commits() {
		if c.Kind == "snapshot" {
			n++
		}
	}
	return n
}

// checkImage fails t unless the latest image of dst's rows equals the
// source table of ci. Both images are keyed by the table's key as the fake
// holds it, which a table without a primary key (a heap) has too: the
// capture instance shows none.
func checkImage(t *testing.T, db *fake.DB, ci string, dst *fake.MemSink) {
	t.Helper()
	ctx := context.Background()
	in, err := db.CaptureInstance(ctx, ci)
	if err != nil {
		t.Fatal(err)
	}
	info, err := db.Table(in.SourceSchema, in.SourceTable)
	if err != nil {
		t.Fatal(err)
	}
	want := snapshot.NewImage(in.Columns, info.KeyColumns)
	rr, err := db.ReadRange(ctx, in, keyrange.Whole()[0], source.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshot.ReadImage(ctx, want, rr, false); err != nil {
		t.Fatal(err)
	}
	got := snapshot.NewImage(in.Columns, info.KeyColumns)
	for _, rec := range dst.Records() {
		if err := got.AddBronze(rec); err != nil {
			t.Fatal(err)
		}
	}
	if d := want.Diff(got, 5); len(d) > 0 {
		t.Fatalf("%s: the latest image differs from the source:\n%s", ci, strings.Join(d, "\n"))
	}
}

// streamChanges appends ci's changes from res.StreamFrom to the database's
// max LSN to dst, as the caller's stream would.
func streamChanges(t *testing.T, src source.Source, res Result, dst *fake.MemSink) {
	t.Helper()
	ctx := context.Background()
	to, err := src.MaxLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.StreamFrom.Compare(to) > 0 {
		return
	}
	rr, err := snapshot.Changes(ctx, src, res.CaptureInstance, res.StreamFrom, to, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if _, err := dst.AppendChanges(ctx, res.CaptureInstance, 1, rr); err != nil {
		t.Fatalf("%s: %v", res.CaptureInstance, err)
	}
}

// smallDB is a fake database with n tables dbo.t00.. and n tables
// sales.s00.. (a bigint key; table i holds 5*i rows), captured as
// dbo_t00.. and sales_s00...
func smallDB(t *testing.T, n int) *fake.DB {
	t.Helper()
	db := fake.New(fake.Options{})
	for i := range n {
		for _, schema := range []string{"dbo", "sales"} {
			name := fmt.Sprintf("%s%02d", map[string]string{"dbo": "t", "sales": "s"}[schema], i)
			var rows []fake.Row
			for k := range 5 * i {
				rows = append(rows, fake.Row{int64(k + 1), fmt.Sprintf("v%d", k)})
			}
			err := db.CreateTable(fake.TableDef{Schema: schema, Name: name, Key: []string{"id"},
				Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "v", Type: "nvarchar(20)", Nullable: true}},
				Rows:    rows, CaptureInstance: schema + "_" + name})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return db
}
