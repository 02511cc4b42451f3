package reconcile_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/reconcile"
	"github.com/cdcsnap/cdcsnap/source"
)

// countingSource counts the capture-instance look-ups, the first read of
// every reconcile.
type countingSource struct {
	source.Source
	lookups *atomic.Int64
}

func (s countingSource) CaptureInstance(ctx context.Context, name string) (*source.CaptureInstance, error) {
	s.lookups.Add(1)
	return s.Source.CaptureInstance(ctx, name)
}

// TestRunAll: many instances, a few at a time: each gets its own result in
// the order given, a failing instance (unknown, or whose source read
// fails midway) does not stop the others, the drifted one reports its
// difference, Done sees every instance once; invalid options fail before
// any source is read; a canceled context fails every instance.
func TestRunAll(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	var lookups atomic.Int64
	var instances []reconcile.Instance
	var worlds []*world
	for i := range 6 {
		w := newWorld(t, r, shapes()[i%len(shapes())], 50+r.IntN(100), i%2 == 0)
		defer w.dst.Close()
		worlds = append(worlds, w)
		instances = append(instances, reconcile.Instance{Source: countingSource{w.DB, &lookups}, Target: w.dst,
			Options: reconcile.Options{CaptureInstance: w.CI, Tiles: 4, Parallel: 2}})
	}
	want := worlds[1].drift(t, r)
	worlds[2].DB.FailReadAfter(10, fake.ErrInjected)
	instances[3].Options.CaptureInstance = "dbo_gone"

	bad := append([]reconcile.Instance(nil), instances...)
	bad[4].Options.Tiles = -1
	bad[5].Target = nil
	if _, err := reconcile.RunAll(ctx, bad, reconcile.DatabaseOptions{}); !errors.Is(err, reconcile.ErrInvalidOptions) ||
		!strings.Contains(err.Error(), "instance 4") || !strings.Contains(err.Error(), "instance 5") {
		t.Fatalf("invalid options: %v", err)
	}
	if _, err := reconcile.RunAll(ctx, instances, reconcile.DatabaseOptions{Instances: -1}); !errors.Is(err, reconcile.ErrInvalidOptions) {
		t.Fatalf("negative Instances: %v", err)
	}
	if n := lookups.Load(); n != 0 {
		t.Fatalf("invalid options read the source %d times", n)
	}

	seen := map[int]int{}
	res, err := reconcile.RunAll(ctx, instances, reconcile.DatabaseOptions{Instances: 3, Done: func(i int, _ reconcile.Result) { seen[i]++ }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(instances) || len(seen) != len(instances) {
		t.Fatalf("%d results, Done saw %v", len(res), seen)
	}
	for i, rs := range res {
		if seen[i] != 1 || rs.CaptureInstance != instances[i].Options.CaptureInstance {
			t.Fatalf("result %d: %+v, Done called %d times", i, rs, seen[i])
		}
		switch i {
		case 1:
			if rs.Err != nil || len(rs.Report.Differences) != len(want) || rs.Clean() != (len(want) == 0) {
				t.Fatalf("drifted instance: %+v, want %d differences", rs, len(want))
			}
		case 2:
			if !errors.Is(rs.Err, fake.ErrInjected) || rs.Clean() {
				t.Fatalf("failing read: %+v", rs)
			}
		case 3:
			if rs.Err == nil || !strings.Contains(rs.Err.Error(), "dbo_gone") {
				t.Fatalf("unknown instance: %+v", rs)
			}
		default:
			if rs.Err != nil || !rs.Clean() {
				t.Fatalf("instance %d: %+v", i, rs)
			}
		}
	}

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	res, err = reconcile.RunAll(canceled, instances, reconcile.DatabaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, rs := range res {
		if !errors.Is(rs.Err, context.Canceled) {
			t.Fatalf("canceled: result %d is %+v", i, rs)
		}
	}
}
