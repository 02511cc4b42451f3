package keyrange_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cdcsnap/cdcsnap/keyrange"
)

// byteReader hands out fuzz bytes, then zeros.
type byteReader struct{ b []byte }

func (r *byteReader) next() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *byteReader) n(k int) int { return int(r.next()) % k }

func (r *byteReader) bytes(max int) []byte {
	n := r.n(max + 1)
	out := make([]byte, n)
	for i := range out {
		out[i] = r.next()
	}
	return out
}

// tupleFromBytes builds a tuple of every value type keyrange holds.
func tupleFromBytes(r *byteReader) keyrange.Tuple {
	t := keyrange.Tuple{}
	for range r.n(6) {
		switch r.n(9) {
		case 0:
			t = append(t, nil)
		case 1:
			var x uint64
			for range 8 {
				x = x<<8 | uint64(r.next())
			}
			t = append(t, int64(x))
		case 2:
			t = append(t, r.next()%2 == 0)
		case 3:
			t = append(t, keyrange.Decimal(genDecimals[r.n(len(genDecimals))]+strings.Repeat("9", r.n(40))))
		case 4:
			var x uint64
			for range 8 {
				x = x<<8 | uint64(r.next())
			}
			t = append(t, math.Float64frombits(x))
		case 5:
			t = append(t, string(r.bytes(8)))
		case 6:
			t = append(t, r.bytes(8))
		case 7:
			sec := int64(r.next())<<24 | int64(r.next())<<16 | int64(r.next())<<8 | int64(r.next())
			loc := time.UTC
			if off := r.n(5); off > 0 {
				loc = time.FixedZone("", (off-2)*90*60)
			}
			t = append(t, time.Unix(sec*37, int64(r.next())*100).In(loc))
		case 8:
			var u keyrange.UUID
			copy(u[:], r.bytes(16))
			t = append(t, u)
		}
	}
	return t
}

// FuzzTupleJSON: tuples of every type round-trip through JSON; arbitrary
// input to UnmarshalJSON never panics, and what it accepts round-trips.
func FuzzTupleJSON(f *testing.F) {
	f.Add([]byte(`[null,{"int":"-5"},{"str":"n  "},{"dec":"1.00"}]`))
	f.Add([]byte(`[{"hex":""},{"uuid":"00112233-4455-6677-8899-AABBCCDDEEFF"},{"time":"2026-09-29T12:38:28.1234567-03:00"}]`))
	f.Add([]byte(`[{"float":"-Inf"},{"bool":true},{"int":"1","str":"x"}]`))
	f.Add([]byte("\x05\x01\x02\x03\x04\x05\x06\x07\x08\x09\x07\x00\x00\x00\x01\x03"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Arbitrary JSON.
		var got keyrange.Tuple
		if err := json.Unmarshal(data, &got); err == nil {
			js, err := json.Marshal(got)
			if err != nil {
				// Only a value Marshal refuses (none that Unmarshal
				// makes, so far) may fail here.
				t.Fatalf("Unmarshal(%q) = %#v, which does not marshal: %v", data, got, err)
			}
			var again keyrange.Tuple
			if err := json.Unmarshal(js, &again); err != nil {
				t.Fatalf("re-Unmarshal(%s): %v", js, err)
			}
			assertSameTuple(t, got, again)
		}
		// A tuple built from the bytes.
		in := tupleFromBytes(&byteReader{b: data})
		js, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("Marshal(%#v): %v", in, err)
		}
		var out keyrange.Tuple
		if err := json.Unmarshal(js, &out); err != nil {
			t.Fatalf("Unmarshal(%s): %v", js, err)
		}
		assertSameTuple(t, in, out)
	})
}

// FuzzPieces decodes columns, keys and a range from the bytes and checks
// the pieces against the brute-force oracle (exactly once, seekable shape,
// key order, seek overlap only between twin bounds).
func FuzzPieces(f *testing.F) {
	f.Add([]byte{1, 1, 0, 5, 3, 1, 4, 2, 7, 1, 9, 9})
	f.Add([]byte{2, 1, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 1})
	f.Add([]byte{2, 4, 2, 12, 5, 5, 6, 6, 7, 7, 1, 2, 2, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &byteReader{b: data}
		cols := make([]keyrange.Column, 1+r.n(3))
		for i := range cols {
			cols[i] = kindByName[genKinds[r.n(len(genKinds))]]
			cols[i].Name = string(rune('a' + i))
		}
		value := func(c keyrange.Column) any {
			x := r.n(16)
			if x == 15 {
				return nil
			}
			switch c.Kind {
			case keyrange.KindInt:
				return genInts[x%len(genInts)]
			case keyrange.KindString:
				return genStrings[x%len(genStrings)] + strings.Repeat(" ", r.n(3))
			case keyrange.KindBytes:
				return append([]byte(nil), genBytes[x%len(genBytes)]...)
			case keyrange.KindDecimal:
				return keyrange.Decimal(genDecimals[x%len(genDecimals)])
			default:
				var u keyrange.UUID
				u[x%4] = 1
				u[10+x%3] = byte(x / 4)
				return u
			}
		}
		tuple := func() keyrange.Tuple {
			tu := make(keyrange.Tuple, len(cols))
			for i, c := range cols {
				tu[i] = value(c)
			}
			return tu
		}
		var keys []keyrange.Tuple
		seen := map[string]bool{}
		for range r.n(24) {
			k := tuple()
			ck, err := tupleKey(cols, k)
			if err != nil {
				t.Fatal(err)
			}
			if !seen[ck] {
				seen[ck] = true
				keys = append(keys, k)
			}
		}
		bound := func() keyrange.Tuple {
			switch r.n(4) {
			case 0:
				return nil
			case 1:
				if len(keys) > 0 {
					return keys[r.n(len(keys))]
				}
			}
			return tuple()
		}
		lo, hi := bound(), bound()
		rg := keyrange.Range{Lower: lo, Upper: hi}
		if lo != nil && hi != nil {
			c, err := keyrange.CompareTuples(cols, lo, hi)
			if err != nil {
				t.Fatal(err)
			}
			if c > 0 {
				if _, err := keyrange.Pieces(cols, rg); err == nil && cols[0].Kind != keyrange.KindString {
					// Refused unless a string column comes first
					// (ordered past it only by the source).
					first := 0
					for first < len(cols) && cols[first].Kind != keyrange.KindString {
						if c, _ := keyrange.Compare(cols[first], lo[first], hi[first]); c != 0 {
							t.Fatalf("Pieces accepted reversed bounds %s", fmtRange(rg))
						}
						first++
					}
				}
				rg.Lower, rg.Upper = hi, lo
			}
		}
		var probes []keyrange.Tuple
		for _, b := range []keyrange.Tuple{lo, hi} {
			if b != nil {
				probes = append(probes, b)
			}
		}
		for range 6 {
			probes = append(probes, tuple())
		}
		checkPieces(t, cols, rg, keys, probes)
	})
}
