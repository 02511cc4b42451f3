package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

const (
	killDirEnv   = "CDCSNAP_KILL_DIR"
	killSeedEnv  = "CDCSNAP_KILL_SEED"
	killReadyEnv = "CDCSNAP_KILL_READY"
)

// killOutcome is what a child that ran to completion prints.
type killOutcome struct {
	Result snapshot.Result `json:"result"`
	Take   time.Duration   `json:"take"`
}

// killWorld is the deterministic source of the SIGKILL test: the same seed
// gives the same rows and LSNs in the child and in the parent.
func killWorld(t testing.TB, seed uint64) *testworld.World {
	r := rand.New(rand.NewPCG(seed, 20))
	return testworld.New(t, r, shapes()[0], 600+r.IntN(400))
}

func killOptions(w *testworld.World) (snapshot.Options, delta.Options) {
	return snapshot.Options{CaptureInstance: w.CI, Partitions: 8, MinPartitionRows: -1, Parallelism: 3, ReadOptions: snapshot.ReadOptions{BatchRows: 20}},
		delta.Options{CheckpointInterval: 1, TargetFileSize: 4096}
}

// killChild runs a bootstrap into the folder table when the test binary
// was re-executed by TestSIGKILL, and reports whether it did.
// snapshotNone is what checkSnapshotRows expects of a table without the
// instance's snapshot: no row of it.
var snapshotNone = sink.Snapshot{Rows: 0}

func killChild() bool {
	dir := os.Getenv(killDirEnv)
	if dir == "" {
		return false
	}
	seed, err := strconv.ParseUint(os.Getenv(killSeedEnv), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	t := &testing.T{}
	w := killWorld(t, seed)
	sopts, topts := killOptions(w)
	ctx := context.Background()
	tb, err := blobstore.Open(ctx, dir, topts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	// Tell the parent the bootstrap starts now: its kill delay counts
	// from here, not from the process start.
	if err := os.WriteFile(os.Getenv(killReadyEnv), nil, 0o666); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(5)
	}
	t0 := time.Now()
	res, err := snapshot.Take(ctx, w.DB, tb, sopts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
	_ = tb.Close()
	_ = json.NewEncoder(os.Stdout).Encode(killOutcome{Result: res, Take: time.Since(t0)})
	return true
}

// TestSIGKILL re-executes the test binary as a child that bootstraps a
// deterministic fake into a local folder table (checkpoint after every
// commit, small data files: many writes to be killed in), and kills it
// with SIGKILL after a random delay, many times. After every kill the
// table must be readable and hold no snapshot of the instance or exactly
// the right one (its rows equal the source, its LSN the source's max).
// Each folder is killed until a snapshot lands or a few kills went by;
// then a child runs to completion, the rerun returns the one snapshot, and
// changes streamed after it converge to the source.
func TestSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("SIGKILL test skipped in -short mode")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 21))
	budget := 25 * time.Second
	if v := os.Getenv("CDCSNAP_KILL_BUDGET"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			budget = d
		}
	}
	const maxKills = 200
	start := time.Now()
	ready := filepath.Join(t.TempDir(), "ready")
	child := func(dir string, seed uint64) *exec.Cmd {
		_ = os.Remove(ready)
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), killDirEnv+"="+dir, fmt.Sprintf("%s=%d", killSeedEnv, seed), killReadyEnv+"="+ready)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		return cmd
	}
	// Calibrate: how long a whole bootstrap takes, process start included.
	var full time.Duration
	{
		dir, s := t.TempDir(), r.Uint64()
		prepareKillTable(t, dir, s)
		cmd := child(dir, s)
		if err := cmd.Run(); err != nil {
			t.Fatalf("calibration child: %v\n%s", err, cmdStderr(cmd))
		}
		var out killOutcome
		if err := json.Unmarshal(cmdStdout(cmd), &out); err != nil {
			t.Fatalf("calibration output: %v", err)
		}
		full = max(out.Take, time.Millisecond)
		verifyKillTable(t, dir, s, true)
	}
	t.Logf("a whole bootstrap in a child takes %v (process start excluded)", full)

	var kills, beforeCommit, afterCommit, folders, finals, midRead, resumed, resumingRuns int
	for kills < maxKills && time.Since(start) < budget {
		folders++
		dir, s := t.TempDir(), r.Uint64()
		prepareKillTable(t, dir, s)
		landed := false
		var prev sink.Partial // the partial snapshot after the last kill
		for k := 0; k < 6 && !landed && kills < maxKills; k++ {
			if len(prev.Parts) > 0 {
				resumingRuns++ // this child must resume prev (checked after the kill)
			}
			cmd := child(dir, s)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Microsecond) {
				if _, err := os.Stat(ready); err == nil {
					break
				}
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
					t.Fatalf("the child never started its bootstrap: %s", cmdStderr(cmd))
				}
			}
			time.Sleep(time.Duration(r.Int64N(int64(full + full/5))))
			_ = cmd.Process.Kill() // SIGKILL
			_ = cmd.Wait()
			kills++
			landed = verifyKillTable(t, dir, s, false)
			if landed {
				afterCommit++
			} else {
				beforeCommit++
				// A kill never loses recorded progress: the next child
				// resumed the same plan, and its recorded partitions only
				// grow.
				p, ok := killPartial(t, dir, s)
				switch {
				case prev.PlanID != "" && (!ok || p.PlanID != prev.PlanID):
					t.Fatalf("kill %d: the partial snapshot %s became %q: a rerun did not resume it", kills, prev.PlanID, p.PlanID)
				case ok && len(p.Parts) < len(prev.Parts):
					t.Fatalf("kill %d: the partial snapshot had %d partitions recorded, now %d", kills, len(prev.Parts), len(p.Parts))
				case ok && len(p.Lost) > 0:
					t.Fatalf("kill %d: recorded partitions %v lost their files", kills, p.Lost)
				}
				if ok && len(p.Parts) > 0 && len(p.Parts) < 8 {
					midRead++
				}
				if ok {
					prev = p
				}
			}
			if t.Failed() {
				return
			}
		}
		// The final rerun, to completion.
		cmd := child(dir, s)
		if err := cmd.Run(); err != nil {
			t.Fatalf("final rerun after %d kills: %v\n%s", kills, err, cmdStderr(cmd))
		}
		var out killOutcome
		if err := json.Unmarshal(cmdStdout(cmd), &out); err != nil {
			t.Fatalf("final rerun output: %v", err)
		}
		res := out.Result
		if landed != res.Existing {
			t.Fatalf("final rerun returned Existing=%v, but a snapshot had landed: %v", res.Existing, landed)
		}
		if !landed && prev.PlanID != "" {
			if !res.Resumed || res.LSN != prev.LSN || res.PartitionsResumed < len(prev.Parts) {
				t.Fatalf("final rerun %+v; want the partial snapshot at %s resumed with at least its %d recorded partitions", res, prev.LSN, len(prev.Parts))
			}
			resumed++
		}
		if _, ok := killPartial(t, dir, s); ok {
			t.Fatal("after the final rerun a partial snapshot is still recorded")
		}
		verifyKillTable(t, dir, s, true)
		finals++
	}
	t.Logf("SIGKILL: %d kills over %d folders (%d before the commit was durable, %d of them with some partitions recorded; %d after); %d killed children started on a partial snapshot; %d final reruns (%d resumed one); all survived, in %v",
		kills, folders, beforeCommit, midRead, afterCommit, resumingRuns, finals, resumed, time.Since(start).Round(time.Millisecond))
	if kills < 10 {
		t.Errorf("only %d kills in the time budget", kills)
	}
	if kills >= 30 && (midRead == 0 || resumingRuns+resumed == 0) {
		t.Errorf("%d kills, but %d left partitions recorded and %d children started on a partial snapshot: the test did not exercise resuming", kills, midRead, resumingRuns+resumed)
	}
}

// openKillTable opens the folder table of seed's world, as the child does.
func openKillTable(t *testing.T, dir string, seed uint64) (*delta.Table, *testworld.World) {
	t.Helper()
	w := killWorld(t, seed)
	_, topts := killOptions(w)
	tb, err := blobstore.Open(context.Background(), dir, topts)
	if err != nil {
		t.Fatal(err)
	}
	return tb, w
}

// killPartial returns the partial snapshot the folder table records, if any.
func killPartial(t *testing.T, dir string, seed uint64) (sink.Partial, bool) {
	t.Helper()
	tb, w := openKillTable(t, dir, seed)
	defer tb.Close()
	p, err := tb.FindPartial(context.Background(), w.CI)
	if errors.Is(err, sink.ErrNotFound) {
		return sink.Partial{}, false
	}
	if err != nil {
		t.Fatalf("reading the partial snapshot after a kill: %v", err)
	}
	return p, true
}

func cmdStderr(cmd *exec.Cmd) []byte {
	if b, ok := cmd.Stderr.(*bytes.Buffer); ok {
		return b.Bytes()
	}
	return nil
}

func cmdStdout(cmd *exec.Cmd) []byte {
	if b, ok := cmd.Stdout.(*bytes.Buffer); ok {
		return b.Bytes()
	}
	return nil
}

// prepareKillTable creates the folder table with another instance's
// (empty) change batch, so the snapshot's commit is version 1 and a
// checkpoint follows it.
func prepareKillTable(t *testing.T, dir string, seed uint64) {
	tb, w := openKillTable(t, dir, seed)
	defer tb.Close()
	if _, err := tb.AppendChanges(context.Background(), "dbo_other", 1, emptyReader(t, bronze(t, w))); err != nil {
		t.Fatal(err)
	}
}

// verifyKillTable checks the folder table after a kill (or a finished
// run, when complete): readable, at most one snapshot of the instance,
// and when there is one, its rows are the source's and its LSN the
// source's max; when complete, changes streamed after it converge. It
// reports whether a snapshot is there.
func verifyKillTable(t *testing.T, dir string, seed uint64, complete bool) bool {
	t.Helper()
	ctx := context.Background()
	tb, w := openKillTable(t, dir, seed)
	defer tb.Close()
	snaps, err := tb.Snapshots(ctx)
	if err != nil {
		t.Fatalf("after a kill the table cannot be read: %v", err)
	}
	var mine int
	for _, s := range snaps {
		if s.CaptureInstance == w.CI {
			mine++
		}
	}
	if mine > 1 || (complete && mine != 1) {
		t.Fatalf("the table holds %d snapshots of %s (complete: %v)", mine, w.CI, complete)
	}
	if mine == 0 {
		// Nothing of the instance may be visible.
		im, err := checkSnapshotRows(t, ctx, w, tb, snapshotNone)
		if err != nil {
			t.Fatalf("no snapshot, but: %v", err)
		}
		if im.Len() != 0 {
			t.Fatalf("no snapshot, but %d rows of the instance are visible", im.Len())
		}
		return false
	}
	sn := instanceSnapshots(t, ctx, tb, w.CI)[0]
	if want := w.MaxLSN(t); sn.LSN != want {
		t.Fatalf("snapshot LSN %s, the source's max LSN is %s", sn.LSN, want)
	}
	got, err := checkSnapshotRows(t, ctx, w, tb, sn)
	if err != nil {
		t.Fatal(err)
	}
	want, err := snapshot.SourceImage(ctx, w.DB, w.Instance(t))
	if err != nil {
		t.Fatal(err)
	}
	if d := want.Diff(got, 5); len(d) > 0 {
		t.Fatalf("the snapshot differs from the source: %v", d)
	}
	if complete {
		// Stream changes after it: the latest image converges.
		r := rand.New(rand.NewPCG(seed, 22))
		for range 20 {
			w.Change(t, r)
		}
		if err := streamAndCompare(t, ctx, w, tb, snapshot.Result{LSN: sn.LSN}, 2); err != nil {
			t.Fatal(err)
		}
	}
	return true
}

// TestEightProcessesOneSnapshot starts 8 processes (the test binary
// re-executed, as TestSIGKILL's child) bootstrapping the same instance
// into one local folder table at once: exactly one commits a snapshot,
// the seven others return it (Existing) with its LSN, and the table holds
// one snapshot whose rows are the source's.
func TestEightProcessesOneSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test skipped in -short mode")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 23))
	for round := range 3 {
		dir, s := t.TempDir(), r.Uint64()
		prepareKillTable(t, dir, s)
		if err := raceBootstraps(exe, dir, s, t.TempDir()); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		verifyKillTable(t, dir, s, true)
	}
}

// raceBootstraps runs 8 processes bootstrapping the kill table at url
// (prepared with seed s) at once and checks that exactly one committed a
// snapshot and all returned its LSN.
func raceBootstraps(exe, url string, s uint64, tmp string) error {
	var cmds []*exec.Cmd
	for i := range 8 {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), killDirEnv+"="+url, fmt.Sprintf("%s=%d", killSeedEnv, s),
			killReadyEnv+"="+filepath.Join(tmp, fmt.Sprint("ready-", i)))
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			return err
		}
		cmds = append(cmds, cmd)
	}
	fresh := 0
	var lsns []string
	var errs []error
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("process %d: %v\n%s", i, err, cmdStderr(cmd)))
			continue
		}
		var out killOutcome
		if err := json.Unmarshal(cmdStdout(cmd), &out); err != nil {
			errs = append(errs, fmt.Errorf("process %d output: %v", i, err))
			continue
		}
		if !out.Result.Existing {
			fresh++
		}
		lsns = append(lsns, out.Result.LSN.String())
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if fresh != 1 {
		return fmt.Errorf("%d processes committed a snapshot, want 1", fresh)
	}
	for _, l := range lsns {
		if l != lsns[0] {
			return fmt.Errorf("processes returned LSNs %v", lsns)
		}
	}
	return nil
}
