package tdsfake_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/internal/tdsfake"
	"github.com/cdcsnap/cdcsnap/keyrange"
	"github.com/cdcsnap/cdcsnap/sink"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source/sqlserver"
)

// asLatin1 is UTF-8 text stored through a Latin1 (code page 1252) varchar
// column byte for byte, as the string SQL Server's conversion to nvarchar
// reads it (FACTS.md F82): 1252's letters, and the five bytes it leaves
// undefined as the C1 controls of the same number ("Á" is 0xC3 0x81: "Ã"
// and U+0081).
func asLatin1(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch c {
		case 0x81, 0x8D, 0x8F, 0x90, 0x9D:
			b.WriteRune(rune(c))
		default:
			b.WriteRune(charmap.Windows1252.DecodeByte(c))
		}
	}
	return b.String()
}

// holds1252Hole reports whether s holds one of 1252's undefined bytes.
func holds1252Hole(s string) bool {
	return strings.ContainsAny(s, "\u0081\u008D\u008F\u0090\u009D")
}

// TestLegacyTextKeysAndValuesReadExactly: keys and values of a Latin1
// varchar column holding UTF-8 bytes (Á, Í, Ï, Ð, Ý: bytes 1252 leaves
// undefined) come through the wire as stored, the server converting them
// to nvarchar; the keyset plan's tile bounds hold such keys, each bound is
// bound back to the same stored key, and every row is read once with its
// value unchanged. Read through go-mssqldb's own code page table the same
// bytes are U+FFFD (TestStoredCodePageBytes).
func TestLegacyTextKeysAndValuesReadExactly(t *testing.T) {
	ctx := context.Background()
	db := fake.New(fake.Options{})
	if err := db.CreateTable(fake.TableDef{Schema: "dbo", Name: "names", Key: []string{"name"}, Columns: []fake.ColumnDef{
		{Name: "name", Type: "varchar(30)", Collation: "SQL_Latin1_General_CP1_CI_AS"},
		{Name: "note", Type: "varchar(40)", Collation: "Latin1_General_CI_AS", Nullable: true},
	}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	var rows []fake.Row
	for i := range 240 {
		word := []string{"Álvaro", "Íñigo", "Ïsa", "Ðórr", "Ýr", "Zoë"}[i%6]
		name, note := asLatin1(fmt.Sprintf("%s %03d", word, i)), asLatin1("Grüße aus Ísafjörður "+word)
		want[name] = note
		rows = append(rows, fake.Row{name, note})
	}
	if _, err := db.Load("dbo", "names", rows...); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EnableCDC("dbo", "names", "dbo_names"); err != nil {
		t.Fatal(err)
	}
	src, _, _ := serve(t, db, tdsfake.Options{PageRows: 7}, sqlserver.Options{})
	opts := snapshot.Options{CaptureInstance: "dbo_names", Partitions: 6, MinPartitionRows: -1, ReadOptions: snapshot.ReadOptions{BatchRows: 16}}
	prep, err := snapshot.Prepare(ctx, src, fake.NewMemSink(), opts)
	if err != nil {
		t.Fatal(err)
	}
	bounds := 0
	for _, r := range prep.Plan.Ranges {
		if r.Lower != nil {
			if s, _ := r.Lower[0].(string); holds1252Hole(s) {
				bounds++
			}
			if !utf8.ValidString(fmt.Sprint(r.Lower...)) || strings.ContainsRune(fmt.Sprint(r.Lower...), utf8.RuneError) {
				t.Errorf("bound %v holds U+FFFD", r.Lower)
			}
		}
	}
	if prep.Plan.Strategy != keyrange.Keyset.String() || bounds == 0 {
		t.Fatalf("plan %s with %d ranges, %d bounds holding 1252's undefined bytes: want keyset bounds holding them", prep.Plan.Strategy, len(prep.Plan.Ranges), bounds)
	}
	dst := fake.NewMemSink()
	defer dst.Close()
	if _, _, err := snapshot.Bootstrap(ctx, src, dst, opts); err != nil {
		t.Fatal(err)
	}
	got, err := dst.Rows()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range got {
		if r[sink.ColOperation] != int64(sink.OperationSnapshot) {
			continue
		}
		name, _ := r["name"].(string)
		seen[name]++
		if note, ok := want[name]; !ok || r["note"] != note {
			t.Errorf("row %q: note %q; want a stored key and its note %q", name, r["note"], note)
		}
	}
	for name := range want {
		if seen[name] != 1 {
			t.Errorf("key %q read %d times", name, seen[name])
		}
	}
}
