package tdsserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Handler answers the requests of a connection, one at a time.
type Handler interface {
	// Serve answers req through w. ctx is cancelled when the client sends
	// ATTENTION for this request (context.Cause is then ErrAttention) or
	// the connection or server closes; w's methods then fail and Serve
	// should return. A returned error, other than one caused by that
	// cancellation, reaches the client as ERROR 50000 (class 16) with the
	// error's text.
	Serve(ctx context.Context, req *Request, w *ResponseWriter) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request, w *ResponseWriter) error

// Serve calls f.
func (f HandlerFunc) Serve(ctx context.Context, req *Request, w *ResponseWriter) error {
	return f(ctx, req, w)
}

// Login is what a client sent in LOGIN7 (MS-TDS 2.2.6.4), less the
// password, with the packet size the server granted.
type Login struct {
	User, Database, AppName, HostName, ServerName, Language string
	// TDSVersion is the version the client asked for (go-mssqldb: 0x74000004).
	TDSVersion uint32
	// PacketSize is the negotiated packet size.
	PacketSize int
	// Encryption is what the connection encrypts, as negotiated in
	// PRELOGIN (see Encryption).
	Encryption Encryption
	// ReadOnlyIntent is LOGIN7's TypeFlags fReadOnlyIntent (0x20, MS-TDS
	// 2.2.6.4): the client declared a read-only workload, which an
	// availability group listener routes to a readable secondary.
	// go-mssqldb sets it for ApplicationIntent=ReadOnly in the DSN
	// (v1.11.2 msdsn/conn_str.go L522-529, tds.go L426-431 and
	// prepareLogin L1071-1073).
	ReadOnlyIntent bool
}

// Request is one request from a client.
type Request struct {
	// ConnID numbers the server's connections from 1; Seq numbers the
	// requests of a connection from 1.
	ConnID, Seq uint64
	// Login is the connection's login.
	Login Login
	// Kind is Batch or RPC.
	Kind Kind
	// Reset is set when the request's packets had RESETCONNECTION (0x08) or
	// RESETCONNECTIONSKIPTRAN (0x10) in their status (MS-TDS 2.2.3.1.2):
	// go-mssqldb sets it on the first request after database/sql took the
	// connection from its pool again (Conn.ResetSession). The server
	// acknowledges it (ENVCHANGE 18); resetting session state is the
	// Handler's business.
	Reset bool
	// Proc is the procedure an RPC called: "sp_executesql" (ProcID 10),
	// another well-known ProcID's name, or the name a client sent, such as
	// "sys.sp_cdc_help_change_data_capture". Empty for a batch.
	Proc string
	// SQL is the batch text, or sp_executesql's @stmt. Empty for other RPCs.
	SQL string
	// Params are the RPC's parameters; for sp_executesql those after @stmt
	// and @params.
	Params []Param
}

// clone copies r deeply enough that the copy shares no mutable memory.
func (r Request) clone() Request {
	r.Params = append([]Param(nil), r.Params...)
	for i := range r.Params {
		if b, ok := r.Params[i].Value.([]byte); ok {
			r.Params[i].Value = append([]byte(nil), b...)
		}
	}
	return r
}

// Options configure a Server.
type Options struct {
	// User and Password are the only login the server accepts (the user
	// name matched ignoring case, as SQL Server's default collation does;
	// the password exactly). Any other login gets ERROR 18456 and the
	// connection closes. User must not be empty.
	User, Password string
	// PacketSize is the packet size granted a client that asks for none
	// (LOGIN7 PacketSize 0); 0 means 4096, or MaxPacketSize if lower.
	PacketSize int
	// MaxPacketSize is the largest packet size the server grants: a client
	// asking for more gets this, announced by ENVCHANGE (go-mssqldb then
	// resizes its buffer). 0 means 32767. A client's request of 512..this
	// is granted as asked.
	MaxPacketSize int
	// ServerVersion is announced in PRELOGIN and LOGINACK:
	// "major.minor.build[.revision]"; "" means "16.0.1000.6" (SQL Server
	// 2022 RTM).
	ServerVersion string
	// ServerName is the server name in ERROR and INFO tokens; "" means
	// "tdsserver".
	ServerName string
	// Collation is the server's collation, announced at login and used for
	// character columns without one; "" means SQL_Latin1_General_CP1_CI_AS.
	Collation string
	// Logger receives connection and protocol events; nil is silent.
	Logger *slog.Logger
	// NoRecord turns off the request log of Requests (for benchmarks and
	// long runs, where it would grow without bound).
	NoRecord bool
	// Inject, when set, is asked before each request is served whether a
	// Fault ends its response (see Fault, TransientFault); Server.Faults
	// counts those that struck.
	Inject func(req *Request) (Fault, bool)
}

// Server is a TDS 7.4 server on a loopback port.
type Server struct {
	h      Handler
	opts   Options
	ver    serverVersion
	coll   Collation
	log    *slog.Logger
	ln     net.Listener
	tls    *tls.Config // the login's TLS, with a certificate made at Start
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool // detaches the Start context's AfterFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	nextID uint64
	reqs   []Request // the request log

	closeOnce sync.Once
	closeErr  error

	faults atomic.Int64 // injected faults that struck
}

// Start listens on 127.0.0.1 at a free port and serves h until Close or
// until ctx is done.
func Start(ctx context.Context, h Handler, opts Options) (*Server, error) {
	if h == nil {
		return nil, errors.New("tdsserver: nil Handler")
	}
	if opts.User == "" {
		return nil, errors.New("tdsserver: Options.User is empty")
	}
	if opts.MaxPacketSize == 0 {
		opts.MaxPacketSize = maxPacketSize
	}
	if opts.PacketSize == 0 {
		opts.PacketSize = min(4096, opts.MaxPacketSize)
	}
	if opts.MaxPacketSize < minPacketSize || opts.MaxPacketSize > maxPacketSize {
		return nil, fmt.Errorf("tdsserver: Options.MaxPacketSize %d outside %d..%d", opts.MaxPacketSize, minPacketSize, maxPacketSize)
	}
	if opts.PacketSize < minPacketSize || opts.PacketSize > opts.MaxPacketSize {
		return nil, fmt.Errorf("tdsserver: Options.PacketSize %d outside %d..%d", opts.PacketSize, minPacketSize, opts.MaxPacketSize)
	}
	if opts.ServerVersion == "" {
		opts.ServerVersion = "16.0.1000.6"
	}
	if opts.ServerName == "" {
		opts.ServerName = "tdsserver"
	}
	if opts.Collation == "" {
		opts.Collation = "SQL_Latin1_General_CP1_CI_AS"
	}
	ver, err := parseServerVersion(opts.ServerVersion)
	if err != nil {
		return nil, err
	}
	coll, err := ParseCollation(opts.Collation)
	if err != nil {
		return nil, fmt.Errorf("tdsserver: Options.Collation: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tdsserver: not started: %w", err)
	}
	cert, err := newCertificate()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tdsserver: listening on 127.0.0.1: %w", err)
	}
	s := &Server{h: h, opts: opts, ver: ver, coll: coll, log: log, ln: ln, tls: tlsConfig(cert), conns: map[*conn]struct{}{}}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.wg.Add(1)
	go s.accept()
	s.stop = context.AfterFunc(ctx, func() { _ = s.shutdown() })
	log.Debug("tdsserver: listening", "addr", ln.Addr().String())
	return s, nil
}

// Addr is the server's address, "127.0.0.1:<port>".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// DSN is a go-mssqldb connection string for database:
// sqlserver://<user>:<password>@127.0.0.1:<port>?database=<db>&encrypt=disable.
func (s *Server) DSN(database string) string {
	u := url.URL{
		Scheme:   "sqlserver",
		User:     url.UserPassword(s.opts.User, s.opts.Password),
		Host:     s.Addr(),
		RawQuery: url.Values{"database": {database}, "encrypt": {"disable"}}.Encode(),
	}
	return u.String()
}

// Requests returns a copy of every request received so far, in the order
// they arrived (per connection; connections interleave), unless
// Options.NoRecord is set.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = r.clone()
	}
	return out
}

func (s *Server) record(r *Request) {
	if s.opts.NoRecord {
		return
	}
	c := r.clone()
	s.mu.Lock()
	s.reqs = append(s.reqs, c)
	s.mu.Unlock()
}

// Close stops the server: it closes the listener and every connection
// (cancelling the handlers' contexts) and waits for every goroutine the
// server started, so a Handler that ignores its context delays Close.
func (s *Server) Close() error {
	s.stop()
	return s.shutdown()
}

func (s *Server) shutdown() error {
	s.closeOnce.Do(func() {
		s.cancel()
		err := s.ln.Close()
		s.mu.Lock()
		s.closed = true
		for c := range s.conns {
			_ = c.nc.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
		if err != nil && !errors.Is(err, net.ErrClosed) {
			s.closeErr = fmt.Errorf("tdsserver: closing the listener: %w", err)
		}
		s.log.Debug("tdsserver: closed", "addr", s.Addr())
	})
	return s.closeErr
}

func (s *Server) accept() {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure (out of file descriptors, say): wait
			// and try again, as net/http's Server does, until Close.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("tdsserver: accept failed; retrying", "error", err, "in", backoff)
			select {
			case <-time.After(backoff):
				continue
			case <-s.ctx.Done():
				return
			}
		}
		backoff = 0
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = nc.Close()
			return
		}
		s.nextID++
		c := newConn(s, nc, s.nextID)
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// conn is one client connection.
type conn struct {
	s      *Server
	nc     net.Conn
	rw     io.ReadWriter // nc, or TLS over it when the whole connection is encrypted
	id     uint64
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	pw     *packetWriter
	login  Login
	prep   preparedStmts // sp_prepare/sp_prepexec handles, by connection

	// Attention bookkeeping, shared with the reader goroutine under mu.
	// Every ATTENTION gets one acknowledgement (MS-TDS 3.3.5.9): in the
	// response of its request if that request was still running when it
	// arrived, else a response of its own. go-mssqldb may send a second
	// ATTENTION after the first was acknowledged (from Rows.Close) and then
	// waits for a second acknowledgement (token.go, nextToken).
	mu        sync.Mutex
	attnFor   uint64                  // the request the latest in-request ATTENTION cancelled
	cur       uint64                  // the request whose handler runs, 0 if none
	curCancel context.CancelCauseFunc // cancels it
	finished  uint64                  // the last request whose response is complete or being completed
}

func newConn(s *Server, nc net.Conn, id uint64) *conn {
	c := &conn{s: s, nc: nc, rw: nc, id: id, log: s.log.With("conn", id)}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	return c
}

// inbound is a message from the reader goroutine, tagged with the request
// it follows.
type inbound struct {
	message
	seq    uint64 // a request's own Seq, or for ATTENTION the request it follows
	inline bool   // an ATTENTION that its request's response acknowledges
	err    error
}

func (c *conn) serve() {
	defer c.cancel()
	defer c.nc.Close()
	c.log.Debug("tdsserver: connection opened", "remote", c.nc.RemoteAddr().String())
	if err := c.handshake(); err != nil {
		c.logEnd(err, "login")
		return
	}
	msgs := make(chan inbound)
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		c.read(msgs)
	}()
	defer func() {
		// Unblock the reader (in a read, or sending to msgs) and wait.
		_ = c.nc.Close()
		c.cancel()
		rwg.Wait()
	}()
	for {
		var in inbound
		select {
		case <-c.ctx.Done():
			return
		case in = <-msgs:
		}
		if in.err != nil {
			c.logEnd(in.err, "reading")
			return
		}
		if err := c.dispatch(in); err != nil {
			c.logEnd(err, "writing")
			return
		}
	}
}

func (c *conn) logEnd(err error, during string) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), c.ctx.Err() != nil:
		c.log.Debug("tdsserver: connection closed", "during", during, "error", err)
	default:
		c.log.Warn("tdsserver: connection dropped", "during", during, "error", err)
	}
}

// read runs in its own goroutine after login, so that an ATTENTION
// arriving while a handler streams a result cancels it at once (MS-TDS
// 3.3.5.9: the server listens for messages while a request executes).
func (c *conn) read(out chan<- inbound) {
	hdr := make([]byte, headerLen)
	var seq uint64
	for {
		m, err := readMessage(c.rw, c.login.PacketSize, hdr)
		in := inbound{message: m, err: err}
		if err == nil {
			if m.typ == pktAttention {
				in.seq = seq
				c.mu.Lock()
				if c.finished < seq { // its request has not finished: cancel it
					in.inline = true
					c.attnFor = seq
					if c.cur == seq {
						c.curCancel(ErrAttention)
					}
				}
				c.mu.Unlock()
			} else {
				seq++
				in.seq = seq
			}
		} else {
			c.cancel() // the client is gone: cancel a running handler too
		}
		select {
		case out <- in:
		case <-c.ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// handshake runs PRELOGIN and LOGIN7 (MS-TDS 3.3.5, the server states
// before "Logged In").
func (c *conn) handshake() error {
	hdr := make([]byte, headerLen)
	m, err := readMessage(c.nc, maxPacketSize, hdr)
	if err != nil {
		return err
	}
	if m.typ != pktPrelogin {
		return fmt.Errorf("%w: first message of type %d, not PRELOGIN", errPacket, m.typ)
	}
	opts, err := parsePrelogin(m.data)
	if err != nil {
		return err
	}
	enc, opt := opts[preEncryption]
	answer, encryption, err := negotiateEncryption(enc, opt)
	if err != nil {
		return err
	}
	pw := newPacketWriter(c.nc, maxPacketSize, uint16(c.id))
	pw.begin(pktReply)
	if _, err := pw.Write(appendPreloginResponse(nil, c.s.ver, answer)); err != nil {
		return err
	}
	if err := pw.end(); err != nil {
		return err
	}
	switch encryption {
	case EncryptNone:
		m, err = readMessage(c.nc, maxPacketSize, hdr)
	case EncryptLogin:
		var tc *tls.Conn
		if tc, err = startTLS(c.nc, c.s.tls); err == nil {
			m, err = readLoginOnly(tc, c.nc, hdr)
		}
	case EncryptFull:
		var tc *tls.Conn
		if tc, err = startTLS(c.nc, c.s.tls); err == nil {
			c.rw = tc
			pw = newPacketWriter(tc, maxPacketSize, uint16(c.id))
			m, err = readMessage(tc, maxPacketSize, hdr)
		}
	}
	if err != nil {
		return err
	}
	if m.typ != pktLogin7 {
		return fmt.Errorf("%w: message of type %d where LOGIN7 was due", errPacket, m.typ)
	}
	l, err := parseLogin7(m.data)
	if err != nil {
		return err
	}
	size := int(l.packetSize)
	switch {
	case size == 0:
		size = c.s.opts.PacketSize
	case size < minPacketSize:
		size = minPacketSize
	case size > c.s.opts.MaxPacketSize:
		size = c.s.opts.MaxPacketSize
	}
	pw.resize(size)
	c.pw = pw
	pw.begin(pktReply)
	if l.sspi || !strings.EqualFold(l.userName, c.s.opts.User) || l.password != c.s.opts.Password {
		_, _ = pw.Write(appendLoginFailed(nil, l.userName, c.s.opts.ServerName))
		_ = pw.end()
		return fmt.Errorf("tdsserver: login failed for user %q", l.userName)
	}
	db := l.database
	if db == "" {
		db = "master"
	}
	c.login = Login{User: l.userName, Database: db, AppName: l.appName, HostName: l.hostName,
		ServerName: l.serverName, Language: l.language, TDSVersion: l.tdsVersion, PacketSize: size, Encryption: encryption, ReadOnlyIntent: l.readOnlyIntent}
	if _, err := pw.Write(appendLoginResponse(nil, db, c.s.opts.ServerName, c.s.coll, c.s.ver, size, int(l.packetSize))); err != nil {
		return err
	}
	c.log.Debug("tdsserver: logged in", "user", l.userName, "database", db, "app", l.appName, "packet_size", size, "encryption", encryption.String(), "read_only_intent", l.readOnlyIntent)
	return pw.end()
}

// dispatch answers one message.
func (c *conn) dispatch(in inbound) error {
	switch in.typ {
	case pktAttention:
		if in.inline {
			return nil // acknowledged at the end of its request's response
		}
		// Its request had finished: acknowledge alone (MS-TDS 3.3.5.9).
		c.pw.begin(pktReply)
		_, _ = c.pw.Write(appendDone(nil, tokDone, doneAttn, 0, 0))
		return c.pw.end()
	}
	if in.typ == pktSQLBatch || in.typ == pktRPC {
		if in.status&statusIgnore == 0 {
			return c.request(in)
		}
	}
	// The rest runs no handler: it is complete at once, and an ATTENTION
	// arriving now gets an acknowledgement of its own.
	c.mu.Lock()
	c.finished = in.seq
	c.mu.Unlock()
	switch {
	case in.typ == pktSQLBatch || in.typ == pktRPC:
		// The client abandoned a partly sent request (ignore bit): drop it
		// and answer with a single DONE (MS-TDS 2.2.1.7).
		c.pw.begin(pktReply)
		_, _ = c.pw.Write(appendDone(nil, tokDone, 0, 0, 0))
		return c.pw.end()
	case in.typ == pktTransMgr:
		return c.transaction(in)
	}
	return c.replyError(fmt.Sprintf("tdsserver: packet type %d is not supported", in.typ))
}

// replyError answers a request it cannot run with ERROR and DONE_ERROR.
func (c *conn) replyError(msg string) error {
	c.log.Warn("tdsserver: request refused", "reason", msg)
	c.pw.begin(pktReply)
	b := appendMessage(nil, tokError, 50000, 1, 16, msg, c.s.opts.ServerName, "", 1)
	_, _ = c.pw.Write(appendDone(b, tokDone, doneError, 0, 0))
	return c.pw.end()
}

// request parses a batch or RPC, records it and runs the handler.
func (c *conn) request(in inbound) error {
	req := &Request{ConnID: c.id, Seq: in.seq, Login: c.login, Reset: in.status&(statusReset|statusResetSkipT) != 0}
	var perr error
	var call procCall
	if in.typ == pktSQLBatch {
		req.Kind = Batch
		req.SQL, perr = parseBatch(in.data)
	} else {
		req.Kind = RPC
		call, perr = c.prep.fill(req, in.data)
	}
	ctx, cancel := context.WithCancelCause(c.ctx)
	defer cancel(nil)
	w := &ResponseWriter{ctx: ctx, kind: req.Kind, pw: c.pw, defColl: c.s.coll, serverName: c.s.opts.ServerName}
	if req.Kind == RPC {
		w.procName, w.returnValues = req.Proc, call.returnValues
	}
	c.pw.begin(pktReply)
	if req.Reset {
		// Reset completion acknowledgement (MS-TDS 2.2.7.9, type 18).
		w.emit(appendEnvChangeBytes(nil, envResetConnAk, nil, nil))
	}
	if perr != nil {
		c.mu.Lock()
		c.finished = in.seq
		attn := c.attnFor == in.seq
		c.mu.Unlock()
		c.log.Warn("tdsserver: malformed request", "seq", in.seq, "error", perr)
		_ = w.Error(50000, 16, 1, perr.Error())
		return w.finish(attn)
	}
	c.s.record(req)
	if c.s.opts.Inject != nil {
		if f, ok := c.s.opts.Inject(req); ok {
			w.armFault(f, func() { _ = c.nc.Close() }, &c.s.faults)
		}
	}
	c.log.Debug("tdsserver: request", "seq", req.Seq, "kind", req.Kind.String(), "proc", req.Proc, "sql", req.SQL, "params", len(req.Params), "reset", req.Reset)

	c.mu.Lock()
	c.cur, c.curCancel = in.seq, cancel
	if c.attnFor == in.seq {
		cancel(ErrAttention) // it arrived before the handler started
	}
	c.mu.Unlock()

	var herr error
	if !call.answered {
		herr = c.serveSafely(ctx, req, w)
	}

	c.mu.Lock()
	attn := c.attnFor == in.seq
	c.cur, c.curCancel, c.finished = 0, nil, in.seq
	c.mu.Unlock()

	if herr != nil && !attn && c.ctx.Err() == nil {
		c.log.Debug("tdsserver: handler failed", "seq", req.Seq, "error", herr)
		_ = w.Error(50000, 16, 1, herr.Error())
	}
	if c.ctx.Err() != nil {
		return c.ctx.Err()
	}
	return w.finish(attn)
}

// serveSafely runs the handler, turning a panic into an error so that one
// bad request does not take the process down.
func (c *conn) serveSafely(ctx context.Context, req *Request, w *ResponseWriter) (err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("tdsserver: handler panicked", "seq", req.Seq, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("tdsserver: handler panicked: %v", p)
		}
	}()
	return c.s.h.Serve(ctx, req, w)
}

// transaction answers a Transaction Manager request (packet type 14,
// MS-TDS 2.2.6.9) itself: begin, commit and rollback get the ENVCHANGE
// go-mssqldb reads (token.go, processEnvChg) and a DONE. The Handler does
// not see them; the request log records them as a Batch with the T-SQL
// equivalent.
func (c *conn) transaction(in inbound) error {
	cur := &cursor{b: in.data}
	skipAllHeaders(cur)
	typ := cur.u16()
	if cur.err != nil {
		return c.replyError("tdsserver: transaction manager request: " + cur.err.Error())
	}
	desc := make([]byte, 8)
	for i := range desc {
		desc[i] = byte((c.id*1000 + in.seq) >> (8 * i))
	}
	var b []byte
	var sql string
	switch typ {
	case 5: // TM_BEGIN_XACT
		sql = "BEGIN TRANSACTION"
		b = appendEnvChangeBytes(nil, envBeginTran, desc, nil)
	case 7: // TM_COMMIT_XACT
		sql = "COMMIT TRANSACTION"
		b = appendEnvChangeBytes(nil, envCommitTran, nil, desc)
	case 8: // TM_ROLLBACK_XACT
		sql = "ROLLBACK TRANSACTION"
		b = appendEnvChangeBytes(nil, envRollbackTr, nil, desc)
	default:
		return c.replyError("tdsserver: transaction manager request type " + strconv.Itoa(int(typ)) + " is not supported")
	}
	c.s.record(&Request{ConnID: c.id, Seq: in.seq, Login: c.login, Kind: Batch, SQL: sql,
		Reset: in.status&(statusReset|statusResetSkipT) != 0})
	c.pw.begin(pktReply)
	_, _ = c.pw.Write(appendDone(b, tokDone, 0, 0, 0))
	return c.pw.end()
}
