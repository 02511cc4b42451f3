package tdsserver

// Convert returns s as SQL Server gives it back after converting it to the
// collation's code page and back to nvarchar, as CAST(@p COLLATE c AS
// varchar(n)) then CAST(... AS nvarchar(n)) do: a character the code page
// lacks becomes '?', and the loss is not reported (source/sqlserver
// FACTS.md F29). SQL Server's conversions may also map such a character
// to a similar one (Windows' best fit); either way the text changes. A
// _UTF8 collation, and one with no code page, keep every character.
func (c Collation) Convert(s string) (string, error) {
	cs, err := charsetOf(c)
	if err != nil {
		return "", err
	}
	var b []byte
	for _, r := range s {
		e, err := cs.appendEncoded(b, string(r))
		if err != nil {
			e = append(b, '?')
		}
		b = e
	}
	return cs.decode(b), nil
}
