package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/cdcsnap/cdcsnap/internal/objstore"
	"github.com/cdcsnap/cdcsnap/internal/testenv"
	"github.com/cdcsnap/cdcsnap/internal/testworld"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	_ "github.com/cdcsnap/cdcsnap/sink/delta/alldrivers" // s3://, gs://, azblob:// targets
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// TestObjectStores runs the bootstrap's guarantees against real
// object-store servers started on loopback (package internal/objstore):
// moto for S3, Azurite for Azure Blob, fake-gcs-server for GCS. For each,
// after checking that a second put-if-absent of one key is refused:
// 8 processes racing to bootstrap one table land one snapshot; a torn
// commit or data-file upload leaves nothing visible; reruns after SIGKILL
// recover; and delta-rs reads the table through the same server with the
// source's rows.
func TestObjectStores(t *testing.T) {
	if testing.Short() {
		t.Skip("object-store servers skipped in -short mode")
	}
	for _, kind := range []string{"s3", "azure", "gcs"} {
		t.Run(kind, func(t *testing.T) {
			st := startStore(t, kind)
			r := rand.New(rand.NewPCG(testworld.Seed(t, *seedFlag), 40))
			t.Run("PutIfAbsent", func(t *testing.T) { storePutIfAbsent(t, st) })
			if t.Failed() {
				return // the rest would rest on a store that races
			}
			t.Run("READMEExample", func(t *testing.T) { storeREADMEExample(t, st) })
			t.Run("MissingBucketNamed", func(t *testing.T) { storeMissingBucket(t, st) })
			var raced string
			var racedSeed uint64
			t.Run("EightProcessesOneSnapshot", func(t *testing.T) { raced, racedSeed = storeRace(t, st, r) })
			t.Run("TornUploadInvisible", func(t *testing.T) { storeTorn(t, st, r) })
			t.Run("SIGKILLRerunRecovers", func(t *testing.T) { storeKill(t, st, r) })
			t.Run("DeltaRSReads", func(t *testing.T) {
				if raced == "" {
					t.Skip("the race left no table")
				}
				storeDeltaRS(t, st, raced, racedSeed)
			})
		})
	}
}

// startStore starts the server of kind, skipping t only when its package
// cannot be installed, sets the driver's environment for the test (and so
// for its child processes) and stops the server at the end.
func startStore(t *testing.T, kind string) *objstore.Store {
	t.Helper()
	ctx := context.Background()
	var st *objstore.Store
	var err error
	t0 := time.Now()
	switch kind {
	case "s3":
		// Serial: moto checks If-None-Match and then stores without a
		// lock; one request at a time makes it as atomic as S3 is.
		st, err = objstore.StartS3(ctx, objstore.S3Options{Serial: true})
	case "azure":
		st, err = objstore.StartAzure(ctx, t.TempDir())
	case "gcs":
		st, err = objstore.StartGCS(ctx)
	}
	testenv.SkipUnavailable(t, "object store "+kind, err)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	setEnv(t, st.Env())
	t.Logf("%s server up at %s in %v", kind, st.Endpoint, time.Since(t0).Round(time.Millisecond))
	return st
}

func setEnv(t *testing.T, env []string) {
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// openStoreBucket opens the bucket behind a table URL (its folder as the
// prefix), as delta.Open does.
func openStoreBucket(t *testing.T, st *objstore.Store, table string) *blob.Bucket {
	t.Helper()
	b, err := blob.OpenBucket(context.Background(), st.URL(table))
	if err != nil {
		t.Fatal(err)
	}
	p := blob.PrefixedBucket(b, strings.Trim(table, "/")+"/")
	t.Cleanup(func() { _ = p.Close(); _ = b.Close() })
	return p
}

// storePutIfAbsent checks the server itself: a second put-if-absent of one
// key fails with FailedPrecondition and leaves the first body.
func storePutIfAbsent(t *testing.T, st *objstore.Store) {
	ctx := context.Background()
	b := openStoreBucket(t, st, "probe")
	w := &blob.WriterOptions{IfNotExist: true}
	if err := b.WriteAll(ctx, "k", []byte("first"), w); err != nil {
		t.Fatalf("first put-if-absent: %v", err)
	}
	err := b.WriteAll(ctx, "k", []byte("second"), w)
	if code := gcerrors.Code(err); code != gcerrors.FailedPrecondition {
		t.Fatalf("%s: a second put-if-absent of one key returned %v (%v): the store cannot guarantee one commit per version", st.Kind, err, code)
	}
	if got, err := b.ReadAll(ctx, "k"); err != nil || string(got) != "first" {
		t.Fatalf("after the refused put the key holds %q (%v)", got, err)
	}
}

// storeRace starts 8 processes (the test binary re-executed as TestSIGKILL's
// child) bootstrapping one instance into one table on the store: one commits
// the snapshot, the others return it; the log's commit files are versions
// 0..n, each once, and the rows are the source's. It returns the table and
// the world's seed.
func storeRace(t *testing.T, st *objstore.Store, r *rand.Rand) (string, uint64) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	url, s := st.URL("race"), r.Uint64()
	prepareKillTable(t, url, s)
	t0 := time.Now()
	if err := raceBootstraps(exe, url, s, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	versions := commitVersions(t, st, "race")
	for i, v := range versions {
		if v != int64(i) {
			t.Fatalf("commit files are versions %v, want 0..%d each once", versions, len(versions)-1)
		}
	}
	if len(versions) != 2 {
		t.Fatalf("commit files %v: want 2 (the other instance's batch, one snapshot)", versions)
	}
	verifyKillTable(t, url, s, true)
	t.Logf("8 processes, one snapshot (commit versions %v before the change check), in %v", versions, time.Since(t0).Round(time.Millisecond))
	return "race", s
}

var storeCommitRE = regexp.MustCompile(`^_delta_log/(\d{20})\.json$`)

// commitVersions lists the table's commit files' versions, ascending.
func commitVersions(t *testing.T, st *objstore.Store, table string) []int64 {
	t.Helper()
	var out []int64
	for _, k := range keys(t, openStoreBucket(t, st, table)) {
		if m := storeCommitRE.FindStringSubmatch(k); m != nil {
			var v int64
			if _, err := fmt.Sscan(m[1], &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// logKeys lists the keys under the table's _delta_log.
func logKeys(t *testing.T, st *objstore.Store, table string) []string {
	var out []string
	for _, k := range keys(t, openStoreBucket(t, st, table)) {
		if strings.HasPrefix(k, "_delta_log/") {
			out = append(out, k)
		}
	}
	return out
}

// storeTorn tears, through a proxy, first every upload of a data file,
// then (the partitions written, the bootstrap resuming them) every upload
// of the snapshot's commit file: each bootstrap fails, the
// log's keys are as before, no snapshot or row of the instance is
// visible, and every Parquet object on the server is whole. A bootstrap
// after the proxy stops tearing lands one snapshot with the source's rows.
func storeTorn(t *testing.T, st *objstore.Store, r *rand.Rand) {
	px, err := objstore.NewProxy(st.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	setEnv(t, st.EnvVia(px.HostPort()))
	const table = "torn"
	url, s := st.URLVia(px.HostPort(), table), r.Uint64()
	prepareKillTable(t, url, s)
	before := logKeys(t, st, table)
	for _, c := range []struct {
		what string
		re   *regexp.Regexp
	}{
		{"data file", regexp.MustCompile(`/part-[^/?]*\.parquet`)},
		{"commit file", regexp.MustCompile(`/_delta_log/\d{20}\.json`)},
	} {
		px.Tear(c.re)
		n0 := px.Torn()
		w := killWorld(t, s)
		sopts, topts := killOptions(w)
		tb, err := blobstore.Open(context.Background(), url, topts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t0 := time.Now()
		_, err = snapshot.Take(ctx, w.DB, tb, sopts)
		cancel()
		_ = tb.Close()
		px.Tear(nil)
		if err == nil {
			t.Fatalf("%s uploads torn (%d), but the bootstrap succeeded", c.what, px.Torn()-n0)
		}
		if px.Torn() == n0 {
			t.Fatalf("no %s upload went through the proxy: %v", c.what, err)
		}
		t.Logf("%d %s uploads torn; the bootstrap failed in %v: %.200s", px.Torn()-n0, c.what, time.Since(t0).Round(time.Millisecond), err)
		if after := logKeys(t, st, table); strings.Join(after, ",") != strings.Join(before, ",") {
			t.Fatalf("torn %s uploads changed the log: %v, was %v", c.what, after, before)
		}
		if verifyKillTable(t, url, s, false) {
			t.Fatalf("torn %s uploads, yet a snapshot is visible", c.what)
		}
		wholeParquet(t, st, table)
	}
	// The rerun with nothing torn.
	w := killWorld(t, s)
	sopts, topts := killOptions(w)
	tb, err := blobstore.Open(context.Background(), url, topts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := snapshot.Take(context.Background(), w.DB, tb, sopts)
	_ = tb.Close()
	if err != nil || res.Existing {
		t.Fatalf("the rerun after torn uploads: %+v, %v", res, err)
	}
	verifyKillTable(t, url, s, true)
}

// wholeParquet checks that every Parquet object of the table on the
// server starts and ends with the magic PAR1: no upload left a torn one.
func wholeParquet(t *testing.T, st *objstore.Store, table string) {
	t.Helper()
	ctx := context.Background()
	b := openStoreBucket(t, st, table)
	for _, k := range keys(t, b) {
		if !strings.HasSuffix(k, ".parquet") {
			continue
		}
		data, err := b.ReadAll(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) < 8 || string(data[:4]) != "PAR1" || string(data[len(data)-4:]) != "PAR1" {
			t.Fatalf("%s on the server is a torn Parquet file (%d bytes)", k, len(data))
		}
	}
}

// storeKill SIGKILLs bootstraps into a table on the store at random points
// (a few times, the delay drawn within one calibrated bootstrap), checking
// after each kill that the table holds no snapshot or the right one, then
// reruns to completion: one snapshot, every row once.
func storeKill(t *testing.T, st *objstore.Store, r *rand.Rand) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	child := func(url string, seed uint64) *exec.Cmd {
		_ = os.Remove(ready)
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), killDirEnv+"="+url, fmt.Sprintf("%s=%d", killSeedEnv, seed), killReadyEnv+"="+ready)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		return cmd
	}
	// Calibrate on a table of its own.
	var full time.Duration
	{
		url, s := st.URL("kill-calibrate"), r.Uint64()
		prepareKillTable(t, url, s)
		cmd := child(url, s)
		if err := cmd.Run(); err != nil {
			t.Fatalf("calibration child: %v\n%s", err, cmdStderr(cmd))
		}
		var out killOutcome
		if err := json.Unmarshal(cmdStdout(cmd), &out); err != nil {
			t.Fatalf("calibration output: %v", err)
		}
		full = max(out.Take, time.Millisecond)
	}
	var kills, landed, partial int
	for folder := range 2 {
		url, s := st.URL(fmt.Sprint("kill-", folder)), r.Uint64()
		prepareKillTable(t, url, s)
		done := false
		for k := 0; k < 3 && !done; k++ {
			cmd := child(url, s)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
				if _, err := os.Stat(ready); err == nil {
					break
				}
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
					t.Fatalf("the child never started its bootstrap: %s", cmdStderr(cmd))
				}
			}
			time.Sleep(time.Duration(r.Int64N(int64(full))))
			_ = cmd.Process.Kill() // SIGKILL
			_ = cmd.Wait()
			kills++
			done = verifyKillTable(t, url, s, false)
			if done {
				landed++
			} else if p, ok := killPartial(t, url, s); ok && len(p.Parts) > 0 {
				partial++
			}
		}
		cmd := child(url, s)
		if err := cmd.Run(); err != nil {
			t.Fatalf("rerun after kills: %v\n%s", err, cmdStderr(cmd))
		}
		var out killOutcome
		if err := json.Unmarshal(cmdStdout(cmd), &out); err != nil {
			t.Fatalf("rerun output: %v", err)
		}
		if out.Result.Existing != done {
			t.Fatalf("the rerun returned Existing=%v, a snapshot had landed: %v", out.Result.Existing, done)
		}
		if _, ok := killPartial(t, url, s); ok {
			t.Fatal("after the rerun a partial snapshot is still recorded")
		}
		verifyKillTable(t, url, s, true)
	}
	t.Logf("a bootstrap takes %v; %d kills (%d after the commit, %d left partitions recorded); every rerun recovered", full, kills, landed, partial)
}

// deltaRSRead is run by the interop Python: it reads the table with
// delta-rs through the server (storage options on stdin, never on the
// command line) and writes its rows to a local Parquet file.
const deltaRSRead = `
import json, os, sys
from deltalake import DeltaTable
import pyarrow.parquet as pq
opts = json.load(sys.stdin)
dt = DeltaTable(sys.argv[1], storage_options=opts)
t = dt.to_pyarrow_table()
pq.write_table(t, sys.argv[2])
print(json.dumps({"version": dt.version(), "rows": t.num_rows, "files": len(dt.file_uris())}))
# deltalake 1.6.6 with pyarrow can abort during interpreter shutdown
# ("terminate called without an active exception"): the answer is out.
sys.stdout.flush()
os._exit(0)
`

// storeDeltaRS reads the raced table with delta-rs (Python deltalake, the
// interop venv) through the server, and checks its rows of the instance:
// each once, stamped with the snapshot's LSN, equal to the source's.
func storeDeltaRS(t *testing.T, st *objstore.Store, table string, seed uint64) {
	py, err := objstore.Python()
	testenv.SkipUnavailable(t, "delta-rs reads tables on object-store servers", err)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "rows.parquet")
	cmd := exec.Command(py, "-c", deltaRSRead, st.DeltaRSURI(table), out)
	cmd.Env = append(os.Environ(), st.DeltaRSEnv()...)
	opts, err := json.Marshal(st.DeltaRSOptions())
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = bytes.NewReader(opts)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("delta-rs reading %s: %v\n%s", st.DeltaRSURI(table), err, lastLines(stderr.String(), 8))
	}
	t.Logf("delta-rs: %s", bytes.TrimSpace(stdout))

	ctx := context.Background()
	tb, w := openKillTable(t, st.URL(table), seed)
	defer tb.Close()
	sn := instanceSnapshots(t, ctx, tb, w.CI)
	if len(sn) != 1 {
		t.Fatalf("%d snapshots of the instance", len(sn))
	}
	rr := parquetRecords(t, out)
	defer rr.Release()
	got, err := imageOf(t, w, rr, sn[0])
	if err != nil {
		t.Fatalf("delta-rs's rows: %v", err)
	}
	// The raced table took changes after the snapshot (verifyKillTable's
	// convergence check): compare delta-rs's snapshot rows with the Go
	// reader's, and their count with the snapshot's record.
	mine, err := checkSnapshotRowsOnly(t, ctx, w, tb, sn[0])
	if err != nil {
		t.Fatal(err)
	}
	if d := mine.Diff(got, 5); len(d) > 0 {
		t.Fatalf("delta-rs's %d snapshot rows differ from the Go reader's %d: %v; the other way: %v", got.Len(), mine.Len(), d, got.Diff(mine, 3))
	}
	if got.Len() != int(sn[0].Rows) {
		t.Fatalf("delta-rs read %d snapshot rows, the snapshot holds %d", got.Len(), sn[0].Rows)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// parquetRecords reads a local Parquet file's records.
func parquetRecords(t *testing.T, path string) array.RecordReader {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pf.Close() })
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1024}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

// imageOf is the image of the snapshot rows (operation 0, stamped with
// want's LSN) of w's instance in rr; a key twice is an error.
func imageOf(t testing.TB, w *testworld.World, rr array.RecordReader, want sink.Snapshot) (*snapshot.Image, error) {
	ci := w.Instance(t)
	key, err := ci.KeyColumns()
	if err != nil {
		return nil, err
	}
	im := snapshot.NewImage(ci.Columns, key)
	for rr.Next() {
		rec := rr.RecordBatch()
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		inst, op, snap := col(sink.ColCaptureInstance), col(sink.ColOperation), col(sink.ColSnapshot)
		// Add each run of kept rows as a slice (helpers_test.go's filter
		// returns only the first run when there are several).
		keep := func(i int) bool {
			return !inst.IsNull(i) && sink.SameInstance(inst.ValueStr(i), w.CI) &&
				op.ValueStr(i) == fmt.Sprint(sink.OperationSnapshot) && !snap.IsNull(i) && snap.ValueStr(i) == want.LSN.String()
		}
		n := int(rec.NumRows())
		for i := 0; i < n; {
			if !keep(i) {
				i++
				continue
			}
			j := i
			for j < n && keep(j) {
				j++
			}
			sub := rec.NewSlice(int64(i), int64(j))
			err := im.AddRows(sub)
			sub.Release()
			if err != nil {
				return nil, err
			}
			i = j
		}
	}
	return im, rr.Err()
}

// checkSnapshotRowsOnly is imageOf over the Go reader's rows of tb.
func checkSnapshotRowsOnly(t testing.TB, ctx context.Context, w *testworld.World, tb *delta.Table, want sink.Snapshot) (*snapshot.Image, error) {
	rr, err := tb.ReadAll(ctx)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	return imageOf(t, w, rr, want)
}
