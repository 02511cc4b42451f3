package source

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/cdcsnap/cdcsnap/keyrange"
)

// Column is one captured column, with its declared SQL Server type rebuilt
// from metadata (sys.sp_cdc_get_captured_columns, sys.columns).
type Column struct {
	Name string `json:"name"`
	// Type is the base type name in lower case ("varchar", "datetime2").
	Type string `json:"type"`
	// Length is the declared length in characters for char/varchar/nchar/
	// nvarchar and in bytes for binary/varbinary; -1 means max.
	Length int `json:"length,omitempty"`
	// Precision and Scale apply to decimal/numeric (precision, scale) and
	// to time/datetime2/datetimeoffset (scale, 0-7).
	Precision int `json:"precision,omitempty"`
	Scale     int `json:"scale,omitempty"`
	// Collation is the column's collation for string types, "" when not
	// visible.
	Collation string `json:"collation,omitempty"`
	// CodePage is the code page of a char, varchar or text column's
	// collation (COLLATIONPROPERTY(collation, 'CodePage'): 1252, 1253,
	// 65001 for a _UTF8 collation), 0 when not known. A source reads such a
	// column as Unicode text where its driver cannot decode the code page.
	CodePage int `json:"code_page,omitempty"`
	// Nullable is the table column's nullability (sys.columns.is_nullable).
	Nullable bool `json:"nullable"`
	// Computed marks a computed column (sys.columns.is_computed). CDC writes
	// NULL for it in every change row, so a source reads it as NULL in
	// snapshots too, and snapshot and stream agree.
	Computed bool `json:"computed,omitempty"`
	// ID is the column's column_id in the source table as the capture
	// instance recorded it (sys.sp_cdc_get_captured_columns); 0 when not
	// known. It stays for the instance's life (FACTS.md F59): a column
	// dropped and added again under the same name has another id (F61).
	ID int `json:"column_id,omitempty"`
	// Dropped marks a captured column the source table no longer has (no
	// column of the table has its ID: dropped, or dropped and added again
	// as another column). CDC writes NULL for it in every change row from
	// the drop on (F60), so a source reads it as a NULL of its type in
	// snapshots too.
	Dropped bool `json:"dropped,omitempty"`
	// CastOnRead makes a source read the column, from the table and from
	// the change table, cast to its captured type, so both reads give one
	// type: set for an identity column (int or bigint in the change table,
	// perhaps decimal in the table: FACTS.md F64) and for a column whose
	// type in the table differs from the captured one (a type change the
	// capture job has not reached yet, F62).
	CastOnRead bool `json:"cast_on_read,omitempty"`
	// PendingType is the column's declared type in the source table when
	// it is not the captured type for another reason than an identity's or
	// a rowversion's change-table type (FACTS.md F64): an ALTER COLUMN the
	// capture job has not processed yet, which changes the captured type
	// only when the job reaches it (F62). A read cast to the captured type
	// would truncate or round the table's values meanwhile (CAST, F92), so
	// package snapshot reads nothing while a column has one. Empty when the
	// types agree or the source cannot tell.
	PendingType string `json:"pending_type,omitempty"`
}

// Declared returns the type as it would be declared: "varchar(20)",
// "nvarchar(max)", "decimal(18,4)", "datetime2(7)", "int". It is the text a
// source inlines in a CAST, so it carries every length, precision and scale.
func (c Column) Declared() string {
	switch c.Type {
	case "char", "varchar", "nchar", "nvarchar", "binary", "varbinary":
		switch {
		case c.Length < 0:
			return c.Type + "(max)"
		case c.Length == 0:
			return c.Type + "(length unknown)"
		}
		return c.Type + "(" + strconv.Itoa(c.Length) + ")"
	case "decimal", "numeric":
		return fmt.Sprintf("%s(%d,%d)", c.Type, c.Precision, c.Scale)
	case "time", "datetime2", "datetimeoffset":
		return fmt.Sprintf("%s(%d)", c.Type, c.Scale)
	default:
		return c.Type
	}
}

// ParseType builds a Column's type fields from a declaration such as
// "varchar(20)", "decimal(18, 4)", "nvarchar(max)" or "datetime2". Types
// that take a length, precision or scale get SQL Server's defaults when it
// is omitted (varchar means varchar(1), decimal decimal(18,0), datetime2
// datetime2(7)).
func ParseType(decl string) (Column, error) {
	var c Column
	s := strings.ToLower(strings.TrimSpace(decl))
	name, args, hasArgs := strings.Cut(s, "(")
	c.Type = strings.TrimSpace(name)
	var nums []string
	if hasArgs {
		if !strings.HasSuffix(args, ")") {
			return c, fmt.Errorf("type %q: missing ')'", decl)
		}
		for _, a := range strings.Split(strings.TrimSuffix(args, ")"), ",") {
			nums = append(nums, strings.TrimSpace(a))
		}
	}
	atoi := func(a string) (int, error) {
		n, err := strconv.Atoi(a)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("type %q: %q is not a size", decl, a)
		}
		return n, nil
	}
	var err error
	switch c.Type {
	case "char", "varchar", "nchar", "nvarchar", "binary", "varbinary":
		c.Length = 1
		if len(nums) > 1 {
			return c, fmt.Errorf("type %q: one length expected", decl)
		}
		if len(nums) == 1 {
			if nums[0] == "max" {
				if c.Type == "char" || c.Type == "nchar" || c.Type == "binary" {
					return c, fmt.Errorf("type %q: max is only for var types", decl)
				}
				c.Length = -1
			} else if c.Length, err = atoi(nums[0]); err != nil {
				return c, err
			}
		}
	case "decimal", "numeric":
		c.Precision, c.Scale = 18, 0
		if len(nums) > 2 {
			return c, fmt.Errorf("type %q: precision and scale expected", decl)
		}
		if len(nums) >= 1 {
			if c.Precision, err = atoi(nums[0]); err != nil {
				return c, err
			}
		}
		if len(nums) == 2 {
			if c.Scale, err = atoi(nums[1]); err != nil {
				return c, err
			}
		}
		if c.Precision < 1 || c.Precision > 38 || c.Scale > c.Precision {
			return c, fmt.Errorf("type %q: precision 1-38 and scale <= precision expected", decl)
		}
	case "time", "datetime2", "datetimeoffset":
		c.Scale = 7
		if len(nums) > 1 {
			return c, fmt.Errorf("type %q: one scale expected", decl)
		}
		if len(nums) == 1 {
			if c.Scale, err = atoi(nums[0]); err != nil {
				return c, err
			}
		}
		if c.Scale > 7 {
			return c, fmt.Errorf("type %q: scale 0-7 expected", decl)
		}
	default:
		if hasArgs {
			return c, fmt.Errorf("type %q takes no arguments", decl)
		}
		if _, known := fixedType(c.Type); !known {
			return c, fmt.Errorf("type %q: %w", decl, ErrUnsupportedType)
		}
	}
	return c, nil
}

// ErrUnsupportedType is wrapped by errors for a SQL Server type cdcsnap
// cannot carry (sql_variant) or does not know.
var ErrUnsupportedType = errors.New("unsupported SQL Server type")

// fixedType returns the Arrow type of a SQL Server type that takes no
// arguments; known is false for a type cdcsnap does not know, and t is nil
// with known true for one it cannot carry (sql_variant).
func fixedType(name string) (t arrow.DataType, known bool) {
	switch name {
	case "bit":
		return arrow.FixedWidthTypes.Boolean, true
	case "tinyint", "smallint":
		return arrow.PrimitiveTypes.Int16, true // Delta has no unsigned byte
	case "int":
		return arrow.PrimitiveTypes.Int32, true
	case "bigint":
		return arrow.PrimitiveTypes.Int64, true
	case "money":
		return &arrow.Decimal128Type{Precision: 19, Scale: 4}, true
	case "smallmoney":
		return &arrow.Decimal128Type{Precision: 10, Scale: 4}, true
	case "float":
		return arrow.PrimitiveTypes.Float64, true
	case "real":
		return arrow.PrimitiveTypes.Float32, true
	case "date":
		return arrow.FixedWidthTypes.Date32, true
	case "datetime", "smalldatetime":
		return timestampUTC(), true
	case "uniqueidentifier", "text", "ntext", "xml":
		return arrow.BinaryTypes.String, true
	case "image", "rowversion", "timestamp", "hierarchyid", "geometry", "geography":
		return arrow.BinaryTypes.Binary, true
	case "sql_variant":
		return nil, true
	}
	return nil, false
}

func timestampUTC() arrow.DataType {
	return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
}

// ArrowType maps the column's SQL Server type to the Arrow type a source
// produces and a sink stores:
//
//	bit                                  boolean
//	tinyint, smallint / int / bigint     int16 / int32 / int64 (Delta has no unsigned byte)
//	decimal(p,s), numeric(p,s)           decimal128(p,s); money decimal(19,4), smallmoney decimal(10,4)
//	float / real                         float64 / float32
//	date                                 date32
//	datetime, smalldatetime, datetime2   timestamp[us, UTC] (wall clock taken as UTC; datetime2(7) truncated to µs)
//	datetimeoffset                       timestamp[us, UTC] (the instant; the offset is not kept)
//	time(n)                              string "hh:mm:ss[.fffffff]" with n digits (Delta has no time type)
//	char, varchar, nchar, nvarchar, text, ntext, xml   string
//	uniqueidentifier                     string, canonical lowercase form
//	binary, varbinary, image, rowversion binary
//	hierarchyid, geometry, geography     binary: the raw CLR serialization (documented fallback)
//	sql_variant                          ErrUnsupportedType
func (c Column) ArrowType() (arrow.DataType, error) {
	switch c.Type {
	case "char", "varchar", "nchar", "nvarchar", "time":
		return arrow.BinaryTypes.String, nil
	case "binary", "varbinary":
		return arrow.BinaryTypes.Binary, nil
	case "decimal", "numeric":
		return &arrow.Decimal128Type{Precision: int32(c.Precision), Scale: int32(c.Scale)}, nil
	case "datetime2", "datetimeoffset":
		return timestampUTC(), nil
	}
	t, _ := fixedType(c.Type)
	if t == nil {
		return nil, fmt.Errorf("column %q: type %s: %w", c.Name, c.Declared(), ErrUnsupportedType)
	}
	return t, nil
}

// KeyColumn describes the column as a key column for planning. A length
// type whose length is not known has no bound a source can cast to:
// KindUnsupported, which keeps the key in one partition.
func (c Column) KeyColumn() keyrange.Column {
	k := keyrange.Column{Name: c.Name, SQLType: c.Declared()}
	switch c.Type {
	case "char", "varchar", "nchar", "nvarchar", "binary", "varbinary":
		if c.Length == 0 {
			k.Kind = keyrange.KindUnsupported
			return k
		}
	}
	switch c.Type {
	case "tinyint", "smallint", "int", "bigint":
		k.Kind = keyrange.KindInt
	case "bit":
		k.Kind = keyrange.KindBool
	case "decimal", "numeric", "money", "smallmoney":
		k.Kind = keyrange.KindDecimal
	case "float", "real":
		k.Kind = keyrange.KindFloat
	case "char", "varchar", "nchar", "nvarchar":
		k.Kind = keyrange.KindString
		k.Collation = keyrange.ParseCollation(c.Collation)
		k.Unicode = c.Type == "nchar" || c.Type == "nvarchar"
	case "binary", "varbinary":
		k.Kind = keyrange.KindBytes
	case "date":
		k.Kind = keyrange.KindDate
	case "time":
		k.Kind = keyrange.KindTime
	case "datetime", "smalldatetime", "datetime2":
		k.Kind = keyrange.KindDateTime
	case "datetimeoffset":
		k.Kind = keyrange.KindDateTimeOffset
	case "uniqueidentifier":
		k.Kind = keyrange.KindUUID
	default:
		k.Kind = keyrange.KindUnsupported
	}
	return k
}

// ArrowSchema returns the Arrow schema of rows of these columns: of a
// snapshot's rows and, with the change metadata after them, of change rows
// (ChangeSchema), so the bronze table has one schema for both. Every field
// is nullable, whatever the table column says: change rows carry NULL
// where the table holds none (FACTS.md F13: computed columns always; text,
// ntext and image in deletes and update-before images; the (max) types in
// update-before images of updates that left them alone; and, seen by a
// peer on SQL Server 2022, NOT NULL columns of delete rows).
func ArrowSchema(cols []Column) (*arrow.Schema, error) {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		t, err := c.ArrowType()
		if err != nil {
			return nil, err
		}
		fields[i] = arrow.Field{Name: c.Name, Type: t, Nullable: true}
	}
	return arrow.NewSchema(fields, nil), nil
}

// The change metadata columns a source adds to each change row, after the
// captured columns (see ChangeSchema).
const (
	ColOperation = "_operation"
	ColStartLSN  = "_start_lsn"
	ColSeqval    = "_seqval"
	ColCommandID = "_command_id"
	ColCommitTS  = "_commit_ts"
)

// ChangeSchema is the schema of ReadChanges: the captured columns, then
// _operation int32 (1 delete, 2 insert, 3 update before, 4 update after),
// _start_lsn and _seqval as LSN strings ("0x" + 20 hex digits), _command_id
// int32 (NULL when the source cannot tell), _commit_ts timestamp[us, UTC].
func ChangeSchema(cols []Column) (*arrow.Schema, error) {
	s, err := ArrowSchema(cols)
	if err != nil {
		return nil, err
	}
	fields := append(s.Fields(),
		arrow.Field{Name: ColOperation, Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: ColStartLSN, Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: ColSeqval, Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: ColCommandID, Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: ColCommitTS, Type: timestampUTC(), Nullable: true},
	)
	return arrow.NewSchema(fields, nil), nil
}
