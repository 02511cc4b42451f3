package testworld_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cdcsnap/cdcsnap/internal/testworld"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSeed(t *testing.T) {
	t.Setenv("CDCSNAP_SEED", "42")
	if s := testworld.Seed(t, 7); s != 7 {
		t.Errorf("Seed with a flag of 7 = %d", s)
	}
	if s := testworld.Seed(t, 0); s != 42 {
		t.Errorf("Seed with CDCSNAP_SEED=42 = %d", s)
	}
	t.Setenv("CDCSNAP_SEED", "")
	if s := testworld.Seed(t, 0); s == 0 {
		t.Error("Seed from the clock = 0")
	}
}

// liveKeys returns the collation keys of w's rows in the database, and
// whether none repeats.
func liveKeys(t *testing.T, w *testworld.World) (map[string]bool, bool) {
	rows, err := w.DB.Rows("dbo", w.Shape.Name)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, row := range rows {
		keys[w.CollationKey(t, w.KeyOf(row))] = true
	}
	return keys, len(keys) == len(rows)
}

// TestWorldKeys: New loads rows of distinct keys, and Keys stays the set
// of live keys through random changes, also through another instance.
func TestWorldKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(testworld.Seed(t, 0), 1))
	for _, precision := range []time.Duration{testworld.Tick, time.Microsecond} {
		for _, sh := range testworld.Shapes(precision) {
			w := testworld.New(t, r, sh, 100)
			if _, err := w.DB.EnableCDC("dbo", sh.Name, w.CI+"_v2"); err != nil {
				t.Fatal(err)
			}
			w2 := w.With(w.CI + "_v2")
			for i := range 200 {
				keys, distinct := liveKeys(t, w)
				if !distinct || len(keys) != len(w.Keys) {
					t.Fatalf("%s after %d changes: %d live keys (distinct %v), Keys holds %d", sh.Name, i, len(keys), distinct, len(w.Keys))
				}
				for k := range keys {
					if !w.Keys[k] {
						t.Fatalf("%s after %d changes: live key %q is not in Keys", sh.Name, i, k)
					}
				}
				if i%2 == 0 {
					w.Change(t, r)
				} else {
					w2.Change(t, r)
				}
			}
			if w.Instance(t).Name != w.CI || w2.Instance(t).Name != w2.CI {
				t.Errorf("%s: instances %s and %s", sh.Name, w.Instance(t).Name, w2.Instance(t).Name)
			}
		}
	}
}

// TestShapesPrecision: datetime2 values carry no digit below the
// precision asked for.
func TestShapesPrecision(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	sub := 0
	for _, sh := range testworld.Shapes(time.Microsecond) {
		for range 200 {
			for _, v := range sh.Row(r) {
				if at, ok := v.(time.Time); ok && at.Nanosecond()%1000 != 0 {
					t.Fatalf("%s: %v is not whole microseconds", sh.Name, at)
				}
			}
		}
	}
	for _, sh := range testworld.Shapes(testworld.Tick) {
		for range 200 {
			for _, v := range sh.Row(r) {
				if at, ok := v.(time.Time); ok && at.Nanosecond()%1000 != 0 {
					sub++
				}
			}
		}
	}
	if sub == 0 {
		t.Error("Shapes(Tick) drew no timestamp below a microsecond")
	}
}
