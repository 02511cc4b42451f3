package deltalog

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Column mapping (PROTOCOL.md, "Column Mapping"): in name and id modes
// every column has a physical name (metadata delta.columnMapping.physicalName)
// and an id (delta.columnMapping.id). Data files name their columns by the
// physical names and carry the ids as Parquet field ids; statistics and
// partition values are keyed by physical names. Readers find a column by
// its physical name (name mode) or its field id (id mode); a column a file
// lacks reads as NULL. The bronze columns are flat, so only top-level
// fields are mapped.

// ParquetFieldID is the Arrow field metadata key pqarrow reads and writes
// as a Parquet SchemaElement's field_id.
const ParquetFieldID = "PARQUET:field_id"

// ColumnMapping is a table's mapping: mode "" (none), "name" or "id", and
// each display name's physical name and id.
type ColumnMapping struct {
	mode     string
	physical map[string]string
	ids      map[string]int32
}

// Mapping returns s's column Mapping, honouring delta.columnMapping.mode
// only where the protocol supports the feature, as the protocol says.
func (s *State) Mapping() (ColumnMapping, error) {
	m := ColumnMapping{}
	if s.Meta == nil || s.Protocol == nil {
		return m, nil
	}
	mode := s.Meta.Configuration["delta.columnMapping.mode"]
	supported := s.Protocol.MinReaderVersion == 2 ||
		s.Protocol.MinReaderVersion >= 3 && strings.Contains(","+strings.Join(s.Protocol.ReaderFeatures, ",")+",", ",columnMapping,")
	if mode == "" || mode == "none" || !supported {
		return m, nil
	}
	if mode != "name" && mode != "id" {
		return m, fmt.Errorf("delta.columnMapping.mode %q (want none, name or id)", mode)
	}
	m.mode, m.physical, m.ids = mode, map[string]string{}, map[string]int32{}
	for _, f := range s.Schema.Fields {
		p, _ := f.Metadata["delta.columnMapping.physicalName"].(string)
		id, err := metadataInt(f.Metadata["delta.columnMapping.id"])
		if p == "" || err != nil {
			return m, fmt.Errorf("column %s lacks its delta.columnMapping.physicalName or id", f.Name)
		}
		m.physical[f.Name], m.ids[f.Name] = p, id
	}
	return m, nil
}

func metadataInt(v any) (int32, error) {
	switch n := v.(type) {
	case float64:
		return int32(n), nil
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 32)
		return int32(i), err
	}
	return 0, fmt.Errorf("not a number: %v", v)
}

// On reports whether columns are mapped.
func (m ColumnMapping) On() bool { return m.mode != "" }

// FileName is the name a file gives the column displayed as name.
func (m ColumnMapping) FileName(name string) string {
	if p, ok := m.physical[name]; ok {
		return p
	}
	return name
}

// FileSchema renames schema's fields to their physical names and gives
// them their field ids, for writing data files.
func (m ColumnMapping) FileSchema(schema *arrow.Schema) *arrow.Schema {
	fields := make([]arrow.Field, schema.NumFields())
	for i, f := range schema.Fields() {
		fields[i] = f
		if p, ok := m.physical[f.Name]; ok {
			fields[i].Name = p
			fields[i].Metadata = arrow.NewMetadata([]string{ParquetFieldID}, []string{strconv.Itoa(int(m.ids[f.Name]))})
		}
	}
	md := schema.Metadata()
	return arrow.NewSchema(fields, &md)
}

// FileIndex finds the column displayed as name in a file's Arrow schema:
// by field id in id mode, by physical name in name mode, by name without
// mapping; -1 when the file lacks it.
func (m ColumnMapping) FileIndex(file *arrow.Schema, name string) int {
	if m.mode == "id" {
		want := strconv.Itoa(int(m.ids[name]))
		for i, f := range file.Fields() {
			if v, ok := f.Metadata.GetValue(ParquetFieldID); ok && v == want {
				return i
			}
		}
		return -1
	}
	if idx := file.FieldIndices(m.FileName(name)); len(idx) == 1 {
		return idx[0]
	}
	return -1
}

// DisplayStats rekeys a file's statistics from physical to display names.
func (m ColumnMapping) DisplayStats(st FileStats) FileStats {
	if !m.On() {
		return st
	}
	back := make(map[string]string, len(m.physical))
	for d, p := range m.physical {
		back[p] = d
	}
	rekey := func(in map[string]any) map[string]any {
		out := make(map[string]any, len(in))
		for k, v := range in {
			if d, ok := back[k]; ok {
				out[d] = v
			}
		}
		return out
	}
	nulls := make(map[string]int64, len(st.NullCount))
	for k, v := range st.NullCount {
		if d, ok := back[k]; ok {
			nulls[d] = v
		}
	}
	return FileStats{NumRecords: st.NumRecords, MinValues: rekey(st.MinValues), MaxValues: rekey(st.MaxValues), NullCount: nulls}
}
