package bucketstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/cdcsnap/cdcsnap/internal/faultblob"
)

// TestErrorsMatchTheirCodeOnly: a bucket's error matches fs.ErrNotExist
// or fs.ErrExist only as its gocloud.dev code says. An error of another
// code whose cause is an ENOENT (a dial to a unix socket not there yet)
// is not a missing object, and the driver's error stays reachable for
// errors.Is and errors.As.
func TestErrorsMatchTheirCodeOnly(t *testing.T) {
	ctx := context.Background()
	fb := faultblob.New(memblob.OpenBucket(nil), true)
	s := New(fb.Bucket(), "s3://bucket/t", true)
	defer s.Close()
	if err := writeOnce(ctx, s, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}

	if _, err := s.ReadAll(ctx, "missing"); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrExist) {
		t.Errorf("a missing object: %v", err)
	}
	if err := writeOnce(ctx, s, "k", []byte("w")); !errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("put-if-absent of an existing object: %v", err)
	}

	dial := &os.SyscallError{Syscall: "connect", Err: fs.ErrNotExist}
	fb.Inject(faultblob.Fault{Op: faultblob.OpAttributes, Times: -1, Err: fmt.Errorf("dial: %w", dial)})
	_, err := s.Size(ctx, "k")
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failure of code Unknown caused by ENOENT reads as a missing object: %v", err)
	}
	var se *os.SyscallError
	if !errors.As(err, &se) || se != dial {
		t.Errorf("the driver's error is not reachable: %v", err)
	}
	if gcerrors.Code(err) != gcerrors.Unknown {
		t.Errorf("gcerrors.Code = %v, want Unknown", gcerrors.Code(err))
	}
	fb.Clear()

	fb.Inject(faultblob.Fault{Op: faultblob.OpAttributes, Err: context.Canceled, Code: gcerrors.Canceled})
	if _, err := s.Size(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled call: %v, want context.Canceled in its chain", err)
	}
}

// writeOnce writes key with put-if-absent.
func writeOnce(ctx context.Context, s *Store, key string, data []byte) error {
	w, err := s.NewWriter(ctx, key, true)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	return w.Close()
}
