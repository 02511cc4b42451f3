// Command bench measures cdcsnap's snapshot throughput against the
// physical limit (its Parquet writer, internal/pqfile, alone) and against
// delta-rs, its memory at two table sizes, the cost of keyset planning, and
// allocations per row. The pipeline is timed twice per cell: from the row
// generator, and from the limit's own input (replaySource), which leaves
// out the generator's share of the cores.
// Every figure that compares two things comes from runs side by side in one
// process (or in child processes of it), so ratios hold on a noisy machine.
//
//	go run ./internal/bench -smoke                       # CI guard, < 60 s
//	go run ./internal/bench -rows 1000000,10000000 -partitions 1,2,4,8
//	go run ./internal/bench -resume -rows 10000000 -partitions 10,20
//
// See BENCHMARKS.md at the repository root for what each figure includes.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cdcsnap/cdcsnap/source"
)

// smokeMinRatio is the "from IPC/limit" ratio under which -smoke fails.
// It is that ratio, not pipeline/limit, that -smoke checks: both read the
// same records, so it measures what the library costs beside the writer,
// where pipeline/limit also pays for the generator on the same two cores
// (BENCHMARKS.md, "The whole pipeline against the Parquet writer alone").
const smokeMinRatio = 0.70

func sourceOpts() source.ReadOptions { return source.ReadOptions{BatchRows: defaultGenBatch} }

type config struct {
	rows          []int64
	partitions    []int
	composite     int64 // companies of the composite-key runs (0: none)
	compositeRows []int64
	reps          int
	peer          bool
	memRows       []int64
	memParts      []int
	planRows      []int64
	planCompanies []int64
	planParts     []int
	profile       bool
	out           string
	work          string
	smoke         bool
	wire          bool // -wire: the read path over TDS instead
	wirePeers     bool // -wire-peers: the read path beside Microsoft's drivers
	wireShapes    bool // -wire-shapes: go-mssqldb's cost per row by result shape
	resume        bool // -resume: a snapshot failed at 90 % and resumed
	packetSize    int
	tune          tuning
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-child-mem" {
		childMem(os.Args[2:])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "-child-tds" {
		childTDS(os.Args[2:])
		return
	}
	var (
		cfg                                      config
		rows, parts, compRows, memRows, memParts string
		planRows, planCompanies, planParts       string
	)
	flag.BoolVar(&cfg.smoke, "smoke", false, "short run for CI: 200k rows, 2 partitions, best of 5; fails under (pipeline from IPC)/limit "+strconv.FormatFloat(smokeMinRatio, 'f', 2, 64))
	flag.StringVar(&rows, "rows", "1000000", "table sizes (bigint key), comma-separated")
	flag.StringVar(&parts, "partitions", "1,2,4,8", "partition counts")
	flag.Int64Var(&cfg.composite, "companies", 20, "companies of the composite-key (company, id) runs; 0 skips them")
	flag.StringVar(&compRows, "composite-rows", "1000000", "table sizes of the composite-key runs")
	flag.IntVar(&cfg.reps, "reps", 1, "repetitions of each timed run (best is kept)")
	flag.BoolVar(&cfg.peer, "peer", true, "run the delta-rs peer (needs CDCSNAP_PYTHON or .cache/venv)")
	flag.StringVar(&memRows, "mem-rows", "1000000,10000000", "sizes of the memory runs (each in a fresh child process); empty skips")
	flag.StringVar(&memParts, "mem-partitions", "2,8", "partition counts of the memory runs")
	flag.StringVar(&planRows, "plan-rows", "40000,1000000", "sizes of the planning-cost runs (fake); empty skips")
	flag.StringVar(&planCompanies, "plan-companies", "1,3,20", "companies of the planning-cost runs")
	flag.StringVar(&planParts, "plan-partitions", "4,8", "partition counts of the planning-cost runs")
	flag.BoolVar(&cfg.profile, "profile", true, "write CPU and allocation profiles of the first size at 2 partitions to -out")
	flag.StringVar(&cfg.out, "out", "internal/bench/out", "folder for profiles and results.json")
	flag.StringVar(&cfg.work, "work", "", "scratch folder for tables and IPC files (default: a temp folder, removed at the end)")
	flag.IntVar(&cfg.tune.ReadAhead, "read-ahead", 0, "snapshot.Options.ReadAhead (0: the library's default, 2; -1: none)")
	flag.IntVar(&cfg.tune.RowGroupRows, "row-group-rows", 0, "experiment: delta.Options.RowGroupRows (and the limit's row groups)")
	flag.IntVar(&cfg.tune.Parallelism, "parallelism", 0, "experiment: snapshot.Options.Parallelism")
	flag.StringVar(&cfg.tune.LimitCodec, "limit-codec", "", "experiment: the limit's Parquet codec (snappy, lz4_raw, zstd, zstd-fastest, uncompressed); sink/delta keeps Snappy")
	flag.StringVar(&cfg.tune.LimitEncoding, "limit-encoding", "", "experiment: delta-int gives every plain integer and timestamp column of the limit DELTA_BINARY_PACKED, ascending or not; sink/delta gives it to the ascending ones")
	flag.IntVar(&cfg.tune.LimitPageBytes, "limit-page-bytes", 0, "experiment: the limit's Parquet data page size in bytes; sink/delta keeps parquetprops.DataPageBytes")
	flag.StringVar(&cfg.tune.LimitWriter, "limit-writer", "", "experiment: the limit's Parquet writer, pqfile (the default: sink/delta's) or pqarrow (arrow-go's pqarrow.FileWriter, the limit issue 20 names)")
	flag.BoolVar(&cfg.wire, "wire", false, "measure the read path over TDS instead: source/sqlserver through go-mssqldb from internal/tdsserver on loopback, beside the generator")
	flag.BoolVar(&cfg.wirePeers, "wire-peers", false, "measure the read path beside Microsoft's drivers instead: cdcsnap's path, go-mssqldb's Scan loop, mssql-python + ODBC Driver 18 (Arrow fetch) and mssql-jdbc read one table (-rows) from internal/tdsserver, interleaved; -peer=false leaves out the two peers, which install on demand (.ci/pyenv, .ci/jdbcenv)")
	flag.BoolVar(&cfg.wireShapes, "wire-shapes", false, "measure go-mssqldb's own cost per row instead: the table's values (-rows) sent by internal/tdsserver in five result shapes, from source/sqlserver's 8 columns to one packed varbinary per row and the key alone, each read on one connection with no decoding, interleaved")
	flag.BoolVar(&cfg.resume, "resume", false, "measure resuming instead: per size and partition count, a clean snapshot, one failed at 90 % of its rows, and its resume (how many rows it reads again); -parallelism sets the workers (default 2)")
	flag.IntVar(&cfg.packetSize, "packet-size", 0, "with -wire: the TDS packet size the client asks for (0: go-mssqldb's default, 4096)")
	flag.Parse()
	if cfg.smoke {
		rows, parts, compRows, memRows, planRows = "200000", "2", "", "", ""
		cfg.reps, cfg.peer, cfg.profile = 5, false, false
	}
	var err error
	must := func(e error) {
		if e != nil && err == nil {
			err = e
		}
	}
	cfg.rows, err = ints64(rows)
	cfg.partitions = ints(parts, must)
	c, e := ints64(compRows)
	must(e)
	cfg.compositeRows = c
	m, e := ints64(memRows)
	must(e)
	cfg.memRows = m
	cfg.memParts = ints(memParts, must)
	p, e := ints64(planRows)
	must(e)
	cfg.planRows = p
	p, e = ints64(planCompanies)
	must(e)
	cfg.planCompanies = p
	cfg.planParts = ints(planParts, must)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if cfg.composite == 0 {
		cfg.compositeRows = nil
	}
	if cfg.tune != (tuning{}) {
		if err := cfg.tune.apply(); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
	}
	if cfg.resume {
		if err := runResume(context.Background(), cfg, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if cfg.wireShapes {
		if err := runWireShapes(context.Background(), cfg, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if cfg.wirePeers {
		if err := runWirePeers(context.Background(), cfg, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if cfg.wire {
		if err := runWire(context.Background(), cfg, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	ratio, err := run(context.Background(), cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if cfg.smoke {
		line, ok := smokeVerdict(ratio)
		fmt.Println(line)
		if !ok {
			os.Exit(1)
		}
	}
}

// smokeVerdict is the smoke's last line and whether the ratio passes.
func smokeVerdict(ratio float64) (string, bool) {
	return fmt.Sprintf("bench smoke: pipeline from IPC/limit = %.2f (>= %.2f required)", ratio, smokeMinRatio), ratio >= smokeMinRatio
}

func ints64(s string) ([]int64, error) {
	var out []int64
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.ParseInt(strings.ReplaceAll(f, "_", ""), 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func ints(s string, must func(error)) []int {
	v, err := ints64(s)
	must(err)
	out := make([]int, len(v))
	for i, n := range v {
		out[i] = int(n)
	}
	return out
}

// throughput is one (key, rows, partitions) row of the main table.
type throughput struct {
	Key        string
	Rows       int64
	Partitions int
	ArrowBytes int64 // bytes of the bronze records (the IPC file)
	Pipeline   measure
	Limit      measure
	GenOnly    measure
	Replay     measure // the pipeline from replaySource: the limit's input
}

func (t throughput) ratio() float64 { return t.Pipeline.rowsPerSec() / t.Limit.rowsPerSec() }

// replayRatio is the pipeline's speed against the limit's when both read
// the same records: what the library costs, without the generator's share
// of the cores.
func (t throughput) replayRatio() float64 { return t.Replay.rowsPerSec() / t.Limit.rowsPerSec() }

// peerRow compares delta-rs with sink/delta on the same IPC file.
type peerRow struct {
	Rows       int64
	DeltaRS    peerResult
	Sink       map[int]measure // by writers
	ArrowBytes int64
}

type results struct {
	Tuning     tuning
	Machine    string
	Started    time.Time
	Seconds    float64
	Throughput []throughput
	Peer       []peerRow
	Memory     []memResult
	Planning   []planCost
	Allocs     []allocResult
}

// allocResult counts heap allocations per row of one in-process run.
type allocResult struct {
	What         string
	Rows         int64
	Allocs       uint64
	AllocPerRow  float64
	BytesPerRow  float64
	BatchRows    int
	AllocPerBtch float64
}

func best(ms []measure) measure {
	return slices.MinFunc(ms, func(a, b measure) int { return int((a.Seconds - b.Seconds) * 1e9) })
}

// run measures what cfg asks for, writes the report to w and returns the
// smoke's figure: the lowest "from IPC/limit" over the cells.
func run(ctx context.Context, cfg config, w io.Writer) (float64, error) {
	res := results{Tuning: tune, Machine: machine(), Started: time.Now()}
	work := cfg.work
	if work == "" {
		d, err := os.MkdirTemp("", "cdcsnap-bench-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(d)
		work = d
	}
	if err := os.MkdirAll(cfg.out, 0o777); err != nil {
		return 0, err
	}
	fmt.Fprintf(w, "machine: %s\n", res.Machine)
	if cfg.tune != (tuning{}) {
		fmt.Fprintf(w, "experiments: %s\n", cfg.tune)
	}
	type job struct {
		key       string
		rows      int64
		companies int64
	}
	var jobs []job
	for _, n := range cfg.rows {
		jobs = append(jobs, job{"bigint", n, 0})
	}
	for _, n := range cfg.compositeRows {
		jobs = append(jobs, job{fmt.Sprintf("(company,id) %d co.", cfg.composite), n, cfg.composite})
	}
	python := pythonPath()
	for ji, j := range jobs {
		g := NewGen(j.rows, j.companies)
		ipcPath := filepath.Join(work, "bronze.arrow")
		mat, err := materialize(ctx, g, ipcPath)
		if err != nil {
			return 0, fmt.Errorf("materializing %d rows: %w", j.rows, err)
		}
		fmt.Fprintf(os.Stderr, "%s %d rows: IPC file %.0f MB in %.1fs\n", j.key, j.rows, float64(mat.OutBytes)/1e6, mat.Seconds)
		m, err := mapIPC(ipcPath)
		if err != nil {
			return 0, err
		}
		replay, err := newReplaySource(g, m)
		if err != nil {
			return 0, err
		}
		for _, p := range cfg.partitions {
			t := throughput{Key: j.key, Rows: j.rows, Partitions: p, ArrowBytes: mat.OutBytes}
			var lim, pipe, gen, rep []measure
			for range cfg.reps {
				runtime.GC()
				l, err := withCPU(func() (measure, error) { return runLimit(m, p, filepath.Join(work, "limit")) })
				if err != nil {
					return 0, fmt.Errorf("limit: %w", err)
				}
				runtime.GC()
				pp, err := withCPU(func() (measure, error) { return runPipeline(ctx, g, p, filepath.Join(work, "pipeline")) })
				if err != nil {
					return 0, fmt.Errorf("pipeline: %w", err)
				}
				runtime.GC()
				gg, err := withCPU(func() (measure, error) { return runGenOnly(ctx, g, p) })
				if err != nil {
					return 0, fmt.Errorf("generator only: %w", err)
				}
				runtime.GC()
				rp, err := withCPU(func() (measure, error) { return runPipeline(ctx, replay, p, filepath.Join(work, "pipeline")) })
				if err != nil {
					return 0, fmt.Errorf("pipeline from the IPC file: %w", err)
				}
				if l.Rows != j.rows || pp.Rows != j.rows || gg.Rows != j.rows || rp.Rows != j.rows {
					return 0, fmt.Errorf("row counts: limit %d, pipeline %d, generator %d, pipeline from IPC %d, want %d", l.Rows, pp.Rows, gg.Rows, rp.Rows, j.rows)
				}
				lim, pipe, gen, rep = append(lim, l), append(pipe, pp), append(gen, gg), append(rep, rp)
			}
			t.Limit, t.Pipeline, t.GenOnly, t.Replay = best(lim), best(pipe), best(gen), best(rep)
			res.Throughput = append(res.Throughput, t)
			fmt.Fprintf(os.Stderr, "  P=%d pipeline %.2fs limit %.2fs generator+stamp %.2fs ratio %.2f; from IPC %.2fs ratio %.2f\n",
				p, t.Pipeline.Seconds, t.Limit.Seconds, t.GenOnly.Seconds, t.ratio(), t.Replay.Seconds, t.replayRatio())
		}
		if cfg.profile && ji == 0 {
			if err := profiles(ctx, g, m, cfg.out, work, &res); err != nil {
				return 0, err
			}
		}
		if cfg.peer && j.companies == 0 {
			if python == "" {
				fmt.Fprintln(os.Stderr, "delta-rs peer skipped: set CDCSNAP_PYTHON (see .ci/pyenv)")
			} else {
				pr := peerRow{Rows: j.rows, Sink: map[int]measure{}, ArrowBytes: mat.OutBytes}
				var peers []peerResult
				sinks := map[int][]measure{}
				for range max(cfg.reps, 1) {
					runtime.GC()
					r, err := runPeer(ctx, python, peerScript(), ipcPath, filepath.Join(work, "deltars"))
					if err != nil {
						return 0, err
					}
					peers = append(peers, r)
					for _, wr := range []int{1, 2} {
						runtime.GC()
						s, err := withCPU(func() (measure, error) { return runSinkFromIPC(ctx, m, wr, filepath.Join(work, "sinkipc")) })
						if err != nil {
							return 0, fmt.Errorf("sink/delta from IPC: %w", err)
						}
						sinks[wr] = append(sinks[wr], s)
					}
				}
				pr.DeltaRS = slices.MinFunc(peers, func(a, b peerResult) int { return int((a.Seconds - b.Seconds) * 1e9) })
				for wr, ms := range sinks {
					pr.Sink[wr] = best(ms)
				}
				res.Peer = append(res.Peer, pr)
				fmt.Fprintf(os.Stderr, "  delta-rs %.2fs, sink/delta 1 writer %.2fs, 2 writers %.2fs\n", pr.DeltaRS.Seconds, pr.Sink[1].Seconds, pr.Sink[2].Seconds)
			}
		}
		if err := m.close(); err != nil {
			return 0, err
		}
		if err := os.Remove(ipcPath); err != nil {
			return 0, err
		}
	}
	for _, n := range cfg.memRows {
		for _, p := range cfg.memParts {
			mr, err := runChildMem(n, p, work)
			if err != nil {
				return 0, err
			}
			res.Memory = append(res.Memory, mr)
			fmt.Fprintf(os.Stderr, "memory %d rows P=%d: peak heap %.0f MiB, VmHWM %.0f MiB\n", n, p, mib(mr.PeakHeap), mib(mr.VmHWM))
		}
	}
	for _, n := range cfg.planRows {
		for _, c := range cfg.planCompanies {
			pc, err := measurePlanning(ctx, n, c, cfg.planParts)
			if err != nil {
				return 0, err
			}
			res.Planning = append(res.Planning, pc...)
		}
	}
	res.Seconds = time.Since(res.Started).Seconds()
	report(w, &res)
	if b, err := json.MarshalIndent(res, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(cfg.out, "results.json"), b, 0o666)
	}
	// The smoke's figure: the worst "from IPC/limit" over what ran.
	ratio := 0.0
	for i, t := range res.Throughput {
		if i == 0 || t.replayRatio() < ratio {
			ratio = t.replayRatio()
		}
	}
	return ratio, nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d cores (GOMAXPROCS %d), %s %s/%s, GOGC=%s GOMEMLIMIT=%s", model, runtime.NumCPU(), runtime.GOMAXPROCS(0),
		runtime.Version(), runtime.GOOS, runtime.GOARCH, envOr("GOGC", "default"), envOr("GOMEMLIMIT", "default"))
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// pythonPath is CDCSNAP_PYTHON, else .cache/venv's python when present.
func pythonPath() string {
	if p := os.Getenv("CDCSNAP_PYTHON"); p != "" {
		return p
	}
	if _, err := os.Stat(".cache/venv/bin/python"); err == nil {
		p, _ := filepath.Abs(".cache/venv/bin/python")
		return p
	}
	return ""
}

func peerScript() string { return filepath.Join("internal", "bench", "peer.py") }

// profiles writes CPU profiles of the pipeline, the limit and sink/delta
// from IPC (2 partitions / writers), an allocation profile of the
// pipeline, and counts allocations per row.
func profiles(ctx context.Context, g *Gen, m *mapped, out, work string, res *results) error {
	cpu := func(name string, f func() error) error {
		runtime.GC()
		return cpuProfile(filepath.Join(out, name), f)
	}
	if err := cpu("cpu-pipeline.pprof", func() error { _, err := runPipeline(ctx, g, 2, filepath.Join(work, "prof")); return err }); err != nil {
		return err
	}
	if err := cpu("cpu-limit.pprof", func() error { _, err := runLimit(m, 2, filepath.Join(work, "prof")); return err }); err != nil {
		return err
	}
	if err := cpu("cpu-sink-ipc.pprof", func() error {
		_, err := runSinkFromIPC(ctx, m, 2, filepath.Join(work, "prof"))
		return err
	}); err != nil {
		return err
	}
	count := func(what string, f func() (measure, error)) error {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ms, err := f()
		runtime.ReadMemStats(&after)
		if err != nil {
			return err
		}
		a := after.Mallocs - before.Mallocs
		res.Allocs = append(res.Allocs, allocResult{What: what, Rows: ms.Rows, Allocs: a,
			AllocPerRow: float64(a) / float64(ms.Rows), BytesPerRow: float64(after.TotalAlloc-before.TotalAlloc) / float64(ms.Rows),
			BatchRows: defaultGenBatch, AllocPerBtch: float64(a) / (float64(ms.Rows) / defaultGenBatch)})
		return nil
	}
	if err := count("generator + stamp (discard sink), 2 partitions", func() (measure, error) { return runGenOnly(ctx, g, 2) }); err != nil {
		return err
	}
	if err := count("Parquet writer (limit) from IPC, 2 writers", func() (measure, error) { return runLimit(m, 2, filepath.Join(work, "prof")) }); err != nil {
		return err
	}
	if err := count("sink/delta from IPC, 2 writers", func() (measure, error) { return runSinkFromIPC(ctx, m, 2, filepath.Join(work, "prof")) }); err != nil {
		return err
	}
	if err := count("pipeline (generator -> snapshot.Take -> sink/delta), 2 partitions", func() (measure, error) {
		return runPipeline(ctx, g, 2, filepath.Join(work, "prof"))
	}); err != nil {
		return err
	}
	// Allocation profile of one more pipeline run, every allocation sampled
	// at the default rate.
	runtime.GC()
	if _, err := runPipeline(ctx, g, 2, filepath.Join(work, "prof")); err != nil {
		return err
	}
	return writeAllocs(filepath.Join(out, "allocs-pipeline.pprof"))
}

// cpuProfile writes a CPU profile of f to path.
func cpuProfile(path string, f func() error) error {
	pf, err := os.Create(path)
	if err != nil {
		return err
	}
	defer pf.Close()
	if err := pprof.StartCPUProfile(pf); err != nil {
		return err
	}
	err = f()
	pprof.StopCPUProfile()
	return err
}

// writeAllocs writes the allocation profile to path, after a GC: the
// profile is as of the last one.
func writeAllocs(path string) error {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// memResult is one child process's memory.
type memResult struct {
	Rows       int64   `json:"rows"`
	Partitions int     `json:"partitions"`
	Seconds    float64 `json:"seconds"`
	PeakHeap   uint64  `json:"peak_heap"` // max sampled heap objects bytes (runtime/metrics, every 5 ms)
	VmHWM      uint64  `json:"vm_hwm"`    // peak RSS (/proc/self/status)
}

// runChildMem re-executes this binary to run the pipeline once in a fresh
// process.
func runChildMem(rows int64, partitions int, work string) (memResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return memResult{}, err
	}
	cmd := exec.Command(exe, "-child-mem", strconv.FormatInt(rows, 10), strconv.Itoa(partitions), filepath.Join(work, "mem"))
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), tuningEnv+"="+tune.String())
	out, err := cmd.Output()
	if err != nil {
		return memResult{}, fmt.Errorf("memory child (%d rows, %d partitions): %w", rows, partitions, err)
	}
	var r memResult
	if err := json.Unmarshal(out, &r); err != nil {
		return memResult{}, fmt.Errorf("memory child output %q: %w", out, err)
	}
	return r, nil
}

// childArgs parses a child's ROWS and integer second argument, exiting
// with usage when args are not n of them.
func childArgs(args []string, usage string, n int) (int64, int) {
	if len(args) != n {
		fmt.Fprintln(os.Stderr, "bench "+usage)
		os.Exit(2)
	}
	rows, err1 := strconv.ParseInt(args[0], 10, 64)
	second, err2 := strconv.Atoi(args[1])
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "bench "+usage+": bad arguments", args)
		os.Exit(2)
	}
	return rows, second
}

// childMem is the child side: args are rows, partitions, table folder.
func childMem(args []string) {
	rows, parts := childArgs(args, "-child-mem ROWS PARTITIONS DIR", 3)
	var t tuning
	if err := json.Unmarshal([]byte(cmp.Or(os.Getenv(tuningEnv), "{}")), &t); err != nil {
		fmt.Fprintln(os.Stderr, "bench -child-mem:", err)
		os.Exit(2)
	}
	if err := t.apply(); err != nil {
		fmt.Fprintln(os.Stderr, "bench -child-mem:", err)
		os.Exit(2)
	}
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	m, err := runPipeline(context.Background(), NewGen(rows, 0), parts, args[2])
	close(stop)
	<-done
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench -child-mem:", err)
		os.Exit(1)
	}
	_ = os.RemoveAll(args[2])
	r := memResult{Rows: m.Rows, Partitions: parts, Seconds: m.Seconds, PeakHeap: peak.Load(), VmHWM: vmHWM()}
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

// vmHWM reads the peak resident set size from /proc/self/status.
func vmHWM() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
