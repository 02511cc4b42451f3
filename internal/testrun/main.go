// Command testrun runs cdcsnap's tests as the README says and CI does:
//
//	go run ./internal/testrun [go test flags] [packages]
//
// It installs the pinned Python readers first (.ci/pyenv: a venv in
// .cache/venv with deltalake, pyarrow, duckdb and sqlglot), so the suites
// that read what Go wrote with delta-rs and DuckDB run here as in CI; then
// it runs `go test -race -json` (packages default to ./...), prints one
// line per package as go test does, the whole output of every failed test,
// the counts, and every suite skipped for a missing component with the one
// line that enables it. The full output goes to .cache/test.log.
//
// Flags before the go test flags: -python=false skips the venv, -log sets
// the log file.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cdcsnap/cdcsnap/internal/testenv"
)

func main() {
	opts, rest, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		fmt.Fprintln(os.Stderr, "usage: go run ./internal/testrun [-python=false] [-log file] [go test flags] [packages]")
		os.Exit(2)
	}
	code, err := run(opts.python, opts.log, rest, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		if code == 0 {
			code = 2
		}
	}
	os.Exit(code)
}

type options struct {
	python bool   // install the pinned Python readers when CDCSNAP_PYTHON is unset
	log    string // file for the whole test output
}

// parseArgs takes testrun's own flags (-python[=bool], -log file) from
// anywhere in args and leaves the rest, go test's flags and packages, in
// order.
func parseArgs(args []string) (options, []string, error) {
	o := options{python: true, log: filepath.Join(".cache", "test.log")}
	var rest []string
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") {
			rest = append(rest, args[i])
			continue
		}
		switch name {
		case "python":
			o.python = true
			if hasVal {
				b, err := strconv.ParseBool(val)
				if err != nil {
					return o, nil, fmt.Errorf("-python=%s: %w", val, err)
				}
				o.python = b
			}
		case "log":
			if !hasVal {
				if i+1 >= len(args) {
					return o, nil, fmt.Errorf("-log needs a file")
				}
				i++
				val = args[i]
			}
			o.log = val
		default:
			rest = append(rest, args[i])
		}
	}
	return o, rest, nil
}

// run runs the tests from the module root and returns go test's exit code.
func run(python bool, logPath string, args []string, stdout, stderr io.Writer) (int, error) {
	root, err := moduleRoot()
	if err != nil {
		return 2, err
	}
	env := os.Environ()
	if python && os.Getenv(testenv.PythonEnv) == "" {
		start := time.Now()
		fmt.Fprintln(stdout, "python:  installing the pinned interop readers (.ci/pyenv: .cache/venv)")
		py, err := installPython(root, stderr)
		var u *testenv.Unavailable
		switch {
		case errors.As(err, &u):
			env = append(env, testenv.PythonUnavailableEnv+"="+u.Why+"; enable: "+u.Enable)
			fmt.Fprintf(stdout, "python:  not installed: %s; the suites that need it are skipped (enable: %s)\n", u.Why, u.Enable)
		case err != nil:
			return 2, err
		default:
			env = append(env, testenv.PythonEnv+"="+py)
			fmt.Fprintf(stdout, "python:  %s (%s)\n", py, time.Since(start).Round(time.Millisecond))
		}
	}
	if !filepath.IsAbs(logPath) {
		logPath = filepath.Join(root, logPath)
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o777); err != nil {
		return 2, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return 2, err
	}
	defer logFile.Close()

	goArgs := []string{"test", "-race", "-json"}
	if !hasFlag(args, "timeout") {
		// The reliability package runs Spark, delta-rs and three object-store
		// servers under -race on two cores: past go test's 10-minute default.
		goArgs = append(goArgs, "-timeout", "25m")
	}
	goArgs = append(goArgs, args...)
	if !hasPackages(args) {
		goArgs = append(goArgs, "./...")
	}
	fmt.Fprintf(stdout, "tests:   go %s\n", strings.Join(goArgs, " "))
	cmd := exec.Command("go", goArgs...)
	cmd.Dir, cmd.Env, cmd.Stderr = root, env, io.MultiWriter(stderr, logFile)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return 2, err
	}
	if err := cmd.Start(); err != nil {
		return 2, err
	}
	sum := newSummary(stdout, logFile)
	if err := sum.read(pipe); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 2, err
	}
	code := 0
	if err := cmd.Wait(); err != nil {
		code = 1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	sum.report(logPath)
	return code, nil
}

// installPython runs root's .ci/pyenv, which installs the pinned Python
// readers, and returns their python, or a *testenv.Unavailable saying what
// is missing (python3 or its venv module: pyenv's exit 3; else the
// download from PyPI) and how to provide it. stderr gets pyenv's output.
func installPython(root string, stderr io.Writer) (string, error) {
	var errOut bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(root, ".ci", "pyenv"))
	cmd.Dir, cmd.Stderr = root, io.MultiWriter(stderr, &errOut)
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return strings.TrimSpace(string(out)), nil
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		return "", &testenv.Unavailable{Component: testenv.Python3.Component, Why: strings.TrimSpace(strings.TrimPrefix(lastLine(errOut.String()), "pyenv: ")), Enable: testenv.Python3.Enable}
	case errors.As(err, &exit):
		return "", testenv.Offline("the Python readers", "PyPI", ".ci/pyenv", errOut.String())
	}
	return "", err
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// hasPackages reports whether args name packages (an argument that is not
// a flag and does not follow a flag taking a separate value).
func hasPackages(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			if !strings.Contains(a, "=") && takesValue(strings.TrimLeft(a, "-")) {
				i++
			}
			continue
		}
		return true
	}
	return false
}

// takesValue reports whether go test flag name takes a value (as
// "-run X" rather than "-run=X").
func takesValue(name string) bool {
	switch name {
	case "run", "skip", "count", "timeout", "parallel", "cpu", "bench", "benchtime", "p", "tags",
		"coverprofile", "cpuprofile", "memprofile", "blockprofile", "mutexprofile", "outputdir", "fuzz", "fuzztime", "list", "shuffle", "o", "exec":
		return true
	}
	return false
}

// moduleRoot is the nearest folder above the working directory with a go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s: run it inside the cdcsnap repository", dir)
		}
		dir = parent
	}
}

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// skipped is one suite skipped for a missing component.
type skipped struct {
	why, enable string
	tests       []string
}

// summary follows the test events.
type summary struct {
	out, log            io.Writer
	output              map[string]*strings.Builder // package + test -> output so far
	passed, failed, ski int
	failedTests         []string
	suites              map[string]*skipped
	suiteOrder          []string
}

func newSummary(out, log io.Writer) *summary {
	return &summary{out: out, log: log, output: map[string]*strings.Builder{}, suites: map[string]*skipped{}}
}

func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not an event (a build error printed as text).
			fmt.Fprintln(s.out, string(line))
			fmt.Fprintln(s.log, string(line))
			continue
		}
		s.event(e)
	}
	return sc.Err()
}

func (s *summary) event(e event) {
	key := e.Package + "\x00" + e.Test
	switch e.Action {
	case "output", "build-output":
		io.WriteString(s.log, e.Output)
		b := s.output[key]
		if b == nil {
			b = &strings.Builder{}
			s.output[key] = b
		}
		b.WriteString(e.Output)
		return
	}
	if e.Test == "" {
		s.packageDone(e, key)
		return
	}
	out := s.output[key]
	delete(s.output, key)
	switch e.Action {
	case "pass":
		s.passed++
	case "fail":
		s.failed++
		s.failedTests = append(s.failedTests, e.Package+"."+e.Test)
		if out != nil {
			fmt.Fprint(s.out, out.String())
		}
	case "skip":
		s.ski++
		if out == nil {
			return
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if suite, why, enable, ok := testenv.ParseSkip(line); ok {
				sk := s.suites[suite]
				if sk == nil {
					sk = &skipped{why: why, enable: enable}
					s.suites[suite] = sk
					s.suiteOrder = append(s.suiteOrder, suite)
				}
				sk.tests = append(sk.tests, shortPackage(e.Package)+"."+e.Test)
				break
			}
		}
	}
}

// packageDone prints a package's line, as go test does without -json.
func (s *summary) packageDone(e event, key string) {
	out := s.output[key]
	delete(s.output, key)
	switch e.Action {
	case "pass":
		fmt.Fprintf(s.out, "ok  \t%s\t%.3fs\n", e.Package, e.Elapsed)
	case "skip":
		fmt.Fprintf(s.out, "?   \t%s\t[no test files]\n", e.Package)
	case "fail", "build-fail":
		if out != nil {
			// The package's own output: a panic, a build error, a leak report.
			fmt.Fprint(s.out, out.String())
		}
		if e.Action == "fail" {
			fmt.Fprintf(s.out, "FAIL\t%s\t%.3fs\n", e.Package, e.Elapsed)
		}
	}
}

func shortPackage(p string) string { return strings.TrimPrefix(p, "github.com/cdcsnap/cdcsnap/") }

// report prints the counts, the failed tests and the skipped suites.
func (s *summary) report(logPath string) {
	line := fmt.Sprintf("tests: %d passed, %d failed, %d skipped", s.passed, s.failed, s.ski)
	fmt.Fprintln(s.out)
	fmt.Fprintln(s.out, line)
	fmt.Fprintln(s.log, line)
	if len(s.failedTests) > 0 {
		fmt.Fprintln(s.out, "failed:")
		for _, t := range s.failedTests {
			fmt.Fprintln(s.out, "  "+t)
		}
	}
	if len(s.suiteOrder) > 0 {
		sort.Strings(s.suiteOrder)
		fmt.Fprintln(s.out, "skipped suites (a component this machine lacks):")
		for _, name := range s.suiteOrder {
			sk := s.suites[name]
			tests := sk.tests
			more := ""
			if len(tests) > 3 {
				more = fmt.Sprintf(" and %d more", len(tests)-3)
				tests = tests[:3]
			}
			fmt.Fprintf(s.out, "  %s (%s%s): %s\n    enable: %s\n", name, strings.Join(tests, ", "), more, sk.why, sk.enable)
		}
	}
	fmt.Fprintf(s.out, "full output: %s\n", logPath)
}

// hasFlag reports whether args set the go test flag name.
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		a = strings.TrimLeft(a, "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}
