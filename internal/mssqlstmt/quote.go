package mssqlstmt

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
