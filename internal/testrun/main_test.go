package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/internal/testenv"
)

func TestParseArgsKeepsGoTestArguments(t *testing.T) {
	o, rest, err := parseArgs([]string{"-count=1", "-python=false", "-run", "TestX", "-log", "x.log", "./sink/..."})
	if err != nil {
		t.Fatal(err)
	}
	if o.python || o.log != "x.log" || strings.Join(rest, " ") != "-count=1 -run TestX ./sink/..." {
		t.Fatalf("parseArgs: %+v %q", o, rest)
	}
	if !hasPackages(rest) || hasPackages([]string{"-run", "TestX", "-count=1"}) {
		t.Fatal("hasPackages took -run's value for a package, or missed ./sink/...")
	}
	if _, _, err := parseArgs([]string{"-python=maybe"}); err == nil {
		t.Fatal("-python=maybe accepted")
	}
}

// TestSummaryListsSkippedSuitesAndFailures feeds go test -json events (as
// cmd/test2json writes them) and checks what a reader of the output sees.
func TestSummaryListsSkippedSuitesAndFailures(t *testing.T) {
	const pkg = "github.com/cdcsnap/cdcsnap/sink/delta"
	var events []string
	add := func(e event) {
		b, _ := json.Marshal(e)
		events = append(events, string(b))
	}
	add(event{Action: "run", Package: pkg, Test: "TestInterop"})
	add(event{Action: "output", Package: pkg, Test: "TestInterop", Output: "    interop_test.go:36: " + testenv.SkipMessage("delta-rs", "CDCSNAP_PYTHON is not set", "CDCSNAP_PYTHON=$(.ci/pyenv) go test ./...") + "\n"})
	add(event{Action: "skip", Package: pkg, Test: "TestInterop"})
	add(event{Action: "output", Package: pkg, Test: "TestChild", Output: "    x_test.go:1: runs as a child\n"})
	add(event{Action: "skip", Package: pkg, Test: "TestChild"})
	add(event{Action: "output", Package: pkg, Test: "TestBroken", Output: "    x_test.go:9: want 3, have 4\n"})
	add(event{Action: "fail", Package: pkg, Test: "TestBroken"})
	add(event{Action: "output", Package: pkg, Test: "TestFine", Output: "noise that stays in the log\n"})
	add(event{Action: "pass", Package: pkg, Test: "TestFine"})
	add(event{Action: "fail", Package: pkg, Elapsed: 1.5})
	events = append(events, "# a build error printed as text")

	var out, log strings.Builder
	s := newSummary(&out, &log)
	if err := s.read(strings.NewReader(strings.Join(events, "\n"))); err != nil {
		t.Fatal(err)
	}
	s.report("test.log")
	got := out.String()
	for _, want := range []string{
		"want 3, have 4",
		"FAIL\t" + pkg + "\t1.500s",
		"# a build error printed as text",
		"tests: 1 passed, 1 failed, 2 skipped",
		"failed:\n  " + pkg + ".TestBroken",
		"  delta-rs (sink/delta.TestInterop): CDCSNAP_PYTHON is not set\n    enable: CDCSNAP_PYTHON=$(.ci/pyenv) go test ./...",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"noise that stays in the log", "runs as a child"} {
		if strings.Contains(got, not) {
			t.Errorf("output has %q:\n%s", not, got)
		}
	}
	if !strings.Contains(log.String(), "noise that stays in the log") {
		t.Error("the log lost a passing test's output")
	}
}

// fakeRoot is a repository root holding only .ci/pyenv and its pins, so a
// test can run the installer without touching the real .cache, and a bin
// folder for PATH with the commands pyenv uses and none of python3's.
func fakeRoot(t *testing.T) (root, bin string) {
	t.Helper()
	root, bin = t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".ci"), 0o777); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"pyenv", "requirements.txt"} {
		b, err := os.ReadFile(filepath.Join("..", "..", ".ci", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, ".ci", f), b, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{"bash", "dirname", "cmp", "cp", "mkdir", "chmod"} {
		p, err := exec.LookPath(c)
		if err != nil {
			t.Skipf("%s: %v", c, err)
		}
		if err := os.Symlink(p, filepath.Join(bin, c)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	return root, bin
}

// TestInstallPythonSaysWhatIsMissing runs .ci/pyenv, as the test command
// does, on machines that lack a part of what it needs: no python3, a
// python3 without venv (Debian without python3-venv), and no network
// (pip finds no package). Each is an *testenv.Unavailable whose reason and
// enable line the skipped suites print.
func TestInstallPythonSaysWhatIsMissing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		python3 string // the fake python3's script; "" for none
		why     []string
		enable  string
	}{
		{name: "no python3", why: []string{"python3 is not on PATH"}, enable: testenv.Python3.Enable},
		{name: "no venv module", python3: "#!/bin/bash\nexit 1\n",
			why: []string{"python3 cannot make a venv (no venv or ensurepip module; Debian: apt-get install python3-venv)"}, enable: testenv.Python3.Enable},
		{name: "no network", python3: `#!/bin/bash
# venv works; the pip it makes reaches no index, as pip does offline.
if [ "$1" = -m ] && [ "$2" = venv ]; then
  mkdir -p "$3/bin"
  printf '#!/bin/bash\necho "ERROR: Could not find a version that satisfies the requirement deltalake==1.6.6 (from versions: none)" >&2\nexit 1\n' > "$3/bin/pip"
  chmod +x "$3/bin/pip"
fi
exit 0
`, why: []string{".ci/pyenv could not install it from PyPI (no network?)", "Could not find a version that satisfies the requirement deltalake==1.6.6"},
			enable: "network access to PyPI, then go run ./internal/testrun"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, bin := fakeRoot(t)
			if tc.python3 != "" {
				if err := os.WriteFile(filepath.Join(bin, "python3"), []byte(tc.python3), 0o777); err != nil {
					t.Fatal(err)
				}
			}
			var stderr strings.Builder
			py, err := installPython(root, &stderr)
			var u *testenv.Unavailable
			if !errors.As(err, &u) {
				t.Fatalf("installPython = %q, %v; want an *testenv.Unavailable\n%s", py, err, &stderr)
			}
			for _, w := range tc.why {
				if !strings.Contains(u.Why, w) {
					t.Errorf("why %q lacks %q", u.Why, w)
				}
			}
			if u.Enable != tc.enable {
				t.Errorf("enable %q, want %q", u.Enable, tc.enable)
			}
			// The suites that need the readers skip with that reason.
			line := testenv.SkipMessage("delta-rs", u.Why, u.Enable)
			if _, why, enable, ok := testenv.ParseSkip(line); !ok || why != u.Why || enable != u.Enable {
				t.Errorf("the skip line %q does not read back: %q %q %v", line, why, enable, ok)
			}
		})
	}
}
