package source_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/source"
)

func TestResolve(t *testing.T) {
	names := []string{"dbo_Orders", "dbo_ORDERS", "sales_items"}
	for _, tc := range []struct {
		name, want, err string
	}{
		{name: "dbo_Orders", want: "dbo_Orders"},
		{name: "dbo_ORDERS", want: "dbo_ORDERS"},
		{name: "SALES_ITEMS", want: "sales_items"},
		{name: "Dbo_orders", err: `"Dbo_orders" is ambiguous: it matches dbo_Orders and dbo_ORDERS`},
		{name: "dbo_missing", err: "dbo_Orders, dbo_ORDERS, sales_items"},
	} {
		got, err := source.Resolve(tc.name, names)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Resolve(%q) = %q, %v; want an error containing %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	_, err := source.Resolve("x", nil)
	var nf *source.NotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, source.ErrNotFound) {
		t.Errorf("Resolve in an empty database: %v, want a NotFoundError", err)
	}
	_, err = source.Resolve("dbo_orders", names)
	var amb *source.AmbiguousError
	if !errors.As(err, &amb) || len(amb.Matches) != 2 {
		t.Errorf("ambiguous: %v", err)
	}
}

func TestParseTypeAndMapping(t *testing.T) {
	for _, tc := range []struct {
		decl, declared, arrow string
		kind                  keyrange.Kind
	}{
		{"varchar(20)", "varchar(20)", "utf8", keyrange.KindString},
		{"NVARCHAR(MAX)", "nvarchar(max)", "utf8", keyrange.KindString},
		{"varchar", "varchar(1)", "utf8", keyrange.KindString},
		{"decimal(18, 4)", "decimal(18,4)", "decimal(18, 4)", keyrange.KindDecimal},
		{"numeric", "numeric(18,0)", "decimal(18, 0)", keyrange.KindDecimal},
		{"money", "money", "decimal(19, 4)", keyrange.KindDecimal},
		{"datetime2", "datetime2(7)", "timestamp[us, tz=UTC]", keyrange.KindDateTime},
		{"datetimeoffset(3)", "datetimeoffset(3)", "timestamp[us, tz=UTC]", keyrange.KindDateTimeOffset},
		{"time(0)", "time(0)", "utf8", keyrange.KindTime},
		{"tinyint", "tinyint", "int16", keyrange.KindInt},
		{"bigint", "bigint", "int64", keyrange.KindInt},
		{"uniqueidentifier", "uniqueidentifier", "utf8", keyrange.KindUUID},
		{"varbinary(max)", "varbinary(max)", "binary", keyrange.KindBytes},
		{"rowversion", "rowversion", "binary", keyrange.KindUnsupported},
		{"geography", "geography", "binary", keyrange.KindUnsupported},
		{"date", "date", "date32", keyrange.KindDate},
	} {
		c, err := source.ParseType(tc.decl)
		if err != nil {
			t.Errorf("ParseType(%q): %v", tc.decl, err)
			continue
		}
		c.Name = "c"
		if got := c.Declared(); got != tc.declared {
			t.Errorf("ParseType(%q).Declared() = %q, want %q", tc.decl, got, tc.declared)
		}
		at, err := c.ArrowType()
		if err != nil || at.String() != tc.arrow {
			t.Errorf("ArrowType(%q) = %v, %v; want %s", tc.decl, at, err, tc.arrow)
		}
		if k := c.KeyColumn().Kind; k != tc.kind {
			t.Errorf("KeyColumn(%q).Kind = %s, want %s", tc.decl, k, tc.kind)
		}
	}
	for _, bad := range []string{"varchar(x)", "char(max)", "decimal(40,2)", "decimal(5,6)", "datetime2(8)", "int(4)", "frobnicate", "varchar(20"} {
		if c, err := source.ParseType(bad); err == nil {
			t.Errorf("ParseType(%q) = %+v, want an error", bad, c)
		}
	}
	v, err := source.ParseType("sql_variant")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.ArrowType(); !errors.Is(err, source.ErrUnsupportedType) {
		t.Errorf("sql_variant: %v, want ErrUnsupportedType", err)
	}
}

func TestChangeSchema(t *testing.T) {
	s, err := source.ChangeSchema([]source.Column{{Name: "id", Type: "int"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"id", source.ColOperation, source.ColStartLSN, source.ColSeqval, source.ColCommandID, source.ColCommitTS}
	for i, f := range s.Fields() {
		if f.Name != want[i] {
			t.Fatalf("field %d is %q, want %q", i, f.Name, want[i])
		}
	}
	if !arrow.TypeEqual(s.Field(5).Type, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}) {
		t.Fatalf("_commit_ts is %s", s.Field(5).Type)
	}
}

// TestSplitOn: the index a split picks (clustered, then the fewest
// columns, then unique, then by name), the errors, and which keys are
// unique.
func TestSplitOn(t *testing.T) {
	ci := &source.CaptureInstance{Name: "ci",
		Columns: []source.Column{{Name: "a", Type: "int"}, {Name: "b", Type: "int"}, {Name: "c", Type: "int", Computed: true}, {Name: "d", Type: "int"}},
		Key:     []string{"a"}, KeyIndex: &source.Index{Name: "PK", Columns: []string{"a"}, Unique: true, Clustered: true},
		Indexes: []source.Index{
			{Name: "PK", Columns: []string{"a"}, Unique: true, Clustered: true},
			{Name: "IX_b_a", Columns: []string{"b", "a"}},
			{Name: "UX_b_d", Columns: []string{"b", "d"}, Unique: true},
			{Name: "IX_b", Columns: []string{"b"}},
			{Name: "IX_a_b", Columns: []string{"a", "b"}},
			{Name: "IX_c", Columns: []string{"c"}},
		}}
	for _, c := range []struct {
		col, index string
		unique     bool
	}{{"a", "PK", true}, {"b", "IX_b", false}} {
		s, err := ci.SplitOn(c.col)
		if err != nil || s.KeyIndex.Name != c.index || len(s.Key) != 1 || s.Key[0] != c.col || s.UniqueKey() != c.unique {
			t.Errorf("SplitOn(%s) = %+v, %v; want index %s, unique %v", c.col, s, err, c.index, c.unique)
		}
	}
	if !ci.UniqueKey() || ci.KeyIndex.Name != "PK" || ci.Key[0] != "a" {
		t.Errorf("the original changed: %+v", ci)
	}
	if _, err := ci.SplitOn("d"); !errors.Is(err, source.ErrNoSplitIndex) || !strings.Contains(err.Error(), "a, b, b, b, a, c") {
		t.Errorf("SplitOn(d): %v, want ErrNoSplitIndex naming the leading columns", err)
	}
	for _, col := range []string{"c", "x"} {
		if _, err := ci.SplitOn(col); err == nil || errors.Is(err, source.ErrNoSplitIndex) {
			t.Errorf("SplitOn(%s): %v, want an error (computed or not captured)", col, err)
		}
	}
	if (&source.CaptureInstance{Key: []string{"b"}}).UniqueKey() != true {
		t.Error("a key with no KeyIndex is unique (a capture instance's own)")
	}
}

// An AccessError names the three things SQL Server's 0x00… minimum LSN
// can mean (FACTS.md F07), the just-enabled instance with what to do.
func TestAccessErrorNamesEveryCause(t *testing.T) {
	err := error(&source.AccessError{CaptureInstance: "dbo_t", Reason: "sys.fn_cdc_get_min_lsn returned 0x00000000000000000000"})
	for _, want := range []string{"dropped", "may not read its changes", "enabled so recently", "retry once it has run"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if !errors.Is(err, source.ErrNotFound) {
		t.Errorf("%v does not wrap ErrNotFound", err)
	}
}
