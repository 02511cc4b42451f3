package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// testdata/ci.log is a .ci/run log assembled from real output: the main
// job's two runs and internal/testrun's summary as they printed them (the
// summary's log path moved into a CI clone's temporary folder), framed by
// the lines .ci/run's step function, and its commit and machine lines,
// print.
func readFixture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ci.log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParse(t *testing.T) {
	f, err := parse(strings.NewReader(readFixture(t)))
	if err != nil {
		t.Fatal(err)
	}
	if f.commit != "8e238e2" || f.machine != "2 cores, go1.26.0 linux/amd64" || f.warm || f.total != 1779 || len(f.stages) != 14 {
		t.Fatalf("commit %q, machine %q, warm %v, total %d, %d stages", f.commit, f.machine, f.warm, f.total, len(f.stages))
	}
	sum := 0
	for _, s := range f.stages {
		sum += s.seconds
	}
	if sum != f.total {
		t.Errorf("stage times add up to %d, the run took %d", sum, f.total)
	}
	for name, want := range map[string]int{"README command 1": 164, "README command 2": 737, "fuzz": 557, "Spark fan-out": 78} {
		found := false
		for _, s := range f.stages {
			if strings.HasPrefix(s.name, name) {
				found = true
				if s.seconds != want {
					t.Errorf("stage %q: %d s, want %d", s.name, s.seconds, want)
				}
			}
		}
		if !found {
			t.Errorf("no stage %q", name)
		}
	}
	if len(f.mainJob) != 6 || !strings.HasPrefix(f.mainJob[0], "demo source:") || !strings.HasPrefix(f.mainJob[5], "check:    latest image") {
		t.Errorf("main job: %q", f.mainJob)
	}
	if len(f.rerun) != 3 || !strings.HasPrefix(f.rerun[0], "snapshot exists:") {
		t.Errorf("rerun: %q", f.rerun)
	}
	if f.tests[0] != "tests: 13 passed, 0 failed, 19 skipped" || f.tests[len(f.tests)-1] != "full output: .cache/test.log" {
		t.Errorf("test summary: %q", f.tests)
	}
}

// TestMarkdownHasNoMachinePaths: what goes into README names no
// temporary or absolute path and no progress line.
func TestMarkdownHasNoMachinePaths(t *testing.T) {
	f, err := parse(strings.NewReader(readFixture(t)))
	if err != nil {
		t.Fatal(err)
	}
	md := f.markdown()
	for _, bad := range []string{"/tmp", "cifresh", "rows/s  partitions", "go: downloading", "GOMODCACHE"} {
		if strings.Contains(md, bad) {
			t.Errorf("the block holds %q:\n%s", bad, md)
		}
	}
	if regexp.MustCompile(`(^|[\s(])/[a-z]`).MatchString(md) {
		t.Errorf("the block holds an absolute path:\n%s", md)
	}
}

// TestRefusesFailedOrUnfinishedRuns: figures come from a passing run.
func TestRefusesFailedOrUnfinishedRuns(t *testing.T) {
	log := readFixture(t)
	for name, bad := range map[string]string{
		"unfinished":   log[:strings.Index(log, "== done in")],
		"tests failed": strings.Replace(log, "tests: 13 passed, 0 failed", "tests: 12 passed, 1 failed", 1),
		"no commit":    strings.Replace(log, "commit: 8e238e2\n", "", 1),
		"no main job":  regexp.MustCompile(`(?m)^(check|snapshot exists):.*\n`).ReplaceAllString(log, ""),
	} {
		if _, err := parse(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestRewritesREADME runs the command on a copy of README.md: the block
// between the markers is the log's, the rest is unchanged, and a second
// run changes nothing.
func TestRewritesREADME(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	if err := os.WriteFile(readme, orig, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := run(filepath.Join("testdata", "ci.log"), readme); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(readme)
	f, _ := parse(strings.NewReader(readFixture(t)))
	if !strings.Contains(string(got), beginMarker+"\n"+f.markdown()+endMarker) {
		t.Fatalf("README's block is not the log's:\n%s", got)
	}
	before, _, _ := strings.Cut(string(orig), beginMarker)
	_, after, _ := strings.Cut(string(orig), endMarker)
	if !strings.HasPrefix(string(got), before) || !strings.HasSuffix(string(got), after) {
		t.Error("the command changed README outside its block")
	}
	if err := run(filepath.Join("testdata", "ci.log"), readme); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(readme); string(again) != string(got) {
		t.Error("a second run changed README again")
	}
}

// TestREADMEFiguresAreGenerated: README.md's figures block is one the
// command wrote (or the block before any run was recorded), and README
// names no temporary path.
func TestREADMEFiguresAreGenerated(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	_, block, ok := strings.Cut(readme, beginMarker+"\n")
	block, _, ok2 := strings.Cut(block, endMarker)
	if !ok || !ok2 {
		t.Fatalf("README.md lacks the %s ... %s block", beginMarker, endMarker)
	}
	if block != emptyBlock && !regexp.MustCompile("^The last `.ci/run` recorded here ran commit [0-9a-f]{7,}").MatchString(block) {
		t.Errorf("README's figures block does not start as the command writes it:\n%s", block)
	}
	if strings.Contains(readme, "/tmp/") {
		t.Error("README.md names a temporary path")
	}
}
