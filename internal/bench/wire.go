package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"github.com/cdcsnap/cdcsnap/internal/tdsserver"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// The wire benchmark (-wire): source/sqlserver reading the benchmark's
// shape through go-mssqldb from a TDS server on loopback
// (internal/tdsserver) that computes the rows as the generator does,
// beside the generator read directly, in the same run. The server runs in
// a child process, so the client's CPU and allocations are measured alone;
// its profiles are split by owner (clientParts).

// wireColumns are the generator's columns as SQL Server sends them.
func wireColumns(g *Gen) []tdsserver.Column {
	cols := make([]tdsserver.Column, len(g.ci.Columns))
	for i, c := range g.ci.Columns {
		cols[i] = tdsserver.Column{Name: c.Name, Type: c.Declared(), Collation: c.Collation, Nullable: c.Nullable}
	}
	return cols
}

// wireInstance is the generator's capture instance as CaptureInstance
// would describe it from SQL Server: the varchar columns' code page known.
func wireInstance(g *Gen) *source.CaptureInstance {
	ci := g.ci
	ci.Columns = append([]source.Column(nil), ci.Columns...)
	for i, c := range ci.Columns {
		if c.Type == "varchar" {
			ci.Columns[i].CodePage = 1252
		}
	}
	return &ci
}

var (
	lowerRE = regexp.MustCompile(`\[id\] >= CAST\(@p(\d+) AS bigint\)`)
	upperRE = regexp.MustCompile(`\[id\] < CAST\(@p(\d+) AS bigint\)`)
)

// genServer answers the range reads source/sqlserver sends for the
// generator's table (one integer key: one piece per range), SET
// TRANSACTION ISOLATION LEVEL and SET LOCK_TIMEOUT, computing each row
// from its number.
type genServer struct{ g *Gen }

func (s genServer) Serve(ctx context.Context, req *tdsserver.Request, w *tdsserver.ResponseWriter) error {
	if strings.HasPrefix(req.SQL, "SET TRANSACTION ISOLATION LEVEL ") || strings.HasPrefix(req.SQL, "SET LOCK_TIMEOUT ") {
		return nil
	}
	if label, ok := isShapeStatement(req.SQL); ok {
		return s.serveShape(ctx, label, w)
	}
	if !strings.HasPrefix(req.SQL, "SELECT [id], ") || !strings.Contains(req.SQL, "[customer]") || strings.Contains(req.SQL, "UNION ALL") {
		return fmt.Errorf("bench: not a range read of the generator: %.80q", req.SQL)
	}
	param := func(re *regexp.Regexp) (int64, bool, error) {
		m := re.FindStringSubmatch(req.SQL)
		if m == nil {
			return 0, false, nil
		}
		n, _ := strconv.Atoi(m[1])
		if n < 1 || n > len(req.Params) {
			return 0, false, fmt.Errorf("bench: @p%d not sent", n)
		}
		v, ok := req.Params[n-1].Value.(int64)
		if !ok {
			return 0, false, fmt.Errorf("bench: @p%d is %T", n, req.Params[n-1].Value)
		}
		return v, true, nil
	}
	var r keyrange.Range
	if v, ok, err := param(lowerRE); err != nil {
		return err
	} else if ok {
		r.Lower = keyrange.Tuple{v}
	}
	if v, ok, err := param(upperRE); err != nil {
		return err
	} else if ok {
		r.Upper = keyrange.Tuple{v}
	}
	lo, hi, err := s.g.Bounds(r)
	if err != nil {
		return err
	}
	cols := wireColumns(s.g)
	// A column the statement casts to varbinary (source/sqlserver reads
	// nchar and nvarchar so, and char and varchar through nvarchar) is sent
	// as its UTF-16 bytes.
	asBytes := make([]bool, len(cols))
	for i, c := range cols {
		if m := regexp.MustCompile(`CAST\((?:CAST\()?\[` + regexp.QuoteMeta(c.Name) + `\](?: AS nvarchar\([0-9a-z]+\)\))? AS (varbinary\([0-9a-z]+\))\) AS \[`).FindStringSubmatch(req.SQL); m != nil {
			cols[i].Type, cols[i].Collation, asBytes[i] = m[1], "", true
		}
	}
	// A decimal the statement scales to a bigint (CAST([amount] * @pN AS
	// bigint)) is sent as its unscaled integer.
	scaled := strings.Contains(req.SQL, "CAST([amount] * @p")
	if scaled {
		cols[4].Type = "bigint"
	}
	if err := w.Columns(cols); err != nil {
		return err
	}
	var buf []byte
	vals := make([]any, len(cols))
	for i := lo; i < hi; i++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		v := s.g.Values(i)
		vals[0], vals[1], vals[2], vals[3] = v[0], v[1], v[2], v[3]
		if scaled {
			vals[4] = int64(v[4].(decimal128.Num).LowBits())
		} else {
			buf = append(buf[:0], v[4].(decimal128.Num).ToString(4)...)
			vals[4] = string(buf)
		}
		vals[5] = v[5].(arrow.Timestamp).ToTime(arrow.Microsecond)
		vals[6] = nil
		if ts, ok := v[6].(arrow.Timestamp); ok {
			vals[6] = ts.ToTime(arrow.Microsecond)
		}
		vals[7] = v[7]
		for j, b := range asBytes {
			if s, ok := vals[j].(string); ok && b {
				vals[j] = utf16LE(s)
			}
		}
		if err := w.Row(vals...); err != nil {
			return err
		}
	}
	return nil
}

// utf16LE is s in UTF-16LE, as SQL Server casts nvarchar to varbinary.
func utf16LE(s string) []byte {
	b := make([]byte, 0, 2*len(s))
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u), byte(u>>8))
	}
	return b
}

// countRanges reads ranges in parallel from src, counting rows.
func countRanges(ctx context.Context, src source.Source, ci *source.CaptureInstance, ranges []keyrange.Range) (int64, error) {
	counts := make([]int64, len(ranges))
	err := inParallel(len(ranges), func(i int) (err error) {
		counts[i], err = readOne(ctx, src, ci, ranges[i])
		return err
	})
	var total int64
	for _, n := range counts {
		total += n
	}
	return total, err
}

func readOne(ctx context.Context, src source.Source, ci *source.CaptureInstance, r keyrange.Range) (int64, error) {
	rr, err := src.ReadRange(ctx, ci, r, source.ReadOptions{BatchRows: defaultGenBatch})
	if err != nil {
		return 0, err
	}
	defer rr.Release()
	var n int64
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	return n, rr.Err()
}

// wireServer is a genServer in a child process (bench -child-tds), so the
// client's CPU, allocations and profile are its own.
type wireServer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	dsn string
}

func startWireServer(rows int64, packetSize int) (*wireServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-child-tds", strconv.FormatInt(rows, 10), strconv.Itoa(packetSize))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &wireServer{cmd: cmd, in: in, out: bufio.NewReader(out)}
	line, err := s.out.ReadString('\n')
	if err != nil {
		s.close()
		return nil, fmt.Errorf("bench -child-tds: %w", err)
	}
	s.dsn = strings.TrimSpace(line)
	return s, nil
}

// cpu asks the server process for its CPU time so far.
func (s *wireServer) cpu() (time.Duration, error) {
	if _, err := io.WriteString(s.in, "cpu\n"); err != nil {
		return 0, err
	}
	line, err := s.out.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	return time.Duration(n), err
}

func (s *wireServer) close() {
	s.in.Close()
	_ = s.cmd.Wait()
}

// startGenServer serves g's table over TDS on loopback as user "bench"
// (DSN("bench")).
func startGenServer(ctx context.Context, g *Gen) (*tdsserver.Server, error) {
	return tdsserver.Start(ctx, genServer{g}, tdsserver.Options{User: "bench", Password: "bench-Passw0rd", NoRecord: true})
}

// childTDS is bench -child-tds ROWS PACKETSIZE: it serves the generator's
// rows over TDS, prints the DSN, answers each "cpu" line on stdin with its
// CPU nanoseconds, and exits when stdin closes.
func childTDS(args []string) {
	rows, packet := childArgs(args, "-child-tds ROWS PACKETSIZE", 2)
	srv, err := startGenServer(context.Background(), NewGen(rows, 0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench -child-tds:", err)
		os.Exit(1)
	}
	defer srv.Close()
	dsn := srv.DSN("bench")
	if packet > 0 {
		dsn += "&packet+size=" + strconv.Itoa(packet)
	}
	fmt.Println(dsn)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fmt.Println(int64(cpuNow()))
	}
}

// runWire runs the wire benchmark and prints its table and where the
// client's CPU went.
func runWire(ctx context.Context, cfg config, w io.Writer) error {
	fmt.Fprintf(w, "machine: %s\n", machine())
	if cfg.profile {
		if err := os.MkdirAll(cfg.out, 0o755); err != nil {
			return err
		}
	}
	for _, n := range cfg.rows {
		if err := wireTable(ctx, cfg, n, w); err != nil {
			return err
		}
	}
	return nil
}

func wireTable(ctx context.Context, cfg config, n int64, w io.Writer) error {
	srv, err := startWireServer(n, cfg.packetSize)
	if err != nil {
		return err
	}
	defer srv.close()
	db, err := sqlserver.Open(srv.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	src, err := sqlserver.New(db, sqlserver.Options{})
	if err != nil {
		return err
	}
	g := NewGen(n, 0)
	ci := wireInstance(g)
	fmt.Fprintf(w, "\nRead path over TDS: %d rows of the benchmark shape (bigint key, 8 columns), packet size %s, batches of %d rows\n\n", n, packetLabel(cfg.packetSize), defaultGenBatch)
	fmt.Fprintln(w, "| partitions | rows/s over the wire | client CPU µs/row | client allocs/row | server CPU µs/row | generator rows/s | generator CPU µs/row |")
	fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	var profile string
	for _, p := range cfg.partitions {
		ranges := keyrange.UniformRanges(1, n, p)
		var best measure
		var allocs, srvCPU float64
		for rep := 0; rep < max(cfg.reps, 1); rep++ {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			s0, err := srv.cpu()
			if err != nil {
				return err
			}
			m, err := timedRead(ctx, src, ci, ranges, "")
			if err != nil {
				return err
			}
			s1, err := srv.cpu()
			if err != nil {
				return err
			}
			runtime.ReadMemStats(&after)
			if m.Rows != n {
				return fmt.Errorf("bench: read %d rows over the wire, want %d", m.Rows, n)
			}
			if best.Seconds == 0 || m.Seconds < best.Seconds {
				best = m
				allocs = float64(after.Mallocs-before.Mallocs) / float64(m.Rows)
				srvCPU = (s1 - s0).Seconds() * 1e6 / float64(m.Rows)
			}
		}
		// The profiles come from one more read, after the timed ones (warm
		// pool, no profiler in the table's figures).
		if p == cfg.partitions[0] && cfg.profile {
			profile = filepath.Join(cfg.out, fmt.Sprintf("wire-%d-p%d.cpu.pprof", n, p))
			if _, err := timedRead(ctx, src, ci, ranges, profile); err != nil {
				return err
			}
		}
		var gen measure
		for rep := 0; rep < max(cfg.reps, 1); rep++ {
			gci := g.ci
			m, err := timedRead(ctx, g, &gci, ranges, "")
			if err != nil {
				return err
			}
			if gen.Seconds == 0 || m.Seconds < gen.Seconds {
				gen = m
			}
		}
		fmt.Fprintf(w, "| %d | %.0f | %.2f | %.2f | %.2f | %.0f | %.2f |\n", p, best.rowsPerSec(), best.cpuPerRow(), allocs, srvCPU, gen.rowsPerSec(), gen.cpuPerRow())
	}
	if profile != "" {
		return printSplit(w, profile, n)
	}
	return nil
}

func packetLabel(n int) string {
	if n == 0 {
		return "4096 (go-mssqldb's default)"
	}
	return strconv.Itoa(n)
}

// timedRead reads ranges in parallel and returns the rows, wall time and
// process CPU. With prof set it writes a CPU profile of the read there, and
// allocation profiles before and after it to prof+".allocs.base" and
// prof+".allocs".
func timedRead(ctx context.Context, src source.Source, ci *source.CaptureInstance, ranges []keyrange.Range, prof string) (measure, error) {
	read := func() (measure, error) {
		return withCPU(func() (measure, error) {
			start := time.Now()
			n, err := countRanges(ctx, src, ci, ranges)
			return measure{Rows: n, Seconds: time.Since(start).Seconds()}, err
		})
	}
	if prof == "" {
		return read()
	}
	if err := writeAllocs(prof + ".allocs.base"); err != nil {
		return measure{}, err
	}
	var m measure
	err := cpuProfile(prof, func() (err error) { m, err = read(); return err })
	if werr := writeAllocs(prof + ".allocs"); err == nil {
		err = werr
	}
	return m, err
}

// pprofTotal runs go tool pprof -top on a profile and returns the sum of
// its samples that pass args' filters (every node shown, none dropped).
func pprofTotal(prof string, args ...string) (float64, error) {
	cmd := exec.Command("go", append(append([]string{"tool", "pprof", "-top", "-nodecount=1000000", "-nodefraction=0", "-edgefraction=0", "-unit=s"}, args...), prof)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("go tool pprof: %v: %s", err, stderr.String())
	}
	total := 0.0
	sc := bufio.NewScanner(&out)
	started := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 5 && f[0] == "flat" {
			started = true
			continue
		}
		if !started || len(f) < 6 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(f[0], "s"), 64)
		if err != nil {
			return 0, fmt.Errorf("go tool pprof: unexpected line %q", sc.Text())
		}
		total += v
	}
	return total, sc.Err()
}

// clientParts attribute profile samples in priority order: a sample goes
// to the first part with a matching frame on its stack (pprof's -focus; the
// earlier parts' patterns are -ignore'd), so no sample counts twice. The
// driver comes first, so the runtime work its calls cause is its own;
// cdcsnap code that database/sql calls (driverValue.Scan) counts as
// database/sql.
var clientParts = []struct{ name, focus string }{
	{"go-mssqldb: packets, tokens, values (UTF-16 to string), and what they allocate", `go-mssqldb`},
	{"database/sql: Rows.Next, Scan", `^database/sql\.`},
	{"cdcsnap: source/sqlserver's decode into Arrow builders", `cdcsnap/source/sqlserver`},
	{"garbage collector (background mark workers)", `gcBgMarkWorker`},
}

// printSplit prints where the client's CPU and allocations went in the
// profiles written by timedRead at prof, for a read of rows rows.
func printSplit(w io.Writer, prof string, rows int64) error {
	allocArgs := []string{"-sample_index=alloc_objects", "-base=" + prof + ".allocs.base"}
	cpuTotal, err := pprofTotal(prof)
	if err != nil {
		return err
	}
	allocTotal, err := pprofTotal(prof+".allocs", allocArgs...)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nWhere the client's CPU and allocations went (%s: %.2f s of CPU samples, %.1f allocations/row sampled; go tool pprof -focus/-ignore):\n\n", filepath.Base(prof), cpuTotal, allocTotal/float64(rows))
	fmt.Fprintln(w, "| part | CPU share | allocations/row |")
	fmt.Fprintln(w, "| --- | ---: | ---: |")
	cpuRest, allocRest := cpuTotal, allocTotal
	var earlier []string
	for _, p := range clientParts {
		filter := []string{"-focus=" + p.focus}
		if len(earlier) > 0 {
			filter = append(filter, "-ignore="+strings.Join(earlier, "|"))
		}
		earlier = append(earlier, p.focus)
		c, err := pprofTotal(prof, filter...)
		if err != nil {
			return err
		}
		a, err := pprofTotal(prof+".allocs", append(allocArgs, filter...)...)
		if err != nil {
			return err
		}
		cpuRest -= c
		allocRest -= a
		fmt.Fprintf(w, "| %s | %.0f%% | %.2f |\n", p.name, 100*c/cpuTotal, a/float64(rows))
	}
	if cpuRest < -0.01*cpuTotal || allocRest < -0.01*allocTotal {
		return fmt.Errorf("bench: the parts of %s add up to more than its total", prof)
	}
	fmt.Fprintf(w, "| other (scheduler, profiler, the benchmark's own loop) | %.0f%% | %.2f |\n", 100*cpuRest/cpuTotal, allocRest/float64(rows))
	return nil
}
