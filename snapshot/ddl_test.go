package snapshot_test

import (
	"math/rand/v2"
	"testing"

	"github.com/cdcsnap/cdcsnap/internal/testworld"
)

// TestDDLProperty: random DDL (drop, add, retype, re-add, a second capture
// instance, the switch to it, the old one disabled) interleaved with random
// DML, whole and chunked snapshots (with DML between their pages) and
// polls (some through a failing commit, then rerun), against the brute-force
// oracle of what SQL Server documents (testworld.RunDDL): the latest image
// of the bronze table equals the source table in every column the capture
// instance that wrote it captures, and a poll the bronze table cannot take
// stops with a *snapshot.SchemaChangeError, writing nothing. A third of
// the cases key the table by a numeric(18,0) IDENTITY and carry a
// rowversion; the others move some rows to another key, and half of
// those run under trace flag 8207, which logs such an update as an
// update-before of the old key and an update-after of the new one. Half
// the cases run the capture job only every second or third commit or
// DDL, so the max LSN and the captured types lag the table.
// Rerun a failure with CDCSNAP_SEED.
func TestDDLProperty(t *testing.T) {
	seed := testworld.Seed(t, 0)
	cases := 200
	if testing.Short() {
		cases = 60
	}
	for c := range cases {
		r := rand.New(rand.NewPCG(seed, uint64(c)))
		lag := 0
		if c%4 >= 2 {
			lag = 2 + c/4%2
		}
		testworld.RunDDL(t, r, testworld.DDLOptions{Case: c, Steps: 40, Identity: c%3 == 0, SingletonKeyUpdates: c%2 == 1, CaptureEvery: lag})
	}
}
