package testworld

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/cdcsnap/cdcsnap/sink"
)

// ServerKey is the oracle's model of a collation's equality, what a unique
// index under it takes for one key (source/sqlserver FACTS.md F22, F24,
// F53): trailing spaces do not count; full-width letters are their ASCII
// ones (width-insensitive); "aa", "Aa" and "AA" are the one letter å, "aA"
// two letters (Danish_Norwegian's tie); case does not count; é and á are e
// and a (accent-insensitive); ß is "ss" (an expansion).
func ServerKey(s string) string {
	rs := []rune(strings.TrimRight(s, " "))
	for i, r := range rs {
		if r >= 0xFF01 && r <= 0xFF5E {
			rs[i] = r - 0xFF01 + 0x21
		}
	}
	var b strings.Builder
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		if i+1 < len(rs) && (r == 'a' && rs[i+1] == 'a' || r == 'A' && (rs[i+1] == 'a' || rs[i+1] == 'A')) {
			b.WriteRune('å')
			i++
			continue
		}
		switch r = unicode.ToLower(r); r {
		case 'é', 'è':
			r = 'e'
		case 'á', 'à':
			r = 'a'
		case 'ß':
			b.WriteString("ss")
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// KeyChange is one bronze row of KeyHistory: columns k (the key) and v.
type KeyChange struct {
	Op            int32 // 0 for a snapshot row
	LSN, Seq, Cmd int
	Key           string
	Val           int64
}

// KeyHistory generates a random table of string keys under serverKey's
// equality (ServerKey) and its changes: inserts, deletes, updates of values, and
// updates of keys (to a value the collation takes for another key, or for
// the same one), logged as a delete and an insert or, as under trace flag
// 8207, as an update-before and an update-after. A snapshot at a random
// step takes the table as it is; the changes after it follow. It returns
// the bronze rows and the table at the end.
func KeyHistory(r *rand.Rand) ([]KeyChange, map[string]int64) {
	tokens := []string{"a", "A", "aa", "aA", "Aa", "AA", "é", "É", "e", "E", "ß", "ss", "SS", "ａ", "Ａ", "b", "á"}
	key := func() string {
		var b strings.Builder
		for range 1 + r.IntN(3) {
			b.WriteString(tokens[r.IntN(len(tokens))])
		}
		if r.IntN(8) == 0 {
			b.WriteString(" ")
		}
		return b.String()
	}
	table := map[string][2]any{} // serverKey -> stored key, value
	stored := func() (string, bool) {
		if len(table) == 0 {
			return "", false
		}
		ks := make([]string, 0, len(table))
		for k := range table {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return ks[r.IntN(len(ks))], true
	}
	var out []KeyChange
	steps := 10 + r.IntN(40)
	snap := r.IntN(steps)
	lsn, seq := 0, 0
	for step := range steps {
		if step == snap {
			lsn++
			for _, row := range table {
				out = append(out, KeyChange{Op: 0, LSN: lsn, Key: row[0].(string), Val: row[1].(int64)})
			}
			out = out[:len(out):len(out)]
		}
		lsn++
		emit := func(op int32, cmd int, k string, v int64, sameSeq bool) {
			if !sameSeq {
				seq++
			}
			if step >= snap {
				out = append(out, KeyChange{Op: op, LSN: lsn, Seq: seq, Cmd: cmd, Key: k, Val: v})
			}
		}
		switch sk, ok := stored(); {
		case r.IntN(3) == 0 || !ok:
			k := key()
			if _, dup := table[ServerKey(k)]; !dup {
				v := r.Int64N(1000)
				table[ServerKey(k)] = [2]any{k, v}
				emit(2, 1, k, v, false)
			}
		case r.IntN(4) == 0:
			row := table[sk]
			delete(table, sk)
			emit(1, 1, row[0].(string), row[1].(int64), false)
		case r.IntN(3) == 0:
			row := table[sk]
			v := r.Int64N(1000)
			table[sk] = [2]any{row[0], v}
			emit(3, 1, row[0].(string), row[1].(int64), false)
			emit(4, 1, row[0].(string), v, true)
		default:
			row := table[sk]
			k := key()
			if _, dup := table[ServerKey(k)]; dup && ServerKey(k) != sk {
				continue
			}
			delete(table, sk)
			table[ServerKey(k)] = [2]any{k, row[1]}
			if r.IntN(2) == 0 {
				emit(1, 1, row[0].(string), row[1].(int64), false)
				emit(2, 2, k, row[1].(int64), false)
			} else {
				emit(3, 1, row[0].(string), row[1].(int64), false)
				emit(4, 1, k, row[1].(int64), true)
			}
		}
	}
	end := map[string]int64{}
	for _, row := range table {
		end[row[0].(string)] = row[1].(int64)
	}
	return out, end
}

// KeyBronze builds the bronze rows of changes (columns k, v) of capture
// instance ci, in the order given.
func KeyBronze(t testing.TB, ci string, changes []KeyChange) arrow.RecordBatch {
	t.Helper()
	schema, err := sink.BronzeSchema(arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil))
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, c := range changes {
		for i, f := range schema.Fields() {
			fb := b.Field(i)
			switch f.Name {
			case "k":
				fb.(*array.StringBuilder).Append(c.Key)
			case "v":
				fb.(*array.Int64Builder).Append(c.Val)
			case sink.ColStartLSN:
				fb.(*array.StringBuilder).Append(fmt.Sprintf("0x%020X", c.LSN))
			case sink.ColCaptureInstance:
				fb.(*array.StringBuilder).Append(ci)
			case sink.ColOperation:
				fb.(*array.Int32Builder).Append(c.Op)
			case sink.ColSeqval:
				if c.Op == 0 {
					fb.AppendNull()
				} else {
					fb.(*array.StringBuilder).Append(fmt.Sprintf("0x%020X", c.Seq))
				}
			case sink.ColCommandID:
				if c.Op == 0 {
					fb.AppendNull()
				} else {
					fb.(*array.Int32Builder).Append(int32(c.Cmd))
				}
			default:
				fb.AppendNull()
			}
		}
	}
	return b.NewRecordBatch()
}
