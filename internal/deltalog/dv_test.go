package deltalog

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// The examples of PROTOCOL.md, "Deletion Vector Descriptor Schema".
func TestDeletionVectorProtocolExamples(t *testing.T) {
	off := int64(4)
	u := &DeletionVector{StorageType: "u", PathOrInlineDv: "ab^-aqEH.-t@S}K{vb[*k^", Offset: &off, SizeInBytes: 40, Cardinality: 6}
	key, err := u.key("s3://mytable/")
	if err != nil || key != "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin" {
		t.Fatalf("relative path: %q, %v", key, err)
	}
	if id := u.UniqueID(); id != "uab^-aqEH.-t@S}K{vb[*k^@4" {
		t.Fatalf("uniqueId %q", id)
	}
	p := &DeletionVector{StorageType: "p", PathOrInlineDv: "s3://mytable/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin", Offset: &off, SizeInBytes: 40, Cardinality: 6}
	if key, err := p.key("s3://mytable/"); err != nil || key != "deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin" {
		t.Fatalf("absolute path: %q, %v", key, err)
	}
	if _, err := p.key("s3://other/"); err == nil {
		t.Fatal("a vector outside the table was accepted")
	}
	// The inline example decodes to the native format's header written
	// big-endian (64 39 d3 d0 = 1681511376, one bucket of 28 bytes), which
	// Delta's own readers, reading little-endian, would refuse: the same
	// bucket with a little-endian header must hold the rows the example
	// names.
	b, err := z85Decode("wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L")
	if err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint32(b) != dvMagicNative || binary.BigEndian.Uint32(b[4:]) != 1 || binary.BigEndian.Uint32(b[8:]) != 28 {
		t.Fatalf("the example decodes to % x", b[:12])
	}
	le := binary.LittleEndian.AppendUint32(nil, dvMagicNative)
	le = binary.LittleEndian.AppendUint32(le, 1)
	le = binary.LittleEndian.AppendUint32(le, 28)
	le = append(le, b[12:40]...)
	bm, err := parseDV(le, 6)
	if err != nil {
		t.Fatal(err)
	}
	if got := bm.ToArray(); !slices.Equal(got, []uint64{3, 4, 7, 11, 18, 29}) {
		t.Fatalf("inline example holds %v, the protocol says 3, 4, 7, 11, 18, 29", got)
	}
	if _, err := parseDV(le, 5); err == nil {
		t.Fatal("a cardinality that does not match was accepted")
	}
	if _, err := parseDV(b[:40], 6); err == nil {
		t.Fatal("a big-endian header was accepted")
	}
}

// TestDeletionVectorFrame: a file's framed vector (big-endian size, the
// bytes, CRC-32) round-trips, and a flipped byte fails the checksum.
func TestDeletionVectorFrame(t *testing.T) {
	bm := roaring64.BitmapOf(0, 9, 1<<33)
	var data bytes.Buffer
	data.Write(binary.LittleEndian.AppendUint32(nil, dvMagic))
	if _, err := bm.WriteTo(&data); err != nil {
		t.Fatal(err)
	}
	b := data.Bytes()
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
	frame = append(frame, b...)
	frame = binary.BigEndian.AppendUint32(frame, crc32.ChecksumIEEE(b))
	got, err := parseDVFrame(frame, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	back, err := parseDV(got, 3)
	if err != nil || !back.Equals(bm) {
		t.Fatalf("round trip: %v, %v", back, err)
	}
	frame[6] ^= 1
	if _, err := parseDVFrame(frame, int64(len(b))); err == nil {
		t.Fatal("a corrupt vector passed its checksum")
	}
}

// FuzzDeletionVector: Z85 text, frames and bitmaps from anywhere never
// panic the parsers.
func FuzzDeletionVector(f *testing.F) {
	f.Add("wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", []byte{0, 0, 0, 4, 1, 2, 3, 4, 0, 0, 0, 0}, int64(4), int64(6))
	f.Fuzz(func(t *testing.T, text string, frame []byte, size, card int64) {
		if b, err := z85Decode(text); err == nil {
			_, _ = parseDV(b, card)
		}
		if size >= 0 && size < 1<<20 {
			if b, err := parseDVFrame(frame, size); err == nil {
				_, _ = parseDV(b, card)
			}
		}
		_, _ = (&DeletionVector{StorageType: "u", PathOrInlineDv: text}).key("file:///t")
	})
}
