// Package testenv is what cdcsnap's tests share about the machine they run
// on: the optional components some suites need (Java, Python, Node.js,
// Maven, network access to a registry, a SQL Server) and one form of
// message for a suite skipped without them, which internal/testrun lists
// after the tests with the line that enables each. A suite never fails for
// a missing component. The Delta tables of testdata/delta are not such a
// component: every clone has them (DeltaFixture).
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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

// PythonUnavailableEnv holds why internal/testrun could not install the
// interop Python (set when it tried and failed), as "why; enable: line".
const PythonUnavailableEnv = "CDCSNAP_PYTHON_UNAVAILABLE"

// Python returns the interop Python, or skips t naming suite.
func Python(t testing.TB, suite string) string {
	t.Helper()
	py := os.Getenv(PythonEnv)
	if py == "" {
		if why, enable, ok := strings.Cut(os.Getenv(PythonUnavailableEnv), "; enable: "); ok {
			Skip(t, suite, why, enable)
		}
		Skip(t, suite, PythonEnv+" is not set",
			"go run ./internal/testrun (it installs .cache/venv), or "+PythonEnv+"=$(.ci/pyenv) go test ./...")
	}
	return py
}

// Unavailable is a component a suite needs that this machine lacks: what
// it is, why it is missing, and the one line that provides it.
type Unavailable struct {
	Component, Why, Enable string
}

// Error implements error.
func (u *Unavailable) Error() string {
	return fmt.Sprintf("%s unavailable: %s (enable: %s)", u.Component, u.Why, u.Enable)
}

// SkipUnavailable skips t naming suite when err is (or wraps) an
// *Unavailable, and returns otherwise.
func SkipUnavailable(t testing.TB, suite string, err error) {
	t.Helper()
	var u *Unavailable
	if errors.As(err, &u) {
		Skip(t, suite, u.Why, u.Enable)
	}
}

// A Program is a command some suites run that the go command does not
// install.
type Program struct {
	// Component names it for people ("Java").
	Component string
	// Name is the command looked up on PATH.
	Name string
	// Home, when set, names an environment variable whose bin/<Name> is
	// used first (JAVA_HOME).
	Home string
	// Enable is the line that installs it.
	Enable string
}

// The programs suites need besides Go.
var (
	// Java runs Spark. pyspark 4.0.1's bin/spark-class runs
	// $JAVA_HOME/bin/java when JAVA_HOME is set, else java from PATH,
	// else fails with "JAVA_HOME is not set"; Spark 4.0 needs Java 17 or
	// later (SPARK-45315).
	Java = Program{Component: "Java", Name: "java", Home: "JAVA_HOME",
		Enable: "install a Java 17 or 21 runtime (Debian: apt-get install openjdk-17-jre-headless), or set JAVA_HOME, then go run ./internal/testrun"}
	// Maven fetches the Delta jar Spark loads (.ci/sparkenv).
	Maven = Program{Component: "Maven", Name: "mvn",
		Enable: "install Maven (Debian: apt-get install maven), then go run ./internal/testrun"}
	// Python3 makes the venvs of the Python readers, moto and Spark
	// (.ci/pyenv, .ci/sparkenv).
	Python3 = Program{Component: "Python 3", Name: "python3",
		Enable: "install Python 3 with venv (Debian: apt-get install python3-venv), then go run ./internal/testrun"}
	// NPM installs Azurite, the Azure Blob server of the object-store
	// tests (internal/objstore).
	NPM = Program{Component: "Node.js", Name: "npm",
		Enable: "install Node.js 18 or later with npm (Debian: apt-get install nodejs npm), then go run ./internal/testrun"}
)

// Find returns the program's path, or an *Unavailable saying why it is
// missing.
func (p Program) Find() (string, error) {
	if p.Home != "" {
		if home := os.Getenv(p.Home); home != "" {
			path := filepath.Join(home, "bin", p.Name)
			if _, err := exec.LookPath(path); err != nil {
				return "", &Unavailable{Component: p.Component, Why: fmt.Sprintf("%s is %s, but %s is not an executable", p.Home, home, path), Enable: p.Enable}
			}
			return path, nil
		}
	}
	path, err := exec.LookPath(p.Name)
	if err != nil {
		why := p.Name + " is not on PATH"
		if p.Home != "" {
			why += " and " + p.Home + " is not set"
		}
		return "", &Unavailable{Component: p.Component, Why: why, Enable: p.Enable}
	}
	return path, nil
}

// Need skips t naming suite unless every program is found.
func Need(t testing.TB, suite string, programs ...Program) {
	t.Helper()
	for _, p := range programs {
		if _, err := p.Find(); err != nil {
			SkipUnavailable(t, suite, err)
		}
	}
}

// Offline is the *Unavailable of an install that failed: what could not
// be installed, from which registry, and the installer's last output.
func Offline(component, registry, installer, output string) *Unavailable {
	why := fmt.Sprintf("%s could not install it from %s (no network?)", installer, registry)
	if tail := lastLines(output, 3); tail != "" {
		why += ": " + strings.ReplaceAll(tail, "\n", " | ")
	}
	return &Unavailable{Component: component, Why: why,
		Enable: "network access to " + registry + ", then go run ./internal/testrun"}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// DeltaFixture returns the path of the Delta table name in testdata/delta
// at the module root: tables written by Spark and delta-rs with
// testdata/delta/make, committed with the versions that made them.
func DeltaFixture(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(moduleRoot(t), "testdata", "delta", name)
	if _, err := os.Stat(filepath.Join(p, "_delta_log")); err != nil {
		t.Fatalf("Delta fixture %s: %v (testdata/delta/make writes it)", name, err)
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

// READMEBlock returns the text of the module's README.md between
// "<!-- name:begin -->" and "<!-- name:end -->", for tests that check what
// README shows; it fails t when the block is missing.
func READMEBlock(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "<!-- "+name+":begin -->")
	block, _, ok2 := strings.Cut(block, "<!-- "+name+":end -->")
	if !ok || !ok2 {
		t.Fatalf("README.md lacks the <!-- %s:begin --> ... <!-- %s:end --> block", name, name)
	}
	return block
}
