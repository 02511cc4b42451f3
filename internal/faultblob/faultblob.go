// Package faultblob is a gocloud.dev/blob driver that wraps another bucket
// (memblob, fileblob, any *blob.Bucket) and injects failures into it, for
// reliability tests: fail the Nth write, close, read, list or delete of the
// keys that match a pattern; write half an object and then fail (the
// object never appears, as on S3, GCS, Azure and fileblob, whose writes
// are atomic); leave a torn object visible (a store without atomic writes);
// or store an object whole and still report an error (the acknowledgement
// lost on the way back).
//
// Every call is recorded (Calls), so a test can run a clean pass first,
// count the operations, and then pick a random crash point among them.
package faultblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/gcerrors"
)

// Op is an operation a Fault can fail.
type Op int

// The operations.
const (
	// OpWrite fails a writer of a matching key part-way: the Write call
	// that would pass Fault.After bytes returns the error (Nth counts the
	// writers opened for matching keys).
	OpWrite Op = iota
	// OpClose fails a writer's Close: the object is complete on the
	// caller's side, then the store fails to commit it (or, with
	// AckLost, commits it and reports an error).
	OpClose
	// OpOpenRead fails NewRangeReader.
	OpOpenRead
	// OpRead fails a reader of a matching key once After bytes were read
	// (Nth counts the readers opened).
	OpRead
	// OpList fails a page of a listing whose prefix matches.
	OpList
	// OpDelete fails Delete.
	OpDelete
	// OpAttributes fails Attributes.
	OpAttributes
	// OpCopy fails Copy (matched on the destination key).
	OpCopy
)

var opNames = [...]string{"write", "close", "open-read", "read", "list", "delete", "attributes", "copy"}

// String implements fmt.Stringer.
func (o Op) String() string {
	if o >= 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Mode says what a failed write leaves in the store.
type Mode int

const (
	// Abort: the object never appears (the write is canceled). This is
	// what every gocloud.dev store does when a write fails.
	Abort Mode = iota
	// Torn: the bytes written before the failure are stored as the whole
	// object, then the error is returned. No gocloud.dev store does this;
	// it models a store without atomic writes (and a process killed while
	// writing a file in place).
	Torn
	// AckLost: the whole object is stored, then the error is returned (the
	// request succeeded but its answer was lost). Only for OpClose.
	AckLost
)

// ErrInjected is the default error of a Fault; every injected error wraps
// Fault.Err, so errors.Is finds it through the blob package's wrapping.
var ErrInjected = errors.New("faultblob: injected fault")

// Fault describes a failure to inject.
type Fault struct {
	// Op is the operation to fail.
	Op Op
	// Key is a regular expression a key must match (for OpList, the
	// listing's prefix); empty matches every key.
	Key string
	// Nth fails the Nth matching call counted from when the fault was
	// injected, from 1; zero means 1.
	Nth int
	// Times is how many matching calls fail from the Nth on; zero means 1,
	// negative means every one.
	Times int
	// After is, for OpWrite, the bytes a writer lets through before it
	// fails (half an object); for OpRead, the bytes read before the
	// failure. Negative means half of what the object ends up being (for
	// OpWrite, the first Write call reaching half of the bytes written so
	// far fails; for OpRead, half of the object's size).
	After int64
	// Mode says what a failed write leaves behind (OpWrite, OpClose).
	Mode Mode
	// Err is the error returned (wrapped); nil means ErrInjected.
	Err error
	// Code is the gcerrors code the blob package reports for it; zero is
	// gcerrors.Unknown.
	Code gcerrors.ErrorCode
}

// Call is one recorded operation.
type Call struct {
	Op  Op
	Key string
	// Failed is true when a fault fired on this call.
	Failed bool
}

type fault struct {
	Fault
	re    *regexp.Regexp
	seen  int
	fired int
}

// Bucket is the fault-injecting driver. Use Bucket() to get a *blob.Bucket.
type Bucket struct {
	inner      *blob.Bucket
	closeInner bool

	mu     sync.Mutex
	faults []*fault
	calls  []Call
	fired  int
	// unconditional drops IfNotExist from writes: a store that ignores
	// If-None-Match (see IgnoreIfNotExist).
	unconditional bool
}

// IgnoreIfNotExist makes b a store without conditional writes: a write
// with IfNotExist replaces an existing object instead of failing.
func (b *Bucket) IgnoreIfNotExist() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unconditional = true
}

// injected is the error type of injected faults.
type injected struct {
	op   Op
	key  string
	err  error
	code gcerrors.ErrorCode
}

func (e *injected) Error() string {
	return fmt.Sprintf("faultblob: %s %q: %v", e.op, e.key, e.err)
}

func (e *injected) Unwrap() error { return e.err }

// New wraps inner. Closing the returned bucket leaves inner open unless
// closeInner.
func New(inner *blob.Bucket, closeInner bool) *Bucket {
	return &Bucket{inner: inner, closeInner: closeInner}
}

// Bucket returns a new *blob.Bucket over b; close it when done.
func (b *Bucket) Bucket() *blob.Bucket { return blob.NewBucket(b) }

// Inject adds f. An invalid Key pattern panics (a test bug).
func (b *Bucket) Inject(f Fault) {
	if f.Nth <= 0 {
		f.Nth = 1
	}
	if f.Times == 0 {
		f.Times = 1
	}
	if f.Err == nil {
		f.Err = ErrInjected
	}
	ff := &fault{Fault: f}
	if f.Key != "" {
		ff.re = regexp.MustCompile(f.Key)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.faults = append(b.faults, ff)
}

// Clear removes every fault (not the record of calls).
func (b *Bucket) Clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.faults = nil
}

// Fired returns how many injected failures fired so far.
func (b *Bucket) Fired() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fired
}

// Calls returns the operations recorded so far.
func (b *Bucket) Calls() []Call {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Call(nil), b.calls...)
}

// Count returns how many recorded calls of op had a key matching the
// regular expression key (empty: any).
func (b *Bucket) Count(op Op, key string) int {
	var re *regexp.Regexp
	if key != "" {
		re = regexp.MustCompile(key)
	}
	n := 0
	for _, c := range b.Calls() {
		if c.Op == op && (re == nil || re.MatchString(c.Key)) {
			n++
		}
	}
	return n
}

// ResetCalls forgets the recorded calls.
func (b *Bucket) ResetCalls() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = nil
}

// check records a call of op on key and returns the fault that fires on
// it, if any. A fault that fires on a call is counted once per call.
func (b *Bucket) check(op Op, key string) *fault {
	b.mu.Lock()
	defer b.mu.Unlock()
	var hit *fault
	for _, f := range b.faults {
		if f.Op != op || (f.re != nil && !f.re.MatchString(key)) {
			continue
		}
		f.seen++
		if hit == nil && f.seen >= f.Nth && (f.Times < 0 || f.fired < f.Times) {
			f.fired++
			hit = f
		}
	}
	if hit != nil {
		b.fired++
	}
	b.calls = append(b.calls, Call{Op: op, Key: key, Failed: hit != nil})
	return hit
}

func (f *fault) err(key string) error {
	return &injected{op: f.Op, key: key, err: f.Err, code: f.Code}
}

// ErrorCode implements driver.Bucket.
func (b *Bucket) ErrorCode(err error) gcerrors.ErrorCode {
	var inj *injected
	if errors.As(err, &inj) {
		if inj.code == 0 {
			return gcerrors.Unknown
		}
		return inj.code
	}
	return gcerrors.Code(err)
}

// As implements driver.Bucket.
func (b *Bucket) As(i any) bool { return b.inner.As(i) }

// ErrorAs implements driver.Bucket.
func (b *Bucket) ErrorAs(err error, i any) bool { return b.inner.ErrorAs(err, i) }

// Attributes implements driver.Bucket.
func (b *Bucket) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	if f := b.check(OpAttributes, key); f != nil {
		return nil, f.err(key)
	}
	a, err := b.inner.Attributes(ctx, key)
	if err != nil {
		return nil, err
	}
	return &driver.Attributes{
		CacheControl: a.CacheControl, ContentDisposition: a.ContentDisposition, ContentEncoding: a.ContentEncoding,
		ContentLanguage: a.ContentLanguage, ContentType: a.ContentType, Metadata: a.Metadata,
		CreateTime: a.CreateTime, ModTime: a.ModTime, Size: a.Size, MD5: a.MD5, ETag: a.ETag, AsFunc: a.As,
	}, nil
}

// ListPaged implements driver.Bucket.
func (b *Bucket) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	if f := b.check(OpList, opts.Prefix); f != nil {
		return nil, f.err(opts.Prefix)
	}
	pageSize := opts.PageSize
	if pageSize <= 0 {
		pageSize = 1000
	}
	token := opts.PageToken
	if len(token) == 0 {
		token = blob.FirstPageToken
	}
	objs, next, err := b.inner.ListPage(ctx, token, pageSize, &blob.ListOptions{Prefix: opts.Prefix, Delimiter: opts.Delimiter})
	if err != nil {
		if errors.Is(err, io.EOF) {
			return &driver.ListPage{}, nil
		}
		return nil, err
	}
	page := &driver.ListPage{NextPageToken: next}
	for _, o := range objs {
		page.Objects = append(page.Objects, &driver.ListObject{Key: o.Key, ModTime: o.ModTime, Size: o.Size, MD5: o.MD5, IsDir: o.IsDir, AsFunc: o.As})
	}
	return page, nil
}

// NewRangeReader implements driver.Bucket.
func (b *Bucket) NewRangeReader(ctx context.Context, key string, offset, length int64, opts *driver.ReaderOptions) (driver.Reader, error) {
	if f := b.check(OpOpenRead, key); f != nil {
		return nil, f.err(key)
	}
	r, err := b.inner.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, err
	}
	rd := &reader{b: b, key: key, r: r}
	if f := b.check(OpRead, key); f != nil {
		rd.fault = f
		rd.left = f.After
		if rd.left < 0 {
			rd.left = r.Size() / 2
		}
	}
	return rd, nil
}

type reader struct {
	b     *Bucket
	key   string
	r     *blob.Reader
	fault *fault
	left  int64
}

func (r *reader) Read(p []byte) (int, error) {
	if r.fault != nil {
		if r.left <= 0 {
			return 0, r.fault.err(r.key)
		}
		if int64(len(p)) > r.left {
			p = p[:r.left]
		}
		n, err := r.r.Read(p)
		r.left -= int64(n)
		return n, err
	}
	return r.r.Read(p)
}

func (r *reader) Close() error { return r.r.Close() }

func (r *reader) Attributes() *driver.ReaderAttributes {
	return &driver.ReaderAttributes{ContentType: r.r.ContentType(), ModTime: r.r.ModTime(), Size: r.r.Size()}
}

func (r *reader) As(i any) bool { return r.r.As(i) }

// NewTypedWriter implements driver.Bucket.
func (b *Bucket) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	b.mu.Lock()
	ifNotExist := opts.IfNotExist && !b.unconditional
	b.mu.Unlock()
	wctx, cancel := context.WithCancel(ctx)
	w := &writer{b: b, key: key, ctx: wctx, cancel: cancel, opts: &blob.WriterOptions{
		BufferSize: opts.BufferSize, MaxConcurrency: opts.MaxConcurrency, CacheControl: opts.CacheControl,
		ContentDisposition: opts.ContentDisposition, ContentEncoding: opts.ContentEncoding, ContentLanguage: opts.ContentLanguage,
		ContentType: contentType, ContentMD5: opts.ContentMD5, Metadata: opts.Metadata,
		DisableContentTypeDetection: true, IfNotExist: ifNotExist,
	}}
	if f := b.check(OpWrite, key); f != nil {
		w.writeFault = f
	}
	iw, err := b.inner.NewWriter(wctx, key, w.opts)
	if err != nil {
		cancel()
		return nil, err
	}
	w.w = iw
	return w, nil
}

type writer struct {
	b          *Bucket
	key        string
	ctx        context.Context
	cancel     context.CancelFunc
	opts       *blob.WriterOptions
	w          *blob.Writer
	writeFault *fault
	written    []byte // what went through, for Torn faults
	n          int64
	failed     error
}

func (w *writer) Write(p []byte) (int, error) {
	if w.failed != nil {
		return 0, w.failed
	}
	if f := w.writeFault; f != nil {
		limit := f.After
		if limit < 0 {
			limit = (w.n + int64(len(p))) / 2
		}
		if w.n+int64(len(p)) > limit {
			k := max(limit-w.n, 0)
			if k > 0 {
				if _, err := w.w.Write(p[:k]); err != nil {
					return 0, err
				}
				w.written = append(w.written, p[:k]...)
				w.n += k
			}
			w.failed = f.err(w.key)
			w.finishFailed(f.Mode)
			return int(k), w.failed
		}
	}
	n, err := w.w.Write(p)
	w.n += int64(n)
	w.written = append(w.written, p[:n]...)
	return n, err
}

// finishFailed ends the inner write after a failure: canceled (Abort), or
// committed with what went through (Torn).
func (w *writer) finishFailed(mode Mode) {
	if mode == Torn {
		_ = w.w.Close()
		return
	}
	w.cancel()
	_ = w.w.Close()
}

func (w *writer) Close() error {
	defer w.cancel()
	if w.failed != nil {
		return w.failed
	}
	if f := w.b.check(OpClose, w.key); f != nil {
		switch f.Mode {
		case AckLost:
			if err := w.w.Close(); err != nil {
				return err
			}
		case Torn:
			// Store half of the object in place of the whole.
			w.cancel()
			_ = w.w.Close()
			_ = w.b.inner.WriteAll(context.WithoutCancel(w.ctx), w.key, w.written[:len(w.written)/2], nil)
		default:
			w.cancel()
			_ = w.w.Close()
		}
		return f.err(w.key)
	}
	return w.w.Close()
}

// Copy implements driver.Bucket.
func (b *Bucket) Copy(ctx context.Context, dstKey, srcKey string, opts *driver.CopyOptions) error {
	if f := b.check(OpCopy, dstKey); f != nil {
		return f.err(dstKey)
	}
	return b.inner.Copy(ctx, dstKey, srcKey, nil)
}

// Delete implements driver.Bucket.
func (b *Bucket) Delete(ctx context.Context, key string, opts *driver.DeleteOptions) error {
	if f := b.check(OpDelete, key); f != nil {
		return f.err(key)
	}
	return b.inner.Delete(ctx, key)
}

// SignedURL implements driver.Bucket.
func (b *Bucket) SignedURL(ctx context.Context, key string, opts *driver.SignedURLOptions) (string, error) {
	return "", errors.New("faultblob: SignedURL is not supported")
}

// Close implements driver.Bucket.
func (b *Bucket) Close() error {
	if b.closeInner {
		return b.inner.Close()
	}
	return nil
}

var _ driver.Bucket = (*Bucket)(nil)
