package main

import (
	"encoding/json"
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
