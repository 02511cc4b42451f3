package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseSkipReadsSkipMessage(t *testing.T) {
	for _, tc := range []struct{ suite, why, enable string }{
		{"delta-rs and DuckDB readers", "CDCSNAP_PYTHON is not set", "go run ./internal/testrun"},
		{`odd "name"; enable: x`, "a; b", "A=1 go test ./..."},
	} {
		line := "    interop_test.go:36: " + SkipMessage(tc.suite, tc.why, tc.enable)
		suite, why, enable, ok := ParseSkip(line)
		if !ok || suite != tc.suite || why != tc.why {
			t.Errorf("ParseSkip(%q) = %q, %q, %q, %v", line, suite, why, enable, ok)
		}
		if enable != tc.enable {
			t.Errorf("ParseSkip(%q): enable %q, want %q", line, enable, tc.enable)
		}
	}
	if _, _, _, ok := ParseSkip("--- SKIP: TestX (0.00s)"); ok {
		t.Error("ParseSkip took a line without the form")
	}
}

// FuzzParseSkip: ParseSkip never panics, and reads back any message
// SkipMessage writes whose parts hold no line break and whose reason and
// enable line do not themselves contain "; enable: ".
func FuzzParseSkip(f *testing.F) {
	f.Add("delta-rs", "CDCSNAP_PYTHON is not set", "go run ./internal/testrun", "    x_test.go:1: ")
	f.Add(`a "b"`, "c; d", "E=1 f", "")
	f.Fuzz(func(t *testing.T, suite, why, enable, prefix string) {
		_, _, _, _ = ParseSkip(prefix + suite + why + enable)
		for _, s := range []string{suite, why, enable, prefix} {
			if strings.ContainsAny(s, "\n\r") {
				return
			}
		}
		if strings.Contains(why+enable, "; enable: ") || strings.Contains(enable, "; enable:") || !utf8.ValidString(suite) {
			return
		}
		gs, gw, ge, ok := ParseSkip(prefix + SkipMessage(suite, why, enable))
		if !ok || gs != suite || ge != enable || gw != why {
			if strings.Contains(prefix, `suite "`) {
				return // the prefix holds a message of its own
			}
			t.Fatalf("ParseSkip(SkipMessage(%q, %q, %q)) = %q, %q, %q, %v", suite, why, enable, gs, gw, ge, ok)
		}
	})
}

// skipRecorder is a testing.TB whose Skip records its message and ends
// the goroutine, as testing's does.
type skipRecorder struct {
	testing.TB
	msg string
}

func (r *skipRecorder) Helper() {}

func (r *skipRecorder) Skip(args ...any) {
	r.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

// skipped runs f with a recorder and returns the skip message ("" when f
// returned without skipping).
func skipped(t *testing.T, f func(tb testing.TB)) string {
	r := &skipRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.msg
}

// TestMissingProgramsSkip simulates a machine without each program a
// suite needs (a PATH without it; JAVA_HOME unset or wrong): Need skips
// with a message internal/testrun reads back, naming what is missing and
// the line that installs it; with the program present it does not skip.
func TestMissingProgramsSkip(t *testing.T) {
	empty := t.TempDir()
	fakeJDK := t.TempDir()
	for _, tc := range []struct {
		name      string
		program   Program
		path      string
		javaHome  string
		why       string
		wantsSkip bool
	}{
		{name: "no java", program: Java, path: empty, why: "java is not on PATH and JAVA_HOME is not set", wantsSkip: true},
		{name: "JAVA_HOME without java", program: Java, path: empty, javaHome: fakeJDK,
			why: "JAVA_HOME is " + fakeJDK + ", but " + filepath.Join(fakeJDK, "bin", "java") + " is not an executable", wantsSkip: true},
		{name: "no mvn", program: Maven, path: empty, why: "mvn is not on PATH", wantsSkip: true},
		{name: "no python3", program: Python3, path: empty, why: "python3 is not on PATH", wantsSkip: true},
		{name: "no npm", program: NPM, path: empty, why: "npm is not on PATH", wantsSkip: true},
		{name: "java on PATH", program: Java, path: fakeBin(t, "java")},
		{name: "npm on PATH", program: NPM, path: fakeBin(t, "npm")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", tc.path)
			t.Setenv("JAVA_HOME", tc.javaHome)
			msg := skipped(t, func(tb testing.TB) { Need(tb, "Spark maintenance", tc.program) })
			if !tc.wantsSkip {
				if msg != "" {
					t.Fatalf("skipped with %s present: %s", tc.program.Name, msg)
				}
				return
			}
			suite, why, enable, ok := ParseSkip("    x_test.go:1: " + msg)
			if !ok || suite != "Spark maintenance" || why != tc.why || enable != tc.program.Enable {
				t.Fatalf("skip %q read back as %q, %q, %q, %v; want why %q, enable %q", msg, suite, why, enable, ok, tc.why, tc.program.Enable)
			}
		})
	}
}

// fakeBin is a PATH folder holding an executable called name.
func fakeBin(t *testing.T, name string) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPythonSkipSaysWhyTheInstallFailed: when internal/testrun could not
// install the Python readers, the suites that need them skip with its
// reason and enable line, not "CDCSNAP_PYTHON is not set".
func TestPythonSkipSaysWhyTheInstallFailed(t *testing.T) {
	t.Setenv(PythonEnv, "")
	u := Offline("the Python readers", "PyPI", ".ci/pyenv", "Collecting deltalake\nERROR: No matching distribution found for deltalake==1.6.6\n")
	t.Setenv(PythonUnavailableEnv, u.Why+"; enable: "+u.Enable)
	msg := skipped(t, func(tb testing.TB) { Python(tb, "delta-rs") })
	_, why, enable, ok := ParseSkip(msg)
	if !ok || why != ".ci/pyenv could not install it from PyPI (no network?): Collecting deltalake | ERROR: No matching distribution found for deltalake==1.6.6" ||
		enable != "network access to PyPI, then go run ./internal/testrun" {
		t.Fatalf("skip %q: %q %q %v", msg, why, enable, ok)
	}
	t.Setenv(PythonUnavailableEnv, "")
	if msg := skipped(t, func(tb testing.TB) { Python(tb, "delta-rs") }); !strings.Contains(msg, PythonEnv+" is not set") {
		t.Fatalf("without testrun: %q", msg)
	}
}
