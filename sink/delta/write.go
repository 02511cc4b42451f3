package delta

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/parquet"

	"github.com/cdcsnap/cdcsnap/internal/deltalog"
	"github.com/cdcsnap/cdcsnap/internal/parquetprops"
	"github.com/cdcsnap/cdcsnap/internal/pqfile"
)

// statsPrefixLen is how many characters of a string min/max are kept: the
// protocol lets writers truncate string statistics (Spark keeps 32).
const statsPrefixLen = 32

// maxRune sorts after every character: a truncated max gets it appended so
// it stays an upper bound (Spark's tie-breaker).
const maxRune = '\U0010FFFF'

// colStats accumulates one column's statistics while it is written.
type colStats struct {
	nulls      int64
	has        bool
	minI, maxI int64
	minF, maxF float64
	minS, maxS string
	minD, maxD decimal128.Num
	skipMinMax bool // NaN seen, or a type without min/max
}

func (c *colStats) update(arr arrow.Array) {
	n := arr.Len()
	c.nulls += int64(arr.NullN())
	allValid := arr.NullN() == 0
	switch a := arr.(type) {
	case *array.Int8:
		for i := 0; i < n; i++ {
			if allValid || a.IsValid(i) {
				c.int(int64(a.Value(i)))
			}
		}
	case *array.Int16:
		for i := 0; i < n; i++ {
			if allValid || a.IsValid(i) {
				c.int(int64(a.Value(i)))
			}
		}
	case *array.Int32:
		vs := a.Int32Values()
		for i, v := range vs {
			if allValid || a.IsValid(i) {
				c.int(int64(v))
			}
		}
	case *array.Int64:
		vs := a.Int64Values()
		for i, v := range vs {
			if allValid || a.IsValid(i) {
				c.int(v)
			}
		}
	case *array.Date32:
		vs := a.Date32Values()
		for i, v := range vs {
			if allValid || a.IsValid(i) {
				c.int(int64(v))
			}
		}
	case *array.Timestamp:
		vs := a.TimestampValues()
		for i, v := range vs {
			if allValid || a.IsValid(i) {
				c.int(int64(v))
			}
		}
	case *array.Float32:
		for i := 0; i < n; i++ {
			if allValid || a.IsValid(i) {
				c.float(float64(a.Value(i)))
			}
		}
	case *array.Float64:
		for i := 0; i < n; i++ {
			if allValid || a.IsValid(i) {
				c.float(a.Value(i))
			}
		}
	case *array.String:
		strMinMax(c, a, allValid)
	case *array.LargeString:
		strMinMax(c, a, allValid)
	case *array.Decimal128:
		for i := 0; i < n; i++ {
			if allValid || a.IsValid(i) {
				v := a.Value(i)
				if !c.has {
					c.minD, c.maxD, c.has = v, v, true
				} else if v.Less(c.minD) {
					c.minD = v
				} else if v.Greater(c.maxD) {
					c.maxD = v
				}
			}
		}
	default:
		c.skipMinMax = true // boolean, binary: nullCount only
	}
}

func (c *colStats) int(v int64) {
	if !c.has {
		c.minI, c.maxI, c.has = v, v, true
	} else if v < c.minI {
		c.minI = v
	} else if v > c.maxI {
		c.maxI = v
	}
}

func (c *colStats) float(v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		c.skipMinMax = true
		return
	}
	if !c.has {
		c.minF, c.maxF, c.has = v, v, true
	} else if v < c.minF {
		c.minF = v
	} else if v > c.maxF {
		c.maxF = v
	}
}

func (c *colStats) str(v string) {
	if !c.has {
		c.minS, c.maxS, c.has = strings.Clone(v), strings.Clone(v), true
	} else if v < c.minS {
		c.minS = strings.Clone(v)
	} else if v > c.maxS {
		c.maxS = strings.Clone(v)
	}
}

// strMinMax folds a string array into c. The batch's min and max point
// into the array and are copied once at the end: a column that grows row
// by row (a sorted key) would otherwise copy a new max on every row.
func strMinMax[A interface {
	Len() int
	IsValid(int) bool
	Value(int) string
}](c *colStats, a A, allValid bool) {
	var lo, hi string
	seen := false
	for i := range a.Len() {
		if !allValid && !a.IsValid(i) {
			continue
		}
		v := a.Value(i)
		switch {
		case !seen:
			lo, hi, seen = v, v, true
		case v < lo:
			lo = v
		case v > hi:
			hi = v
		}
	}
	if seen {
		c.str(lo)
		c.str(hi)
	}
}

// truncMin keeps the first statsPrefixLen characters: a prefix sorts at or
// below the value.
func truncMin(s string) string {
	if utf8.RuneCountInString(s) <= statsPrefixLen {
		return s
	}
	i, n := 0, 0
	for i = range s {
		if n == statsPrefixLen {
			break
		}
		n++
	}
	return s[:i]
}

// truncMax keeps the prefix and appends maxRune, so it sorts above every
// string with that prefix that was written.
func truncMax(s string) string {
	p := truncMin(s)
	if p == s {
		return s
	}
	return p + string(maxRune)
}

// minMax returns the JSON values of min and max, ok false when there are
// none.
func (c *colStats) minMax(t arrow.DataType) (any, any, bool) {
	if !c.has || c.skipMinMax {
		return nil, nil, false
	}
	switch tt := t.(type) {
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type:
		return c.minI, c.maxI, true
	case *arrow.Date32Type:
		return arrow.Date32(c.minI).FormattedString(), arrow.Date32(c.maxI).FormattedString(), true
	case *arrow.TimestampType:
		if tt.TimeZone == "" { // timestamp_ntz: no zone
			return formatNTZ(c.minI), formatNTZ(c.maxI), true
		}
		return formatTS(c.minI), formatTS(c.maxI), true
	case *arrow.Float32Type, *arrow.Float64Type:
		return c.minF, c.maxF, true
	case *arrow.StringType, *arrow.LargeStringType:
		return truncMin(c.minS), truncMax(c.maxS), true
	case *arrow.Decimal128Type:
		return json.Number(c.minD.ToString(tt.Scale)), json.Number(c.maxD.ToString(tt.Scale)), true
	}
	return nil, nil, false
}

func formatNTZ(micros int64) string {
	return time.UnixMicro(micros).UTC().Format("2006-01-02T15:04:05.000000")
}

func formatTS(micros int64) string {
	return time.UnixMicro(micros).UTC().Format("2006-01-02T15:04:05.000000Z")
}

// dataFile is one Parquet file being written.
type dataFile struct {
	name   string
	cancel context.CancelFunc
	bw     io.WriteCloser
	fw     *pqfile.Writer
	stats  []colStats
	rows   int64
}

// fileSet writes the records of one partition into files rolled at the
// target size, one file at a time (bounded memory: one buffered row group).
type fileSet struct {
	t         *Table
	schema    *arrow.Schema
	partition int
	props     *parquet.WriterProperties
	mem       *bufferPool   // the fileSets' pool
	constant  bool          // try the constant-column path (writeRecords)
	consts    *constColumns // nil: batches are written as they come
	cur       *dataFile
	done      []deltalog.AddFile
	seq       int
	// dir is the partition folder ("" or "col=value/") and values its
	// partition values (nil: unpartitioned).
	dir    string
	values deltalog.StringMap
}

// writerProps are the Parquet properties of a data file, decided from its
// first batch (see parquetprops.ForBronze), with the partition write's
// buffer pool as the allocator.
func (t *Table) writerProps(rec arrow.RecordBatch, mem *bufferPool) *parquet.WriterProperties {
	return parquetprops.ForBronze(rec, t.opts.rowGroupRows(), "cdcsnap (arrow-go parquet)", parquet.WithAllocator(mem))
}

func (s *fileSet) open(ctx context.Context) error {
	s.seq++
	name := fmt.Sprintf("%spart-%05d-%s-c%03d.snappy.parquet", s.dir, s.partition, deltalog.NewUUID(), s.seq-1)
	wctx, cancel := context.WithCancel(ctx)
	bw, err := s.t.store.NewWriter(wctx, name, false)
	if err != nil {
		cancel()
		return fmt.Errorf("delta: creating data file %s: %w", name, err)
	}
	fileSchema := s.schema
	if s.consts != nil {
		fileSchema = s.consts.schema
	}
	fw, err := pqfile.NewWriter(fileSchema, bw, s.props)
	if err != nil {
		cancel()
		_ = bw.Close()
		return fmt.Errorf("delta: parquet writer for %s: %w", name, err)
	}
	s.cur = &dataFile{name: name, cancel: cancel, bw: bw, fw: fw, stats: make([]colStats, s.schema.NumFields())}
	return nil
}

func (s *fileSet) write(ctx context.Context, rec arrow.RecordBatch) error {
	if rec.NumRows() == 0 {
		return nil
	}
	if s.props == nil {
		s.props = s.t.writerProps(rec, s.mem)
		if s.constant {
			s.consts = newConstColumns(s.schema, rec)
		}
	}
	if s.cur == nil {
		if err := s.open(ctx); err != nil {
			return err
		}
	}
	f := s.cur
	wrec := rec
	if s.consts != nil {
		var err error
		if wrec, err = s.consts.convert(rec); err != nil {
			return fmt.Errorf("delta: writing %s: %w", f.name, err)
		}
		defer wrec.Release()
	}
	if err := f.fw.Write(wrec); err != nil {
		return fmt.Errorf("delta: writing %s: %w", f.name, err)
	}
	s.consts.updateStats(f.stats, rec)
	f.rows += rec.NumRows()
	if f.fw.RowGroupCompressedBytes() >= parquetprops.RowGroupBytes {
		if err := f.fw.Flush(); err != nil {
			return fmt.Errorf("delta: writing %s: %w", f.name, err)
		}
	}
	// The bytes already in the file and the open row group's.
	if f.fw.BytesWritten()+f.fw.RowGroupCompressedBytes() >= s.t.opts.targetFileSize() {
		return s.finish()
	}
	return nil
}

// finish closes the current file and records its add action.
func (s *fileSet) finish() error {
	f := s.cur
	if f == nil {
		return nil
	}
	s.cur = nil
	defer f.cancel()
	if err := f.fw.Close(); err != nil {
		f.cancel()
		_ = f.bw.Close()
		return fmt.Errorf("delta: closing data file %s: %w", f.name, err)
	}
	if err := f.bw.Close(); err != nil {
		return fmt.Errorf("delta: closing data file %s: %w", f.name, err)
	}
	st := deltalog.FileStats{NumRecords: f.rows, MinValues: map[string]any{}, MaxValues: map[string]any{}, NullCount: map[string]int64{}}
	for i, fld := range s.schema.Fields() {
		st.NullCount[fld.Name] = f.stats[i].nulls
		if mn, mx, ok := f.stats[i].minMax(fld.Type); ok {
			st.MinValues[fld.Name] = mn
			st.MaxValues[fld.Name] = mx
		}
	}
	sb, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("delta: stats of %s: %w", f.name, err)
	}
	pv := deltalog.StringMap{}
	for k, v := range s.values {
		pv[k] = v
	}
	s.done = append(s.done, deltalog.AddFile{
		Path:             logPath(f.name),
		PartitionValues:  pv,
		Size:             f.fw.BytesWritten(),
		ModificationTime: time.Now().UnixMilli(),
		DataChange:       true,
		Stats:            string(sb),
	})
	return nil
}

// abort cancels the file being written (the store drops it) and
// deletes the finished ones, best effort: they were never referenced.
func (s *fileSet) abort(ctx context.Context) {
	if f := s.cur; f != nil {
		s.cur = nil
		f.cancel()
		_ = f.fw.Close()
		_ = f.bw.Close()
	}
	for _, a := range s.done {
		_ = s.t.store.Delete(context.WithoutCancel(ctx), a.Key())
	}
	s.done = nil
}

// writeRecords writes every record of rr (which must all be in schema)
// into new data files and returns their add actions. On error nothing it
// wrote stays referenced (and it tries to delete what it wrote). constant
// says the bronze metadata holds one value per call (a snapshot partition
// or chunk), so the constant-column path pays (see constColumns); change
// rows vary, and a value changing mid-row-group makes arrow-go's column
// writer fall back to plain encoding for that column chunk.
func (t *Table) writeRecords(ctx context.Context, schema *arrow.Schema, partition int, rr array.RecordReader, constant bool) ([]deltalog.AddFile, int64, error) {
	st, err := t.effective(ctx, schema)
	if err != nil {
		return nil, 0, err
	}
	fileSchema, ntz, err := fileSchemaOf(st, schema)
	if err != nil {
		return nil, 0, err
	}
	sets, err := t.newFileSets(st, fileSchema, partition, constant)
	if err != nil {
		return nil, 0, err
	}
	sets.layout = layoutOf(sets.schema, sets.cols, fileSchema != schema)
	defer sets.release()
	var rows int64
	fail := func(err error) ([]deltalog.AddFile, int64, error) {
		sets.abort(ctx)
		return nil, 0, err
	}
	for rr.Next() {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		rec := rr.RecordBatch()
		if !rec.Schema().Equal(schema) {
			return fail(schemaMismatch(schema, rec.Schema()))
		}
		if err := checkNotNull(st, rec); err != nil {
			return fail(err)
		}
		rows += rec.NumRows()
		if fileSchema != schema {
			rec, err := relabel(ctx, rec, fileSchema, ntz)
			if err != nil {
				return fail(err)
			}
			err = sets.write(ctx, rec)
			rec.Release()
			if err != nil {
				return fail(err)
			}
		} else if err := sets.write(ctx, rec); err != nil {
			return fail(err)
		}
	}
	if err := rr.Err(); err != nil {
		return fail(fmt.Errorf("delta: reading records: %w", err))
	}
	if err := sets.finish(); err != nil {
		return fail(err)
	}
	return sets.done(), rows, nil
}

// maxOpenPartitions bounds the data files open at once in a partitioned
// table (each buffers a row group): past it, every open file is closed.
const maxOpenPartitions = 16

// fileSets writes records into one fileSet, or one per partition value of
// a partitioned table (partition.go).
type fileSets struct {
	t         *Table
	schema    *arrow.Schema // the data files' (no partition columns)
	partition int
	constant  bool
	cols      []partitionColumn
	byDir     map[string]*fileSet
	order     []*fileSet
	layout    string      // layoutOf the files, tagged on every add
	mem       *bufferPool // every file's Parquet allocator
}

func (t *Table) newFileSets(st *deltalog.State, schema *arrow.Schema, partition int, constant bool) (*fileSets, error) {
	cols, err := partitionColumns(st)
	if err != nil {
		return nil, &deltalog.UnsupportedProtocolError{Table: t.url, Feature: "partitionColumns: " + err.Error(), Write: true}
	}
	fs := &fileSets{t: t, schema: schema, partition: partition, constant: constant, cols: cols, byDir: map[string]*fileSet{}, mem: newBufferPool(poolHeldBytes)}
	if len(cols) > 0 {
		fs.schema = withoutPartitionColumns(schema, cols)
	}
	return fs, nil
}

func (fs *fileSets) get(dir string, values deltalog.StringMap) *fileSet {
	s, ok := fs.byDir[dir]
	if !ok {
		s = &fileSet{t: fs.t, schema: fs.schema, partition: fs.partition, constant: fs.constant, dir: dir, values: values, mem: fs.mem}
		fs.byDir[dir] = s
		fs.order = append(fs.order, s)
	}
	return s
}

func (fs *fileSets) write(ctx context.Context, rec arrow.RecordBatch) error {
	if len(fs.cols) == 0 {
		return fs.get("", nil).write(ctx, rec)
	}
	values, groups, err := splitByPartition(ctx, rec, fs.cols, fs.schema)
	if err != nil {
		return err
	}
	defer func() {
		for _, g := range groups {
			g.Release()
		}
	}()
	for i, g := range groups {
		if err := fs.get(partitionDir(fs.cols, values[i]), values[i]).write(ctx, g); err != nil {
			return err
		}
	}
	open := 0
	for _, s := range fs.order {
		if s.cur != nil {
			open++
		}
	}
	if open > maxOpenPartitions {
		return fs.finish()
	}
	return nil
}

func (fs *fileSets) finish() error {
	for _, s := range fs.order {
		if err := s.finish(); err != nil {
			return err
		}
	}
	return fs.mem.check()
}

func (fs *fileSets) abort(ctx context.Context) {
	for _, s := range fs.order {
		s.abort(ctx)
	}
}

func (fs *fileSets) done() []deltalog.AddFile {
	var out []deltalog.AddFile
	for _, s := range fs.order {
		for _, a := range s.done {
			if fs.layout != "" {
				a.Tags = deltalog.StringMap{layoutTag: fs.layout}
			}
			out = append(out, a)
		}
	}
	return out
}

func (fs *fileSets) release() {
	for _, s := range fs.order {
		s.consts.release()
	}
}

// schemaMismatch names the first column where got differs from want.
func schemaMismatch(want, got *arrow.Schema) error {
	for i, f := range want.Fields() {
		if i >= got.NumFields() {
			return &deltalog.SchemaError{Column: f.Name, Reason: "missing from a record batch"}
		}
		g := got.Field(i)
		if g.Name != f.Name || !arrow.TypeEqual(g.Type, f.Type) || g.Nullable != f.Nullable {
			return &deltalog.SchemaError{Column: f.Name, Reason: fmt.Sprintf("a record batch has %s %s where the schema has %s %s", g.Name, g.Type, f.Name, f.Type)}
		}
	}
	if got.NumFields() > want.NumFields() {
		return &deltalog.SchemaError{Column: got.Field(want.NumFields()).Name, Reason: "a record batch has this extra column"}
	}
	return &deltalog.SchemaError{Column: "?", Reason: "a record batch's schema differs (metadata)"}
}

// fileSchemaOf returns the schema the records' data files are written in
// (schema itself when the table asks for nothing else) and the indexes of
// the columns whose type it changes. A mapped table's columns take their
// physical names and field ids (colmap.go). A UTC timestamp column the
// table keeps as timestamp_ntz loses its zone, so Parquet marks it
// isAdjustedToUTC false, as the protocol asks; the values are the same
// microseconds: SQL Server's datetime2 and datetime are wall-clock values,
// which the bronze schema labels UTC.
func fileSchemaOf(st *deltalog.State, schema *arrow.Schema) (*arrow.Schema, []int, error) {
	cm, err := st.Mapping()
	if err != nil {
		return nil, nil, err
	}
	var idx []int
	fields := slices.Clone(schema.Fields())
	for _, tf := range st.Schema.Fields {
		for _, i := range schema.FieldIndices(tf.Name) {
			rt, err := deltalog.DeltaType(fields[i].Type)
			if err != nil || rt == tf.TypeName() {
				continue
			}
			if at, err := deltalog.ArrowType(tf.TypeName()); err == nil && (deltalog.Widens(rt, tf.TypeName()) || rt == "timestamp" && tf.TypeName() == "timestamp_ntz") {
				fields[i].Type = at
				idx = append(idx, i)
			}
		}
	}
	if len(idx) == 0 && !cm.On() {
		return schema, nil, nil
	}
	md := schema.Metadata()
	return cm.FileSchema(arrow.NewSchema(fields, &md)), idx, nil
}

// relabel returns rec in schema, its columns idx given schema's types
// over the same buffers.
func relabel(ctx context.Context, rec arrow.RecordBatch, schema *arrow.Schema, idx []int) (arrow.RecordBatch, error) {
	cols := slices.Clone(rec.Columns())
	var made []arrow.Array
	defer func() {
		for _, a := range made {
			a.Release()
		}
	}()
	for _, i := range idx {
		to := schema.Field(i).Type
		_, fromTS := cols[i].DataType().(*arrow.TimestampType)
		if _, toTS := to.(*arrow.TimestampType); fromTS && toTS {
			// timestamp_ntz: the same microseconds without the zone.
			d := cols[i].Data()
			nd := array.NewData(to, d.Len(), d.Buffers(), d.Children(), d.NullN(), d.Offset())
			cols[i] = array.MakeFromData(nd)
			nd.Release()
		} else {
			c, err := compute.CastArray(ctx, cols[i], compute.SafeCastOptions(to))
			if err != nil {
				return nil, fmt.Errorf("column %s: widening to %s: %w", schema.Field(i).Name, to, err)
			}
			cols[i] = c
		}
		made = append(made, cols[i])
	}
	return array.NewRecordBatch(schema, cols, rec.NumRows()), nil
}

// effective is the table's state, or, when the table does not exist yet,
// the state its creating commit will give it (Options.Create) for records
// in schema: data files are written before that commit.
func (t *Table) effective(ctx context.Context, schema *arrow.Schema) (*deltalog.State, error) {
	st, err := t.current(ctx)
	if err != nil || st.Version >= 0 {
		return st, err
	}
	ds, err := deltalog.SchemaFromArrow(schema)
	if err != nil {
		return nil, err
	}
	return t.opts.Create.created(ds)
}

// checkNotNull refuses a record with a NULL in a column the table
// declares NOT NULL: writers enforce non-nullable columns, as Spark does.
func checkNotNull(st *deltalog.State, rec arrow.RecordBatch) error {
	for _, f := range st.Schema.Fields {
		if f.Nullable {
			continue
		}
		for _, i := range rec.Schema().FieldIndices(f.Name) {
			if n := rec.Column(i).NullN(); n > 0 {
				return &deltalog.SchemaError{Column: f.Name, Reason: fmt.Sprintf("the table declares it NOT NULL and %d rows hold NULL (nothing was written)", n)}
			}
		}
	}
	return nil
}

// layoutTag is the add tag recording how a data file lays out the table:
// its Parquet columns (names, types, field ids) and partition columns.
// A commit refuses files laid out for another table than the one it
// lands on (a table created, or re-created, by another writer between
// the write and the commit), whose columns readers would not find.
const layoutTag = "cdcsnap.layout"

// layoutOf fingerprints a data file layout: its columns (names, types,
// field ids) and the table's partition columns. It is "" for the plain
// layout (the records' own columns, unpartitioned), which files written
// before the tag existed carry implicitly.
func layoutOf(dataSchema *arrow.Schema, cols []partitionColumn, relabelled bool) string {
	if !relabelled && len(cols) == 0 {
		return ""
	}
	h := sha256.New()
	for _, f := range dataSchema.Fields() {
		id, _ := f.Metadata.GetValue(deltalog.ParquetFieldID)
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", f.Name, f.Type, id)
	}
	for _, c := range cols {
		fmt.Fprintf(h, "p\x00%s\x00", c.key)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// checkLayout refuses adds whose layout is not the one the table of s
// gives records in schema (see layoutTag).
func (t *Table) checkLayout(s *deltalog.State, schema *arrow.Schema, adds []deltalog.AddFile) error {
	st := s
	if s.Version < 0 {
		ds, err := deltalog.SchemaFromArrow(schema)
		if err != nil {
			return err
		}
		if st, err = t.opts.Create.created(ds); err != nil {
			return err
		}
	}
	fileSchema, _, err := fileSchemaOf(st, schema)
	if err != nil {
		return err
	}
	cols, err := partitionColumns(st)
	if err != nil {
		return err
	}
	want := layoutOf(withoutPartitionColumns(fileSchema, cols), cols, fileSchema != schema)
	for _, a := range adds {
		if got := a.Tags[layoutTag]; got != want {
			return fmt.Errorf("delta: table %s: data file %s was written for another layout of the table (partition columns, column mapping or column types) than the one it has now: another writer created or changed the table meanwhile; write the data again", t.url, a.Path)
		}
	}
	return nil
}
