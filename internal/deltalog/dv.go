package deltalog

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net/url"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// Deletion vectors, as the Delta protocol describes them (PROTOCOL.md,
// "Deletion Vectors" and "Deletion Vector Format"): a set of row indexes
// of one data file that readers must skip, stored inline in the log
// (storageType "i", Z85 text) or in a file beside the data files ("u": a
// path derived from a UUID, "p": an absolute path). The set is a 64-bit
// RoaringBitmap in the portable format behind a magic number; in a file,
// each vector is framed by its big-endian size and a CRC-32 of its bytes.

// DeletionVector is a Delta DeletionVectorDescriptor.
type DeletionVector struct {
	// StorageType is "u" (relative path from a UUID), "i" (inline) or "p"
	// (absolute path).
	StorageType string `json:"storageType"`
	// PathOrInlineDv is the random prefix and Z85 UUID ("u"), the Z85
	// bitmap ("i"), or the path ("p").
	PathOrInlineDv string `json:"pathOrInlineDv"`
	// Offset is where the vector starts in its file (absent: 0; inline: none).
	Offset *int64 `json:"offset,omitempty"`
	// SizeInBytes is the size of the serialized vector (before Z85).
	SizeInBytes int64 `json:"sizeInBytes"`
	// Cardinality is the number of rows the vector deletes.
	Cardinality int64 `json:"cardinality"`
}

// The magic numbers that start a serialized bitmap (little endian):
// PROTOCOL.md names the portable format; Delta's readers (Spark's and
// Kernel's RoaringBitmapArray) also read their older native format.
const (
	dvMagic       = 1681511377 // count (8 bytes), then (key, 32-bit bitmap) per bucket
	dvMagicNative = 1681511376 // count (4 bytes), then (size, 32-bit bitmap); the key is the index
)

// UniqueID is the protocol's derived uniqueId: with the path, the key of
// a logical file.
func (d *DeletionVector) UniqueID() string {
	if d == nil {
		return ""
	}
	if d.Offset == nil {
		return d.StorageType + d.PathOrInlineDv
	}
	return fmt.Sprintf("%s%s@%d", d.StorageType, d.PathOrInlineDv, *d.Offset)
}

// DeletedRows is the number of rows the vector deletes (0 for none).
func (d *DeletionVector) DeletedRows() int64 {
	if d == nil {
		return 0
	}
	return d.Cardinality
}

// key returns the object key of an on-disk vector below the table root.
func (d *DeletionVector) key(tableURL string) (string, error) {
	switch d.StorageType {
	case "u":
		p := d.PathOrInlineDv
		if len(p) < 20 {
			return "", fmt.Errorf("deletion vector path %q is shorter than a Z85 UUID (20 characters)", p)
		}
		prefix, enc := p[:len(p)-20], p[len(p)-20:]
		u, err := z85Decode(enc)
		if err != nil {
			return "", fmt.Errorf("deletion vector path %q: %w", p, err)
		}
		name := fmt.Sprintf("deletion_vector_%x-%x-%x-%x-%x.bin", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
		if prefix != "" {
			return prefix + "/" + name, nil
		}
		return name, nil
	case "p":
		u, err := url.Parse(d.PathOrInlineDv)
		if err != nil {
			return "", fmt.Errorf("deletion vector path %q: %w", d.PathOrInlineDv, err)
		}
		root, err := url.Parse(tableURL)
		outside := fmt.Errorf("deletion vector %q is outside table %s", d.PathOrInlineDv, tableURL)
		if err != nil || u.Host != root.Host || (u.Scheme != root.Scheme && !(root.Scheme == "" && u.Scheme == "file")) {
			return "", outside
		}
		rel := strings.TrimPrefix(u.Path, "/")
		if dir := strings.Trim(root.Path, "/"); dir != "" {
			var ok bool
			if rel, ok = strings.CutPrefix(rel, dir+"/"); !ok {
				return "", outside
			}
		}
		return rel, nil
	default:
		return "", fmt.Errorf("deletion vector storage type %q is not on disk", d.StorageType)
	}
}

// Load reads the vector's row indexes.
func (d *DeletionVector) Load(ctx context.Context, s Store, tableURL string) (*roaring64.Bitmap, error) {
	if d.StorageType == "i" {
		raw, err := z85Decode(d.PathOrInlineDv)
		if err != nil {
			return nil, fmt.Errorf("inline deletion vector: %w", err)
		}
		if int64(len(raw)) < d.SizeInBytes {
			return nil, fmt.Errorf("inline deletion vector: %d bytes, the descriptor says %d", len(raw), d.SizeInBytes)
		}
		return parseDV(raw[:d.SizeInBytes], d.Cardinality)
	}
	key, err := d.key(tableURL)
	if err != nil {
		return nil, err
	}
	var off int64 // absent: 0 (PROTOCOL.md, "Deletion Vector Descriptor Schema")
	if d.Offset != nil {
		off = *d.Offset
	}
	if off < 0 || d.SizeInBytes < 4 {
		return nil, fmt.Errorf("deletion vector %s: offset %d, size %d", key, off, d.SizeInBytes)
	}
	r, err := s.NewRangeReader(ctx, key, off, 4+d.SizeInBytes+4)
	if err != nil {
		return nil, fmt.Errorf("deletion vector %s: %w", key, err)
	}
	defer r.Close()
	frame := make([]byte, 4+d.SizeInBytes+4)
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, fmt.Errorf("deletion vector %s at %d: %w", key, off, err)
	}
	raw, err := parseDVFrame(frame, d.SizeInBytes)
	if err != nil {
		return nil, fmt.Errorf("deletion vector %s at %d: %w", key, off, err)
	}
	return parseDV(raw, d.Cardinality)
}

// parseDVFrame checks one framed vector of a deletion vector file (size,
// bytes, CRC-32, big endian) and returns its bytes.
func parseDVFrame(frame []byte, size int64) ([]byte, error) {
	if int64(len(frame)) != 4+size+4 {
		return nil, fmt.Errorf("frame of %d bytes for a vector of %d", len(frame), size)
	}
	if n := binary.BigEndian.Uint32(frame); int64(n) != size {
		return nil, fmt.Errorf("the file says %d bytes, the descriptor %d", n, size)
	}
	b := frame[4 : 4+size]
	if want, got := binary.BigEndian.Uint32(frame[4+size:]), crc32.ChecksumIEEE(b); want != got {
		return nil, fmt.Errorf("checksum %08x, the file says %08x", got, want)
	}
	return b, nil
}

// parseDV decodes a serialized vector: the magic number, then a portable
// 64-bit RoaringBitmap holding cardinality row indexes.
func parseDV(b []byte, cardinality int64) (*roaring64.Bitmap, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("a deletion vector of %d bytes", len(b))
	}
	bm := roaring64.New()
	switch m := binary.LittleEndian.Uint32(b); m {
	case dvMagic:
		if _, err := bm.ReadFrom(bytes.NewReader(b[4:])); err != nil {
			return nil, fmt.Errorf("deletion vector bitmap: %w", err)
		}
	case dvMagicNative:
		if err := readNativeDV(b[4:], bm); err != nil {
			return nil, fmt.Errorf("deletion vector bitmap (native format): %w", err)
		}
	default:
		return nil, fmt.Errorf("not a deletion vector: magic number %d, want %d (or %d)", m, dvMagic, dvMagicNative)
	}
	if n := bm.GetCardinality(); int64(n) != cardinality {
		return nil, fmt.Errorf("deletion vector holds %d rows, the descriptor says %d", n, cardinality)
	}
	return bm, nil
}

// z85Alphabet is ZeroMQ's Z85 (RFC 32), which the protocol uses.
const z85Alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

// z85Decode decodes Z85 text (a multiple of 5 characters) into bytes.
func z85Decode(s string) ([]byte, error) {
	if len(s)%5 != 0 {
		return nil, fmt.Errorf("Z85 text of %d characters is not a multiple of 5", len(s))
	}
	out := make([]byte, 0, len(s)/5*4)
	for i := 0; i < len(s); i += 5 {
		var v uint64
		for j := range 5 {
			d := strings.IndexByte(z85Alphabet, s[i+j])
			if d < 0 {
				return nil, fmt.Errorf("%q is not a Z85 character", s[i+j])
			}
			v = v*85 + uint64(d)
		}
		if v > 0xFFFFFFFF {
			return nil, fmt.Errorf("Z85 group %q overflows", s[i:i+5])
		}
		out = binary.BigEndian.AppendUint32(out, uint32(v))
	}
	return out, nil
}

// readNativeDV reads the native format's buckets into bm.
func readNativeDV(b []byte, bm *roaring64.Bitmap) error {
	if len(b) < 4 {
		return fmt.Errorf("no bucket count")
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if int64(n) > int64(len(b)/4) {
		return fmt.Errorf("%d buckets in %d bytes", n, len(b))
	}
	for key := range uint64(n) {
		if len(b) < 4 {
			return fmt.Errorf("bucket %d: no size", key)
		}
		size := binary.LittleEndian.Uint32(b)
		b = b[4:]
		if int64(size) > int64(len(b)) {
			return fmt.Errorf("bucket %d: %d bytes, %d left", key, size, len(b))
		}
		low := roaring.New()
		if _, err := low.ReadFrom(bytes.NewReader(b[:size])); err != nil {
			return fmt.Errorf("bucket %d: %w", key, err)
		}
		it := low.Iterator()
		for it.HasNext() {
			bm.Add(key<<32 | uint64(it.Next()))
		}
		b = b[size:]
	}
	return nil
}
