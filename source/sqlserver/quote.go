package sqlserver

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxSysname is the longest name SQL Server accepts (sysname is nvarchar(128)).
const maxSysname = 128

// QuoteName quotes an identifier as T-SQL's QUOTENAME does with brackets:
// the name inside [ and ], every ] doubled. Names longer than 128
// characters (where QUOTENAME returns NULL), empty names and names holding
// a NUL are errors.
func QuoteName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("sqlserver: empty identifier")
	}
	if !utf8.ValidString(name) {
		return "", fmt.Errorf("sqlserver: identifier %q is not valid UTF-8", name)
	}
	if n := utf8.RuneCountInString(name); n > maxSysname {
		return "", fmt.Errorf("sqlserver: identifier %q has %d characters, more than %d", name, n, maxSysname)
	}
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("sqlserver: identifier %q holds a NUL character", name)
	}
	return "[" + strings.ReplaceAll(name, "]", "]]") + "]", nil
}

// quoteTwo quotes schema.name.
func quoteTwo(schema, name string) (string, error) {
	s, err := QuoteName(schema)
	if err != nil {
		return "", err
	}
	n, err := QuoteName(name)
	if err != nil {
		return "", err
	}
	return s + "." + n, nil
}

// ParseQuotedList splits a comma-separated list of bracket-quoted names, as
// sys.sp_cdc_help_change_data_capture returns index_column_list and
// captured_column_list ("[id], [a]]b], [c,d]"). Unquoted names are accepted
// too (trimmed of spaces). An empty or blank list is no names.
func ParseQuotedList(s string) ([]string, error) {
	var out []string
	i := 0
	skipSpace := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
			i++
		}
	}
	skipSpace()
	if i == len(s) {
		return nil, nil
	}
	for {
		skipSpace()
		if i == len(s) {
			return nil, fmt.Errorf("sqlserver: column list %q: missing name after ','", s)
		}
		var name strings.Builder
		if s[i] == '[' {
			i++
			closed := false
			for i < len(s) {
				if s[i] == ']' {
					if i+1 < len(s) && s[i+1] == ']' {
						name.WriteByte(']')
						i += 2
						continue
					}
					i++
					closed = true
					break
				}
				name.WriteByte(s[i])
				i++
			}
			if !closed {
				return nil, fmt.Errorf("sqlserver: column list %q: unterminated [", s)
			}
		} else {
			start := i
			for i < len(s) && s[i] != ',' {
				if s[i] == '[' || s[i] == ']' {
					return nil, fmt.Errorf("sqlserver: column list %q: bracket inside an unquoted name", s)
				}
				i++
			}
			name.WriteString(strings.TrimRight(s[start:i], " \t\r\n"))
		}
		if name.Len() == 0 {
			return nil, fmt.Errorf("sqlserver: column list %q: empty name", s)
		}
		out = append(out, name.String())
		skipSpace()
		if i == len(s) {
			return out, nil
		}
		if s[i] != ',' {
			return nil, fmt.Errorf("sqlserver: column list %q: want ',' at byte %d", s, i)
		}
		i++
	}
}
