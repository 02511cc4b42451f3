package sqlserver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"strings"
	"sync"
)

// fakeDB is a database/sql driver that answers queries from a handler and
// records, per connection, every statement it ran: enough to test the thin
// I/O layer (connection handling, isolation levels, error mapping) without
// a server.
type fakeDB struct {
	mu      sync.Mutex
	handler func(query string, args []any) (cols []string, rows [][]any, err error)
	conns   []*fakeConn
	failSQL string // an Exec whose text contains this fails
}

type fakeConn struct {
	db     *fakeDB
	id     int
	log    []string
	closed bool
}

func (f *fakeDB) Connect(context.Context) (driver.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := &fakeConn{db: f, id: len(f.conns)}
	f.conns = append(f.conns, c)
	return c, nil
}

func (f *fakeDB) Driver() driver.Driver { return nil }

func (f *fakeDB) open() *sql.DB { return sql.OpenDB(f) }

// logs returns each connection's statements and whether it was closed.
func (f *fakeDB) logs() ([][]string, []bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out [][]string
	var closed []bool
	for _, c := range f.conns {
		out = append(out, append([]string(nil), c.log...))
		closed = append(closed, c.closed)
	}
	return out, closed
}

func (c *fakeConn) Prepare(string) (driver.Stmt, error) { return nil, driver.ErrSkip }
func (c *fakeConn) Close() error {
	c.db.mu.Lock()
	c.closed = true
	c.db.mu.Unlock()
	return nil
}
func (c *fakeConn) Begin() (driver.Tx, error)                { return nil, driver.ErrSkip }
func (c *fakeConn) CheckNamedValue(*driver.NamedValue) error { return nil }

func (c *fakeConn) record(q string) {
	c.db.mu.Lock()
	c.log = append(c.log, q)
	c.db.mu.Unlock()
}

func (c *fakeConn) ExecContext(_ context.Context, q string, _ []driver.NamedValue) (driver.Result, error) {
	c.record(q)
	if c.db.failSQL != "" && strings.Contains(q, c.db.failSQL) {
		return nil, io.ErrUnexpectedEOF
	}
	return driver.RowsAffected(0), nil
}

func (c *fakeConn) QueryContext(_ context.Context, q string, nv []driver.NamedValue) (driver.Rows, error) {
	c.record(q)
	args := make([]any, len(nv))
	for i, v := range nv {
		args[i] = v.Value
	}
	cols, rows, err := c.db.handler(q, args)
	var cut midStream
	if errors.As(err, &cut) {
		return &fakeRows{cols: cols, rows: rows, err: cut.err}, nil
	}
	if err != nil {
		return nil, err
	}
	return &fakeRows{cols: cols, rows: rows}, nil
}

// midStream, returned by a handler with rows, fails the result with err
// after those rows (a statement cut mid-stream).
type midStream struct{ err error }

func (m midStream) Error() string { return "after the rows: " + m.err.Error() }

type fakeRows struct {
	cols []string
	rows [][]any
	i    int
	err  error
}

func (r *fakeRows) Columns() []string { return r.cols }
func (r *fakeRows) Close() error      { return nil }
func (r *fakeRows) Next(dest []driver.Value) error {
	if r.i >= len(r.rows) {
		if r.err != nil {
			return r.err
		}
		return io.EOF
	}
	for j := range dest {
		dest[j] = r.rows[r.i][j]
	}
	r.i++
	return nil
}
