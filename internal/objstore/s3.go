package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cdcsnap/cdcsnap/internal/testenv"
)

// pythonEnv names the interop Python (see Python).
const pythonEnv = "CDCSNAP_PYTHON"

// s3Key and s3Secret are moto's: it accepts any access key.
const (
	s3Key    = "cdcsnap-test"
	s3Secret = "cdcsnap-test-secret"
	s3Region = "us-east-1"
)

// motoLauncher runs moto's WSGI app as moto_server (moto/server.py main)
// does, on the host and port given, threaded as moto_server is unless the
// third argument is "serial".
const motoLauncher = `
import sys
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
app = DomainDispatcherApplication(create_backend_app)
run_simple(sys.argv[1], int(sys.argv[2]), app, threaded=sys.argv[3] != "serial", request_handler=MotoRequestHandler)
`

// S3Options tune StartS3.
type S3Options struct {
	// Serial runs moto single-threaded: one request at a time. moto's
	// put_object checks If-None-Match and then stores the object without
	// a lock (moto 5.2.5, s3/responses.py put_object), so under moto's
	// default threaded server two racing conditional puts can both
	// succeed; real S3 decides them atomically. Serial makes moto atomic
	// too, which is what a test of the sink (not of moto) needs.
	Serial bool
}

// StartS3 starts moto in server mode (moto[server] 5.2.5 in the interop
// venv) on a free loopback port and makes bucket Bucket.
//
// gocloud.dev v0.49.0 reaches it with these URL parameters (blob/s3blob/
// s3blob.go URLOpener: use_path_style, disable_https; aws/aws.go
// V2ConfigFromURLParams: endpoint, region), and credentials from the
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY environment (the SDK's
// default chain). blob.WriterOptions.IfNotExist becomes
// If-None-Match: * on PutObject (s3blob.go NewTypedWriter), and moto's
// PreconditionFailed maps to gcerrors.FailedPrecondition (s3blob.go
// ErrorCode).
func StartS3(ctx context.Context, opts S3Options) (*Store, error) {
	py, err := Python()
	if err != nil {
		return nil, err
	}
	mode := "threaded"
	if opts.Serial {
		mode = "serial"
	}
	p, port, err := startServer(ctx, py, func(port int) []string {
		return []string{"-c", motoLauncher, "127.0.0.1", strconv.Itoa(port), mode}
	}, "/moto-api/", 60*time.Second)
	if err != nil {
		return nil, err
	}
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := createS3Bucket(ctx, endpoint); err != nil {
		_ = p.kill()
		return nil, err
	}
	s := &Store{Kind: "s3", Endpoint: endpoint, stop: p.kill}
	s.urlOf = func(hostport, table string) string {
		q := url.Values{}
		q.Set("endpoint", "http://"+hostport)
		q.Set("use_path_style", "true")
		q.Set("disable_https", "true")
		q.Set("region", s3Region)
		// Validate response checksums only where the API requires them:
		// moto sends none on GetObject, and the SDK would log a debug
		// line about it on every read (aws/aws.go
		// V2ConfigFromURLParams: response_checksum_validation).
		q.Set("response_checksum_validation", "when_required")
		return "s3://" + Bucket + "/" + strings.Trim(table, "/") + "?" + q.Encode()
	}
	s.env = func(string) []string {
		return []string{
			"AWS_ACCESS_KEY_ID=" + s3Key,
			"AWS_SECRET_ACCESS_KEY=" + s3Secret,
			"AWS_SESSION_TOKEN=",
			"AWS_PROFILE=",
			"AWS_CONFIG_FILE=" + os.DevNull,
			"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
			"AWS_EC2_METADATA_DISABLED=true",
		}
	}
	s.rsURI = func(table string) string { return "s3://" + Bucket + "/" + strings.Trim(table, "/") }
	s.rsOpts = func() map[string]string {
		// object_store's AmazonS3ConfigKey names (delta-rs passes them on).
		return map[string]string{
			"AWS_ENDPOINT_URL":                 endpoint,
			"AWS_ALLOW_HTTP":                   "true",
			"AWS_REGION":                       s3Region,
			"AWS_ACCESS_KEY_ID":                s3Key,
			"AWS_SECRET_ACCESS_KEY":            s3Secret,
			"AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
		}
	}
	return s, nil
}

// createS3Bucket makes Bucket with a plain CreateBucket request (moto does
// not check signatures).
func createS3Bucket(ctx context.Context, endpoint string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, endpoint+"/"+Bucket, bytes.NewReader(nil))
	if err != nil {
		return fmt.Errorf("objstore: %w", err)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("objstore: creating bucket %s: %w", Bucket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("objstore: creating bucket %s: %s", Bucket, resp.Status)
	}
	return nil
}

// Python returns the interop Python, which runs moto and delta-rs:
// CDCSNAP_PYTHON when it imports moto.server, or else the one .ci/pyenv
// installs (idempotent; .ci/requirements.txt pins deltalake and
// moto[server]). It returns an error wrapping ErrUnavailable when
// .ci/pyenv fails (no network).
func Python() (string, error) {
	hasMoto := func(py string) bool {
		return exec.Command(py, "-c", "import moto.server, werkzeug").Run() == nil
	}
	if py := os.Getenv(pythonEnv); py != "" && hasMoto(py) {
		return py, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	if _, err := testenv.Python3.Find(); err != nil {
		return "", fmt.Errorf("%w: moto is a Python package: %w", ErrUnavailable, err)
	}
	cmd := exec.Command("bash", filepath.Join(root, ".ci", "pyenv"))
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 { // pyenv: python3 cannot make a venv
		return "", fmt.Errorf("%w: %w", ErrUnavailable, &testenv.Unavailable{Component: testenv.Python3.Component, Why: lastLines(stderr.String(), 1), Enable: testenv.Python3.Enable})
	}
	if err != nil {
		return "", fmt.Errorf("%w: moto[server] (.ci/requirements.txt): %w", ErrUnavailable, testenv.Offline("moto", "PyPI", ".ci/pyenv", fmt.Sprintf("%v\n%s", err, lastLines(stderr.String(), 5))))
	}
	py := strings.TrimSpace(string(out))
	if !hasMoto(py) {
		return "", fmt.Errorf("%w: %s cannot import moto.server after .ci/pyenv", ErrUnavailable, py)
	}
	return py, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
