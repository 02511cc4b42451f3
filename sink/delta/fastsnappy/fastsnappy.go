// Package fastsnappy makes arrow-go's Parquet writers compress Snappy pages
// with s2's fast Snappy encoder instead of the "better" mode arrow-go uses
// (klauspost/compress/snappy.Encode is s2.EncodeSnappyBetter).
//
// The output is standard Snappy: every Parquet reader decodes it. Files are
// about 12 % larger (the size delta-rs writes) and sink/delta spends
// markedly less CPU per row; BENCHMARKS.md has the figures and the command.
//
// arrow-go keeps its codecs in one process-wide registry, so Register
// changes every arrow-go Parquet writer in the program, not only
// sink/delta's. That is why it is a separate package and an explicit call,
// not a default.
package fastsnappy

import (
	"fmt"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/s2"
)

// Register installs the fast encoder as arrow-go's Snappy codec. Call it
// once at the start of main, before any goroutine writes or reads Parquet:
// arrow-go's registry is a plain map, so registering while another
// goroutine looks a codec up is a data race. Decoding is unchanged.
func Register() error {
	c, err := compress.GetCodec(compress.Codecs.Snappy)
	if err != nil {
		return fmt.Errorf("fastsnappy: arrow-go has no Snappy codec to wrap: %w", err)
	}
	switch c := c.(type) {
	case codec:
		return nil // registered already
	case snappyCodec:
		compress.RegisterCodec(compress.Codecs.Snappy, codec{c})
		return nil
	}
	return fmt.Errorf("fastsnappy: arrow-go's Snappy codec %T lacks block-error or streaming decoding", c)
}

// snappyCodec is what arrow-go's Snappy codec implements.
type snappyCodec interface {
	compress.ErrorCodec
	compress.StreamingCodec
}

// codec is arrow-go's Snappy codec with a faster block encoder; decoding
// and the streaming API are arrow-go's own.
type codec struct{ snappyCodec }

// Encode compresses src into dst as one Snappy block.
func (codec) Encode(dst, src []byte) []byte { return s2.EncodeSnappy(dst, src) }

// EncodeLevel is Encode: Snappy has no levels.
func (codec) EncodeLevel(dst, src []byte, _ int) []byte { return s2.EncodeSnappy(dst, src) }

// CompressBound is the most bytes Encode can return for len input bytes.
func (codec) CompressBound(len int64) int64 { return int64(s2.MaxEncodedLen(int(len))) }
