package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/source"
)

// genCI is the capture instance the generator serves.
const genCI = "dbo_orders"

// genLSN is the generator's max LSN (the snapshot's L0).
var genLSN = mustLSN("0x0000002A00000F380003")

// genCommitTS is the commit time of genLSN.
var genCommitTS = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// defaultGenBatch is the generator's rows per batch when the read options
// give none: source/sqlserver's default.
const defaultGenBatch = 8192

// Gen is a source.Source whose table is computed from the row number: row i
// (0-based) has the key id = i+1 (and company = the i-th of Companies equal
// blocks, for a composite key) and values that are a cheap hash of id. It
// holds nothing per row, so a 10M-row table costs no memory, and it answers
// SeekKey by arithmetic since the keys are dense. It is safe for
// concurrent use.
type Gen struct {
	rows      int64
	companies int64 // 0: key (id); else key (company, id)
	ci        source.CaptureInstance
	schema    *arrow.Schema
}

// NewGen returns a generator of rows rows; companies > 0 gives the
// composite key (company int, id bigint) with that many companies.
func NewGen(rows, companies int64) *Gen {
	cols := []source.Column{}
	key := []string{"id"}
	if companies > 0 {
		cols = append(cols, source.Column{Name: "company", Type: "int"})
		key = []string{"company", "id"}
	}
	cols = append(cols,
		source.Column{Name: "id", Type: "bigint"},
		source.Column{Name: "customer", Type: "varchar", Length: 100, Collation: "SQL_Latin1_General_CP1_CI_AS"},
		source.Column{Name: "status", Type: "varchar", Length: 20, Collation: "SQL_Latin1_General_CP1_CI_AS"},
		source.Column{Name: "note", Type: "nvarchar", Length: 400, Collation: "SQL_Latin1_General_CP1_CI_AS", Nullable: true},
		source.Column{Name: "amount", Type: "decimal", Precision: 18, Scale: 4},
		source.Column{Name: "created", Type: "datetime2", Scale: 7},
		source.Column{Name: "shipped", Type: "datetime2", Scale: 7, Nullable: true},
		source.Column{Name: "remark", Type: "nvarchar", Length: 400, Collation: "SQL_Latin1_General_CP1_CI_AS", Nullable: true},
	)
	g := &Gen{rows: rows, companies: companies, ci: source.CaptureInstance{
		Name: genCI, SourceSchema: "dbo", SourceTable: "orders", StartLSN: mustLSN("0x0000002A00000F380001"),
		Columns: cols, Key: key,
	}}
	s, err := source.ArrowSchema(cols)
	if err != nil {
		panic(err) // the columns above are all supported
	}
	g.schema = s
	return g
}

var _ source.Source = (*Gen)(nil)

// CaptureInstance implements source.Source.
func (g *Gen) CaptureInstance(_ context.Context, name string) (*source.CaptureInstance, error) {
	n, err := source.Resolve(name, []string{genCI})
	if err != nil {
		return nil, err
	}
	ci := g.ci
	ci.Name = n
	return &ci, nil
}

// MaxLSN implements source.Source.
func (g *Gen) MaxLSN(context.Context) (lsn.LSN, error) { return genLSN, nil }

// MinLSN implements source.Source.
func (g *Gen) MinLSN(context.Context, string) (lsn.LSN, bool, error) { return g.ci.StartLSN, true, nil }

// LSNTime implements source.Source.
func (g *Gen) LSNTime(context.Context, lsn.LSN) (time.Time, error) { return genCommitTS, nil }

// IntKeyBounds implements source.Source.
func (g *Gen) IntKeyBounds(context.Context, *source.CaptureInstance) (int64, int64, bool, error) {
	if g.companies > 0 {
		return 0, 0, false, errors.New("bench: the key is (company, id), not one integer")
	}
	return 1, g.rows, g.rows > 0, nil
}

// RowCount implements source.Source (exact).
func (g *Gen) RowCount(context.Context, *source.CaptureInstance) (int64, error) { return g.rows, nil }

// ReadChanges implements source.Source: the generator has no changes.
func (g *Gen) ReadChanges(context.Context, *source.CaptureInstance, lsn.LSN, lsn.LSN) (array.RecordReader, error) {
	return nil, errors.New("bench: the generator has no changes")
}

// companyStart returns the first row of company c (1-based); c beyond the
// last gives rows.
func (g *Gen) companyStart(c int64) int64 {
	switch {
	case c <= 1:
		return 0
	case c > g.companies:
		return g.rows
	}
	return ((c-1)*g.rows + g.companies - 1) / g.companies // ceil
}

// company returns the company of row i: the c with companyStart(c) <= i <
// companyStart(c+1).
func (g *Gen) company(i int64) int64 {
	c := i*g.companies/g.rows + 1
	for g.companyStart(c+1) <= i {
		c++
	}
	for g.companyStart(c) > i {
		c--
	}
	return c
}

// Key returns the key of row i.
func (g *Gen) Key(i int64) keyrange.Tuple {
	if g.companies > 0 {
		return keyrange.Tuple{g.company(i), i + 1}
	}
	return keyrange.Tuple{i + 1}
}

func asInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float64:
		return int64(x), nil
	}
	return 0, fmt.Errorf("bench: key value %v (%T) is not an integer", v, v)
}

// lowerIndex returns the first row whose key is at or after t (rows when
// none, 0 for nil).
func (g *Gen) lowerIndex(t keyrange.Tuple) (int64, error) {
	if t == nil {
		return 0, nil
	}
	if len(t) == 0 || t[0] == nil {
		return 0, nil
	}
	if g.companies == 0 {
		id, err := asInt(t[0])
		if err != nil {
			return 0, err
		}
		return min(max(id-1, 0), g.rows), nil
	}
	c, err := asInt(t[0])
	if err != nil {
		return 0, err
	}
	lo, hi := g.companyStart(c), g.companyStart(c+1)
	if c < 1 {
		return 0, nil
	}
	if c > g.companies {
		return g.rows, nil
	}
	if len(t) < 2 || t[1] == nil {
		return lo, nil
	}
	id, err := asInt(t[1])
	if err != nil {
		return 0, err
	}
	return min(max(id-1, lo), hi), nil
}

// SeekKey implements source.Source by arithmetic: the keys are dense.
func (g *Gen) SeekKey(_ context.Context, _ *source.CaptureInstance, _ source.Isolation, from keyrange.Tuple, k int64) (keyrange.Tuple, bool, error) {
	i, err := g.lowerIndex(from)
	if err != nil {
		return nil, false, err
	}
	if i+k >= g.rows {
		return nil, false, nil
	}
	return g.Key(i + k), true, nil
}

// Bounds returns the rows [lo, hi) of r.
func (g *Gen) Bounds(r keyrange.Range) (lo, hi int64, err error) {
	if lo, err = g.lowerIndex(r.Lower); err != nil {
		return 0, 0, err
	}
	hi = g.rows
	if r.Upper != nil {
		if hi, err = g.lowerIndex(r.Upper); err != nil {
			return 0, 0, err
		}
	}
	return lo, max(lo, hi), nil
}

// ReadRange implements source.Source.
func (g *Gen) ReadRange(ctx context.Context, _ *source.CaptureInstance, r keyrange.Range, opts source.ReadOptions) (array.RecordReader, error) {
	lo, hi, err := g.Bounds(r)
	if err != nil {
		return nil, err
	}
	batch := opts.BatchRows
	if batch <= 0 {
		batch = defaultGenBatch
	}
	gr := &genReader{ctx: ctx, g: g, next: lo, end: hi, batch: batch, rb: array.NewRecordBuilder(memory.DefaultAllocator, g.schema)}
	gr.refs.Store(1)
	gr.bind()
	return gr, nil
}

// genReader builds the batches of one range, reusing its builders.
type genReader struct {
	ctx       context.Context
	g         *Gen
	next, end int64
	batch     int
	rb        *array.RecordBuilder
	refs      atomic.Int64
	cur       arrow.RecordBatch
	err       error
	buf       []byte

	company                        *array.Int32Builder
	id                             *array.Int64Builder
	customer, status, note, remark *array.StringBuilder
	amount                         *array.Decimal128Builder
	created, shipped               *array.TimestampBuilder
}

func (r *genReader) bind() {
	f := 0
	if r.g.companies > 0 {
		r.company = r.rb.Field(0).(*array.Int32Builder)
		f = 1
	}
	r.id = r.rb.Field(f).(*array.Int64Builder)
	r.customer = r.rb.Field(f + 1).(*array.StringBuilder)
	r.status = r.rb.Field(f + 2).(*array.StringBuilder)
	r.note = r.rb.Field(f + 3).(*array.StringBuilder)
	r.amount = r.rb.Field(f + 4).(*array.Decimal128Builder)
	r.created = r.rb.Field(f + 5).(*array.TimestampBuilder)
	r.shipped = r.rb.Field(f + 6).(*array.TimestampBuilder)
	r.remark = r.rb.Field(f + 7).(*array.StringBuilder)
}

func (r *genReader) Retain() { r.refs.Add(1) }

func (r *genReader) Release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.rb != nil {
		r.rb.Release()
		r.rb = nil
	}
}

func (r *genReader) Schema() *arrow.Schema          { return r.g.schema }
func (r *genReader) RecordBatch() arrow.RecordBatch { return r.cur }

// Deprecated: use RecordBatch.
func (r *genReader) Record() arrow.RecordBatch { return r.cur }
func (r *genReader) Err() error                { return r.err }

func (r *genReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.err != nil || r.rb == nil || r.next >= r.end {
		return false
	}
	if err := r.ctx.Err(); err != nil {
		r.err = err
		return false
	}
	n := int(min(int64(r.batch), r.end-r.next))
	r.rb.Reserve(n)
	for i := r.next; i < r.next+int64(n); i++ {
		r.appendRow(i)
	}
	r.next += int64(n)
	r.cur = r.rb.NewRecordBatch()
	return true
}

// splitmix64 is the hash the values come from.
func splitmix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

var statuses = []string{"new", "paid", "shipped", "delivered", "cancelled", "returned"}

// words make the free-text columns: mostly ASCII, some accented and CJK.
var words = strings.Fields(`the order was placed by customer via web shop and paid with card
delivery address changed twice before shipping please call ahead café crème Straße Größe
naïve façade 東京 配送 注文 fragile handle with care gift wrap requested invoice attached
backorder partial refund warehouse north south east west express standard pallet box
priority customer service note follow up next week discount applied coupon loyalty`)

// textPool is 1 MiB of words in a deterministic random order; a text value
// is a slice of it (cut at character boundaries), so building one costs a
// copy, as decoding a row from the wire would.
var textPool = func() []byte {
	var b []byte
	h := uint64(42)
	for len(b) < 1<<20 {
		h = splitmix64(h)
		b = append(b, words[h%uint64(len(words))]...)
		b = append(b, ' ')
	}
	return b
}()

// appendText appends about size bytes of text chosen by h to buf.
func appendText(buf []byte, h uint64, size int) []byte {
	lo := int(h % uint64(len(textPool)-2*size-8))
	for !utf8.RuneStart(textPool[lo]) {
		lo++
	}
	hi := lo + size
	for !utf8.RuneStart(textPool[hi]) {
		hi--
	}
	return append(buf, textPool[lo:hi]...)
}

// Values returns row i's captured values as Go values (nil for NULL), in
// column order: the reference the tests compare batches with.
func (g *Gen) Values(i int64) []any {
	id := i + 1
	h := splitmix64(uint64(id))
	var out []any
	if g.companies > 0 {
		out = append(out, int32(g.company(i)))
	}
	out = append(out, id,
		string(appendCustomer(nil, h)),
		statuses[(h>>8)%uint64(len(statuses))],
		string(appendText(nil, h, noteSize(h))),
		decimal128.FromI64(amount(h)),
		arrow.Timestamp(created(id, h)),
	)
	if s, ok := shipped(id, h); ok {
		out = append(out, arrow.Timestamp(s))
	} else {
		out = append(out, nil)
	}
	if h%10 == 3 {
		out = append(out, string(appendText(nil, h>>3, remarkSize)))
	} else {
		out = append(out, nil)
	}
	return out
}

func appendCustomer(buf []byte, h uint64) []byte {
	buf = append(buf, "Customer "...)
	return strconv.AppendUint(buf, 100000+(h>>16)%200000, 10)
}

// noteSize is 30..329 bytes.
func noteSize(h uint64) int { return 30 + int((h>>24)%300) }

// remarkSize is the size of a non-NULL remark.
const remarkSize = 24

func amount(h uint64) int64 { return int64((h >> 20) % 10_000_000_000) }

var genEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

func created(id int64, h uint64) int64 { return genEpoch + id*37_000_000 + int64(h%1_000_000) }

// shipped is NULL for 70% of rows.
func shipped(id int64, h uint64) (int64, bool) {
	if (h>>40)%10 < 7 {
		return 0, false
	}
	return created(id, h) + 86_400_000_000 + int64((h>>12)%86_400_000_000), true
}

func (r *genReader) appendRow(i int64) {
	id := i + 1
	h := splitmix64(uint64(id))
	if r.company != nil {
		r.company.Append(int32(r.g.company(i)))
	}
	r.id.Append(id)
	r.buf = appendCustomer(r.buf[:0], h)
	r.customer.BinaryBuilder.Append(r.buf)
	r.status.Append(statuses[(h>>8)%uint64(len(statuses))])
	r.buf = appendText(r.buf[:0], h, noteSize(h))
	r.note.BinaryBuilder.Append(r.buf)
	r.amount.Append(decimal128.FromI64(amount(h)))
	r.created.Append(arrow.Timestamp(created(id, h)))
	if s, ok := shipped(id, h); ok {
		r.shipped.Append(arrow.Timestamp(s))
	} else {
		r.shipped.AppendNull()
	}
	if h%10 == 3 {
		r.buf = appendText(r.buf[:0], h>>3, remarkSize)
		r.remark.BinaryBuilder.Append(r.buf)
	} else {
		r.remark.AppendNull()
	}
}

func mustLSN(s string) lsn.LSN {
	l, err := lsn.Parse(s)
	if err != nil {
		panic(err)
	}
	return l
}
