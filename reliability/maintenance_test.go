package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/cdcsnap/cdcsnap/internal/testenv"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// The maintenance tests (issue 16, "found again after maintenance"): Go
// writes a whole snapshot, change batches 1..3 and a chunked snapshot
// interrupted midway into a local Delta table; a real engine (delta-rs or
// Spark) maintains the table as a Delta user would; then a rerun of every
// step must find what is there, read nothing it need not, add nothing twice,
// and converge to the source.
//
// Each table holds two capture instances of one source table: the whole
// snapshot and its change batches (instance A) and the chunked snapshot
// (instance B), plus rows the engine appends for a third, "filler"
// instance, so compaction mixes all of them in one file.

const (
	maintRows      = 2000 // source rows (a few thousand: Spark stays quick)
	maintBatches   = 3    // change batches applied before the maintenance
	maintChunks    = 4    // chunks of the chunked snapshot, one per wave
	maintCommitted = 2    // chunks committed before it is interrupted
	fillerCI       = "maint_filler"
)

// Operations per engine: the scripts in testdata do them.
var (
	deltaRSOps = []string{"txn-retention", "checkpoint", "optimize", "zorder", "vacuum", "compound"}
	sparkOps   = []string{"txn-retention", "checkpoint", "multipart", "optimize", "zorder", "vacuum", "compound", "v2checkpoint"}
)

// TestMaintenanceDeltaRS runs the maintenance operations with delta-rs
// (Python deltalake: $CDCSNAP_PYTHON, else the venv .ci/pyenv creates).
func TestMaintenanceDeltaRS(t *testing.T) {
	if os.Getenv(testenv.PythonEnv) == "" {
		testenv.Need(t, "delta-rs maintenance", testenv.Python3)
	}
	runMaintenance(t, "delta-rs", deltaRSOps, testenv.PythonEnv, "pyenv", "maintain_deltars.py")
}

// TestMaintenanceSpark runs them with Spark + Delta (pyspark 4.0.1,
// delta-spark 4.0.0 and the Delta jar: $CDCSNAP_SPARK_PYTHON, else the venv
// .ci/sparkenv creates, about 90 s the first time), in one Spark session
// for every table.
func TestMaintenanceSpark(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "Spark maintenance", "-short", "go test ./reliability (without -short)")
	}
	needSpark(t, "Spark maintenance")
	runMaintenance(t, "Spark", sparkOps, sparkPythonEnv, "sparkenv", "maintain_spark.py")
}

// needSpark skips t naming suite when the programs Spark needs are
// missing: Java always (a venv of CDCSNAP_SPARK_PYTHON runs it too), and
// python3 when .ci/sparkenv is to make the venv.
func needSpark(t *testing.T, suite string) {
	t.Helper()
	testenv.Need(t, suite, testenv.Java)
	if os.Getenv(sparkPythonEnv) == "" {
		testenv.Need(t, suite, testenv.Python3)
	}
}

// sparkPythonEnv names an interpreter with pyspark and delta-spark that the
// Spark test uses instead of installing .cache/spark-venv.
const sparkPythonEnv = "CDCSNAP_SPARK_PYTHON"

// registries are where each installer downloads from.
var registries = map[string]string{"pyenv": "PyPI", "sparkenv": "PyPI and Maven Central"}

// installFailed is the engine process's exit code when .ci/<installer>
// could not install the engine (no network): the test then skips.
const installFailed = 97

// maintTable is one prepared table and what Go wrote into it.
type maintTable struct {
	op, dir string
	w       *testworld.World // instance A: whole snapshot + change batches
	wb      *testworld.World // instance B: chunked snapshot
	snap    snapshot.Result
	batches [][2]lsn.LSN // change batch i+1 read from..to
	chunked sink.Chunked // instance B's state after the interruption
	version int64        // the table's version after Go's writes
	rows    int64        // every row of the table after Go's writes
	files   []string     // live data files after Go's writes
	txns    map[string]int64
	tree    map[string]string // every file under dir: size and mtime
}

func (m *maintTable) takeOpts() snapshot.Options {
	return snapshot.Options{CaptureInstance: m.w.CI, Partitions: 4, MinPartitionRows: -1}
}

func (m *maintTable) backfillOpts() snapshot.BackfillOptions {
	return snapshot.BackfillOptions{CaptureInstance: m.wb.CI, Chunks: maintChunks, WaveChunks: 1}
}

// engineResult is what a maintenance script reports per table.
type engineResult struct {
	Op          string          `json:"op"`
	Error       string          `json:"error"`
	Version     int64           `json:"version"`
	VersionPrev int64           `json:"version_before"`
	LogBefore   []string        `json:"log_before"`
	LogAfter    []string        `json:"log_after"`
	Rows        int64           `json:"rows"`
	Protocol    string          `json:"protocol"`
	Seconds     float64         `json:"seconds"`
	Total       float64         `json:"seconds_total"`
	Session     float64         `json:"session_seconds"`
	Vacuumed    json.RawMessage `json:"vacuumed"`
}

func runMaintenance(t *testing.T, engine string, ops []string, pyEnv, installer, script string) {
	ctx := context.Background()
	seed := testworld.Seed(t, *seedFlag)
	root := t.TempDir()
	start := time.Now()
	tables := make([]*maintTable, len(ops))
	type jobTable struct {
		Path string `json:"path"`
		Op   string `json:"op"`
	}
	job := struct {
		Tables []jobTable `json:"tables"`
		Filler string     `json:"filler"`
	}{Filler: fillerCI}
	for i, op := range ops {
		r := rand.New(rand.NewPCG(seed, uint64(100+i)))
		dir := filepath.Join(root, op)
		tables[i] = prepareMaintTable(t, ctx, r, dir, op)
		job.Tables = append(job.Tables, jobTable{Path: dir, Op: op})
	}
	prepared := time.Since(start)
	jobFile := filepath.Join(root, "job.json")
	b, _ := json.Marshal(job)
	if err := os.WriteFile(jobFile, b, 0o666); err != nil {
		t.Fatal(err)
	}

	// The engine (after its install, when needed) runs as a child process
	// started before t.Parallel: it works while the package's sequential
	// tests run. Its output goes to files, so no goroutine copies it (the
	// leak tests would see one), and no context watches it: a timer kills
	// it after 15 minutes.
	scriptPath, err := filepath.Abs(filepath.Join("testdata", script))
	if err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	if py := os.Getenv(pyEnv); py != "" {
		cmd = exec.Command(py, scriptPath, jobFile)
	} else {
		root, err := filepath.Abs("..")
		if err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command("bash", "-c", `start=$SECONDS
py=$(bash "$0") || { echo "maint: $0 failed"; exit `+fmt.Sprint(installFailed)+`; }
echo "maint: $0: $py ($((SECONDS - start)) s)" >&2
exec "$py" "$1" "$2"`, filepath.Join(root, ".ci", installer), scriptPath, jobFile)
	}
	stdout, err := os.Create(filepath.Join(root, "engine.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(root, "engine.err"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	engineStart := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", engine, err)
	}
	kill := time.AfterFunc(15*time.Minute, func() { _ = cmd.Process.Kill() })
	defer kill.Stop()
	t.Parallel()
	err = cmd.Wait()
	engineTime := time.Since(engineStart)
	errText, _ := os.ReadFile(stderr.Name())
	out, _ := os.ReadFile(stdout.Name())
	for _, line := range strings.Split(string(errText), "\n") {
		if strings.HasPrefix(line, "maint: ") {
			t.Log(strings.TrimPrefix(line, "maint: "))
		}
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == installFailed {
		testenv.SkipUnavailable(t, engine+" maintenance", testenv.Offline(engine, registries[installer], ".ci/"+installer, string(errText)))
	}
	if err != nil {
		t.Fatalf("%s: %s: %v\n%s", engine, script, err, tail(string(errText), 60))
	}
	var results map[string]engineResult
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatalf("%s printed %q: %v\n%s", script, tail(string(out), 20), err, tail(string(errText), 20))
	}
	var session float64
	for _, r := range results {
		session = max(session, r.Session)
	}
	t.Logf("%s: Go wrote %d tables in %s; the engine (with its install, if any) ran for %s, overlapping the package's sequential tests (session start %.1fs)",
		engine, len(tables), prepared.Round(time.Millisecond), engineTime.Round(time.Millisecond), session)

	for _, m := range tables {
		t.Run(m.op, func(t *testing.T) {
			res, ok := results[m.dir]
			if !ok {
				t.Fatalf("%s reported nothing for %s", script, m.dir)
			}
			verifyMaintained(t, ctx, engine, m, res)
		})
	}
	t.Logf("%s: whole test %s", engine, time.Since(start).Round(time.Millisecond))
}

// prepareMaintTable writes instance A's whole snapshot and change batches
// and instance B's chunked snapshot, interrupted after maintCommitted of
// its chunks, into a new local table in dir.
func prepareMaintTable(t *testing.T, ctx context.Context, r *rand.Rand, dir, op string) *maintTable {
	t.Helper()
	w := testworld.New(t, r, shapes()[0], maintRows)
	ciB := w.CI + "_b"
	if _, err := w.DB.EnableCDC("dbo", w.Shape.Name, ciB); err != nil {
		t.Fatal(err)
	}
	m := &maintTable{op: op, dir: dir, w: w, wb: w.With(ciB)}
	tb := openMaint(t, ctx, dir)
	defer tb.Close()

	var err error
	if m.snap, err = snapshot.Take(ctx, w.DB, tb, m.takeOpts()); err != nil {
		t.Fatalf("%s: Take: %v", op, err)
	}
	from, err := m.snap.StreamFrom()
	if err != nil {
		t.Fatal(err)
	}
	for b := int64(1); b <= maintBatches; b++ {
		for range 30 {
			w.Change(t, r)
		}
		to := w.MaxLSN(t)
		appendBatch(t, ctx, tb, w, b, from, to)
		m.batches = append(m.batches, [2]lsn.LSN{from, to})
		if from, err = to.Next(); err != nil {
			t.Fatal(err)
		}
	}

	// Instance B: a chunked snapshot, stopped after maintCommitted waves
	// (one chunk each), then failed mid-read in the next wave.
	bo := m.backfillOpts()
	bo.MaxWaves = maintCommitted
	if _, err := snapshot.Backfill(ctx, w.DB, tb, bo); err != nil {
		t.Fatalf("%s: Backfill: %v", op, err)
	}
	w.DB.FailReadAfter(int64(10+r.IntN(100)), errBoom)
	if _, err := snapshot.Backfill(ctx, w.DB, tb, m.backfillOpts()); !errors.Is(err, errBoom) {
		t.Fatalf("%s: the interrupted Backfill returned %v, want the injected fault", op, err)
	}
	w.DB.ClearFaults()
	if m.chunked, err = tb.FindChunked(ctx, ciB); err != nil {
		t.Fatal(err)
	}
	if m.chunked.Committed != maintCommitted || m.chunked.Complete {
		t.Fatalf("%s: the interrupted chunked snapshot is %+v, want %d of %d chunks committed", op, m.chunked, maintCommitted, maintChunks)
	}

	if m.version, err = tb.Version(ctx); err != nil {
		t.Fatal(err)
	}
	files, err := tb.Files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		m.files = append(m.files, f.Path)
	}
	m.rows = countTable(t, ctx, tb, w.CI).all
	m.txns = logTxns(t, ctx, dir)
	for _, prefix := range []string{"cdcsnap/snapshot/", "cdcsnap/changes/", "cdcsnap/chunked/", "cdcsnap/chunks/"} {
		if !hasPrefix(m.txns, prefix) {
			t.Fatalf("%s: Go's log holds no txn %s... before the maintenance: %v", op, prefix, m.txns)
		}
	}
	m.tree = treeOf(t, dir)
	return m
}

func openMaint(t *testing.T, ctx context.Context, dir string) *delta.Table {
	t.Helper()
	tb, err := blobstore.Open(ctx, dir, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// appendBatch appends the changes of w's instance from..to as batch b.
func appendBatch(t *testing.T, ctx context.Context, tb *delta.Table, w *testworld.World, b int64, from, to lsn.LSN) int64 {
	t.Helper()
	rr, err := snapshot.Changes(ctx, w.DB, w.CI, from, to, b)
	if err != nil {
		t.Fatalf("changes of batch %d: %v", b, err)
	}
	defer rr.Release()
	v, err := tb.AppendChanges(ctx, w.CI, b, rr)
	if err != nil {
		t.Fatalf("AppendChanges(%s, batch %d): %v", w.CI, b, err)
	}
	return v
}

// verifyMaintained checks the operation's evidence and then reruns every
// step of the bootstrap against the maintained table.
func verifyMaintained(t *testing.T, ctx context.Context, engine string, m *maintTable, res engineResult) {
	if res.Error != "" && m.op != "v2checkpoint" {
		t.Fatalf("%s %s: %s", engine, m.op, res.Error)
	}
	t.Logf("%s %s (%.1fs): table version %d -> %d; log %d files -> %d", engine, m.op, res.Seconds, m.version, res.Version, len(res.LogBefore), len(res.LogAfter))
	after := logTxns(t, ctx, m.dir)
	if m.op == "v2checkpoint" {
		if verifyV2Refused(t, ctx, engine, m, res) {
			return
		}
	}
	switch m.op {
	case "txn-retention", "compound":
		if m.op == "compound" {
			verifyRewritten(t, ctx, engine, m)
		}
		// The proof runs the rows fallback only if every cdcsnap txn is
		// really gone from what the log holds: JSON commits and checkpoints.
		if hasPrefix(after, "cdcsnap/") {
			t.Fatalf("%s did not remove the expired txn records: the log still holds %v", engine, after)
		}
		if exists(filepath.Join(m.dir, "_delta_log", fmt.Sprintf("%020d.json", 0))) {
			t.Fatalf("%s: log cleanup left the first commit", engine)
		}
		if len(checkpoints(t, m.dir)) == 0 {
			t.Fatalf("%s: no checkpoint in the log", engine)
		}
		t.Logf("%s: no cdcsnap txn left in the log (%d before: %s); log now %v", engine, len(m.txns), strings.Join(txnIDs(m.txns), ", "), res.LogAfter)
	case "checkpoint", "multipart":
		cps := checkpoints(t, m.dir)
		var newer []string
		parts := 0
		for name, v := range cps {
			if v > m.version {
				newer = append(newer, name)
				if p := checkpointParts(name); p > parts {
					parts = p
				}
			}
		}
		if len(newer) == 0 {
			t.Fatalf("%s wrote no checkpoint after version %d: log %v", engine, m.version, res.LogAfter)
		}
		if m.op == "multipart" && parts < 2 {
			t.Fatalf("%s wrote no multi-part checkpoint: %v", engine, newer)
		}
		// The reader starts from the newest checkpoint: it must be the one
		// this case is about (no later classic checkpoint hides it).
		newest, newestV := "", int64(-1)
		for name, v := range cps {
			if v > newestV || v == newestV && checkpointParts(name) > checkpointParts(newest) {
				newest, newestV = name, v
			}
		}
		if m.op == "multipart" && checkpointParts(newest) < 2 {
			t.Fatalf("the newest checkpoint %s is not the multi-part one: %v", newest, newer)
		}
		if !hasPrefix(after, "cdcsnap/snapshot/") {
			t.Fatalf("%s's checkpoint lost the live txn records: %v", engine, after)
		}
		sort.Strings(newer)
		t.Logf("%s: checkpoint files %v", engine, newer)
	case "optimize", "zorder", "vacuum":
		verifyRewritten(t, ctx, engine, m)
	}
	rerun(t, ctx, m)
}

// verifyV2Refused checks that a table with v2 checkpoints is refused with
// an *UnsupportedProtocolError naming v2Checkpoint and that nothing is read
// or written. It returns false when the sink reads such tables now (the
// caller then checks them as any other).
func verifyV2Refused(t *testing.T, ctx context.Context, engine string, m *maintTable, res engineResult) bool {
	if res.Error != "" {
		t.Logf("%s could not turn v2 checkpoints on: %s", engine, res.Error)
		if !strings.Contains(res.Protocol, "v2Checkpoint") {
			t.Skipf("%s: the table has no v2Checkpoint feature (%s): nothing to prove", engine, res.Protocol)
		}
	}
	if !strings.Contains(res.Protocol, "v2Checkpoint") {
		t.Fatalf("%s: the table's protocol has no v2Checkpoint after the operation: %s", engine, res.Protocol)
	}
	cps := checkpoints(t, m.dir)
	v2 := false
	for name := range cps {
		v2 = v2 || regexp.MustCompile(`\.checkpoint\.[0-9a-fA-F-]{36}\.(json|parquet)$`).MatchString(name)
	}
	if !v2 {
		t.Fatalf("%s wrote no v2 checkpoint (UUID-named): %v", engine, res.LogAfter)
	}
	before := treeOf(t, m.dir)
	tb := openMaint(t, ctx, m.dir)
	defer tb.Close()
	m.w.DB.ResetStats()
	_, err := snapshot.Take(ctx, m.w.DB, tb, m.takeOpts())
	if err == nil {
		t.Logf("the sink reads v2-checkpoint tables now: checked as any other table")
		return false
	}
	var upe *delta.UnsupportedProtocolError
	if !errors.As(err, &upe) || !strings.Contains(upe.Feature, "v2Checkpoint") || !strings.Contains(err.Error(), "v2Checkpoint") {
		t.Fatalf("Take on a v2-checkpoint table: %v (%T); want an *UnsupportedProtocolError naming v2Checkpoint", err, err)
	}
	t.Logf("Take refused: %v", err)
	rr, err := snapshot.Changes(ctx, m.w.DB, m.w.CI, m.batches[0][0], m.batches[0][1], 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tb.AppendChanges(ctx, m.w.CI, 1, rr)
	rr.Release()
	if !errors.As(err, &upe) || !strings.Contains(upe.Feature, "v2Checkpoint") {
		t.Fatalf("AppendChanges on a v2-checkpoint table: %v; want an *UnsupportedProtocolError naming v2Checkpoint", err)
	}
	_, err = snapshot.Backfill(ctx, m.w.DB, tb, m.backfillOpts())
	if !errors.As(err, &upe) || !strings.Contains(upe.Feature, "v2Checkpoint") {
		t.Fatalf("Backfill on a v2-checkpoint table: %v; want an *UnsupportedProtocolError naming v2Checkpoint", err)
	}
	st, _ := m.w.DB.Stats("dbo", m.w.Shape.Name)
	if st.RangeReads != 0 || st.Seeks != 0 {
		t.Errorf("the refused calls read the source: %+v", st)
	}
	if d := diffTrees(before, treeOf(t, m.dir)); d != "" {
		t.Errorf("the refused calls changed the table's folder:\n%s", d)
	}
	return true
}

// verifyRewritten checks that compaction rewrote every data file under a
// new name, that one of the new files mixes instance A's snapshot rows
// with its change rows, and, after VACUUM, that the old files are gone.
func verifyRewritten(t *testing.T, ctx context.Context, engine string, m *maintTable) {
	tb := openMaint(t, ctx, m.dir)
	defer tb.Close()
	files, err := tb.Files(ctx)
	if err != nil {
		t.Fatalf("Files after %s %s: %v", engine, m.op, err)
	}
	old := map[string]bool{}
	for _, f := range m.files {
		old[f] = true
	}
	mixed := 0
	for _, f := range files {
		if old[f.Path] {
			t.Fatalf("%s %s kept Go's file %s live", engine, m.op, f.Path)
		}
		c := countFile(t, ctx, filepath.Join(m.dir, filepath.FromSlash(f.Path)), m.w.CI)
		if c.snapshot > 0 && c.changes > 0 {
			mixed++
		}
	}
	if mixed == 0 {
		t.Fatalf("%s %s: no live file holds both snapshot and change rows of %s (%d files)", engine, m.op, m.w.CI, len(files))
	}
	gone := 0
	for f := range old {
		if !exists(filepath.Join(m.dir, filepath.FromSlash(f))) {
			gone++
		}
	}
	if (m.op == "vacuum" || m.op == "compound") && gone != len(old) {
		t.Fatalf("%s VACUUM left %d of Go's %d rewritten files on disk", engine, len(old)-gone, len(old))
	}
	t.Logf("%s %s: %d live files, all new, %d mixing snapshot and change rows; %d of Go's %d files deleted", engine, m.op, len(files), mixed, gone, len(old))
}

// rerun runs every step of the bootstrap again on a fresh Table, as a
// restarted process would.
func rerun(t *testing.T, ctx context.Context, m *maintTable) {
	w := m.w
	var logBuf syncBuffer
	tb, err := blobstore.Open(ctx, m.dir, delta.Options{Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	defer func() {
		// Which path found what: the sink logs each find from the rows.
		var fromRows []string
		for _, line := range strings.Split(logBuf.String(), "\n") {
			if strings.Contains(line, "table's rows") {
				if _, msg, ok := strings.Cut(line, "msg="); ok {
					line = "msg=" + msg
				}
				if !slices.Contains(fromRows, line) {
					fromRows = append(fromRows, line)
				}
			}
		}
		found := func(what string) bool {
			for _, l := range fromRows {
				if strings.Contains(l, what) {
					return true
				}
			}
			return false
		}
		whats := []string{"msg=\"snapshot found", "msg=\"last change batch found", "msg=\"chunked snapshot found"}
		switch {
		case t.Failed():
		case m.op == "txn-retention" || m.op == "compound":
			for _, what := range whats {
				if !found(what) {
					t.Errorf("the txn records are gone but the sink logged no %s...from the table's rows\" (it logged %q)", what, fromRows)
				}
			}
			t.Logf("found from the rows:\n%s", strings.Join(fromRows, "\n"))
		default:
			if len(fromRows) > 0 {
				t.Errorf("the txn records are there but the sink used the rows: %q", fromRows)
			}
		}
	}()

	// The whole snapshot: found, the same, nothing read.
	w.DB.ResetStats()
	res, err := snapshot.Take(ctx, w.DB, tb, m.takeOpts())
	if err != nil {
		t.Fatalf("rerun Take: %v", err)
	}
	st, _ := w.DB.Stats("dbo", w.Shape.Name)
	if !res.Existing || res.LSN != m.snap.LSN || res.Rows != 0 {
		t.Fatalf("rerun Take returned %+v; want the existing snapshot at %s (a second snapshot was taken)", res, m.snap.LSN)
	}
	if st.RangeReads != 0 || st.Seeks != 0 || st.RowsReturned != 0 {
		t.Fatalf("rerun Take read the source: %+v", st)
	}
	c := countTable(t, ctx, tb, w.CI)
	if c.snapshotRows != m.snap.Rows || len(c.snapshotLSNs) != 1 || !c.snapshotLSNs[m.snap.LSN.String()] {
		t.Fatalf("the table holds %d snapshot rows of %s with _snapshot %v; want %d at %s", c.snapshotRows, w.CI, c.snapshotLSNs, m.snap.Rows, m.snap.LSN)
	}

	// Applied change batches: nothing added.
	v0, err := tb.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, br := range m.batches {
		appendBatch(t, ctx, tb, w, int64(i+1), br[0], br[1])
	}
	if v, _ := tb.Version(ctx); v != v0 {
		t.Fatalf("rerunning applied batches 1..%d committed versions %d..%d", len(m.batches), v0+1, v)
	}
	if n := countTable(t, ctx, tb, w.CI).all; n != c.all {
		t.Fatalf("rerunning applied batches changed the table from %d to %d rows", c.all, n)
	}

	// The chunked snapshot: resumed, not restarted, and completed.
	w.DB.ResetStats()
	bres, err := snapshot.Backfill(ctx, w.DB, tb, m.backfillOpts())
	if err != nil {
		t.Fatalf("rerun Backfill: %v", err)
	}
	if !bres.Resumed || bres.PlanID != m.chunked.PlanID || bres.LSN != m.chunked.LSN || !bres.Complete || bres.Waves != maintChunks-maintCommitted {
		t.Fatalf("rerun Backfill returned %+v; want plan %s at %s resumed with %d waves and complete", bres, m.chunked.PlanID, m.chunked.LSN, maintChunks-maintCommitted)
	}
	if st, err := tb.FindChunked(ctx, m.wb.CI); err != nil || st.PlanID != m.chunked.PlanID || !st.Complete || st.Committed != maintChunks {
		t.Fatalf("FindChunked after the rerun: %+v, %v; want plan %s complete", st, err, m.chunked.PlanID)
	}
	// Table.ChunkedSnapshots lists from the txn records only: noted, not
	// required (the rerun finds the snapshot through FindChunked).
	if all, err := tb.ChunkedSnapshots(ctx); err != nil || countInstance(all, m.wb.CI) != 1 {
		t.Logf("note: Table.ChunkedSnapshots lists %d chunked snapshots of %s (%v)", countInstance(all, m.wb.CI), m.wb.CI, err)
	}
	if _, err := checkKeysOnce(t, ctx, m.wb, tb); err != nil {
		t.Fatalf("chunked snapshot rows: %v", err)
	}

	// A new batch of each instance after the maintenance lands once, and
	// both latest images equal the source.
	for range 30 {
		w.Change(t, rand.New(rand.NewPCG(uint64(len(m.dir)), 7)))
	}
	to := w.MaxLSN(t)
	from, _ := m.batches[len(m.batches)-1][1].Next()
	vA := appendBatch(t, ctx, tb, w, maintBatches+1, from, to)
	fromB, _ := m.chunked.LSN.Next()
	vB := appendBatch(t, ctx, tb, m.wb, 1, fromB, to)
	if vB != vA+1 {
		t.Fatalf("new batches committed versions %d and %d", vA, vB)
	}
	for _, x := range []*testworld.World{w, m.wb} {
		want, err := snapshot.SourceImage(ctx, x.DB, x.Instance(t))
		if err != nil {
			t.Fatal(err)
		}
		got, err := tableImage(t, ctx, x, tb)
		if err != nil {
			t.Fatal(err)
		}
		if d := want.Diff(got, 5); len(d) > 0 {
			t.Fatalf("latest image of %s differs from the source:\n%s", x.CI, strings.Join(d, "\n"))
		}
	}
	t.Logf("rerun: snapshot found (%d rows at %s, nothing read), batches 1..%d added nothing, chunked snapshot resumed at chunk %d and completed; images of %s and %s equal the source",
		m.snap.Rows, m.snap.LSN, maintBatches, maintCommitted, w.CI, m.wb.CI)
}

func countInstance(all []sink.Chunked, ci string) int {
	n := 0
	for _, c := range all {
		if sink.SameInstance(c.CaptureInstance, ci) {
			n++
		}
	}
	return n
}

// checkKeysOnce checks that w's instance has each key in exactly one
// snapshot (chunk) row and as many as the source has rows.
func checkKeysOnce(t *testing.T, ctx context.Context, w *testworld.World, tb *delta.Table) (int, error) {
	ci := w.Instance(t)
	key, err := ci.KeyColumns()
	if err != nil {
		return 0, err
	}
	im := snapshot.NewImage(ci.Columns, key)
	rr, err := tb.ReadAll(ctx)
	if err != nil {
		return 0, err
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		inst := rec.Column(rec.Schema().FieldIndices(sink.ColCaptureInstance)[0]).(*array.String)
		op := rec.Column(rec.Schema().FieldIndices(sink.ColOperation)[0]).(*array.Int32)
		keep := make([]bool, rec.NumRows())
		for i := range keep {
			keep[i] = inst.IsValid(i) && sink.SameInstance(inst.Value(i), w.CI) && op.IsValid(i) && op.Value(i) == sink.OperationSnapshot
		}
		sub, err := filter(rec, keep)
		if err != nil {
			return 0, err
		}
		err = im.AddRows(sub) // a key twice is an error
		sub.Release()
		if err != nil {
			return 0, err
		}
	}
	if err := rr.Err(); err != nil {
		return 0, err
	}
	src, err := snapshot.SourceImage(ctx, w.DB, ci)
	if err != nil {
		return 0, err
	}
	if im.Len() != src.Len() {
		return im.Len(), fmt.Errorf("%d chunk rows of %s, the source has %d rows", im.Len(), w.CI, src.Len())
	}
	return im.Len(), nil
}

type tableCount struct {
	all          int64
	snapshotRows int64           // instance A's whole-snapshot rows (_operation 0, _chunk NULL)
	snapshotLSNs map[string]bool // their _snapshot values
}

func countTable(t *testing.T, ctx context.Context, tb *delta.Table, ci string) tableCount {
	t.Helper()
	c := tableCount{snapshotLSNs: map[string]bool{}}
	rr, err := tb.ReadAll(ctx)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		inst := col(sink.ColCaptureInstance).(*array.String)
		op := col(sink.ColOperation).(*array.Int32)
		chunk := col(sink.ColChunk).(*array.Int32)
		snap := col(sink.ColSnapshot).(*array.String)
		c.all += rec.NumRows()
		for i := range int(rec.NumRows()) {
			if inst.IsValid(i) && sink.SameInstance(inst.Value(i), ci) && op.IsValid(i) && op.Value(i) == sink.OperationSnapshot && chunk.IsNull(i) {
				c.snapshotRows++
				c.snapshotLSNs[snap.ValueStr(i)] = true
			}
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	return c
}

type fileCount struct{ snapshot, changes int64 }

// countFile counts ci's snapshot and change rows in one Parquet data file,
// read directly (not through the sink).
func countFile(t *testing.T, ctx context.Context, path, ci string) fileCount {
	t.Helper()
	tbl := readParquet(t, ctx, path)
	defer tbl.Release()
	var c fileCount
	insts := tbl.Schema().FieldIndices(sink.ColCaptureInstance)
	ops := tbl.Schema().FieldIndices(sink.ColOperation)
	if len(insts) != 1 || len(ops) != 1 {
		t.Fatalf("%s has no %s or %s column", path, sink.ColCaptureInstance, sink.ColOperation)
	}
	ic, oc := tbl.Column(insts[0]).Data().Chunks(), tbl.Column(ops[0]).Data().Chunks()
	for k := range ic {
		for i := range ic[k].Len() {
			if ic[k].IsNull(i) || !sink.SameInstance(ic[k].ValueStr(i), ci) {
				continue
			}
			if oc[k].ValueStr(i) == "0" {
				c.snapshot++
			} else {
				c.changes++
			}
		}
	}
	return c
}

func readParquet(t *testing.T, ctx context.Context, path string) arrow.Table {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	tbl, err := fr.ReadTable(ctx)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return tbl
}

var (
	commitRE     = regexp.MustCompile(`^(\d{20})\.json$`)
	checkpointRE = regexp.MustCompile(`^(\d{20})\.checkpoint(\.\d{10}\.\d{10}|\.[0-9a-fA-F-]{36})?\.(parquet|json)$`)
	partsRE      = regexp.MustCompile(`\.checkpoint\.\d{10}\.(\d{10})\.parquet$`)
)

// checkpoints returns the checkpoint files of the table's log (classic,
// multi-part and v2) and the version of each.
func checkpoints(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "_delta_log"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, e := range ents {
		if m := checkpointRE.FindStringSubmatch(e.Name()); m != nil {
			v, err := strconv.ParseInt(m[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = v
		}
	}
	return out
}

func checkpointParts(name string) int {
	m := partsRE.FindStringSubmatch(name)
	if m == nil {
		return 1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// logTxns reads every txn action the table's log holds, in its JSON commits
// and in its checkpoints (every part; v2 sidecars too), straight from the
// files: appId -> the highest version seen.
func logTxns(t *testing.T, ctx context.Context, dir string) map[string]int64 {
	t.Helper()
	logDir := filepath.Join(dir, "_delta_log")
	out := map[string]int64{}
	add := func(app string, v int64) {
		if old, ok := out[app]; !ok || v > old {
			out[app] = v
		}
	}
	err := filepath.WalkDir(logDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := d.Name()
		isCommit := commitRE.MatchString(name)
		isSidecar := filepath.Base(filepath.Dir(p)) == "_sidecars" && !strings.HasPrefix(name, ".") &&
			(strings.HasSuffix(name, ".parquet") || strings.HasSuffix(name, ".json"))
		if !isCommit && !checkpointRE.MatchString(name) && !isSidecar {
			return nil
		}
		if strings.HasSuffix(name, ".json") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, line := range strings.Split(string(b), "\n") {
				var a struct {
					Txn *struct {
						AppID   string `json:"appId"`
						Version int64  `json:"version"`
					} `json:"txn"`
				}
				if line == "" || json.Unmarshal([]byte(line), &a) != nil || a.Txn == nil {
					continue
				}
				add(a.Txn.AppID, a.Txn.Version)
			}
			return nil
		}
		tbl := readParquet(t, ctx, p)
		defer tbl.Release()
		idx := tbl.Schema().FieldIndices("txn")
		if len(idx) == 0 {
			return nil
		}
		for _, ch := range tbl.Column(idx[0]).Data().Chunks() {
			s := ch.(*array.Struct)
			st := s.DataType().(*arrow.StructType)
			ai, _ := st.FieldIdx("appId")
			vi, _ := st.FieldIdx("version")
			for i := range s.Len() {
				if s.IsNull(i) || s.Field(ai).IsNull(i) {
					continue
				}
				var v int64
				fmt.Sscan(s.Field(vi).ValueStr(i), &v)
				add(s.Field(ai).ValueStr(i), v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func hasPrefix(m map[string]int64, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func txnIDs(m map[string]int64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// treeOf lists every file under dir with its size and modification time.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = fmt.Sprintf("%d bytes, %s", fi.Size(), fi.ModTime().Format(time.RFC3339Nano))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffTrees(a, b map[string]string) string {
	var d []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			d = append(d, "removed "+k)
		} else if w != v {
			d = append(d, "changed "+k+": "+v+" -> "+w)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d = append(d, "added "+k)
		}
	}
	sort.Strings(d)
	return strings.Join(d, "\n")
}

// syncBuffer is a bytes.Buffer for a logger that goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// The helpers below are for other tests of the package that need an
// engine's interpreter at once; the maintenance tests themselves start the
// install and the engine as one child process.
var _, _ = maintPython, sparkPython

// maintPython is the delta-rs interpreter: $CDCSNAP_PYTHON (set by
// internal/testrun), else the venv .ci/pyenv creates (idempotent). For
// tests that need it at once (the maintenance tests start theirs as a
// child process instead).
func maintPython(t *testing.T) string {
	t.Helper()
	if py := os.Getenv(testenv.PythonEnv); py != "" {
		return py
	}
	testenv.Need(t, "delta-rs maintenance", testenv.Python3)
	return installer(t, "delta-rs maintenance", "pyenv")
}

// sparkPython is the Spark interpreter: $CDCSNAP_SPARK_PYTHON, else the
// venv .ci/sparkenv creates (pyspark, delta-spark and the Delta jar in the
// local Maven repository; idempotent, about 90 s the first time).
func sparkPython(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		testenv.Skip(t, "Spark maintenance", "-short", "go test ./reliability (without -short)")
	}
	needSpark(t, "Spark maintenance")
	if py := os.Getenv(sparkPythonEnv); py != "" {
		return py
	}
	return installer(t, "Spark maintenance", "sparkenv")
}

// installer runs .ci/<script>, which installs what a suite needs and prints
// its python; it skips the suite only when the install fails.
func installer(t *testing.T, suite, script string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := exec.Command("bash", filepath.Join(root, ".ci", script))
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		testenv.SkipUnavailable(t, suite, testenv.Offline(suite, registries[script], ".ci/"+script, fmt.Sprintf("%v\n%s", err, stderr.String())))
	}
	py := strings.TrimSpace(string(out))
	t.Logf(".ci/%s: %s (%s)", script, py, time.Since(start).Round(time.Millisecond))
	return py
}
