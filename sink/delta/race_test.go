package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/sink"
)

const (
	raceDirEnv = "CDCSNAP_DELTA_RACE_DIR"
	raceIDEnv  = "CDCSNAP_DELTA_RACE_ID"
)

// raceOutcome is what a racing process reports on stdout.
type raceOutcome struct {
	Snapshot sink.Snapshot `json:"snapshot"`
	Exists   bool          `json:"exists"`
	Err      string        `json:"err,omitempty"`
}

// raceChild runs the racing process's part when the test binary was
// re-executed by TestMultiProcessRace, and reports whether it did.
func raceChild() bool {
	dir := os.Getenv(raceDirEnv)
	if dir == "" {
		return false
	}
	id := os.Getenv(raceIDEnv)
	out := raceOutcome{}
	snap, err := raceOnce(dir, id)
	out.Snapshot = snap
	if errors.Is(err, sink.ErrSnapshotExists) {
		out.Exists = true
	} else if err != nil {
		out.Err = err.Error()
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
	return true
}

func raceOnce(dir, id string) (sink.Snapshot, error) {
	ctx := context.Background()
	t := &testing.T{}
	tb, err := Open(ctx, dir, Options{CheckpointInterval: 3})
	if err != nil {
		return sink.Snapshot{}, err
	}
	defer tb.Close()
	schema := bronze(t, capturedSchema())
	info := snapshotInfo(t, schema, "dbo_Orders", "0x0000002A00000F380003")
	info.PlanID = "plan-" + id
	parts, err := stageRace(t, ctx, tb, info, info.LSN.String(), dir, id)
	if err != nil {
		return sink.Snapshot{}, err
	}
	return tb.CommitSnapshot(ctx, info, parts)
}

// TestMultiProcessRace re-executes the test binary in several processes
// that commit a snapshot of one instance (and a change batch each) to one
// local table at once: exactly one snapshot lands, the others get
// ErrSnapshotExists with it, every change batch lands, and each version
// has exactly one commit file.
func TestMultiProcessRace(t *testing.T) {
	const n = 6
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for i := 0; i < n; i++ {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), raceDirEnv+"="+dir, fmt.Sprintf("%s=%d", raceIDEnv, i))
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		outs = append(outs, &out)
	}
	// Wait for every racer to have written its parts, then start them.
	for i := 0; i < n; i++ {
		for {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("ready-%d", i))); err == nil {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	snaps := make([]sink.Snapshot, n)
	errs := make([]error, n)
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("racer %d: %v\n%s", i, err, outs[i])
		}
		var o raceOutcome
		if err := json.Unmarshal(outs[i].Bytes(), &o); err != nil {
			t.Fatalf("racer %d printed %q", i, outs[i])
		}
		if o.Err != "" {
			t.Fatalf("racer %d: %s", i, o.Err)
		}
		snaps[i] = o.Snapshot
		if o.Exists {
			errs[i] = sink.ErrSnapshotExists
		}
	}
	checkOneWinner(t, snaps, errs)

	// One commit file per version, contiguous, and the log says the same.
	re := regexp.MustCompile(`^(\d{20})\.json$`)
	var versions []string
	for _, name := range logFiles(t, dir) {
		if m := re.FindStringSubmatch(name); m != nil {
			versions = append(versions, m[1])
		}
	}
	sort.Strings(versions)
	if len(versions) != n+1 {
		t.Fatalf("%d commit files, want %d (one snapshot, %d change batches): %v", len(versions), n+1, n, versions)
	}
	for i, v := range versions {
		if v != fmt.Sprintf("%020d", i) {
			t.Fatalf("commit files %v are not versions 0..%d", versions, n)
		}
	}
	ctx := context.Background()
	tb := openLocal(t, dir, Options{})
	all, err := tb.Snapshots(ctx)
	if err != nil || len(all) != 1 || all[0] != snaps[0] {
		t.Fatalf("snapshots in the log: %+v, %v", all, err)
	}
	txns, _ := tb.txns(ctx)
	for i := 0; i < n; i++ {
		if txns[changesAppID(fmt.Sprintf("dbo_Other%d", i))].Version != 1 {
			t.Fatalf("change batch of racer %d missing: %+v", i, txns)
		}
	}
	tbl := readAll(t, tb)
	defer tbl.Release()
	if tbl.NumRows() != 10+2*n {
		t.Fatalf("%d rows, want %d", tbl.NumRows(), 10+2*n)
	}
}

// stageRace is what every racing child does before its commit: it writes
// partitions 0 and 1 (rows stamped with stamp), signals it is ready, waits
// for the start signal so the commits race, and appends a change batch of
// another instance so versions are also contended by commits that must all
// land.
func stageRace(t *testing.T, ctx context.Context, tb *Table, info sink.Info, stamp, dir, id string) ([]sink.Part, error) {
	var parts []sink.Part
	for p := 0; p < 2; p++ {
		rec := buildRecord(t, info.Schema, p*5, 5, rowSpec{ci: info.CaptureInstance, startLSN: stamp, commitTS: info.CommitTS, snapshot: info.LSN.String()})
		part, err := tb.WritePartition(ctx, info, p, reader(t, info.Schema, rec))
		if err != nil {
			return nil, err
		}
		parts = append(parts, part)
	}
	if err := os.WriteFile(filepath.Join(dir, "ready-"+id), nil, 0o666); err != nil {
		return nil, err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := tb.AppendChanges(ctx, "dbo_Other"+id, 1, changeRows(t, info.Schema, "dbo_Other"+id, 1, 0, 2)); err != nil {
		return nil, err
	}
	return parts, nil
}
