package main

import (
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/s2"
)

// cpuNow returns this process's user + system CPU time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fastSnappy is arrow-go's Snappy codec with s2's fast Snappy-compatible
// encoder instead of klauspost/compress/snappy.Encode, which is
// s2.EncodeSnappyBetter (slower, a few percent smaller). Registered only by
// the -fast-snappy experiment, for every writer in the process (the limit
// and delta-rs comparisons included).
type fastSnappy struct{ compress.Codec }

func (f fastSnappy) Encode(dst, src []byte) []byte { return s2.EncodeSnappy(dst, src) }

func (f fastSnappy) EncodeLevel(dst, src []byte, _ int) []byte { return s2.EncodeSnappy(dst, src) }

func registerFastSnappy() error {
	c, err := compress.GetCodec(compress.Codecs.Snappy)
	if err != nil {
		return err
	}
	compress.RegisterCodec(compress.Codecs.Snappy, fastSnappy{c})
	return nil
}

// prefetchReader reads its input on its own goroutine, up to depth batches
// ahead, so producing batches overlaps with consuming them (the -prefetch
// experiment: what a read-ahead in snapshot.Execute would do).
type prefetchReader struct {
	in   array.RecordReader
	ch   chan arrow.RecordBatch
	stop chan struct{}
	refs atomic.Int64
	cur  arrow.RecordBatch
	err  error // set before ch is closed
}

func newPrefetchReader(in array.RecordReader, depth int) *prefetchReader {
	p := &prefetchReader{in: in, ch: make(chan arrow.RecordBatch, depth), stop: make(chan struct{})}
	p.refs.Store(1)
	go p.loop()
	return p
}

func (p *prefetchReader) loop() {
	defer close(p.ch)
	for p.in.Next() {
		rec := p.in.RecordBatch()
		rec.Retain()
		select {
		case p.ch <- rec:
		case <-p.stop:
			rec.Release()
			return
		}
	}
	p.err = p.in.Err()
}

func (p *prefetchReader) Retain()                        { p.refs.Add(1) }
func (p *prefetchReader) Schema() *arrow.Schema          { return p.in.Schema() }
func (p *prefetchReader) RecordBatch() arrow.RecordBatch { return p.cur }

// Deprecated: use RecordBatch.
func (p *prefetchReader) Record() arrow.RecordBatch { return p.cur }

// Err is valid once Next has returned false.
func (p *prefetchReader) Err() error { return p.err }

func (p *prefetchReader) Next() bool {
	if p.cur != nil {
		p.cur.Release()
		p.cur = nil
	}
	rec, ok := <-p.ch
	if !ok {
		return false
	}
	p.cur = rec
	return true
}

func (p *prefetchReader) Release() {
	if p.refs.Add(-1) != 0 {
		return
	}
	if p.cur != nil {
		p.cur.Release()
		p.cur = nil
	}
	close(p.stop)
	for rec := range p.ch {
		rec.Release()
	}
	p.in.Release()
}
