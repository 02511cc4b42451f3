// Package importcheck proves the library works as a user imports it: a
// fresh module outside this repository requires github.com/cdcsnap/cdcsnap,
// builds the README's usage program, and bootstraps the fake CDC database
// into a Delta folder. If the public API drifts from the README, this test
// fails.
package importcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The README's usage program lies between these lines, in a ```go fence.
const (
	beginMarker = "<!-- importcheck:begin -->"
	endMarker   = "<!-- importcheck:end -->"
)

// repoRoot returns the module root: the nearest folder above this
// package's with a go.mod.
func repoRoot(t *testing.T) string {
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
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}

// snippet extracts the Go program between the markers of readme; ok is
// false when the markers are absent.
func snippet(readme string) (string, bool, error) {
	_, rest, found := strings.Cut(readme, beginMarker)
	if !found {
		return "", false, nil
	}
	body, _, found := strings.Cut(rest, endMarker)
	if !found {
		return "", false, fmt.Errorf("README.md has %q but no %q after it", beginMarker, endMarker)
	}
	m := regexp.MustCompile("(?s)```go\\s*\\n(.*?)```").FindStringSubmatch(body)
	if m == nil {
		return "", false, fmt.Errorf("README.md: no ```go fence between %q and %q", beginMarker, endMarker)
	}
	return m[1], true, nil
}

func TestSnippetExtraction(t *testing.T) {
	readme := "# x\n" + beginMarker + "\n\n```go\npackage main\n\nfunc main() {}\n```\n" + endMarker + "\nmore\n"
	got, ok, err := snippet(readme)
	if err != nil || !ok || got != "package main\n\nfunc main() {}\n" {
		t.Errorf("snippet = %q, %v, %v", got, ok, err)
	}
	if _, ok, err := snippet("no markers"); ok || err != nil {
		t.Errorf("snippet without markers = %v, %v; want not found, no error", ok, err)
	}
	if _, _, err := snippet(beginMarker + "\n```go\nx\n```\n"); err == nil {
		t.Error("snippet with no end marker: no error")
	}
	if _, _, err := snippet(beginMarker + "\nno fence\n" + endMarker); err == nil {
		t.Error("snippet with no go fence: no error")
	}
}

// TestReadmeBlock checks testdata/readme-block.md, the block to paste into
// README.md, holds exactly testdata/main.go between the markers.
func TestReadmeBlock(t *testing.T) {
	block, err := os.ReadFile(filepath.Join("testdata", "readme-block.md"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := snippet(string(block))
	if err != nil || !ok || got != string(want) {
		t.Errorf("testdata/readme-block.md extracts to %q (%v, %v), want testdata/main.go", got, ok, err)
	}
}

// maxProgramLines is the most lines the README's usage program may have,
// imports and helpers included: short enough to read at a glance.
const maxProgramLines = 30

// TestProgramShape checks the usage program (the README's, else
// testdata/main.go) is gofmt'd and at most maxProgramLines lines.
func TestProgramShape(t *testing.T) {
	src := program(t, repoRoot(t))
	formatted, err := format.Source(src)
	if err != nil {
		t.Fatalf("the usage program does not parse: %v", err)
	}
	if !bytes.Equal(formatted, src) {
		t.Errorf("the usage program is not gofmt'd; gofmt makes it:\n%s", formatted)
	}
	if n := bytes.Count(src, []byte("\n")); n > maxProgramLines {
		t.Errorf("the usage program has %d lines, want at most %d", n, maxProgramLines)
	}
}

// program returns the program to run: the README's snippet when README.md
// has the markers, else testdata/main.go.
func program(t *testing.T, root string) []byte {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, ok, err := snippet(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Log("running the program between the importcheck markers of README.md")
		return []byte(src)
	}
	t.Logf("README.md has no %s ... %s block: running testdata/main.go", beginMarker, endMarker)
	b, err := os.ReadFile(filepath.Join("testdata", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestImportedModule writes a fresh module that requires cdcsnap (replaced
// by this checkout), runs the usage program twice with the go command, and
// checks its output and the Delta table it wrote. It needs no network:
// the fresh module requires every module at the version cdcsnap's go.mod
// names, so the go command needs only what building cdcsnap's own tests
// put in the module cache (GOPROXY=off). Left to resolve its requirements
// itself (-mod=mod), it would read go.mod files that cdcsnap's pruned
// module graph never loads, and fail on a fresh machine.
func TestImportedModule(t *testing.T) {
	if testing.Short() {
		t.Skip("importcheck builds a fresh module with the go command (slow); skipped under -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	root := repoRoot(t)
	dir := t.TempDir()
	gomod, err := freshGoMod(t, goBin, root)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": gomod, "go.sum": sum, "main.go": program(t, root)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(),
		"GOFLAGS=-mod=readonly", // the fresh go.mod is complete: nothing to resolve
		"GOPROXY=off",           // offline: the module cache has every dependency
		"GOWORK=off",
		"GOTOOLCHAIN=local",
	)
	runProgram := func() string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), goBin, "run", ".")
		cmd.Dir, cmd.Env = dir, env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) && strings.Contains(stderr.String(), "GOPROXY=off") {
				t.Fatalf("go run needs a module that building cdcsnap's tests did not put in the module cache: %v\n%s", err, &stderr)
			}
			t.Fatalf("go run . in a fresh module: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
		}
		return stdout.String()
	}
	line := regexp.MustCompile(`^snapshot: (\d+) rows at LSN (0x[0-9A-F]{20}); stream from (0x[0-9A-F]{20})\n$`)
	first := runProgram()
	m := line.FindStringSubmatch(first)
	if m == nil || m[1] != "2" {
		t.Fatalf("first run printed %q, want \"snapshot: 2 rows at LSN 0x…; stream from 0x…\"", first)
	}
	if _, err := os.Stat(filepath.Join(dir, "bronze", "orders", "_delta_log", "00000000000000000000.json")); err != nil {
		t.Errorf("the program wrote no Delta commit: %v", err)
	}
	// A rerun finds the snapshot: same LSN, nothing read.
	second := runProgram()
	m2 := line.FindStringSubmatch(second)
	if m2 == nil || m2[1] != "0" || m2[2] != m[2] || m2[3] != m[3] {
		t.Errorf("rerun printed %q, want 0 rows at the first run's LSN %s", second, m[2])
	}
}

// freshGoMod returns the go.mod of a module that requires cdcsnap, replaced
// by the checkout at root, and every module cdcsnap's go.mod requires at
// the same version (read with go mod edit -json).
func freshGoMod(t *testing.T, goBin, root string) ([]byte, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), goBin, "mod", "edit", "-json")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go mod edit -json in %s: %w", root, err)
	}
	var mod struct {
		Go      string
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		return nil, fmt.Errorf("go mod edit -json: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "module example.com/importcheck\n\ngo %s\n\nrequire (\n\tgithub.com/cdcsnap/cdcsnap v0.0.0\n", mod.Go)
	for _, r := range mod.Require {
		fmt.Fprintf(&b, "\t%s %s\n", r.Path, r.Version)
	}
	fmt.Fprintf(&b, ")\n\nreplace github.com/cdcsnap/cdcsnap => %s\n", root)
	return []byte(b.String()), nil
}

// heavyPackages are packages (with every package below them) the
// README's program, which writes to a local folder, must not link:
// arrow-go's Flight, which pqarrow imports for the Arrow schema it stores
// in a footer (arrow-go v18.9.0 parquet/pqarrow/schema.go and
// file_writer.go), and pqarrow itself (internal/pqfile writes and reads
// Parquet without them); gocloud.dev, whose blob package links gRPC
// through gax-go for its retries and protobuf for its error codes
// (gocloud.dev v0.49.0 internal/retry/retry.go, internal/gcerr) and is
// for cloud tables only (package sink/delta/blobstore); and gRPC and
// protobuf, whoever would bring them in.
var heavyPackages = []string{
	"github.com/apache/arrow-go/v18/arrow/flight",
	"github.com/apache/arrow-go/v18/parquet/pqarrow",
	"gocloud.dev",
	"google.golang.org/grpc",
	"google.golang.org/protobuf",
}

// TestProgramLinksNoHeavyPackage lists the packages the usage program
// links (go list -deps) and fails when one of heavyPackages is among
// them, naming the package of the program that imports it.
func TestProgramLinksNoHeavyPackage(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	root := repoRoot(t)
	prog := filepath.Join(t.TempDir(), "main.go")
	if err := os.WriteFile(prog, program(t, root), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), goBin, "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", prog)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, &stderr)
	}
	bad, n := linkedHeavy(string(out))
	if n < 100 {
		t.Fatalf("go list -deps listed %d packages; want the program's whole closure", n)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// heavy reports whether pkg is one of heavyPackages or below one.
func heavy(pkg string) bool {
	return slices.ContainsFunc(heavyPackages, func(h string) bool { return pkg == h || strings.HasPrefix(pkg, h+"/") })
}

// linkedHeavy reads go list lines ("package import import ...") and
// returns what breaks the rule (each heavy package a package outside
// them imports), and how many packages there are.
func linkedHeavy(list string) (bad []string, packages int) {
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		packages++
		if heavy(fields[0]) {
			continue
		}
		for _, imp := range fields[1:] {
			if heavy(imp) {
				bad = append(bad, fields[0]+" imports "+imp)
			}
		}
	}
	return bad, packages
}

func TestLinkedHeavy(t *testing.T) {
	bad, n := linkedHeavy("main fmt github.com/cdcsnap/cdcsnap/sink/delta\n" +
		"github.com/cdcsnap/cdcsnap/sink/delta gocloud.dev/blob github.com/apache/arrow-go/v18/parquet/pqarrow\n" +
		"github.com/apache/arrow-go/v18/parquet/pqarrow github.com/apache/arrow-go/v18/arrow/flight\n" +
		"gocloud.dev/blob github.com/googleapis/gax-go/v2\n" +
		"github.com/googleapis/gax-go/v2 google.golang.org/grpc\n" +
		"github.com/cdcsnap/cdcsnap/snapshot google.golang.org/protobuf/proto gocloud.devx/y\n" +
		"github.com/apache/arrow-go/v18/arrow/flightsql x\n")
	want := []string{
		"github.com/cdcsnap/cdcsnap/sink/delta imports gocloud.dev/blob",
		"github.com/cdcsnap/cdcsnap/sink/delta imports github.com/apache/arrow-go/v18/parquet/pqarrow",
		"github.com/googleapis/gax-go/v2 imports google.golang.org/grpc",
		"github.com/cdcsnap/cdcsnap/snapshot imports google.golang.org/protobuf/proto",
	}
	if n != 7 || !slices.Equal(bad, want) {
		t.Errorf("linkedHeavy = %q, %d; want %q, 7", bad, n, want)
	}
}
