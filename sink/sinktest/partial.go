package sinktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/cdcsnap/cdcsnap/sink"
)

// RunPartial runs the conformance suite of sink.PartialSink against the
// sinks newSink returns, one fresh, empty sink per subtest. It checks: a
// plan opened is found (ignoring case) with its plan bytes, LSN,
// Replaces and a recent Created, and nothing of it is a snapshot; the
// newest of two opens is found; opening a plan again is a no-op, with
// another plan an error; OpenPartial refuses a schema the sink cannot
// take; parts recorded are found in partition order, a second record of
// a partition returns the first (sink.ErrPartRecorded), and of concurrent
// records of one partition exactly one succeeds and every writer gets its
// part back; recording for an unknown or dropped plan wraps
// sink.ErrNotFound; DropPartial forgets a plan (and nothing else), and
// dropping an unknown plan succeeds; recorded parts commit as a snapshot.
func RunPartial(t *testing.T, newSink func(t *testing.T) sink.PartialSink) {
	t.Helper()
	runSuite(t, newSink, []suiteCase[sink.PartialSink]{
		{"OpenFind", testPartialOpenFind},
		{"NewestWins", testPartialNewestWins},
		{"ReopenSamePlan", testPartialReopen},
		{"RefusesSchema", testPartialRefusesSchema},
		{"RecordFindCommit", testPartialRecordFindCommit},
		{"ConcurrentRecords", testPartialConcurrentRecords},
		{"Drop", testPartialDrop},
	})
}

func partialPlan(info sink.Info) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"id":%q,"lsn":%q,"note":"opaque to the sink"}`, info.PlanID, info.LSN))
}

func openPartial(t *testing.T, s sink.PartialSink, info sink.Info) {
	t.Helper()
	if err := s.OpenPartial(t.Context(), info, partialPlan(info)); err != nil {
		t.Fatalf("OpenPartial(%q, plan %s): %v", info.CaptureInstance, info.PlanID, err)
	}
}

func findPartial(t *testing.T, s sink.PartialSink, ci string) sink.Partial {
	t.Helper()
	p, err := s.FindPartial(t.Context(), ci)
	if err != nil {
		t.Fatalf("FindPartial(%q): %v", ci, err)
	}
	return p
}

func wantNoPartial(t *testing.T, s sink.PartialSink, ci, when string) {
	t.Helper()
	if p, err := s.FindPartial(t.Context(), ci); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("%s: FindPartial(%q) = plan %q, %v; want an error wrapping sink.ErrNotFound", when, ci, p.PlanID, err)
	}
}

func samePlanJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}

func testPartialOpenFind(t *testing.T, s sink.PartialSink) {
	wantNoPartial(t, s, "dbo_orders", "an empty sink")
	info := Info("dbo_Orders", LSN(40))
	info.Replaces = LSN(7)
	before := time.Now().Add(-time.Minute)
	openPartial(t, s, info)
	p := findPartial(t, s, "DBO_ORDERS")
	switch {
	case p.PlanID != info.PlanID || p.LSN != info.LSN || p.Replaces != info.Replaces || !sink.SameInstance(p.CaptureInstance, info.CaptureInstance):
		t.Fatalf("FindPartial = %+v; want plan %s at %s replacing %s", p, info.PlanID, info.LSN, info.Replaces)
	case !samePlanJSON(p.Plan, partialPlan(info)):
		t.Fatalf("FindPartial's plan %s; want %s", p.Plan, partialPlan(info))
	case p.Created.Before(before) || p.Created.After(time.Now().Add(time.Minute)):
		t.Fatalf("Created = %s; want about now", p.Created)
	case len(p.Parts) != 0 || len(p.Lost) != 0:
		t.Fatalf("a plan with nothing recorded has parts %v, lost %v", p.Parts, p.Lost)
	}
	wantNotFound(t, s, "dbo_orders", "a partial snapshot")
	wantNoPartial(t, s, "dbo_other", "another instance")
}

func testPartialNewestWins(t *testing.T, s sink.PartialSink) {
	old := Info("dbo_t", LSN(10))
	openPartial(t, s, old)
	time.Sleep(5 * time.Millisecond) // Created has at least millisecond resolution
	newer := Info("dbo_T", LSN(20))
	openPartial(t, s, newer)
	if p := findPartial(t, s, "dbo_t"); p.PlanID != newer.PlanID {
		t.Fatalf("FindPartial = plan %s; want the newest, %s", p.PlanID, newer.PlanID)
	}
	if err := s.DropPartial(t.Context(), newer.CaptureInstance, newer.PlanID); err != nil {
		t.Fatal(err)
	}
	if p := findPartial(t, s, "dbo_t"); p.PlanID != old.PlanID {
		t.Fatalf("after dropping the newest, FindPartial = plan %s; want %s", p.PlanID, old.PlanID)
	}
}

func testPartialReopen(t *testing.T, s sink.PartialSink) {
	info := Info("dbo_t", LSN(10))
	openPartial(t, s, info)
	part, err := writeOne(t.Context(), s, info, 0, span{0, 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordPart(t.Context(), info, part); err != nil {
		t.Fatal(err)
	}
	openPartial(t, s, info) // a retried open
	if p := findPartial(t, s, "dbo_t"); len(p.Parts) != 1 {
		t.Fatalf("opening the plan again lost its parts: %+v", p)
	}
	other := json.RawMessage(`{"another":"plan"}`)
	if err := s.OpenPartial(t.Context(), info, other); err == nil {
		t.Fatal("OpenPartial of a recorded plan id with another plan succeeded")
	}
	if p := findPartial(t, s, "dbo_t"); !samePlanJSON(p.Plan, partialPlan(info)) {
		t.Fatalf("the plan became %s", p.Plan)
	}
}

func testPartialRefusesSchema(t *testing.T, s sink.PartialSink) {
	info := Info("dbo_t", LSN(10))
	// No bronze columns, and a type no lakehouse column holds.
	info.Schema = arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.FixedWidthTypes.Duration_ns}}, nil)
	if err := s.OpenPartial(t.Context(), info, partialPlan(info)); err == nil {
		t.Fatal("OpenPartial accepted a schema of one duration column, without the bronze metadata columns")
	}
	wantNoPartial(t, s, "dbo_t", "a refused open")
}

func testPartialRecordFindCommit(t *testing.T, s sink.PartialSink) {
	ctx := t.Context()
	info := Info("dbo_t", LSN(10))
	if _, err := s.RecordPart(ctx, info, sink.Part{PlanID: info.PlanID}); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("RecordPart for a plan never opened: %v; want an error wrapping sink.ErrNotFound", err)
	}
	openPartial(t, s, info)
	spans := []span{{0, 100}, {100, 250}, {250, 251}, {251, 400}}
	parts := write(t, s, info, spans)
	for _, i := range []int{3, 0, 2} {
		got, err := s.RecordPart(ctx, info, parts[i])
		if err != nil || got.Partition != i || got.Rows != parts[i].Rows {
			t.Fatalf("RecordPart(partition %d) = %+v, %v", i, got, err)
		}
	}
	p := findPartial(t, s, "dbo_t")
	if got := partitions(p.Parts); !slices.Equal(got, []int{0, 2, 3}) || len(p.Lost) != 0 {
		t.Fatalf("FindPartial parts %v, lost %v; want partitions [0 2 3] in order", got, p.Lost)
	}
	for _, part := range p.Parts {
		if part.PlanID != info.PlanID || part.Rows != parts[part.Partition].Rows {
			t.Fatalf("found part %+v; recorded %+v", part, parts[part.Partition])
		}
	}
	// A second writer of partition 2 gets the first one's part.
	again, err := writeOne(ctx, s, info, 2, spans[2])
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.RecordPart(ctx, info, again)
	if !errors.Is(err, sink.ErrPartRecorded) || string(got.Data) != string(p.Parts[1].Data) {
		t.Fatalf("second RecordPart of partition 2 = %+v, %v; want the first record and sink.ErrPartRecorded", got, err)
	}
	wantNotFound(t, s, "dbo_t", "parts recorded, nothing committed")
	if _, err := s.RecordPart(ctx, info, parts[1]); err != nil {
		t.Fatal(err)
	}
	all := findPartial(t, s, "dbo_t").Parts
	snap, err := s.CommitSnapshot(ctx, info, jsonParts(t, all))
	if err != nil {
		t.Fatalf("committing the recorded parts: %v", err)
	}
	checkSnapshot(t, "the snapshot of recorded parts", snap, info, total(spans))
	checkRows(t, s, "dbo_t", info, spans)
}

func partitions(parts []sink.Part) []int {
	out := make([]int, len(parts))
	for i, p := range parts {
		out[i] = p.Partition
	}
	return out
}

func testPartialConcurrentRecords(t *testing.T, s sink.PartialSink) {
	ctx := t.Context()
	info := Info("dbo_t", LSN(10))
	openPartial(t, s, info)
	const n = 8
	mine := make([]sink.Part, n)
	got := make([]sink.Part, n)
	errs := make([]error, n)
	for i := range n {
		p, err := writeOne(ctx, s, info, 0, span{0, 50})
		if err != nil {
			t.Fatal(err)
		}
		mine[i] = p
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = s.RecordPart(ctx, info, mine[i]) })
	}
	wg.Wait()
	recorded := -1
	for i := range n {
		switch {
		case errs[i] == nil && recorded >= 0:
			t.Fatalf("writers %d and %d both recorded their part of partition 0", recorded, i)
		case errs[i] == nil && string(got[i].Data) != string(mine[i].Data):
			t.Fatalf("writer %d recorded its part but got another back", i)
		case errs[i] == nil:
			recorded = i
		case !errors.Is(errs[i], sink.ErrPartRecorded):
			t.Fatalf("writer %d: %v", i, errs[i])
		}
	}
	if recorded < 0 {
		t.Fatalf("none of %d concurrent writers recorded its part", n)
	}
	for i := range n {
		if string(got[i].Data) != string(mine[recorded].Data) {
			t.Fatalf("writer %d got a part other than the one writer %d recorded", i, recorded)
		}
	}
	p := findPartial(t, s, "dbo_t")
	if len(p.Parts) != 1 || string(p.Parts[0].Data) != string(mine[recorded].Data) {
		t.Fatalf("after %d concurrent records FindPartial holds %d parts; want the one recorded", n, len(p.Parts))
	}
}

func testPartialDrop(t *testing.T, s sink.PartialSink) {
	ctx := t.Context()
	if err := s.DropPartial(ctx, "dbo_t", "0123456789abcdef"); err != nil {
		t.Fatalf("dropping an unknown plan: %v", err)
	}
	a, b := Info("dbo_t", LSN(10)), Info("dbo_u", LSN(11))
	openPartial(t, s, a)
	openPartial(t, s, b)
	part, err := writeOne(ctx, s, a, 0, span{0, 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordPart(ctx, a, part); err != nil {
		t.Fatal(err)
	}
	if err := s.DropPartial(ctx, "DBO_T", a.PlanID); err != nil {
		t.Fatal(err)
	}
	wantNoPartial(t, s, "dbo_t", "after DropPartial")
	if p := findPartial(t, s, "dbo_u"); p.PlanID != b.PlanID {
		t.Fatalf("dropping one instance's plan lost another's: %+v", p)
	}
	if _, err := s.RecordPart(ctx, a, part); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("RecordPart for a dropped plan: %v; want an error wrapping sink.ErrNotFound", err)
	}
	if err := s.DropPartial(context.WithoutCancel(ctx), "dbo_t", a.PlanID); err != nil {
		t.Fatalf("dropping it again: %v", err)
	}
}
