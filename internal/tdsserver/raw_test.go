package tdsserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// A raw TDS client, for what go-mssqldb cannot be made to send on purpose
// (an ATTENTION after the response, the ignore bit, malformed requests).
// The builders write the same bytes go-mssqldb writes (tds.go sendLogin,
// writePrelogin, writeAllHeaders; rpc.go sendRpc) and seed the fuzzers.

func buildPrelogin() []byte {
	// VERSION, ENCRYPTION (ENCRYPT_NOT_SUP), MARS, terminator.
	return []byte{0, 0, 16, 0, 6, 1, 0, 22, 0, 1, 4, 0, 23, 0, 1, 0xFF,
		1, 2, 3, 4, 0, 0, 2, 0}
}

func buildLogin7(user, password, db string, packetSize uint32, optionFlags2 byte) []byte {
	ucs := func(s string) []byte { u, _ := appendUTF16(nil, s); return u }
	mangled := ucs(password)
	for i, c := range mangled {
		mangled[i] = (c<<4 | c>>4) ^ 0xA5
	}
	vars := []struct {
		at  int
		val []byte
	}{
		{36, ucs("host")}, {40, ucs(user)}, {44, mangled}, {48, ucs("raw")}, {52, ucs("127.0.0.1")},
		{60, ucs("rawlib")}, {64, nil}, {68, ucs(db)},
	}
	b := make([]byte, login7FixedLen)
	le := binary.LittleEndian
	le.PutUint32(b[4:], tdsVersion74)
	le.PutUint32(b[8:], packetSize)
	b[24], b[25] = 0xA0, optionFlags2
	off := login7FixedLen
	for _, v := range vars {
		le.PutUint16(b[v.at:], uint16(off))
		le.PutUint16(b[v.at+2:], uint16(len(v.val)/2))
		b = append(b, v.val...)
		off += len(v.val)
	}
	for _, at := range []int{78, 82, 86} { // SSPI, AtchDBFile, ChangePassword
		le.PutUint16(b[at:], uint16(off))
	}
	le.PutUint32(b, uint32(len(b)))
	return b
}

// allHeaders is ALL_HEADERS with the transaction descriptor header
// go-mssqldb sends (tds.go writeAllHeaders, transDescrHdr).
func allHeaders() []byte {
	b := appendU32(nil, 22)
	b = appendU32(b, 18)
	b = appendU16(b, 2)
	b = appendU64(b, 0)
	return appendU32(b, 1)
}

func buildBatch(sql string) []byte {
	u, _ := appendUTF16(nil, sql)
	return append(allHeaders(), u...)
}

// rawParam is an RPC parameter already encoded: TYPE_INFO and value.
type rawParam struct {
	name  string
	typed []byte
}

func nvarcharParam(name, s string) rawParam {
	u, _ := appendUTF16(nil, s)
	b := appendU16([]byte{typeNVarChar}, uint16(len(u)))
	b = append(b, 0, 0, 0, 0, 0) // go-mssqldb's zero collation
	b = appendU16(b, uint16(len(u)))
	return rawParam{name, append(b, u...)}
}

func bigintParam(name string, v int64) rawParam {
	return rawParam{name, appendU64([]byte{typeIntN, 8, 8}, uint64(v))}
}

func buildRPC(procID uint16, proc string, params ...rawParam) []byte {
	b := allHeaders()
	if proc == "" {
		b = appendU16(appendU16(b, 0xFFFF), procID)
	} else {
		b = appendUSVarChar(b, proc)
	}
	b = appendU16(b, 0)
	for _, p := range params {
		b = appendBVarChar(b, p.name)
		b = append(b, 0)
		b = append(b, p.typed...)
	}
	return b
}

type rawClient struct {
	t   *testing.T
	c   net.Conn
	hdr []byte
}

func dialRaw(t *testing.T, s *Server, user, password string) (*rawClient, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	r := &rawClient{t: t, c: c, hdr: make([]byte, headerLen)}
	r.send(pktPrelogin, buildPrelogin())
	if m := r.recv(); m.typ != pktReply {
		t.Fatalf("PRELOGIN answer of type %d", m.typ)
	} else if opts, err := parsePrelogin(m.data); err != nil || !bytes.Equal(opts[preEncryption], []byte{encryptNotSup}) {
		t.Fatalf("PRELOGIN answer %v %v", opts, err)
	}
	r.send(pktLogin7, buildLogin7(user, password, "shop", 4096, 0))
	return r, r.recv().data
}

func (r *rawClient) send(typ byte, payload []byte) {
	r.t.Helper()
	pw := newPacketWriter(r.c, 4096, 0)
	pw.begin(typ)
	_, _ = pw.Write(payload)
	if err := pw.end(); err != nil {
		r.t.Fatal(err)
	}
}

// sendRaw sends one packet with the given status as it is.
func (r *rawClient) sendRaw(typ, status byte, payload []byte) {
	r.t.Helper()
	p := make([]byte, headerLen, headerLen+len(payload))
	p[0], p[1] = typ, status
	binary.BigEndian.PutUint16(p[2:], uint16(headerLen+len(payload)))
	p[6] = 1
	if _, err := r.c.Write(append(p, payload...)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawClient) recv() message {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	m, err := readMessage(r.c, maxPacketSize, r.hdr)
	if err != nil {
		r.t.Fatal(err)
	}
	return m
}

// lastDone returns the status of the DONE token that ends a response.
func lastDone(t *testing.T, data []byte) uint16 {
	t.Helper()
	if len(data) < 13 || data[len(data)-13] != tokDone && data[len(data)-13] != tokDoneProc {
		t.Fatalf("response does not end with DONE: % X", data)
	}
	return binary.LittleEndian.Uint16(data[len(data)-12:])
}

func TestRawLogin(t *testing.T) {
	s := startServer(t, nopHandler)
	_, resp := dialRaw(t, s, testUser, testPassword)
	if !bytes.Contains(resp, []byte{tokLoginAck}) || lastDone(t, resp) != 0 {
		t.Errorf("login response % X", resp)
	}
	// The ENVCHANGE packet size answers 4096 to the 4096 asked.
	if !bytes.Contains(resp, appendEnvChange(nil, envPacketSize, "4096", "4096")) {
		t.Error("no ENVCHANGE packet size")
	}
	r, resp := dialRaw(t, s, testUser, "nope")
	if lastDone(t, resp) != doneError || !bytes.Contains(resp, []byte{tokError}) {
		t.Errorf("bad login response % X", resp)
	}
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("after a failed login the connection is open: %v", err)
	}
	// Integrated security is refused even with the right names.
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r = &rawClient{t: t, c: c, hdr: make([]byte, headerLen)}
	r.send(pktPrelogin, buildPrelogin())
	r.recv()
	r.send(pktLogin7, buildLogin7(testUser, testPassword, "shop", 4096, 0x80))
	if lastDone(t, r.recv().data) != doneError {
		t.Error("SSPI login accepted")
	}
}

// TestRawAttentionIdle: an ATTENTION after the response ended is
// acknowledged by a response of its own, a lone DONE with DONE_ATTN
// (MS-TDS 3.3.5.9), and the handler is not involved.
func TestRawAttentionIdle(t *testing.T) {
	s := startServer(t, tableHandler{"select 1": {cols: []Column{{Name: "a", Type: "int"}}, rows: [][]any{{1}}}})
	r, _ := dialRaw(t, s, testUser, testPassword)
	r.send(pktSQLBatch, buildBatch("select 1"))
	if st := lastDone(t, r.recv().data); st != doneCount {
		t.Errorf("DONE status %#x", st)
	}
	r.send(pktAttention, nil)
	if m := r.recv(); !bytes.Equal(m.data, appendDone(nil, tokDone, doneAttn, 0, 0)) {
		t.Errorf("attention answer % X", m.data)
	}
	r.send(pktSQLBatch, buildBatch("select 1"))
	if st := lastDone(t, r.recv().data); st != doneCount {
		t.Errorf("after the attention: DONE status %#x", st)
	}
}

// TestRawAttentionBeforeHandler: an ATTENTION that arrives right behind
// its request cancels the handler before it writes anything.
func TestRawAttentionBeforeHandler(t *testing.T) {
	gate := make(chan struct{})
	causes := make(chan error, 1)
	h := HandlerFunc(func(ctx context.Context, req *Request, w *ResponseWriter) error {
		if req.SQL == "select wait" {
			<-gate
			<-ctx.Done()
			causes <- context.Cause(ctx)
		}
		return w.Columns([]Column{{Name: "a", Type: "int"}})
	})
	s := startServer(t, h)
	r, _ := dialRaw(t, s, testUser, testPassword)
	r.send(pktSQLBatch, buildBatch("select wait"))
	r.send(pktAttention, nil)
	close(gate)
	if m := r.recv(); !bytes.Equal(m.data, appendDone(nil, tokDone, doneAttn, 0, 0)) {
		t.Errorf("response % X, want a lone DONE_ATTN", m.data)
	}
	if c := <-causes; !errors.Is(c, ErrAttention) {
		t.Errorf("cause %v", c)
	}
	// No second acknowledgement follows: the next answer is the next request's.
	r.send(pktSQLBatch, buildBatch("select again"))
	if st := lastDone(t, r.recv().data); st&doneAttn != 0 {
		t.Errorf("a second DONE_ATTN: %#x", st)
	}
}

// TestRawIgnoreBit: a request whose last packet has the ignore bit is
// dropped and answered with a single DONE (MS-TDS 2.2.1.7).
func TestRawIgnoreBit(t *testing.T) {
	s := startServer(t, nopHandler)
	r, _ := dialRaw(t, s, testUser, testPassword)
	r.sendRaw(pktSQLBatch, statusEOM|statusIgnore, buildBatch("select dropped"))
	if m := r.recv(); !bytes.Equal(m.data, appendDone(nil, tokDone, 0, 0, 0)) {
		t.Errorf("answer % X", m.data)
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("%d requests recorded", n)
	}
}

// TestRawMalformed: a malformed request is answered with ERROR and the
// connection stays usable; a malformed packet closes it.
func TestRawMalformed(t *testing.T) {
	s := startServer(t, tableHandler{"select 1": {cols: []Column{{Name: "a", Type: "int"}}, rows: [][]any{{1}}}})
	r, _ := dialRaw(t, s, testUser, testPassword)
	for _, bad := range []struct {
		typ  byte
		data []byte
		want string
	}{
		{pktSQLBatch, []byte{1, 2}, "truncated"},
		{pktSQLBatch, append(allHeaders(), 'x'), "odd UTF-16"},
		{pktRPC, append(allHeaders(), 0xFF, 0xFF, 10, 0, 0, 0, 0, 0, typeIntN, 8, 8, 1), "truncated"},
		{pktRPC, buildRPC(10, ""), "without @stmt"},
		{pktRPC, buildRPC(10, "", bigintParam("", 1)), "@stmt is bigint"},
		{pktRPC, append(buildRPC(0, "p"), 0, 0, typeTVP), "0xF3 is not supported"},
		{pktRPC, append(buildRPC(0, "p"), 0xFF), "several procedures"},
		{pktRPC, append(buildRPC(0, "p"), 0, 0, typeIntN, 3), "length 3"},
		{pktBulkLoadForTest, []byte{1}, "packet type 7 is not supported"},
	} {
		r.send(bad.typ, bad.data)
		m := r.recv()
		if lastDone(t, m.data)&doneError == 0 || !strings.Contains(string(mustUTF16(m.data)), bad.want) {
			t.Errorf("% X: answer % X, want an ERROR saying %q", bad.data, m.data, bad.want)
		}
	}
	r.send(pktSQLBatch, buildBatch("select 1"))
	if st := lastDone(t, r.recv().data); st != doneCount {
		t.Errorf("after the bad requests: %#x", st)
	}
	// A packet shorter than its header ends the connection.
	_, _ = r.c.Write([]byte{pktSQLBatch, statusEOM, 0, 4, 0, 0, 1, 0})
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("after a bad packet: %v", err)
	}
}

const pktBulkLoadForTest = 7

// mustUTF16 decodes the UTF-16 parts of a token stream well enough to
// search an error message in it.
func mustUTF16(b []byte) []byte {
	var out []byte
	for i := 0; i+1 < len(b); i++ {
		if b[i] >= 0x20 && b[i] < 0x7F && b[i+1] == 0 {
			out = append(out, b[i])
			i++
		}
	}
	return out
}

// TestTransactions: BeginTx, Commit and Rollback go as Transaction
// Manager requests, which the server answers itself.
func TestTransactions(t *testing.T) {
	s := startServer(t, nopHandler)
	db := openDB(t, s.DSN("shop"))
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("update t set a = 1"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range s.Requests() {
		got = append(got, r.SQL)
	}
	if want := "BEGIN TRANSACTION|update t set a = 1|COMMIT TRANSACTION|BEGIN TRANSACTION|ROLLBACK TRANSACTION"; strings.Join(got, "|") != want {
		t.Errorf("got %s", strings.Join(got, "|"))
	}
}

// TestRawAttentionTwice: an ATTENTION during a streaming response is
// acknowledged at its end; a second one after that (go-mssqldb sends one
// from Rows.Close when its token channel is momentarily empty) gets an
// acknowledgement of its own.
func TestRawAttentionTwice(t *testing.T) {
	h := &bigHandler{total: 2_000_000, causes: make(chan error, 4)}
	s := startServer(t, h)
	r, _ := dialRaw(t, s, testUser, testPassword)
	r.send(pktSQLBatch, buildBatch("select big"))
	// Read the first packet, so the handler is streaming, then interrupt.
	first := make([]byte, 4096)
	if _, err := io.ReadFull(r.c, first); err != nil || first[1] != 0 {
		t.Fatalf("first packet: status %d, %v", first[1], err)
	}
	r.send(pktAttention, nil)
	m := r.recv() // the rest of the message
	if st := lastDone(t, m.data); st != doneAttn {
		t.Fatalf("the streamed response ends with DONE status %#x", st)
	}
	if c := <-h.causes; !errors.Is(c, ErrAttention) {
		t.Errorf("cause %v", c)
	}
	if n := h.sent.Load(); n == 0 || n >= int64(h.total) {
		t.Errorf("%d of %d rows sent", n, h.total)
	}
	r.send(pktAttention, nil)
	if m := r.recv(); !bytes.Equal(m.data, appendDone(nil, tokDone, doneAttn, 0, 0)) {
		t.Errorf("second acknowledgement % X", m.data)
	}
	r.send(pktSQLBatch, buildBatch("select one"))
	if st := lastDone(t, r.recv().data); st != doneCount {
		t.Errorf("next request: DONE status %#x", st)
	}
}
