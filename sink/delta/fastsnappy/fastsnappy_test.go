package fastsnappy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/testenv"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/fastsnappy"
	"github.com/cdcsnap/cdcsnap/snapshot"
)

// text is compressible input on which the fast and the better encoders
// give different blocks.
func text(n int) []byte {
	var b bytes.Buffer
	words := []string{"order", "shipped", "Zürich", "東京", "pending", "refund", "invoice", "42"}
	for i := 0; b.Len() < n; i++ {
		b.WriteString(words[(i*7+i/3)%len(words)])
		b.WriteByte(' ')
	}
	return b.Bytes()[:n]
}

// noteFor is row id's note: a slice of text, valid UTF-8.
func noteFor(id int64) string {
	return string(bytes.ToValidUTF8(text(40 + int(id)%300)[id%17:], nil))
}

// arrowSnappy is arrow-go's own Snappy codec: package variables are set
// before any test registers the fast one, so tests may run in any order
// and any number of times.
var arrowSnappy, arrowSnappyErr = compress.GetCodec(compress.Codecs.Snappy)

// TestRegister: arrow-go's own codec encodes in s2's better mode; after
// Register arrow-go encodes in the fast mode; both decode with a standard
// Snappy decoder; a second Register changes nothing.
func TestRegister(t *testing.T) {
	if arrowSnappyErr != nil {
		t.Fatal(arrowSnappyErr)
	}
	src := text(1 << 20)
	encodeWith := func(c compress.Codec) []byte {
		return c.EncodeLevel(make([]byte, c.CompressBound(int64(len(src)))), src, compress.DefaultCompressionLevel)
	}
	encode := func() []byte {
		c, err := compress.GetCodec(compress.Codecs.Snappy)
		if err != nil {
			t.Fatal(err)
		}
		return encodeWith(c)
	}
	before := encodeWith(arrowSnappy)
	if want := snappy.Encode(nil, src); !bytes.Equal(before, want) {
		t.Fatal("arrow-go's Snappy codec does not encode like klauspost/compress/snappy (better mode): this test's premise is stale")
	}
	if err := fastsnappy.Register(); err != nil {
		t.Fatal(err)
	}
	after := encode()
	if want := s2.EncodeSnappy(nil, src); !bytes.Equal(after, want) {
		t.Fatal("after Register, arrow-go's Snappy codec does not encode with s2.EncodeSnappy")
	}
	if bytes.Equal(before, after) {
		t.Fatal("the fast and better encoders gave the same block: the input does not tell them apart")
	}
	for name, block := range map[string][]byte{"better": before, "fast": after} {
		got, err := snappy.Decode(nil, block)
		if err != nil || !bytes.Equal(got, src) {
			t.Errorf("%s block does not decode to the input with a Snappy decoder: %v", name, err)
		}
	}
	if err := fastsnappy.Register(); err != nil {
		t.Fatal(err)
	}
	c, _ := compress.GetCodec(compress.Codecs.Snappy)
	if _, ok := c.(compress.StreamingCodec); !ok {
		t.Errorf("registered codec %T lost the streaming API that arrow-go's page reader uses", c)
	}
	if !bytes.Equal(encode(), after) {
		t.Error("a second Register changed the encoder")
	}
	t.Logf("1 MiB of text: better mode %d bytes, fast mode %d bytes", len(before), len(after))
}

// TestTableReadsBack: a bootstrap written after Register reads back whole
// with sink/delta's reader and, when CDCSNAP_PYTHON is set, with delta-rs;
// its files are Snappy-compressed.
func TestTableReadsBack(t *testing.T) {
	if err := fastsnappy.Register(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "notes", Key: []string{"id"},
		Columns: []fake.ColumnDef{{Name: "id", Type: "bigint"}, {Name: "note", Type: "nvarchar(400)", Nullable: true}}}); err != nil {
		t.Fatal(err)
	}
	const rows = 5000
	var load []fake.Row
	var want int64
	for i := range rows {
		var note any = noteFor(int64(i))
		if i%10 == 0 {
			note = nil
		}
		load = append(load, fake.Row{int64(i), note})
		want += int64(i)
	}
	if _, err := db.Load("dbo", "notes", load...); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EnableCDC("dbo", "notes", "dbo_notes"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "notes")
	tb, err := delta.Open(ctx, dir, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	if _, err := snapshot.Take(ctx, db, tb, snapshot.Options{CaptureInstance: "dbo_notes", Partitions: 3}); err != nil {
		t.Fatal(err)
	}

	rr, err := tb.ReadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	var n, sum, notes int64
	for rr.Next() {
		rec := rr.RecordBatch()
		ids := rec.Column(0).(*array.Int64)
		nt := rec.Column(1).(*array.String)
		for i := 0; i < ids.Len(); i++ {
			n++
			sum += ids.Value(i)
			id := ids.Value(i)
			if id%10 != 0 && nt.Value(i) != noteFor(id) {
				t.Fatalf("id %d: note read back differs", id)
			}
			if nt.IsValid(i) {
				notes++
			}
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	if n != rows || sum != want || notes != rows-rows/10 {
		t.Fatalf("read back %d rows (id sum %d, %d notes), want %d (%d, %d)", n, sum, notes, rows, want, rows-rows/10)
	}

	files, err := tb.Files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		r, err := file.OpenParquetFile(filepath.Join(dir, f.Path), false)
		if err != nil {
			t.Fatal(err)
		}
		for c := 0; c < r.MetaData().RowGroup(0).NumColumns(); c++ {
			cc, err := r.MetaData().RowGroup(0).ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			if cc.Compression() != compress.Codecs.Snappy {
				t.Errorf("%s column %d is %s, want SNAPPY", f.Path, c, cc.Compression())
			}
		}
		r.Close()
	}

	py := testenv.Python(t, "delta-rs reads fastsnappy's files")
	// sink/delta's interop script: delta-rs reads every row.
	cmd := exec.Command(py, filepath.Join("..", "interop", "interop.py"), "verify", dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("delta-rs: %v\n%s", err, stderr.String())
	}
	var got struct {
		NumRows int                       `json:"num_rows"`
		Rows    map[string]map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("interop.py verify printed %q: %v", out, err)
	}
	if got.NumRows != rows {
		t.Fatalf("delta-rs read %d rows, want %d", got.NumRows, rows)
	}
	for id := int64(0); id < rows; id++ {
		r, ok := got.Rows[fmt.Sprintf("%d/0/None", id)]
		if !ok {
			t.Fatalf("delta-rs did not read id %d", id)
		}
		var want any = noteFor(id)
		if id%10 == 0 {
			want = nil
		}
		if r["note"] != want {
			t.Fatalf("delta-rs read id %d's note as %v, want %v", id, r["note"], want)
		}
	}
}

// FuzzRoundTrip: whatever the input, the registered encoder's block
// decodes to it through arrow-go's decoder.
func FuzzRoundTrip(f *testing.F) {
	if err := fastsnappy.Register(); err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{})
	f.Add([]byte("a"))
	f.Add(text(70000))
	f.Fuzz(func(t *testing.T, src []byte) {
		c, err := compress.GetCodec(compress.Codecs.Snappy)
		if err != nil {
			t.Fatal(err)
		}
		block := c.Encode(nil, src)
		got, err := compress.Decode(c, make([]byte, len(src)), block)
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("round trip of %d bytes: %v", len(src), err)
		}
	})
}
