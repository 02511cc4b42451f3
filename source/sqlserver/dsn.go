package sqlserver

import (
	"database/sql"
	"errors"
	"net/url"
	"strings"

	mssql "github.com/microsoft/go-mssqldb"
	"github.com/microsoft/go-mssqldb/msdsn"
)

// redacted replaces every secret RedactDSN hides.
const redacted = "xxxxx"

// isSecretKey reports whether a connection-string key holds a secret.
func isSecretKey(k string) bool {
	k = strings.ToLower(strings.TrimSpace(k))
	for _, s := range []string{"password", "pwd", "secret", "token"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// RedactDSN returns dsn with its secrets (password, pwd and any key naming
// a secret or token) replaced by "xxxxx", in each form go-mssqldb accepts:
// URL ("sqlserver://user:pass@host?database=db"), ADO
// ("server=h;user id=u;password=p") and ODBC ("odbc:server=h;pwd={p}").
// What it cannot parse it hides whole. Use it for every DSN that reaches a
// log or an error.
func RedactDSN(dsn string) string {
	out, _, ok := redactForm(dsn)
	if !ok {
		return "<unparseable DSN redacted>"
	}
	// Belt and braces: whatever go-mssqldb itself reads as the password is
	// gone too, in the spellings a DSN can hold it.
	if cfg, err := msdsn.Parse(dsn); err == nil && len(cfg.Password) >= 3 {
		for _, s := range []string{cfg.Password, url.QueryEscape(cfg.Password), url.PathEscape(cfg.Password), strings.ReplaceAll(cfg.Password, "}", "}}")} {
			out = strings.ReplaceAll(out, s, redacted)
		}
	}
	return out
}

// redactForm returns the redacted DSN and the secret values it removed.
func redactForm(dsn string) (string, []string, bool) {
	if strings.HasPrefix(strings.ToLower(dsn), "odbc:") {
		s, secrets, ok := redactPairs(dsn[len("odbc:"):], true)
		return dsn[:len("odbc:")] + s, secrets, ok
	}
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", nil, false
		}
		var secrets []string
		if u.User != nil {
			if pw, has := u.User.Password(); has {
				secrets = append(secrets, pw)
				u.User = url.UserPassword(u.User.Username(), redacted)
			}
		}
		q := u.Query()
		for k, v := range q {
			if isSecretKey(k) {
				secrets = append(secrets, v...)
				q[k] = []string{redacted}
			}
		}
		u.RawQuery = q.Encode()
		return u.String(), secrets, true
	}
	return redactPairs(dsn, false)
}

// redactPairs redacts "key=value;..." text. ODBC values may be wrapped in
// braces ("{a;b}}c}"); ADO values in double or single quotes.
func redactPairs(s string, odbc bool) (string, []string, bool) {
	var b strings.Builder
	var secrets []string
	i := 0
	for i < len(s) {
		eq := strings.IndexByte(s[i:], '=')
		semi := strings.IndexByte(s[i:], ';')
		if eq < 0 || (semi >= 0 && semi < eq) {
			// A part with no value ("server" or an empty part).
			end := len(s)
			if semi >= 0 {
				end = i + semi + 1
			}
			b.WriteString(s[i:end])
			i = end
			continue
		}
		key := s[i : i+eq]
		b.WriteString(key + "=")
		i += eq + 1
		// Leading spaces before a quoted value.
		j := i
		for j < len(s) && s[j] == ' ' {
			j++
		}
		var val string
		switch {
		case j < len(s) && odbc && s[j] == '{':
			k := j + 1
			for {
				if k >= len(s) {
					return "", nil, false
				}
				if s[k] == '}' {
					if k+1 < len(s) && s[k+1] == '}' {
						k += 2
						continue
					}
					break
				}
				k++
			}
			val = s[i : k+1]
			i = k + 1
		case j < len(s) && !odbc && (s[j] == '"' || s[j] == '\''):
			q := s[j]
			k := j + 1
			for {
				if k >= len(s) {
					return "", nil, false
				}
				if s[k] == q {
					if k+1 < len(s) && s[k+1] == q {
						k += 2
						continue
					}
					break
				}
				k++
			}
			val = s[i : k+1]
			i = k + 1
		default:
			end := strings.IndexByte(s[i:], ';')
			if end < 0 {
				end = len(s) - i
			}
			val = s[i : i+end]
			i += end
		}
		if isSecretKey(key) {
			secrets = append(secrets, strings.TrimSpace(val))
			val = redacted
		}
		b.WriteString(val)
		// Anything between a closing quote and the next ';' is kept only
		// when the key is not secret.
		if i < len(s) && s[i] != ';' {
			end := strings.IndexByte(s[i:], ';')
			if end < 0 {
				end = len(s) - i
			}
			if isSecretKey(key) {
				secrets = append(secrets, s[i:i+end])
			} else {
				b.WriteString(s[i : i+end])
			}
			i += end
		}
		if i < len(s) && s[i] == ';' {
			b.WriteByte(';')
			i++
		}
	}
	return b.String(), secrets, true
}

// DefaultPacketSize is the TDS packet size Open asks for when the DSN
// does not say ("packet size"): the largest a client may ask (MS-TDS
// 2.2.6.4, PacketSize; go-mssqldb's default is 4096). The server grants at
// most its "network packet size" maximum and says so at login; a read of
// the benchmark's shape spends 15-20 % less client CPU per row than at
// 4096 (BENCHMARKS.md, "Reading from SQL Server: cdcsnap against Microsoft's drivers").
const DefaultPacketSize = 32767

// Open opens a *sql.DB on go-mssqldb's "sqlserver" driver, asking for
// DefaultPacketSize unless the DSN sets "packet size". Errors name the DSN
// only through RedactDSN and never hold its password.
func Open(dsn string) (*sql.DB, error) {
	cfg, err := msdsn.Parse(dsn)
	if err != nil {
		return nil, errors.New("sqlserver: opening " + RedactDSN(dsn) + ": " + scrub(err.Error(), dsn))
	}
	if _, set := cfg.Parameters[msdsn.PacketSize]; !set {
		cfg.PacketSize = DefaultPacketSize
	}
	return sql.OpenDB(mssql.NewConnectorConfig(cfg)), nil
}

// scrub removes the DSN's secrets from a message; when the DSN cannot be
// parsed at all, it drops the message.
func scrub(msg, dsn string) string {
	_, secrets, ok := redactForm(dsn)
	if !ok {
		return "the DSN does not parse"
	}
	if cfg, err := msdsn.Parse(dsn); err == nil && cfg.Password != "" {
		secrets = append(secrets, cfg.Password)
	}
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, redacted)
		}
	}
	return msg
}
