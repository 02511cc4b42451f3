package pqfile

import (
	"context"
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// A leaf column's values reach arrow-go's column chunk writer as pqarrow's
// WriteArrowToColumn hands them (arrow-go v18.9.0
// parquet/pqarrow/encode_arrow.go, writeDenseArrow; encode_dict_compute.go,
// writeDictionaryArrow): the same typed call (WriteBatch when no value is
// NULL, the spaced variants with the validity bitmap otherwise, the Arrow
// offset variants for byte arrays), the same conversions to the physical
// type, and for a dictionary array its dictionary put into the column's
// dictionary encoder once and its indices written. Same calls, same
// bytes: the tests compare the files with pqarrow's.

// leafWriter writes leaf columns, reusing buffers for converted values
// (the column writers copy what they are given: encoders into their
// buffers, statistics into their own slices). The integer buffers are
// typed, not views of the byte buffer, which may be unaligned.
type leafWriter struct {
	scratch []byte
	ints32  []int32
	ints64  []int64
}

// bytes returns the scratch buffer with room for n bytes.
func (lw *leafWriter) bytes(n int) []byte {
	if cap(lw.scratch) < n {
		lw.scratch = make([]byte, n)
	}
	return lw.scratch[:n]
}

func (lw *leafWriter) int32s(n int) []int32 {
	if cap(lw.ints32) < n {
		lw.ints32 = make([]int32, n)
	}
	return lw.ints32[:n]
}

func (lw *leafWriter) int64s(n int) []int64 {
	if cap(lw.ints64) < n {
		lw.ints64 = make([]int64, n)
	}
	return lw.ints64[:n]
}

// write gives arr, a leaf's values, to cw with the leaf's levels (nil when
// the column has none). leafNullable says whether the leaf's own field may
// hold NULLs here: nullable and holding some.
func (lw *leafWriter) write(cw file.ColumnChunkWriter, arr arrow.Array, def, rep []int16, leafNullable bool) error {
	// Parent NULLs are values the levels skip: when any ancestor may be
	// NULL, the writer derives validity from the levels into its bits
	// buffer, which pqarrow sizes for a batch.
	li := cw.LevelInfo()
	singleNullable := li.DefLevel == li.RepeatedAncestorDefLevel+1 && leafNullable
	parentNulls := li.HasNullableValues() && !singleNullable
	if parentNulls && !cw.HasBitsBuffer() {
		buf := memory.NewResizableBuffer(cw.Properties().Allocator())
		buf.Resize(int(bitutil.BytesForBits(cw.Properties().WriteBatchSize())))
		cw.SetBitsBuffer(buf)
	}
	if d, ok := arr.(*array.Dictionary); ok {
		return lw.writeDictionary(cw, d, def, rep, parentNulls)
	}
	return lw.writeDense(cw, arr, def, rep, parentNulls)
}

// values returns the fixed-width values of arr (from its offset) as T,
// over arr's own buffer: a Parquet type of the same width (date32 and
// uint32 as int32; uint64, time64 and timestamps as int64).
func values[T int32 | int64](arr arrow.Array) []T {
	buf := arr.Data().Buffers()[1]
	if buf == nil {
		return nil
	}
	var zero T
	size := int(unsafe.Sizeof(zero))
	b := buf.Bytes()
	all := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/size)
	off := arr.Data().Offset()
	return all[off : off+arr.Len()]
}

func (lw *leafWriter) writeDense(cw file.ColumnChunkWriter, arr arrow.Array, def, rep []int16, parentNulls bool) error {
	noNulls := cw.Descr().SchemaNode().RepetitionType() == parquet.Repetitions.Required || arr.NullN() == 0
	dense := !parentNulls && noNulls
	valid, off := arr.NullBitmapBytes(), int64(arr.Data().Offset())
	var err error
	switch w := cw.(type) {
	case *file.BooleanColumnChunkWriter:
		b, ok := arr.(*array.Boolean)
		if !ok {
			return mismatch(cw, arr)
		}
		switch {
		case b.Len() == 0:
			_, err = w.WriteBatch(nil, def, rep)
		case dense:
			_, err = w.WriteBitmapBatch(b.Data().Buffers()[1].Bytes(), off, b.Len(), def, rep)
		default:
			// A NULL's bit in the value bitmap is undefined: pqarrow
			// spells the values out as bools.
			bs := lw.bytes(b.Len())
			vals := unsafe.Slice((*bool)(unsafe.Pointer(unsafe.SliceData(bs))), len(bs))
			for i := range vals {
				vals[i] = b.Value(i)
			}
			_, err = w.WriteBatchSpacedWithError(vals, def, rep, valid, off)
		}
	case *file.Int32ColumnChunkWriter:
		var vals []int32
		switch a := arr.(type) {
		case *array.Int32:
			vals = a.Int32Values()
		case *array.Date32, *array.Uint32:
			vals = values[int32](arr)
		case *array.Time32:
			// time32[ms] only: parquetType refuses seconds.
			vals = values[int32](arr)
		case *array.Int8:
			vals = lw.int32s(a.Len())
			for i, v := range a.Int8Values() {
				vals[i] = int32(v)
			}
		case *array.Int16:
			vals = lw.int32s(a.Len())
			for i, v := range a.Int16Values() {
				vals[i] = int32(v)
			}
		case *array.Uint8:
			vals = lw.int32s(a.Len())
			for i, v := range a.Uint8Values() {
				vals[i] = int32(v)
			}
		case *array.Uint16:
			vals = lw.int32s(a.Len())
			for i, v := range a.Uint16Values() {
				vals[i] = int32(v)
			}
		case *array.Decimal128:
			if err := checkDecimals(cw, a, def, 32); err != nil {
				return err
			}
			vals = lw.int32s(a.Len())
			for i, v := range a.Values() {
				vals[i] = int32(v.LowBits())
			}
		default:
			return mismatch(cw, arr)
		}
		if dense {
			_, err = w.WriteBatch(vals, def, rep)
		} else {
			_, err = w.WriteBatchSpacedWithError(vals, def, rep, valid, off)
		}
	case *file.Int64ColumnChunkWriter:
		var vals []int64
		switch a := arr.(type) {
		case *array.Int64:
			vals = a.Int64Values()
		case *array.Uint64, *array.Time64, *array.Timestamp:
			// Timestamps keep their unit: parquetType refuses the units
			// pqarrow would convert.
			vals = values[int64](arr)
		case *array.Uint32:
			vals = lw.int64s(a.Len())
			for i, v := range a.Uint32Values() {
				vals[i] = int64(v)
			}
		case *array.Decimal128:
			if err := checkDecimals(cw, a, def, 64); err != nil {
				return err
			}
			vals = lw.int64s(a.Len())
			for i, v := range a.Values() {
				vals[i] = int64(v.LowBits())
			}
		default:
			return mismatch(cw, arr)
		}
		if dense {
			_, err = w.WriteBatch(vals, def, rep)
		} else {
			_, err = w.WriteBatchSpacedWithError(vals, def, rep, valid, off)
		}
	case *file.Float32ColumnChunkWriter:
		a, ok := arr.(*array.Float32)
		if !ok {
			return mismatch(cw, arr)
		}
		if dense {
			_, err = w.WriteBatch(a.Float32Values(), def, rep)
		} else {
			_, err = w.WriteBatchSpacedWithError(a.Float32Values(), def, rep, valid, off)
		}
	case *file.Float64ColumnChunkWriter:
		a, ok := arr.(*array.Float64)
		if !ok {
			return mismatch(cw, arr)
		}
		if dense {
			_, err = w.WriteBatch(a.Float64Values(), def, rep)
		} else {
			_, err = w.WriteBatchSpacedWithError(a.Float64Values(), def, rep, valid, off)
		}
	case *file.ByteArrayColumnChunkWriter:
		err = writeByteArrays(w, arr, def, rep, dense)
	case *file.FixedLenByteArrayColumnChunkWriter:
		err = lw.writeFixed(w, arr, def, rep, dense)
	default:
		return fmt.Errorf("no writer for physical type %s", cw.Type())
	}
	return err
}

func mismatch(cw file.ColumnChunkWriter, arr arrow.Array) error {
	return fmt.Errorf("%w: a %s column cannot hold %s values", arrow.ErrInvalid, cw.Type(), arr.DataType())
}

// checkDecimals refuses a decimal written as a Parquet integer of bits
// bits that does not fit it, or has more digits than the column's
// precision (pqarrow checks the values the levels reach).
func checkDecimals(cw file.ColumnChunkWriter, a *array.Decimal128, def []int16, bits int) error {
	prec := int32(0)
	if lt, ok := cw.Descr().LogicalType().(schema.DecimalLogicalType); ok {
		prec = lt.Precision()
	}
	check := func(i int) error {
		v := a.Value(i)
		hi, lo := v.HighBits(), v.LowBits()
		fits := hi == 0 && lo <= 1<<(bits-1)-1 || hi == -1 && lo >= -(uint64(1)<<(bits-1))
		if !fits {
			return fmt.Errorf("%w: Decimal128 value at index %d does not fit in Parquet INT%d", arrow.ErrInvalid, i, bits)
		}
		if prec > 0 && (prec > decimal128.MaxPrecision || v.Sign() < 0 && v.Negate() == v || !v.FitsInPrecision(prec)) {
			return fmt.Errorf("%w: Decimal128 value at index %d does not fit Parquet DECIMAL precision %d", arrow.ErrInvalid, i, prec)
		}
		return nil
	}
	if len(def) == 0 {
		for i := range a.Len() {
			if a.IsValid(i) {
				if err := check(i); err != nil {
					return err
				}
			}
		}
		return nil
	}
	// With levels, values start at the repeated ancestor's level; a value
	// is present at the leaf's full level.
	li := cw.LevelInfo()
	i := 0
	for _, d := range def {
		if d < li.RepeatedAncestorDefLevel {
			continue
		}
		if i >= a.Len() {
			break
		}
		if d == li.DefLevel && a.IsValid(i) {
			if err := check(i); err != nil {
				return err
			}
		}
		i++
	}
	return nil
}

// writeByteArrays writes strings and binaries from their Arrow offsets
// and data, which arrow-go's byte array writer takes as they are.
func writeByteArrays(w *file.ByteArrayColumnChunkWriter, arr arrow.Array, def, rep []int16, dense bool) error {
	var data []byte
	if buf := arr.Data().Buffers()[2]; buf != nil {
		data = buf.Bytes()
	} else {
		data = []byte{}
	}
	valid, off := arr.NullBitmapBytes(), int64(arr.Data().Offset())
	var offsets32 []int32
	var offsets64 []int64
	switch a := arr.(type) {
	case *array.String:
		offsets32 = a.ValueOffsets()
	case *array.Binary:
		offsets32 = a.ValueOffsets()
	case *array.LargeString:
		offsets64 = a.ValueOffsets()
	case *array.LargeBinary:
		offsets64 = a.ValueOffsets()
	default:
		return fmt.Errorf("%w: a BYTE_ARRAY column cannot hold %s values", arrow.ErrInvalid, arr.DataType())
	}
	var err error
	if w.SupportsArrowOffsets() {
		switch {
		case offsets32 != nil && dense:
			_, err = w.WriteBatchArrow(data, offsets32, def, rep)
		case offsets32 != nil:
			_, err = w.WriteBatchSpacedArrow(data, offsets32, def, rep, valid, off)
		case dense:
			_, err = w.WriteBatchArrow64(data, offsets64, def, rep)
		default:
			_, err = w.WriteBatchSpacedArrow64(data, offsets64, def, rep, valid, off)
		}
		return err
	}
	vals := make([]parquet.ByteArray, arr.Len())
	for i := range vals {
		if offsets32 != nil {
			vals[i] = data[offsets32[i]:offsets32[i+1]]
		} else {
			vals[i] = data[offsets64[i]:offsets64[i+1]]
		}
	}
	if dense {
		_, err = w.WriteBatch(vals, def, rep)
	} else {
		_, err = w.WriteBatchSpacedWithError(vals, def, rep, valid, off)
	}
	return err
}

// writeFixed writes fixed-size binaries, and decimals as big-endian two's
// complement in the column's width (the format's DECIMAL on
// FIXED_LEN_BYTE_ARRAY). A decimal column is written with WriteBatch
// whenever the array has no NULL, as pqarrow does.
func (lw *leafWriter) writeFixed(w *file.FixedLenByteArrayColumnChunkWriter, arr arrow.Array, def, rep []int16, dense bool) error {
	valid, off := arr.NullBitmapBytes(), int64(arr.Data().Offset())
	var err error
	switch a := arr.(type) {
	case *array.FixedSizeBinary:
		width := a.DataType().(*arrow.FixedSizeBinaryType).ByteWidth
		if w.SupportsArrowValues() {
			var data []byte
			if buf := a.Data().Buffers()[1]; buf != nil {
				data = buf.Bytes()[int(off)*width : (int(off)+a.Len())*width]
			}
			if dense {
				_, err = w.WriteBatchArrow(data, def, rep)
			} else {
				_, err = w.WriteBatchSpacedArrow(data, def, rep, valid, off)
			}
			return err
		}
		vals := make([]parquet.FixedLenByteArray, a.Len())
		for i := range vals {
			vals[i] = a.Value(i)
		}
		if dense {
			_, err = w.WriteBatch(vals, def, rep)
		} else {
			_, err = w.WriteBatchSpacedWithError(vals, def, rep, valid, off)
		}
	case *array.Decimal128:
		width := w.Descr().TypeLength()
		buf := lw.bytes(16 * a.Len())
		vals := make([]parquet.FixedLenByteArray, a.Len())
		for i := range vals {
			if a.IsNull(i) {
				continue
			}
			v := a.Value(i)
			be := buf[16*i : 16*i+16]
			binary.BigEndian.PutUint64(be, uint64(v.HighBits()))
			binary.BigEndian.PutUint64(be[8:], v.LowBits())
			vals[i] = be[16-width:]
		}
		if a.NullN() == 0 {
			_, err = w.WriteBatch(vals, def, rep)
		} else {
			_, err = w.WriteBatchSpacedWithError(vals, def, rep, valid, off)
		}
	default:
		return fmt.Errorf("%w: a FIXED_LEN_BYTE_ARRAY column cannot hold %s values", arrow.ErrInvalid, arr.DataType())
	}
	return err
}

// dictEncoder is what pqfile uses of arrow-go's dictionary encoder (the
// column writer's current encoder while it dictionary-encodes).
type dictEncoder interface {
	PutDictionary(arrow.Array) error
	PreservedDictionary() arrow.Array
	NormalizeDict(arrow.Array) (arrow.Array, error)
	NumEntries() int
}

// writeDictionary writes a dictionary array: while the column is still
// dictionary-encoded, its dictionary becomes the column's (once; a
// different one later, or one with duplicates, makes the column fall
// back to plain) and its indices are written; otherwise its values.
func (lw *leafWriter) writeDictionary(cw file.ColumnChunkWriter, d *array.Dictionary, def, rep []int16, parentNulls bool) error {
	mem := cw.Properties().Allocator()
	dense := func() error {
		vt := d.DataType().(*arrow.DictionaryType).ValueType
		v, err := compute.CastArray(compute.WithAllocator(context.Background(), mem), d, compute.SafeCastOptions(vt))
		if err != nil {
			return err
		}
		defer v.Release()
		return lw.writeDense(cw, v, def, rep, parentNulls)
	}
	enc, ok := cw.CurrentEncoder().(dictEncoder)
	vt := d.DataType().(*arrow.DictionaryType).ValueType
	if !ok || cw.CurrentEncoder().Encoding() != parquet.Encodings.PlainDict || !(arrow.IsPrimitive(vt.ID()) || arrow.IsBaseBinary(vt.ID())) {
		return dense()
	}
	dict, indices := d.Dictionary(), d.Indices()
	preserved := enc.PreservedDictionary()
	normalized, err := enc.NormalizeDict(dict)
	if err != nil {
		return err
	}
	defer normalized.Release()
	stats := cw.PageStatistics()
	// The page statistics count the values the indices reach, from the
	// dictionary entries they use.
	updateStats := func() error {
		used := preserved
		if used == nil || used != normalized {
			ctx := compute.WithAllocator(context.Background(), mem)
			ref, err := compute.UniqueArray(ctx, indices)
			if err != nil {
				return err
			}
			defer ref.Release()
			if ref.Len() == normalized.Len() {
				used = normalized
			} else {
				taken, err := compute.TakeArrayOpts(ctx, normalized, ref, compute.TakeOptions{BoundsCheck: true})
				if err != nil {
					return err
				}
				defer taken.Release()
				used = taken
			}
		}
		present := indices.Len() - indices.NullN()
		stats.IncNulls(int64(max(len(def)-present, 0)))
		stats.IncNumValues(int64(present))
		return stats.UpdateFromArrow(used, false)
	}
	switch {
	case preserved == nil:
		if err := enc.PutDictionary(normalized); err != nil {
			return err
		}
		if enc.NumEntries() != normalized.Len() {
			// Duplicate values: the encoder's indices no longer match.
			cw.FallbackToPlain()
			return dense()
		}
	case !array.Equal(normalized, preserved):
		cw.FallbackToPlain()
		return dense()
	}
	if stats != nil {
		if err := updateStats(); err != nil {
			return err
		}
	}
	return cw.WriteDictIndices(indices, def, rep)
}
