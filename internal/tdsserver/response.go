package tdsserver

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf16"
)

// ErrAttention is the cause (context.Cause) of a Handler's context when
// the client sent ATTENTION for the request (MS-TDS 2.2.1.7): the client
// cancelled it, for example because its context ended or it closed a
// result set before reading every row.
var ErrAttention = errors.New("tdsserver: the client sent ATTENTION")

// errFinished is returned by a ResponseWriter used after Serve returned.
var errFinished = errors.New("tdsserver: response already finished (the ResponseWriter was used after Serve returned)")

// ResponseWriter writes the token stream answering one request. Its
// methods write whole tokens into packets of the negotiated size and send
// each packet as it fills, so a long result streams in constant memory.
//
// The server ends the response after Serve returns: it closes an open
// result set (with DONE_COUNT of the rows written), and writes the final
// DONE of a SQL batch, or the RETURNSTATUS and DONEPROC of an RPC
// (MS-TDS 2.2.2.7 Response Completion, 2.2.7.6-2.2.7.8, 2.2.7.18;
// go-mssqldb reads a response up to the DONE or DONEPROC without
// DONE_MORE, token.go processSingleResponse). A ResponseWriter is not safe for
// concurrent use and must not be used after Serve returns.
type ResponseWriter struct {
	ctx        context.Context
	kind       Kind
	pw         *packetWriter
	defColl    Collation
	serverName string
	procName   string
	// returnValues are the RETURNVALUE tokens of the RPC's output
	// parameters, sent after RETURNSTATUS (MS-TDS 2.2.7.19).
	returnValues []byte

	buf      []byte // one token at a time
	cols     []Column
	types    []*colType
	inResult bool
	rows     int64
	pending  doneTok // the last statement's DONE, held back until we know whether more follows
	stmtErr  bool    // an ERROR was written for the current statement
	anyErr   bool    // an ERROR was written in this response
	err      error   // sticky write error
	finished bool
	fault    *faultState // an injected fault (Options.Inject), nil for none
}

type doneTok struct {
	ok     bool
	status uint16
	curCmd uint16
	rows   uint64
}

// Columns starts a result set: it writes COLMETADATA (MS-TDS 2.2.7.4). A
// result set still open is ended first, as Done(rows written) would.
func (w *ResponseWriter) Columns(cols []Column) error {
	if err := w.check(); err != nil {
		return err
	}
	if len(cols) == 0 || len(cols) > 4096 {
		return fmt.Errorf("tdsserver: a result set has 1..4096 columns, got %d", len(cols))
	}
	types := make([]*colType, len(cols))
	for i, c := range cols {
		t, err := parseType(c, w.defColl)
		if err != nil {
			return err
		}
		if n := len(utf16.Encode([]rune(c.Name))); n > 255 {
			return fmt.Errorf("tdsserver: column name %q is %d UTF-16 units, over 255", c.Name, n)
		}
		types[i] = t
	}
	w.endResult()
	b := appendU16(append(w.buf[:0], tokColMetadata), uint16(len(cols)))
	for i, t := range types {
		b = appendU32(b, t.userType)
		var flags uint16
		if t.nullable {
			flags |= 0x0001 // fNullable
		}
		b = appendU16(b, flags)
		b = t.appendTypeInfo(b)
		b = appendBVarChar(b, cols[i].Name)
	}
	w.flushPending()
	w.emit(b)
	w.cols, w.types = append(w.cols[:0], cols...), types
	w.inResult, w.rows = true, 0
	return w.err
}

// Row writes one row of the open result set: ROW, or NBCROW when a value is
// nil (MS-TDS 2.2.7.20, 2.2.7.15). Values are Go values: int64 (or any Go
// integer) for the integer types; bool for bit; float64 for float and real
// (a real must be exactly a float32); exact decimal text (string or []byte)
// or an integer for decimal, numeric, money and smallmoney; time.Time or
// civil.Date/civil.DateTime/civil.Time for the date and time types (the
// wall clock is sent; datetimeoffset takes a time.Time and its zone's
// offset); string for the character types and xml; []byte for the binary
// types, rowversion and UDTs; the 16 wire bytes ([]byte or [16]byte) of a
// uniqueidentifier; for sql_variant an integer, bool, float64, string,
// []byte or time.Time (sent as bigint, bit, float, nvarchar, varbinary or
// datetime2(7)); nil for NULL. A value the column cannot hold exactly is
// an error naming the column, and nothing of the row is written.
func (w *ResponseWriter) Row(vals ...any) error {
	if err := w.check(); err != nil {
		return err
	}
	if !w.inResult {
		return errors.New("tdsserver: Row before Columns")
	}
	if w.strike(false) {
		return w.faultErr()
	}
	if len(vals) != len(w.types) {
		return fmt.Errorf("tdsserver: row %d has %d values for %d columns", w.rows+1, len(vals), len(w.types))
	}
	b := w.buf[:0]
	nulls := false
	for i, v := range vals {
		if v == nil {
			if !w.types[i].nullable {
				return fmt.Errorf("tdsserver: row %d, column %q (%s NOT NULL): NULL", w.rows+1, w.cols[i].Name, w.cols[i].Type)
			}
			nulls = true
		}
	}
	if nulls {
		// NBCROW: a bitmap with a set bit per NULL, then the other values.
		b = append(b, tokNBCRow)
		bm := len(b)
		for range (len(vals) + 7) / 8 {
			b = append(b, 0)
		}
		for i, v := range vals {
			if v == nil {
				b[bm+i/8] |= 1 << (i % 8)
			}
		}
	} else {
		b = append(b, tokRow)
	}
	for i, v := range vals {
		if v == nil {
			continue
		}
		var err error
		if b, err = w.types[i].appendValue(b, v); err != nil {
			w.buf = b[:0]
			return fmt.Errorf("tdsserver: row %d, column %q (%s): %w", w.rows+1, w.cols[i].Name, w.cols[i].Type, err)
		}
	}
	w.buf = b[:0]
	w.emit(b)
	w.rows++
	if w.fault != nil {
		w.fault.sent++
	}
	return w.err
}

// Done ends the current statement: the open result set, or a statement
// without one (an UPDATE, say). rowCount >= 0 is sent with DONE_COUNT (the
// rows affected that Exec reports); a negative rowCount sends no count.
// It writes DONE for a SQL batch and DONEINPROC for an RPC (MS-TDS
// 2.2.7.6-7). Whether more follows (DONE_MORE) is known only later, so the
// token is held until the next write or the end of the response; the
// handler does not say it.
func (w *ResponseWriter) Done(rowCount int64) error {
	if err := w.check(); err != nil {
		return err
	}
	w.flushPending()
	cmd := uint16(0)
	if w.inResult {
		cmd = curCmdSelect
	}
	w.inResult = false
	w.setPending(rowCount, cmd)
	return w.err
}

// Error writes an ERROR token (MS-TDS 2.2.7.10); go-mssqldb returns it as
// an mssql.Error with this Number, Class, State and Message. The current
// statement's DONE and the response's final DONE (or DONEPROC) then carry
// DONE_ERROR.
func (w *ResponseWriter) Error(number int32, class, state uint8, msg string) error {
	if err := w.check(); err != nil {
		return err
	}
	w.flushPending()
	w.emit(appendMessage(w.buf[:0], tokError, number, state, class, msg, w.serverName, w.procName, 1))
	w.stmtErr, w.anyErr = true, true
	return w.err
}

// Info writes an INFO token (MS-TDS 2.2.7.13), a message that is not an
// error (PRINT, or class 10 and below).
func (w *ResponseWriter) Info(number int32, class, state uint8, msg string) error {
	if err := w.check(); err != nil {
		return err
	}
	w.flushPending()
	w.emit(appendMessage(w.buf[:0], tokInfo, number, state, class, msg, w.serverName, w.procName, 1))
	return w.err
}

// check refuses writes after the response finished, after a write error,
// and after the request was cancelled (ATTENTION or a closed connection).
func (w *ResponseWriter) check() error {
	switch {
	case w.finished:
		return errFinished
	case w.faultErr() != nil:
		return w.faultErr()
	case w.err != nil:
		return w.err
	case w.ctx.Err() != nil:
		return fmt.Errorf("tdsserver: request cancelled: %w", context.Cause(w.ctx))
	}
	return nil
}

func (w *ResponseWriter) emit(b []byte) {
	if w.err == nil {
		_, w.err = w.pw.Write(b)
	}
}

// endResult turns an open result set into a pending DONE with its count.
func (w *ResponseWriter) endResult() {
	if w.inResult {
		w.flushPending()
		w.inResult = false
		w.setPending(w.rows, curCmdSelect)
	}
}

func (w *ResponseWriter) setPending(rowCount int64, cmd uint16) {
	d := doneTok{ok: true, curCmd: cmd}
	if rowCount >= 0 {
		d.status |= doneCount
		d.rows = uint64(rowCount)
	}
	if w.stmtErr {
		d.status |= doneError
	}
	w.stmtErr = false
	w.pending = d
}

// flushPending writes the held DONE with DONE_MORE: something follows.
func (w *ResponseWriter) flushPending() {
	if !w.pending.ok {
		return
	}
	tok := byte(tokDone)
	if w.kind == RPC {
		tok = tokDoneInProc
	}
	p := w.pending
	w.pending = doneTok{}
	w.emit(appendDone(w.buf[:0], tok, p.status|doneMore, p.curCmd, p.rows))
}

// finish ends the response and its message. attn answers an ATTENTION
// received during the request with DONE_ATTN (MS-TDS 2.2.1.7, 3.3.5.9);
// go-mssqldb waits for a DONE (not DONEINPROC) with that bit
// (token.go, readCancelConfirmation).
func (w *ResponseWriter) finish(attn bool) error {
	if w.finished {
		return w.err
	}
	w.strike(true)
	w.endResult()
	if w.stmtErr && !w.pending.ok {
		w.setPending(-1, 0) // an ERROR after the last DONE: report it as a statement
	}
	switch {
	case attn:
		w.flushPending()
		w.emit(appendDone(w.buf[:0], tokDone, doneAttn, 0, 0))
	case w.kind == RPC:
		w.flushPending()
		status := uint16(0)
		if w.anyErr {
			status = doneError
		}
		b := append(appendReturnStatus(w.buf[:0], 0), w.returnValues...)
		w.emit(appendDone(b, tokDoneProc, status, 0, 0))
	default:
		d := w.pending
		w.pending = doneTok{}
		if w.anyErr {
			d.status |= doneError
		}
		w.emit(appendDone(w.buf[:0], tokDone, d.status, d.curCmd, d.rows))
	}
	w.finished = true
	if w.err == nil {
		w.err = w.pw.end()
	}
	return w.err
}
