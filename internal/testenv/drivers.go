package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Microsoft's own SQL Server drivers, for the suites in which a client
// this repository did not write reads internal/tdsserver: mssql-python
// (PyPI, pinned in .ci/requirements.txt) with the Microsoft ODBC Driver 18
// it bundles (mssql-python-odbc), which needs Debian's libltdl7; and
// mssql-jdbc from Maven Central (pinned in .ci/jdbcenv).

// MSSQLPython returns the interop Python when it imports mssql_python and
// loads the ODBC driver's library, or skips t naming suite.
func MSSQLPython(t testing.TB, suite string) string {
	t.Helper()
	py := Python(t, suite)
	out, err := exec.Command(py, "-c", "import mssql_python.ddbc_bindings").CombinedOutput()
	if err != nil {
		Skip(t, suite, "mssql-python with ODBC Driver 18 does not load: "+lastLine(string(out)),
			"apt-get install -y libltdl7 && "+PythonEnv+"=$(.ci/pyenv) go test ./internal/tdsserver ./internal/tdsfake")
	}
	return py
}

// JDBCEnv names the mssql-jdbc jar; by default .cache/jdbc's, which
// .ci/jdbcenv downloads.
const JDBCEnv = "CDCSNAP_MSSQL_JDBC"

// MSSQLJDBC returns the java command, the javac command and the
// mssql-jdbc jar, or skips t naming suite.
func MSSQLJDBC(t testing.TB, suite string) (java, javac, jar string) {
	t.Helper()
	enable := JDBCEnv + "=$(.ci/jdbcenv) go test ./internal/tdsserver"
	jar = os.Getenv(JDBCEnv)
	if jar == "" {
		matches, _ := filepath.Glob(filepath.Join(moduleRoot(t), ".cache", "jdbc", "mssql-jdbc-*.jar"))
		if len(matches) == 0 {
			Skip(t, suite, JDBCEnv+" is not set and .cache/jdbc holds no mssql-jdbc jar", enable)
		}
		jar = matches[len(matches)-1]
	}
	if _, err := os.Stat(jar); err != nil {
		Skip(t, suite, err.Error(), enable)
	}
	var err error
	if java, err = exec.LookPath("java"); err != nil {
		Skip(t, suite, "no java on PATH", "apt-get install -y openjdk-17-jdk-headless")
	}
	if javac, err = exec.LookPath("javac"); err != nil {
		Skip(t, suite, "no javac on PATH", "apt-get install -y openjdk-17-jdk-headless")
	}
	return java, javac, jar
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
