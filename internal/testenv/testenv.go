// Package testenv is what cdcsnap's tests share about the machine they run
// on: the optional components some suites need (the pinned Python readers,
// the shared Delta tables, a SQL Server) and one form of message for a suite
// skipped without them, which internal/testrun lists after the tests with
// the line that enables each.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// Skip skips t because suite needs a component this machine lacks: why
// says what is missing, enable the one command line that provides it.
func Skip(t testing.TB, suite, why, enable string) {
	t.Helper()
	t.Skip(SkipMessage(suite, why, enable))
}

// SkipMessage is Skip's message: `suite "<suite>" skipped: <why>; enable: <enable>`.
func SkipMessage(suite, why, enable string) string {
	return fmt.Sprintf("suite %q skipped: %s; enable: %s", suite, why, enable)
}

// skipRE matches SkipMessage's form in test output.
var skipRE = regexp.MustCompile(`suite "((?:[^"\\]|\\.)*)" skipped: (.*); enable: (.*)$`)

// ParseSkip reads a line of test output written by Skip.
func ParseSkip(line string) (suite, why, enable string, ok bool) {
	m := skipRE.FindStringSubmatch(line)
	if m == nil {
		return "", "", "", false
	}
	suite, err := strconv.Unquote(`"` + m[1] + `"`)
	if err != nil {
		return "", "", "", false
	}
	return suite, m[2], m[3], true
}

// PythonEnv names the interop Python (a venv with the pinned deltalake,
// pyarrow, duckdb and sqlglot of .ci/requirements.txt).
const PythonEnv = "CDCSNAP_PYTHON"

// Python returns the interop Python, or skips t naming suite.
func Python(t testing.TB, suite string) string {
	t.Helper()
	py := os.Getenv(PythonEnv)
	if py == "" {
		Skip(t, suite, PythonEnv+" is not set",
			"go run ./internal/testrun (it installs .cache/venv), or "+PythonEnv+"=$(.ci/pyenv) go test ./...")
	}
	return py
}

// SharedEnv names the folder holding the shared Delta test tables
// (testdata/delta written by Spark and delta-rs); by default ../shared
// beside the repository.
const SharedEnv = "CDCSNAP_SHARED"

// SharedDeltaTable returns the path of the shared Delta test table name,
// or skips t when the shared folder is absent.
func SharedDeltaTable(t testing.TB, name string) string {
	t.Helper()
	root := os.Getenv(SharedEnv)
	if root == "" {
		root = filepath.Join(moduleRoot(t), "..", "shared")
	}
	dir := filepath.Join(root, "testdata", "delta")
	if _, err := os.Stat(dir); err != nil {
		abs, _ := filepath.Abs(dir)
		Skip(t, "shared Delta tables", abs+" is absent",
			SharedEnv+"=<folder holding testdata/delta> go test ./sink/delta")
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		abs, _ := filepath.Abs(p)
		Skip(t, "shared Delta tables", abs+" is absent (an older shared folder?)",
			SharedEnv+"=<folder holding testdata/delta> go test ./sink/delta")
	}
	return p
}

// moduleRoot returns the nearest folder above the working directory (the
// test's package folder) holding a go.mod.
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testenv: no go.mod above the test's folder")
		}
		dir = parent
	}
}
