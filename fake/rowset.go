package fake

// row is one table row: its values in column order, and its key normalized
// for ordering (see keyPart). A published row is never modified: an update
// replaces it.
type row struct {
	key  []any
	vals []any
}

// chunkSize is the most rows a chunk holds. Small enough that an insert's
// copy within a chunk is cheap, large enough that the chunk list a commit
// copies stays short (2,000 pointers for a million rows).
const chunkSize = 512

// chunk is a sorted run of rows. Once a rowset holding it is published, it
// is immutable; a commit copies a chunk before changing it (gen says which
// commit owns a chunk it may still change).
type chunk struct {
	rows []*row
	gen  uint64
}

// rowset is a table's rows sorted by key: a list of chunks, copied on write
// per commit, so a reader (a page of a READ COMMITTED read, or a whole
// SNAPSHOT read) holds a consistent version for as long as it needs it,
// and a binary search finds a key in O(log n).
type rowset struct {
	chunks []*chunk
	n      int
	lay    *layout // the columns the rows' values are in
}

// pos is a position in a rowset: chunk c, row i. The end is {len(chunks), 0}.
type pos struct{ c, i int }

func (p pos) less(q pos) bool { return p.c < q.c || p.c == q.c && p.i < q.i }

func (s *rowset) end() pos { return pos{len(s.chunks), 0} }

func (s *rowset) at(p pos) *row { return s.chunks[p.c].rows[p.i] }

func (s *rowset) next(p pos) pos {
	p.i++
	if p.i >= len(s.chunks[p.c].rows) {
		return pos{p.c + 1, 0}
	}
	return p
}

// search returns the first position whose row satisfies f, where f is false
// then true in key order (like sort.Search); the end when none does.
func (s *rowset) search(f func(*row) bool) pos {
	lo, hi := 0, len(s.chunks)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		rows := s.chunks[m].rows
		if !f(rows[len(rows)-1]) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(s.chunks) {
		return s.end()
	}
	rows := s.chunks[lo].rows
	a, b := 0, len(rows)
	for a < b {
		m := int(uint(a+b) >> 1)
		if !f(rows[m]) {
			a = m + 1
		} else {
			b = m
		}
	}
	return pos{lo, a}
}

// all calls f for every row in key order until f returns false.
func (s *rowset) all(f func(*row) bool) {
	for _, c := range s.chunks {
		for _, r := range c.rows {
			if !f(r) {
				return
			}
		}
	}
}

// rowsetWriter changes a copy of a rowset within one commit, copying each
// chunk the first time it changes it.
type rowsetWriter struct {
	s   rowset
	gen uint64
}

func newRowsetWriter(from *rowset, gen uint64) *rowsetWriter {
	return &rowsetWriter{s: rowset{chunks: append([]*chunk(nil), from.chunks...), n: from.n, lay: from.lay}, gen: gen}
}

// own returns chunk c, copied first unless this writer made it.
func (w *rowsetWriter) own(c int) *chunk {
	ch := w.s.chunks[c]
	if ch.gen == w.gen {
		return ch
	}
	cp := &chunk{rows: make([]*row, len(ch.rows), max(len(ch.rows)+1, chunkSize/2)), gen: w.gen}
	copy(cp.rows, ch.rows)
	w.s.chunks[c] = cp
	return cp
}

// insertAt puts r at p, which must keep the order.
func (w *rowsetWriter) insertAt(p pos, r *row) {
	w.s.n++
	if len(w.s.chunks) == 0 {
		w.s.chunks = append(w.s.chunks, &chunk{rows: append(make([]*row, 0, chunkSize/2), r), gen: w.gen})
		return
	}
	if p.c == len(w.s.chunks) {
		p = pos{p.c - 1, len(w.s.chunks[p.c-1].rows)}
	}
	last := p.c == len(w.s.chunks)-1
	if last && p.i == chunkSize && len(w.s.chunks[p.c].rows) == chunkSize {
		// Appending past a full last chunk (a load in key order): start a
		// new chunk and leave the full one as it is.
		w.s.chunks = append(w.s.chunks, &chunk{rows: append(make([]*row, 0, chunkSize), r), gen: w.gen})
		return
	}
	ch := w.own(p.c)
	ch.rows = append(ch.rows, nil)
	copy(ch.rows[p.i+1:], ch.rows[p.i:])
	ch.rows[p.i] = r
	if len(ch.rows) > chunkSize {
		half := len(ch.rows) / 2
		tail := &chunk{rows: make([]*row, len(ch.rows)-half, chunkSize), gen: w.gen}
		copy(tail.rows, ch.rows[half:])
		clear(ch.rows[half:])
		ch.rows = ch.rows[:half]
		w.s.chunks = append(w.s.chunks, nil)
		copy(w.s.chunks[p.c+2:], w.s.chunks[p.c+1:])
		w.s.chunks[p.c+1] = tail
	}
}

// deleteAt removes the row at p.
func (w *rowsetWriter) deleteAt(p pos) {
	w.s.n--
	if len(w.s.chunks[p.c].rows) == 1 {
		w.s.chunks = append(w.s.chunks[:p.c], w.s.chunks[p.c+1:]...)
		return
	}
	ch := w.own(p.c)
	copy(ch.rows[p.i:], ch.rows[p.i+1:])
	ch.rows[len(ch.rows)-1] = nil
	ch.rows = ch.rows[:len(ch.rows)-1]
}

// replaceAt puts r at p in place of the row there (same key).
func (w *rowsetWriter) replaceAt(p pos, r *row) {
	w.own(p.c).rows[p.i] = r
}

// done returns the new rowset; the writer must not be used after.
func (w *rowsetWriter) done() *rowset {
	s := w.s
	return &s
}

// find returns where key is or would go, and whether a row with an equal
// key is there. A key above the last row's (a load in key order) is found
// without a search.
func (w *rowsetWriter) find(o keyOrder, key []any) (pos, bool) {
	s := &w.s
	if len(s.chunks) > 0 {
		last := s.chunks[len(s.chunks)-1].rows
		if o.compare(last[len(last)-1].key, key) < 0 {
			return s.end(), false
		}
	}
	p := s.search(func(r *row) bool { return o.compare(r.key, key) >= 0 })
	return p, p != s.end() && o.compare(s.at(p).key, key) == 0
}
