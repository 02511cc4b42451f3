package objstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cdcsnap/cdcsnap/internal/testenv"
)

// StartGCS starts fake-gcs-server (Go module github.com/fsouza/
// fake-gcs-server, in memory, as the program ./internal/objstore/fakegcs,
// built with the go command on first use into a temporary folder) on a
// free loopback port and makes bucket Bucket.
//
// gocloud.dev v0.49.0 reaches it with gs://lake/path and
// STORAGE_EMULATOR_HOST=127.0.0.1:PORT (blob/gcsblob/gcsblob.go: the URL
// opener then uses placeholder credentials, and OpenBucket
// (httpClientOptions) sends the JSON API to http://HOST/storage/v1/
// without authentication). IfNotExist becomes
// storage.Conditions{DoesNotExist: true}, ifGenerationMatch=0 on the
// upload (NewTypedWriter).
func StartGCS(ctx context.Context) (*Store, error) {
	dir, err := os.MkdirTemp("", "cdcsnap-fakegcs-")
	if err != nil {
		return nil, fmt.Errorf("objstore: %w", err)
	}
	bin := filepath.Join(dir, "fakegcs")
	goCmd, err := exec.LookPath("go")
	if err != nil {
		if goCmd, err = exec.LookPath(filepath.Join(os.Getenv("GOROOT"), "bin", "go")); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, &testenv.Unavailable{Component: "Go", Why: "no go command on PATH or in $GOROOT/bin to build fake-gcs-server", Enable: "put the go command on PATH"})
		}
	}
	root, err := RepoRoot()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	build := exec.CommandContext(ctx, goCmd, "build", "-o", bin, "./internal/objstore/fakegcs")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w: building fake-gcs-server: %w", ErrUnavailable, testenv.Offline("fake-gcs-server", "the Go module proxy", "go build ./internal/objstore/fakegcs", fmt.Sprintf("%v\n%s", err, lastLines(string(out), 5))))
	}
	p, port, err := startServer(ctx, bin, func(port int) []string {
		return []string{"-port", strconv.Itoa(port), "-bucket", Bucket}
	}, "/storage/v1/b", 30*time.Second)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	s := &Store{Kind: "gcs", Endpoint: endpoint, stop: func() error {
		err := p.kill()
		if rerr := os.RemoveAll(dir); err == nil && rerr != nil {
			err = fmt.Errorf("objstore: %w", rerr)
		}
		return err
	}}
	s.urlOf = func(_, table string) string { return "gs://" + Bucket + "/" + strings.Trim(table, "/") }
	s.env = func(hostport string) []string {
		return []string{"STORAGE_EMULATOR_HOST=" + hostport}
	}
	s.rsURI = func(table string) string { return "gs://" + Bucket + "/" + strings.Trim(table, "/") }
	s.rsOpts = func() map[string]string {
		return map[string]string{
			"google_base_url":       endpoint,
			"google_skip_signature": "true",
			"allow_http":            "true",
		}
	}
	return s, nil
}
