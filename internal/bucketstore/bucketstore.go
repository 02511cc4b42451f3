// Package bucketstore adapts a gocloud.dev/blob bucket to the methods of
// sink/delta.Store, so a table can live in any store gocloud.dev has a
// driver for (package sink/delta/blobstore), and tests can inject faults
// into one (package internal/faultblob wraps a bucket).
package bucketstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/cdcsnap/cdcsnap/internal/storehints"
)

// Store is a bucket with the methods of sink/delta.Store.
type Store struct {
	b     *blob.Bucket
	url   string
	close bool
}

// New returns b, the bucket of the table url, as a store. With
// closeBucket, the store's Close closes b; else b stays open for its
// owner.
func New(b *blob.Bucket, url string, closeBucket bool) *Store {
	return &Store{b: b, url: url, close: closeBucket}
}

// err makes gocloud.dev's error codes the standard library's sentinels:
// NotFound is fs.ErrNotExist, and a refused
// put-if-absent (FailedPrecondition, the code v0.49.0's
// blob.WriterOptions.IfNotExist documents, or AlreadyExists) is
// fs.ErrExist. A refusal of
// a store that is not set up carries what fixes it (the Hint method
// sink/delta.Store documents).
func (s *Store) err(err error) error {
	if err == nil {
		return nil
	}
	e := &storeError{err: err, hint: storehints.Hint(s.url, err)}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		e.is = fs.ErrNotExist
	case gcerrors.FailedPrecondition, gcerrors.AlreadyExists:
		e.is = fs.ErrExist
	}
	return e
}

// storeError is a bucket's error that matches fs.ErrNotExist or
// fs.ErrExist only as its gocloud.dev code says, and anything else as the
// driver's error does. It has no Unwrap: a driver error of another code
// whose cause is an ENOENT (a proxy's unix socket not there yet) must not
// read as a missing object, which would make a recorded part Lost or a
// partial snapshot gone.
type storeError struct {
	err  error
	is   error
	hint string
}

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Is(target error) bool {
	if target == fs.ErrNotExist || target == fs.ErrExist {
		return target == e.is
	}
	return errors.Is(e.err, target)
}
func (e *storeError) As(target any) bool { return errors.As(e.err, target) }
func (e *storeError) Hint() string       { return e.hint }

// ReadAll returns the whole object.
func (s *Store) ReadAll(ctx context.Context, key string) ([]byte, error) {
	b, err := s.b.ReadAll(ctx, key)
	return b, s.err(err)
}

// NewRangeReader reads length bytes of the object from offset.
func (s *Store) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	r, err := s.b.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, s.err(err)
	}
	return r, nil
}

// Size returns the object's size in bytes.
func (s *Store) Size(ctx context.Context, key string) (int64, error) {
	a, err := s.b.Attributes(ctx, key)
	if err != nil {
		return 0, s.err(err)
	}
	return a.Size, nil
}

// List lists prefix with the delimiter "/".
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	it := s.b.List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})
	var keys []string
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return keys, nil
		}
		if err != nil {
			return nil, s.err(err)
		}
		keys = append(keys, obj.Key)
	}
}

// contentType is the Content-Type sink/delta gave each object it wrote
// through a bucket: log files are JSON, data files and checkpoints
// Parquet (octet-stream), the conditional-write probe text.
func contentType(key string) string {
	switch {
	case strings.HasSuffix(key, ".json"), strings.HasSuffix(key, "_last_checkpoint"):
		return "application/json"
	case strings.HasPrefix(key, "_cdcsnap/probe/"):
		return "text/plain"
	}
	return "application/octet-stream"
}

// NewWriter writes the object with the bucket's writer, whose write is
// dropped when ctx is cancelled before Close.
func (s *Store) NewWriter(ctx context.Context, key string, ifNotExist bool) (io.WriteCloser, error) {
	w, err := s.b.NewWriter(ctx, key, &blob.WriterOptions{IfNotExist: ifNotExist, ContentType: contentType(key)})
	if err != nil {
		return nil, s.err(err)
	}
	return &writer{w: w, s: s}, nil
}

type writer struct {
	w *blob.Writer
	s *Store
}

func (w *writer) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	return n, w.s.err(err)
}

func (w *writer) Close() error { return w.s.err(w.w.Close()) }

// Delete removes the object.
func (s *Store) Delete(ctx context.Context, key string) error {
	return s.err(s.b.Delete(ctx, key))
}

// Close closes the bucket if New was told to.
func (s *Store) Close() error {
	if !s.close {
		return nil
	}
	if err := s.b.Close(); err != nil {
		return fmt.Errorf("closing the bucket: %w", err)
	}
	return nil
}
