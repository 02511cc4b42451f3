package sink_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink"
)

func TestBronzeSchema(t *testing.T) {
	captured := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	s, err := sink.BronzeSchema(captured)
	if err != nil {
		t.Fatal(err)
	}
	if s.NumFields() != 1+len(sink.MetadataFields()) || s.Field(0).Name != "id" || s.Field(1).Name != sink.ColCaptureInstance || s.Field(s.NumFields()-1).Name != sink.ColChunk {
		t.Fatalf("bronze schema %s", s)
	}
	for _, f := range s.Fields()[1:] {
		if !f.Nullable {
			t.Errorf("metadata column %s is not nullable", f.Name)
		}
	}
	for name, want := range map[string]string{
		"_operation":   `collides with the bronze metadata column "_operation"`,
		"_SNAPSHOT":    `collides with the bronze metadata column "_snapshot"`,
		"__$tile":      "reserved prefix",
		"__$start_lsn": "reserved prefix",
	} {
		bad := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: name, Type: arrow.BinaryTypes.String}}, nil)
		if _, err := sink.BronzeSchema(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("captured column %q: %v, want an error containing %q", name, err, want)
		}
	}
	dup := arrow.NewSchema([]arrow.Field{{Name: "Id", Type: arrow.PrimitiveTypes.Int64}, {Name: "ID", Type: arrow.PrimitiveTypes.Int64}}, nil)
	if _, err := sink.BronzeSchema(dup); err == nil || !strings.Contains(err.Error(), "equal ignoring case") {
		t.Errorf("columns equal ignoring case: %v", err)
	}
}

func TestUserMetadata(t *testing.T) {
	l, _ := lsn.Parse("0x0000002A00000F380003")
	m := sink.NewUserMetadata(sink.Info{CaptureInstance: "dbo_Orders", LSN: l, CommitTS: time.Date(2026, 10, 1, 9, 30, 0, 123456789, time.FixedZone("x", 3600))})
	want := sink.UserMetadata{Snapshot: "dbo_Orders", LSN: "0x0000002A00000F380003", CommitTS: "2026-10-01T08:30:00.123456Z"}
	if m != want {
		t.Fatalf("%+v, want %+v", m, want)
	}
}
