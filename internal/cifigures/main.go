// Command cifigures writes README.md's figures from a .ci/run log, so that
// they come from one run and can be regenerated instead of going stale:
//
//	.ci/run                                  # writes .cache/ci.log
//	go run ./internal/cifigures .cache/ci.log
//
// It replaces the block between README's "<!-- cifigures:begin -->" and
// "<!-- cifigures:end -->" with the run's commit and machine, each stage's
// time, what the main job printed (and its rerun), and the test command's
// summary, with temporary paths made relative to the repository. It
// refuses a log of a run that did not finish or whose tests failed.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./internal/cifigures .cache/ci.log (the log .ci/run writes)")
		os.Exit(2)
	}
	if err := run(os.Args[1], "README.md"); err != nil {
		fmt.Fprintln(os.Stderr, "cifigures:", err)
		os.Exit(1)
	}
}

func run(logPath, readmePath string) error {
	f, err := os.Open(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	figs, err := parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", logPath, err)
	}
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		return err
	}
	out, err := splice(string(readme), figs.markdown())
	if err != nil {
		return fmt.Errorf("%s: %w", readmePath, err)
	}
	return os.WriteFile(readmePath, []byte(out), 0o666)
}

// figures is what README shows of one .ci/run.
type figures struct {
	commit, machine string
	warm            bool // the run kept the caller's Go caches
	stages          []stage
	total           int
	mainJob, rerun  []string
	tests           []string // the test command's summary
}

type stage struct {
	name    string
	seconds int
}

// stageRE matches .ci/run's step line: "== NAME (at Ns; the stage before took Ms)".
var stageRE = regexp.MustCompile(`^== (.*) \(at (\d+)s; the stage before took (\d+)s\)$`)

// jobLine matches a line the main job prints on stdout (its progress lines,
// on stderr, are left out).
var jobLine = regexp.MustCompile(`^(demo source|snapshot|snapshot exists|resumed|partial|delta|stream|changes|check|demo|source):\s`)

// parse reads a .ci/run log.
func parse(r io.Reader) (*figures, error) {
	f := &figures{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	current, done := "", false
	inSummary := false
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if m := stageRE.FindStringSubmatch(line); m != nil {
			before, _ := strconv.Atoi(m[3])
			if n := len(f.stages); n > 0 {
				f.stages[n-1].seconds = before
			}
			if total, ok := strings.CutPrefix(m[1], "done in "); ok {
				f.total, _ = strconv.Atoi(strings.TrimSuffix(total, "s"))
				done = true
				current = ""
				continue
			}
			current = m[1]
			f.stages = append(f.stages, stage{name: m[1]})
			inSummary = false
			continue
		}
		switch {
		case f.commit == "" && strings.HasPrefix(line, "commit: "):
			f.commit = strings.TrimPrefix(line, "commit: ")
		case f.machine == "" && strings.HasPrefix(line, "machine: "):
			m := strings.TrimPrefix(line, "machine: ")
			f.machine, f.warm = strings.TrimSuffix(strings.TrimSuffix(m, ", CI_WARM=0"), ", CI_WARM=1"), strings.HasSuffix(m, "CI_WARM=1")
		case strings.HasPrefix(current, "README command 1:") && jobLine.MatchString(line):
			if strings.HasPrefix(line, "snapshot exists:") || len(f.rerun) > 0 {
				f.rerun = append(f.rerun, line)
			} else {
				f.mainJob = append(f.mainJob, line)
			}
		case strings.HasPrefix(current, "README command 2:") && strings.HasPrefix(line, "tests: "):
			inSummary = true
			f.tests = append(f.tests[:0], line)
		case inSummary:
			if rest, ok := strings.CutPrefix(line, "full output: "); ok {
				line = "full output: " + repoRelative(rest)
				inSummary = false
			}
			f.tests = append(f.tests, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	switch {
	case !done:
		return nil, errors.New(`the run did not finish (no "== done in" line): figures come from a passing run only`)
	case f.commit == "":
		return nil, errors.New(`no "commit:" line (a log of .ci/run before it printed one?)`)
	case len(f.mainJob) == 0 || len(f.rerun) == 0:
		return nil, errors.New("no output of the main job and its rerun in the stage README command 1")
	case len(f.tests) == 0:
		return nil, errors.New(`no "tests:" summary in the stage README command 2`)
	case !strings.Contains(f.tests[0], " 0 failed"):
		return nil, fmt.Errorf("the tests failed (%s): figures come from a passing run only", f.tests[0])
	}
	return f, nil
}

// repoRelative turns a path inside the clone .ci/run ran in into one
// relative to the repository: what follows its last "/.cache/".
func repoRelative(p string) string {
	if i := strings.LastIndex(p, "/.cache/"); i >= 0 {
		return p[i+1:]
	}
	return filepath.Base(p)
}

// markdown renders the figures as README's block.
func (f *figures) markdown() string {
	var b strings.Builder
	caches := "empty Go module and build caches"
	if f.warm {
		caches = "the Go caches of earlier runs (CDCSNAP_CI_WARM=1)"
	}
	fmt.Fprintf(&b, "The last `.ci/run` recorded here ran commit %s on %s, from %s; each stage's time in seconds:\n\n", f.commit, f.machine, caches)
	b.WriteString("| stage | s |\n| --- | ---: |\n")
	for _, s := range f.stages {
		name, _, _ := strings.Cut(s.name, " (")
		fmt.Fprintf(&b, "| %s | %d |\n", strings.ReplaceAll(name, "|", `\|`), s.seconds)
	}
	fmt.Fprintf(&b, "| all | %d |\n\n", f.total)
	b.WriteString("What the main job printed (its progress lines go to stderr):\n\n```\n")
	b.WriteString(strings.Join(f.mainJob, "\n"))
	b.WriteString("\n```\n\nIts rerun, which finds the snapshot and reads nothing:\n\n```\n")
	b.WriteString(strings.Join(f.rerun, "\n"))
	b.WriteString("\n```\n\nThe test command's summary:\n\n```\n")
	b.WriteString(strings.Join(f.tests, "\n"))
	b.WriteString("\n```\n")
	return b.String()
}

const (
	beginMarker = "<!-- cifigures:begin -->"
	endMarker   = "<!-- cifigures:end -->"
	// emptyBlock is the block before any run was recorded.
	emptyBlock = "No `.ci/run` is recorded here yet: after one, `go run ./internal/cifigures .cache/ci.log` fills this block.\n"
)

// splice replaces what lies between README's markers with block.
func splice(readme, block string) (string, error) {
	i := strings.Index(readme, beginMarker)
	j := strings.Index(readme, endMarker)
	if i < 0 || j < i || strings.Count(readme, beginMarker) != 1 || strings.Count(readme, endMarker) != 1 {
		return "", fmt.Errorf("want one %s followed by one %s", beginMarker, endMarker)
	}
	return readme[:i+len(beginMarker)] + "\n" + block + readme[j:], nil
}
