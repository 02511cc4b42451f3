package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// The peers benchmark (-wire-peers): one table of the benchmark's shape,
// served by internal/tdsserver in a child process (genServer), read whole
// on one connection by cdcsnap's read path (source/sqlserver into Arrow
// record batches), go-mssqldb's plain database/sql Scan loop, Microsoft's
// ODBC Driver 18 through mssql-python's Arrow fetch (peer_odbc.py) and
// mssql-jdbc (JdbcRead.java, a warm JVM), interleaved: each round runs
// every client, each client several passes in one process, and the last
// pass counts (the JVM's JIT warm, caches full). A table row is the median
// over the rounds. Client CPU per row is the client process's user +
// system time over the pass divided by the rows: the stable figure on a
// shared machine (the server's CPU is not in it).

// wirePeerPasses is the passes each client reads per round; the last counts.
const wirePeerPasses = 2

// jdbcPasses is mssql-jdbc's passes per round: its JIT needs more.
const jdbcPasses = 4

// wirePeer is one client of the peers benchmark.
type wirePeer struct {
	name string
	// read reads the query passes times and returns each pass's figures.
	read func(ctx context.Context, passes int) ([]measure, error)
	// passes is how many passes a round reads.
	passes int
	// allocs: the client runs in this process, so its measures count its
	// heap allocations.
	allocs bool
}

// peerPass is what peer_odbc.py and JdbcRead print per pass.
type peerPass struct {
	Rows int64   `json:"rows"`
	Secs float64 `json:"seconds"`
	CPU  float64 `json:"cpu_seconds"`
}

// readPeerPasses runs a peer's command and reads its JSON lines.
func readPeerPasses(ctx context.Context, name string, cmd *exec.Cmd) ([]measure, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", name, err, lastLines(stderr.String(), 5))
	}
	var ms []measure
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var p peerPass
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return nil, fmt.Errorf("%s: output %q: %w", name, sc.Text(), err)
		}
		ms = append(ms, measure{Rows: p.Rows, Seconds: p.Secs, CPU: p.CPU})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("%s printed no pass", name)
	}
	return ms, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// odbcPeer returns the mssql-python + ODBC Driver 18 peer, installing the
// pinned package on demand (.ci/pyenv), or why it cannot run.
func odbcPeer(port, user, password, query string) (wirePeer, error) {
	py := pythonPath()
	version := ""
	check := func(py string) error {
		out, err := exec.Command(py, "-c", "import mssql_python.ddbc_bindings, mssql_python; print(mssql_python.__version__)").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s cannot load mssql-python with ODBC Driver 18: %s", py, lastLines(string(out), 1))
		}
		version = strings.TrimSpace(string(out))
		return nil
	}
	if py == "" || check(py) != nil {
		fmt.Fprintln(os.Stderr, "bench: installing the pinned mssql-python (.ci/pyenv)")
		cmd := exec.Command("bash", filepath.Join(".ci", "pyenv"))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return wirePeer{}, fmt.Errorf(".ci/pyenv: %w", err)
		}
		py = strings.TrimSpace(string(out))
	}
	if err := check(py); err != nil {
		return wirePeer{}, err
	}
	p := wirePeer{name: "mssql-python " + version + " + ODBC Driver 18, Arrow fetch", passes: wirePeerPasses}
	p.read = func(ctx context.Context, passes int) ([]measure, error) {
		cmd := exec.CommandContext(ctx, py, filepath.Join("internal", "bench", "peer_odbc.py"), port, user, password, query, fmt.Sprint(passes))
		return readPeerPasses(ctx, p.name, cmd)
	}
	return p, nil
}

// jdbcPeer returns the mssql-jdbc peer, downloading the pinned jar on
// demand (.ci/jdbcenv) and compiling JdbcRead.java, or why it cannot run.
func jdbcPeer(work, host, port, user, password, query string) (wirePeer, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return wirePeer{}, errors.New("no java on PATH")
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		return wirePeer{}, errors.New("no javac on PATH")
	}
	jar := os.Getenv("CDCSNAP_MSSQL_JDBC")
	if jar == "" {
		cmd := exec.Command("bash", filepath.Join(".ci", "jdbcenv"))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return wirePeer{}, fmt.Errorf(".ci/jdbcenv (mvn from Maven Central): %w", err)
		}
		jar = strings.TrimSpace(string(out))
	}
	classes := filepath.Join(work, "jdbc-classes")
	if out, err := exec.Command(javac, "-d", classes, filepath.Join("internal", "bench", "JdbcRead.java")).CombinedOutput(); err != nil {
		return wirePeer{}, fmt.Errorf("javac JdbcRead.java: %w: %s", err, out)
	}
	u := fmt.Sprintf("jdbc:sqlserver://%s:%s;databaseName=bench;user=%s;password=%s;encrypt=false;trustServerCertificate=true", host, port, user, password)
	p := wirePeer{name: strings.TrimSuffix(filepath.Base(jar), ".jar") + ", typed getters, warm JVM", passes: jdbcPasses}
	p.read = func(ctx context.Context, passes int) ([]measure, error) {
		cmd := exec.CommandContext(ctx, java, "-cp", jar+string(os.PathListSeparator)+classes, "JdbcRead", u, query, fmt.Sprint(passes))
		return readPeerPasses(ctx, p.name, cmd)
	}
	return p, nil
}

// goScanPeer is go-mssqldb's plain database/sql loop: Scan every column
// into an any.
func goScanPeer(db *sql.DB, query string) wirePeer {
	p := wirePeer{name: "go-mssqldb v1.11.2, database/sql Scan into any", passes: wirePeerPasses, allocs: true}
	p.read = func(ctx context.Context, passes int) ([]measure, error) {
		return scanPasses(ctx, db, query, passes, func(n int) []any {
			vals := make([]any, n)
			ptrs := make([]any, n)
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			return ptrs
		})
	}
	return p
}

// scanPasses reads query whole passes times through database/sql,
// scanning each row into dest(columns), and returns each pass's figures.
func scanPasses(ctx context.Context, db *sql.DB, query string, passes int, dest func(columns int) []any) ([]measure, error) {
	var ms []measure
	for range passes {
		m, err := withCPU(func() (measure, error) {
			start := time.Now()
			rows, err := db.QueryContext(ctx, query)
			if err != nil {
				return measure{}, err
			}
			defer rows.Close()
			cols, err := rows.Columns()
			if err != nil {
				return measure{}, err
			}
			ptrs := dest(len(cols))
			var n int64
			for rows.Next() {
				if err := rows.Scan(ptrs...); err != nil {
					return measure{}, err
				}
				n++
			}
			return measure{Rows: n, Seconds: time.Since(start).Seconds()}, rows.Err()
		})
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// cdcsnapPeer is source/sqlserver's ReadRange of the whole table into
// Arrow record batches, on one connection.
func cdcsnapPeer(src *sqlserver.Source, ci *source.CaptureInstance, prof string) wirePeer {
	p := wirePeer{name: "cdcsnap read path (source/sqlserver into Arrow)", passes: wirePeerPasses, allocs: true}
	first := true
	p.read = func(ctx context.Context, passes int) ([]measure, error) {
		var ms []measure
		for i := range passes {
			pf := ""
			if first && prof != "" && i == passes-1 {
				pf, first = prof, false
			}
			m, err := timedRead(ctx, src, ci, []keyrange.Range{{}}, pf)
			if err != nil {
				return nil, err
			}
			ms = append(ms, m)
		}
		return ms, nil
	}
	return p
}

// runWirePeers runs the peers benchmark for each -rows size.
func runWirePeers(ctx context.Context, cfg config, w io.Writer) error {
	fmt.Fprintf(w, "machine: %s\n", machine())
	work := cfg.work
	if work == "" {
		d, err := os.MkdirTemp("", "cdcsnap-wire-peers-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		work = d
	}
	for _, n := range cfg.rows {
		if err := wirePeersTable(ctx, cfg, work, n, w); err != nil {
			return err
		}
	}
	return nil
}

func wirePeersTable(ctx context.Context, cfg config, work string, n int64, w io.Writer) error {
	srv, err := startWireServer(n, cfg.packetSize)
	if err != nil {
		return err
	}
	defer srv.close()
	u, err := url.Parse(srv.dsn)
	if err != nil {
		return err
	}
	host, port := u.Hostname(), u.Port()
	password, _ := u.User.Password()
	user := u.User.Username()
	g := NewGen(n, 0)
	ci := wireInstance(g)
	// The peers read the columns as they are (source/sqlserver's own
	// statement casts some of them for its decoder).
	var names []string
	for _, c := range ci.Columns {
		names = append(names, "["+c.Name+"]")
	}
	query := "SELECT " + strings.Join(names, ", ") + " FROM [" + ci.SourceSchema + "].[" + ci.SourceTable + "]"
	db, err := sqlserver.Open(srv.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxIdleConns(2)
	src, err := sqlserver.New(db, sqlserver.Options{})
	if err != nil {
		return err
	}
	prof := ""
	if cfg.profile {
		if err := os.MkdirAll(cfg.out, 0o755); err != nil {
			return err
		}
		prof = filepath.Join(cfg.out, fmt.Sprintf("wire-peers-%d-cdcsnap.cpu.pprof", n))
	}
	// go-mssqldb's loop runs at go-mssqldb's own defaults (4096-byte
	// packets), not sqlserver.Open's.
	plain, err := sql.Open("sqlserver", srv.dsn)
	if err != nil {
		return err
	}
	defer plain.Close()
	peers := []wirePeer{cdcsnapPeer(src, ci, prof), goScanPeer(plain, query)}
	var missing []string
	if cfg.peer {
		if p, err := odbcPeer(port, user, password, query); err != nil {
			missing = append(missing, "mssql-python + ODBC Driver 18 not measured: "+err.Error()+" (install: .ci/pyenv, which pins mssql-python and installs libltdl7 as root)")
		} else {
			peers = append(peers, p)
		}
		if p, err := jdbcPeer(work, host, port, user, password, query); err != nil {
			missing = append(missing, "mssql-jdbc not measured: "+err.Error()+" (install: .ci/jdbcenv, which needs mvn and Maven Central; java and javac 11+)")
		} else {
			peers = append(peers, p)
		}
	}
	for _, m := range missing {
		fmt.Fprintln(os.Stderr, "bench:", m)
	}
	rounds := max(cfg.reps, 3)
	fmt.Fprintf(w, "\nReading %d rows of the benchmark shape from internal/tdsserver on loopback, one connection, each client's defaults; %d rounds, interleaved, each client %d passes per round (mssql-jdbc %d), the last counted; median over the rounds\n\n",
		n, rounds, wirePeerPasses, jdbcPasses)
	results, err := interleave(ctx, peers, rounds, n)
	if err != nil {
		return err
	}
	cpu := make([]float64, len(peers))
	rate := make([]float64, len(peers))
	odbc := -1
	for i, p := range peers {
		cpu[i] = median(mapSlice(results[i], measure.cpuPerRow))
		rate[i] = median(mapSlice(results[i], measure.rowsPerSec))
		if strings.HasPrefix(p.name, "mssql-python") {
			odbc = i
		}
	}
	fmt.Fprintln(w, "| client | rows/s | client CPU µs/row | CPU / ODBC 18's | rows/s / ODBC 18's | client allocs/row |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: |")
	for i, p := range peers {
		ratioCPU, ratioRate, allocs := "-", "-", "-"
		if odbc >= 0 {
			ratioCPU = fmt.Sprintf("%.2f", cpu[i]/cpu[odbc])
			ratioRate = fmt.Sprintf("%.2f", rate[i]/rate[odbc])
		}
		if p.allocs {
			allocs = fmt.Sprintf("%.2f", median(mapSlice(results[i], measure.allocsPerRow)))
		}
		fmt.Fprintf(w, "| %s | %.0f | %.2f | %s | %s | %s |\n", p.name, rate[i], cpu[i], ratioCPU, ratioRate, allocs)
	}
	for _, m := range missing {
		fmt.Fprintln(w, "\n"+m)
	}
	if prof != "" {
		return printSplit(w, prof, n)
	}
	return nil
}

// interleave reads with every peer in turn, rounds times, each its
// passes, and returns each peer's last pass of every round; each pass
// must read n rows.
func interleave(ctx context.Context, peers []wirePeer, rounds int, n int64) ([][]measure, error) {
	results := make([][]measure, len(peers))
	for r := range rounds {
		for i, p := range peers {
			ms, err := p.read(ctx, p.passes)
			if err != nil {
				return nil, fmt.Errorf("bench: %s: %w", p.name, err)
			}
			last := ms[len(ms)-1]
			if last.Rows != n {
				return nil, fmt.Errorf("bench: %s read %d rows, want %d", p.name, last.Rows, n)
			}
			results[i] = append(results[i], last)
			allocs := ""
			if p.allocs {
				allocs = fmt.Sprintf(", %.2f allocs/row", last.allocsPerRow())
			}
			fmt.Fprintf(os.Stderr, "  round %d: %-50s %.2f µs/row CPU, %.0f rows/s%s\n", r+1, p.name, last.cpuPerRow(), last.rowsPerSec(), allocs)
		}
	}
	return results, nil
}

func mapSlice[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}
