package sourcetest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"go.uber.org/goleak"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sourcetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness is sourcetest.FakeHarness.
func harness(db *fake.DB, src source.Source) sourcetest.Harness {
	return sourcetest.FakeHarness(db, src)
}

// TestFake runs the suite against the fake CDC database.
func TestFake(t *testing.T) {
	db := fake.New(fake.Options{})
	sourcetest.Run(t, harness(db, db))
}

// brokenEnv names the bug TestBrokenFake gives its source.
const brokenEnv = "SOURCETEST_BROKEN_SOURCE"

// broken is a fake.DB with one rule of the contract broken.
type broken struct {
	*fake.DB
	bug string
}

func (b broken) CaptureInstance(ctx context.Context, name string) (*source.CaptureInstance, error) {
	ci, err := b.DB.CaptureInstance(ctx, name)
	switch {
	case b.bug == "caseSensitiveNames" && err == nil && ci.Name != name:
		return nil, &source.NotFoundError{Name: name}
	case b.bug == "bareNotFound" && errors.Is(err, source.ErrNotFound):
		return nil, source.ErrNotFound
	}
	return ci, err
}

func (b broken) MinLSN(ctx context.Context, ci string) (lsn.LSN, bool, error) {
	if b.bug == "minLSNZeroNotNull" {
		l, ok, err := b.DB.MinLSN(ctx, ci)
		if err == nil && !ok {
			return lsn.LSN{}, true, nil
		}
		return l, ok, err
	}
	return b.DB.MinLSN(ctx, ci)
}

func (b broken) LSNTime(ctx context.Context, l lsn.LSN) (time.Time, error) {
	ts, err := b.DB.LSNTime(ctx, l)
	if b.bug == "localTime" {
		return ts.Local(), err
	}
	return ts, err
}

func (b broken) SeekKey(ctx context.Context, ci *source.CaptureInstance, iso source.Isolation, from keyrange.Tuple, k int64) (keyrange.Tuple, bool, error) {
	if b.bug == "seekOffByOne" && k > 0 {
		k--
	}
	if b.bug == "seekAssumesUnique" && ci.KeyIndex != nil {
		// Seek a repeating key as if it were unique: a bound can equal
		// from.
		cp := *ci
		ix := *ci.KeyIndex
		ix.Unique, ix.Columns = true, ci.Key
		cp.KeyIndex = &ix
		ci = &cp
	}
	return b.DB.SeekKey(ctx, ci, iso, from, k)
}

func (b broken) ReadRange(ctx context.Context, ci *source.CaptureInstance, r keyrange.Range, opts source.ReadOptions) (array.RecordReader, error) {
	if b.bug == "upperInclusive" && r.Upper != nil {
		// Read up to the key after Upper: Upper's own row is read twice.
		next, ok, err := b.DB.SeekKey(ctx, ci, opts.Isolation, r.Upper, 1)
		if err != nil {
			return nil, err
		}
		if ok {
			r.Upper = next
		} else {
			r.Upper = nil
		}
	}
	if b.bug == "ignoresBatchRows" {
		opts.BatchRows = 0
	}
	return b.DB.ReadRange(ctx, ci, r, opts)
}

func (b broken) ReadChanges(ctx context.Context, ci *source.CaptureInstance, from, to lsn.LSN) (array.RecordReader, error) {
	if b.bug == "emptyOnDataLoss" {
		if min, ok, err := b.DB.MinLSN(ctx, ci.Name); err == nil && ok && from.Less(min) {
			from = min
		}
	}
	if b.bug == "clampsToMax" {
		if max, err := b.DB.MaxLSN(ctx); err == nil && max.Less(to) {
			to = max
		}
	}
	return b.DB.ReadChanges(ctx, ci, from, to)
}

// TestBrokenFake runs the suite on a source with one bug; it only runs as
// the child process of TestSuiteCatchesBugs.
func TestBrokenFake(t *testing.T) {
	bug := os.Getenv(brokenEnv)
	if bug == "" {
		t.Skip("runs as a child of TestSuiteCatchesBugs")
	}
	db := fake.New(fake.Options{})
	sourcetest.Run(t, harness(db, broken{DB: db, bug: bug}))
}

// TestSuiteCatchesBugs proves each rule is checked: the suite fails on a
// source that breaks it, in the subtest meant to catch it.
func TestSuiteCatchesBugs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary once per bug")
	}
	cases := []struct{ bug, subtest string }{
		{"caseSensitiveNames", "CaptureInstanceNames"},
		{"bareNotFound", "CaptureInstanceNames"},
		{"minLSNZeroNotNull", "MinMaxLSN"},
		{"localTime", "LSNTime"},
		{"seekOffByOne", "SeekKey"},
		{"upperInclusive", "ReadRange"},
		{"seekAssumesUnique", "SplitColumn"},
		{"ignoresBatchRows", "ReadRange"},
		{"emptyOnDataLoss", "DataLoss"},
		{"clampsToMax", "ReadChanges"},
	}
	for _, c := range cases {
		t.Run(c.bug+"/"+c.subtest, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenFake$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+c.bug)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the suite passed (or did not run: %v) on a source with bug %q, want a failure in %s:\n%s", err, c.bug, c.subtest, out)
			}
			if want := "--- FAIL: TestBrokenFake/" + c.subtest; !strings.Contains(string(out), want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		})
	}
}
