package pqfile

import (
	"encoding/binary"
	"errors"
)

// errSchemaMessage is a stored Arrow schema whose flatbuffer does not fit
// in its own bytes.
var errSchemaMessage = errors.New("the stored Arrow schema is not a well-formed IPC schema message")

// checkSchemaMessage checks, before arrow-go's ipc reader sees it, that
// every vector the reader sizes a slice by (a schema's fields, a field's
// children, their custom metadata) fits in the message's bytes. arrow-go
// v18.9.0 (arrow/ipc/metadata.go, schemaFromFB and fieldFromFB) makes a
// slice of whatever length a vector claims, so a corrupt footer value of
// a few hundred bytes asked for tens of GiB and the process died out of
// memory, which recover cannot catch (FuzzStoredArrowSchema found it).
//
// The layout is the Arrow columnar format's "Encapsulated message format"
// (an optional 0xFFFFFFFF continuation, an int32 size, then the Message
// flatbuffer) and the tables of its Schema.fbs/Message.fbs: Message's
// field 2 is its header (here a Schema), Schema's fields 1 and 2 are its
// fields and custom_metadata, Field's fields 5 and 6 its children and
// custom_metadata. Flatbuffer offsets point forward, so the walk ends.
func checkSchemaMessage(raw []byte) error {
	if len(raw) >= 4 && binary.LittleEndian.Uint32(raw) == 0xFFFFFFFF {
		raw = raw[4:]
	}
	if len(raw) < 4 {
		return errSchemaMessage
	}
	size := binary.LittleEndian.Uint32(raw)
	if uint64(size) > uint64(len(raw)-4) {
		return errSchemaMessage
	}
	fb := flatbuf(raw[4 : 4+size])
	msg, ok := fb.root()
	if !ok {
		return errSchemaMessage
	}
	schema, ok := fb.table(msg, 2)
	if !ok {
		return nil // no header: arrow-go refuses it itself
	}
	if !fb.tables(schema, 1, 0) || !fb.vector(schema, 2) {
		return errSchemaMessage
	}
	return nil
}

// flatbuf reads a flatbuffer's tables with every offset checked.
type flatbuf []byte

func (b flatbuf) u32(at uint64) (uint64, bool) {
	if at+4 > uint64(len(b)) {
		return 0, false
	}
	return uint64(binary.LittleEndian.Uint32(b[at:])), true
}

// root is the position of the root table.
func (b flatbuf) root() (uint64, bool) {
	off, ok := b.u32(0)
	return off, ok && off < uint64(len(b))
}

// field is the position of field i of the table at t; ok false for a
// malformed table, present false for a field the table leaves out.
func (b flatbuf) field(t uint64, i int) (pos uint64, present, ok bool) {
	so, ok := b.u32(t)
	if !ok {
		return 0, false, false
	}
	vt := int64(t) - int64(int32(uint32(so)))
	if vt < 0 || uint64(vt)+4 > uint64(len(b)) {
		return 0, false, false
	}
	vtSize := uint64(binary.LittleEndian.Uint16(b[vt:]))
	at := uint64(vt) + 4 + 2*uint64(i)
	if at+2 > uint64(vt)+vtSize {
		return 0, false, true
	}
	if at+2 > uint64(len(b)) {
		return 0, false, false
	}
	off := uint64(binary.LittleEndian.Uint16(b[at:]))
	if off == 0 {
		return 0, false, true
	}
	return t + off, true, t+off < uint64(len(b))
}

// ref follows field i of the table at t, an offset to a table or vector.
func (b flatbuf) ref(t uint64, i int) (pos uint64, present, ok bool) {
	at, present, ok := b.field(t, i)
	if !present || !ok {
		return 0, present, ok
	}
	off, ok := b.u32(at)
	return at + off, true, ok && off > 0 && at+off < uint64(len(b))
}

// table is the table field i of t refers to.
func (b flatbuf) table(t uint64, i int) (uint64, bool) {
	pos, present, ok := b.ref(t, i)
	return pos, present && ok
}

// vector checks that the vector of offsets field i of t refers to fits.
func (b flatbuf) vector(t uint64, i int) bool {
	_, _, ok := b.elems(t, i)
	return ok
}

// elems is the vector of offsets field i of t refers to: its first
// element's position and length.
func (b flatbuf) elems(t uint64, i int) (first, n uint64, ok bool) {
	pos, present, ok := b.ref(t, i)
	if !present {
		return 0, 0, ok
	}
	if !ok {
		return 0, 0, false
	}
	n, ok = b.u32(pos)
	if !ok || n > (uint64(len(b))-pos-4)/4 {
		return 0, 0, false
	}
	return pos + 4, n, true
}

// tables checks the vector of Field tables field i of t refers to, and
// their children, depth levels down.
func (b flatbuf) tables(t uint64, i int, depth int) bool {
	first, n, ok := b.elems(t, i)
	if !ok || depth > 64 {
		return false
	}
	for k := range n {
		at := first + 4*k
		off, _ := b.u32(at)
		f := at + off
		if off == 0 || f >= uint64(len(b)) {
			return false
		}
		if !b.tables(f, 5, depth+1) || !b.vector(f, 6) {
			return false
		}
	}
	return true
}
