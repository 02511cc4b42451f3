// Package objstore starts object-store servers on loopback for cdcsnap's
// tests: moto (S3), Azurite (Azure Blob) and fake-gcs-server (GCS), each on
// a free port, with one bucket made at start. A Store gives the gocloud.dev
// table URL that sink/delta opens, the environment the gocloud driver reads
// (set it in the test and in every child process), and the storage options
// delta-rs needs to read the same table through the same server.
//
// Installing a server's package can fail only for lack of a program
// (python3, npm) or of network: the Start functions then return an error
// wrapping ErrUnavailable and a *testenv.Unavailable that says what is
// missing and how to provide it, on which a test skips
// (testenv.SkipUnavailable). Every other failure is an error.
//
// The credentials here are the emulators' public, well-known development
// ones; still, nothing in this package prints them.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ErrUnavailable is wrapped by a Start function's error when the server's
// package could not be installed (no network, no node or python).
var ErrUnavailable = errors.New("objstore: server unavailable")

// Bucket is the bucket (S3, GCS) or container (Azure) each Start makes.
// S3 bucket names must be valid DNS names, so not "b".
const Bucket = "lake"

// Store is an object-store server running on loopback.
type Store struct {
	// Kind is "s3", "azure" or "gcs".
	Kind string
	// Endpoint is the server's base URL, http://127.0.0.1:PORT.
	Endpoint string

	// urlOf returns the gocloud URL of a table folder behind endpoint
	// (host:port).
	urlOf func(hostport, table string) string
	// env returns the NAME=value pairs the gocloud driver reads, for a
	// client that reaches the server at hostport.
	env func(hostport string) []string
	// rsURI and rsOpts are delta-rs's table URI and storage options.
	rsURI  func(table string) string
	rsOpts func() map[string]string
	// rsEnv is extra environment for the delta-rs process.
	rsEnv func() []string

	stopOnce sync.Once
	stop     func() error
	stopErr  error
}

// HostPort is the server's host:port.
func (s *Store) HostPort() string { return strings.TrimPrefix(s.Endpoint, "http://") }

// URL is the gocloud.dev URL of the table folder table in the bucket, as
// blobstore.Open takes it, for clients with Env.
func (s *Store) URL(table string) string { return s.urlOf(s.HostPort(), table) }

// URLVia is URL for clients that reach the server through hostport (a
// proxy in front of it), with EnvVia(hostport).
func (s *Store) URLVia(hostport, table string) string { return s.urlOf(hostport, table) }

// Env is the environment (NAME=value) the gocloud driver needs to reach
// the server: credentials and, for GCS, STORAGE_EMULATOR_HOST.
func (s *Store) Env() []string { return s.env(s.HostPort()) }

// EnvVia is Env for clients that reach the server through hostport.
func (s *Store) EnvVia(hostport string) []string { return s.env(hostport) }

// DeltaRSURI is the table's URI for delta-rs (s3://, az://, gs://).
func (s *Store) DeltaRSURI(table string) string { return s.rsURI(table) }

// DeltaRSOptions are the storage_options delta-rs (object_store) needs to
// read the table through this server.
func (s *Store) DeltaRSOptions() map[string]string { return s.rsOpts() }

// DeltaRSEnv is extra environment for the Python process that runs
// delta-rs (nil for most stores).
func (s *Store) DeltaRSEnv() []string {
	if s.rsEnv == nil {
		return nil
	}
	return s.rsEnv()
}

// Close stops the server and removes nothing else; it is safe to call
// twice.
func (s *Store) Close() error {
	s.stopOnce.Do(func() { s.stopErr = s.stop() })
	return s.stopErr
}

// RepoRoot returns the nearest folder above the working directory holding
// a go.mod: the repository, whose .cache the servers are installed in.
func RepoRoot() (string, error) {
	dir, err := filepath.Abs(".")
	if err != nil {
		return "", fmt.Errorf("objstore: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("objstore: no go.mod above the working directory")
		}
		dir = parent
	}
}

// freePort returns a TCP port free on 127.0.0.1 a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("objstore: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// process is a server program started by a Start function.
type process struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error
}

func startProcess(name string, args []string, env []string) (*process, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("objstore: starting %s: %w", filepath.Base(name), err)
	}
	p := &process{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// kill stops the process and waits for it.
func (p *process) kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("objstore: stopping the server: %w", err)
	}
	<-p.done
	return nil
}

// waitHTTP polls url until it answers any HTTP status, the process exits
// or the deadline passes.
func (p *process) waitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("objstore: %w", err)
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("objstore: the server exited before answering (%v): %s", p.err, p.out.String())
		case <-ctx.Done():
			return fmt.Errorf("objstore: the server did not answer %s in %v: %s", url, timeout, p.out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// lockedBuffer is a goroutine-safe output buffer of bounded size.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > 64<<10 {
		l.b = l.b[len(l.b)-32<<10:]
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// startServer starts a server on a free loopback port (args gives its
// command line for the port) and waits until readyPath answers over
// HTTP; a port taken meanwhile, or a server that does not come up in
// timeout, gets two more tries.
func startServer(ctx context.Context, bin string, args func(port int) []string, readyPath string, timeout time.Duration) (*process, int, error) {
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, 0, err
		}
		p, err := startProcess(bin, args(port), nil)
		if err != nil {
			return nil, 0, err
		}
		if err = p.waitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d%s", port, readyPath), timeout); err == nil {
			return p, port, nil
		}
		_ = p.kill()
		if attempt == 2 {
			return nil, 0, err
		}
	}
}
