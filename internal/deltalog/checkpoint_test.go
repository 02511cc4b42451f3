package deltalog

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// randomState is a table state with random txns, live files (partition
// values, tags and statistics or none), tombstones, protocol features
// and metadata.
func randomState(r *rand.Rand) *State {
	s := EmptyState()
	s.Version = r.Int64N(1000)
	s.Protocol = &Protocol{MinReaderVersion: 1 + r.IntN(3), MinWriterVersion: 2 + r.IntN(6)}
	if r.IntN(2) == 0 {
		s.Protocol.ReaderFeatures = []string{}
		s.Protocol.WriterFeatures = []string{"appendOnly", "invariants"}[:r.IntN(3)]
	}
	str := func(p string) *string {
		if r.IntN(3) == 0 {
			return nil
		}
		v := fmt.Sprint(p, r.IntN(100), "-é")
		return &v
	}
	smap := func(n int) StringMap {
		m := StringMap{}
		for i := range n {
			m[fmt.Sprint("k", i)] = []string{"", "v", "x=y/z%", "é"}[r.IntN(4)]
		}
		return m
	}
	var created *int64
	if r.IntN(2) == 0 {
		c := r.Int64N(1 << 40)
		created = &c
	}
	s.Meta = &MetaData{ID: fmt.Sprint("id-", r.IntN(1000)), Name: str("name"), Description: str("desc"),
		Format: Format{Provider: "parquet", Options: smap(r.IntN(2))}, SchemaString: `{"type":"struct","fields":[]}`,
		PartitionColumns: []string{"a", "b"}[:r.IntN(3)], Configuration: smap(r.IntN(4)), CreatedTime: created}
	for i := range r.IntN(4) {
		s.Txns[fmt.Sprint("app", i)] = Txn{AppID: fmt.Sprint("app", i), Version: r.Int64N(100), LastUpdated: r.Int64N(1 << 40)}
	}
	for i := range r.IntN(300) {
		p := fmt.Sprintf("part-%05d.parquet", i)
		a := &AddFile{Path: p, PartitionValues: smap(r.IntN(3)), Size: r.Int64N(1 << 30), ModificationTime: r.Int64N(1 << 41), DataChange: r.IntN(2) == 0}
		if r.IntN(3) > 0 {
			a.Stats = fmt.Sprintf(`{"numRecords":%d}`, r.IntN(1000))
		}
		if r.IntN(3) == 0 {
			a.Tags = smap(r.IntN(3))
		}
		s.Files[p] = a
	}
	for i := range r.IntN(50) {
		p := fmt.Sprintf("gone-%05d.parquet", i)
		s.Removes[p] = &RemoveFile{Path: p, DeletionTimestamp: r.Int64N(1 << 41), ExtendedFileMetadata: r.IntN(2) == 0, PartitionValues: smap(r.IntN(2)), Size: r.Int64N(1000)}
	}
	return s
}

// checkpointRecord is the record WriteCheckpoint writes for rows.
func checkpointRecord(t *testing.T, rows []map[string]any) arrow.RecordBatch {
	t.Helper()
	js, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, checkpointSchema(), bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestCheckpointSameBytesAsPqarrow: a checkpoint part is byte for byte
// what pqarrow.WriteTable wrote for the same rows (its footer up to the
// order of two lists arrow-go fills from maps), over random states.
func TestCheckpointSameBytesAsPqarrow(t *testing.T) {
	for seed := range uint64(60) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rows := checkpointRows(randomState(rand.New(rand.NewPCG(seed, 60))))
			rec := checkpointRecord(t, rows)
			defer rec.Release()
			var want bytes.Buffer
			props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))
			tbl := array.NewTableFromRecords(checkpointSchema(), []arrow.RecordBatch{rec})
			defer tbl.Release()
			if err := pqarrow.WriteTable(tbl, &want, int64(max(len(rows), 1)), props, pqarrow.DefaultWriterProps()); err != nil {
				t.Fatal(err)
			}
			got, err := writeCheckpointPart(checkpointSchema(), rec)
			if err != nil {
				t.Fatal(err)
			}
			gp, gf := canonicalFile(t, got.Bytes())
			wp, wf := canonicalFile(t, want.Bytes())
			if !bytes.Equal(gp, wp) || !bytes.Equal(gf, wf) {
				t.Fatalf("checkpoint of %d rows: %d bytes, pqarrow %d; they differ", len(rows), got.Len(), want.Len())
			}
		})
	}
}

// canonicalFile splits a Parquet file into its pages and its footer with
// each column chunk's encodings sorted (arrow-go lists them in map order).
func canonicalFile(t *testing.T, b []byte) (pages, foot []byte) {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	md := rdr.MetaData()
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	pages = b[:len(b)-8-n]
	sortEncodings(md)
	var buf bytes.Buffer
	if _, err := md.WriteTo(&buf, nil); err != nil {
		t.Fatal(err)
	}
	return pages, buf.Bytes()
}

func sortEncodings(md *metadata.FileMetaData) {
	for _, rg := range md.RowGroups {
		for _, cc := range rg.Columns {
			m := cc.MetaData
			sort.Slice(m.Encodings, func(i, j int) bool { return m.Encodings[i] < m.Encodings[j] })
			sort.Slice(m.EncodingStats, func(i, j int) bool {
				a, b := m.EncodingStats[i], m.EncodingStats[j]
				return a.PageType < b.PageType || a.PageType == b.PageType && a.Encoding < b.Encoding
			})
		}
	}
}

// pqarrowCheckpointActions decodes a checkpoint as internal/deltalog did
// with pqarrow: the whole table read, each action column marshalled to
// JSON by arrow-go. The reference.
func pqarrowCheckpointActions(t *testing.T, b []byte) ([]Action, error) {
	t.Helper()
	tbl, err := pqarrow.ReadTable(t.Context(), bytes.NewReader(b), nil, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	defer tbl.Release()
	var acts []Action
	for i := range int(tbl.NumCols()) {
		col := tbl.Column(i)
		name := col.Name()
		switch name {
		case "add", "remove", "metaData", "protocol", "txn", "domainMetadata", "sidecar":
		default:
			continue
		}
		for _, chunk := range col.Data().Chunks() {
			js, err := json.Marshal(chunk)
			if err != nil {
				return nil, err
			}
			var raw []json.RawMessage
			if err := json.Unmarshal(js, &raw); err != nil {
				return nil, err
			}
			for _, r := range raw {
				if len(r) == 0 || string(r) == "null" {
					continue
				}
				var a Action
				if err := json.Unmarshal([]byte(`{"`+name+`":`+string(r)+`}`), &a); err != nil {
					return nil, fmt.Errorf("column %s: %w", name, err)
				}
				acts = append(acts, a)
			}
		}
	}
	return acts, nil
}

func sameActions(t *testing.T, b []byte) int {
	t.Helper()
	want, werr := pqarrowCheckpointActions(t, b)
	got, gerr := checkpointActions(b)
	if werr != nil || gerr != nil {
		t.Fatalf("pqarrow: %v; pqfile: %v", werr, gerr)
	}
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Fatalf("actions:\n%s\npqarrow's:\n%s", gj, wj)
	}
	return len(got)
}

// TestCheckpointActionsAsPqarrow: checkpoints of random states decode to
// the actions the pqarrow-based reader decoded, in the same order; and
// they are the state's.
func TestCheckpointActionsAsPqarrow(t *testing.T) {
	for seed := range uint64(60) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := randomState(rand.New(rand.NewPCG(seed, 61)))
			rows := checkpointRows(s)
			rec := checkpointRecord(t, rows)
			defer rec.Release()
			b, err := writeCheckpointPart(checkpointSchema(), rec)
			if err != nil {
				t.Fatal(err)
			}
			if n := sameActions(t, b.Bytes()); n != len(rows) {
				t.Fatalf("%d actions, wrote %d", n, len(rows))
			}
			back := EmptyState()
			acts, _ := checkpointActions(b.Bytes())
			for i := range acts {
				if err := back.Apply(&acts[i]); err != nil {
					t.Fatal(err)
				}
			}
			if len(back.Files) != len(s.Files) || len(back.Removes) != len(s.Removes) || len(back.Txns) != len(s.Txns) {
				t.Fatalf("read back %d files, %d tombstones, %d txns; wrote %d, %d, %d",
					len(back.Files), len(back.Removes), len(back.Txns), len(s.Files), len(s.Removes), len(s.Txns))
			}
			for p, a := range s.Files {
				if !reflect.DeepEqual(back.Files[p].PartitionValues, a.PartitionValues) || back.Files[p].Stats != a.Stats || back.Files[p].Size != a.Size {
					t.Fatalf("file %s read back as %+v, wrote %+v", p, back.Files[p], a)
				}
			}
		})
	}
}

// TestCheckpointActionsFixtures: every checkpoint and sidecar Spark and
// delta-rs wrote (testdata/delta: classic, multi-part, v2 with sidecars,
// deletion vectors, column mapping, partitions) decodes to the actions
// the pqarrow-based reader decoded.
func TestCheckpointActionsFixtures(t *testing.T) {
	root := filepath.Join("..", "..", "testdata", "delta")
	n := 0
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") || !strings.Contains(p, "_delta_log") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		t.Run(strings.TrimPrefix(p, root), func(t *testing.T) {
			if sameActions(t, b) == 0 {
				t.Fatal("no actions")
			}
		})
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 15 {
		t.Fatalf("decoded %d fixture checkpoints; testdata/delta has more", n)
	}
}
