package tdsserver

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// tap is a TCP proxy on loopback that keeps every byte the client sent.
type tap struct {
	ln   net.Listener
	mu   sync.Mutex
	sent bytes.Buffer
	wg   sync.WaitGroup
}

func startTap(t *testing.T, target string) *tap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tap{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				return
			}
			p.wg.Add(2)
			go func() {
				defer p.wg.Done()
				_, _ = io.Copy(io.MultiWriter(writerFunc(p.record), s), c)
				_ = s.(*net.TCPConn).CloseWrite()
			}()
			go func() {
				defer p.wg.Done()
				_, _ = io.Copy(c, s)
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func (p *tap) record(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent.Write(b)
}

func (p *tap) clientSent() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.sent.Bytes())
}

func utf16le(s string) []byte {
	u, _ := appendUTF16(nil, s)
	return u
}

// TestEncryptionNegotiated: go-mssqldb's three encrypt settings get what
// SQL Server gives them (MS-TDS 2.2.6.5, 3.2.5.2): "disable"
// (ENCRYPT_NOT_SUP) logs in in the clear, "false" (ENCRYPT_OFF) has its
// LOGIN7 encrypted and the rest in the clear, "true" (ENCRYPT_ON) has
// every packet after the handshake encrypted. What the client put on the
// wire is checked through a proxy: the login's user name and the query's
// text in UTF-16, in the clear or not.
func TestEncryptionNegotiated(t *testing.T) {
	const query = "select 'wire tap marker'"
	var mu sync.Mutex
	var logins []Login
	s := startServer(t, HandlerFunc(func(ctx context.Context, req *Request, w *ResponseWriter) error {
		mu.Lock()
		logins = append(logins, req.Login)
		mu.Unlock()
		if err := w.Columns([]Column{{Name: "v", Type: "nvarchar(40)"}}); err != nil {
			return err
		}
		return w.Row(req.SQL)
	}))
	for _, tc := range []struct {
		encrypt              string
		want                 Encryption
		loginClear, sqlClear bool
	}{
		{"disable", EncryptNone, true, true},
		{"false", EncryptLogin, false, true},
		{"true", EncryptFull, false, false},
	} {
		t.Run(tc.encrypt, func(t *testing.T) {
			p := startTap(t, s.Addr())
			u, _ := url.Parse(s.DSN("shop"))
			u.Host = p.ln.Addr().String()
			q := u.Query()
			q.Set("encrypt", tc.encrypt)
			q.Set("TrustServerCertificate", "true")
			u.RawQuery = q.Encode()
			db := openDB(t, u.String())
			var got string
			if err := db.QueryRow(query).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != query {
				t.Errorf("read %q, want %q", got, query)
			}
			db.Close()
			mu.Lock()
			l := logins[len(logins)-1]
			mu.Unlock()
			if l.Encryption != tc.want || l.User != testUser {
				t.Errorf("login %+v, want encryption %s", l, tc.want)
			}
			sent := p.clientSent()
			if c := bytes.Contains(sent, utf16le(testUser)); c != tc.loginClear {
				t.Errorf("user name in the clear on the wire: %v, want %v", c, tc.loginClear)
			}
			if c := bytes.Contains(sent, utf16le(query)); c != tc.sqlClear {
				t.Errorf("query text in the clear on the wire: %v, want %v", c, tc.sqlClear)
			}
		})
	}
}

// TestEncryptionRefused: a certificate the client cannot verify stops a
// client that verifies it, as SQL Server's self-signed certificate does.
func TestEncryptionRefused(t *testing.T) {
	s := startServer(t, HandlerFunc(func(ctx context.Context, req *Request, w *ResponseWriter) error { return nil }))
	dsn := strings.Replace(s.DSN("shop"), "encrypt=disable", "encrypt=true", 1)
	err := openDB(t, dsn).Ping()
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("ping with an unverifiable certificate: %v, want a certificate error", err)
	}
}

func TestNegotiateEncryption(t *testing.T) {
	for _, tc := range []struct {
		opt     []byte
		present bool
		answer  byte
		enc     Encryption
		err     bool
	}{
		{nil, false, encryptNotSup, EncryptNone, false},
		{[]byte{encryptNotSup}, true, encryptNotSup, EncryptNone, false},
		{[]byte{encryptOff}, true, encryptOff, EncryptLogin, false},
		{[]byte{encryptOn}, true, encryptOn, EncryptFull, false},
		{[]byte{encryptReq}, true, encryptOn, EncryptFull, false},
		{[]byte{0x80}, true, 0, 0, true},
		{[]byte{}, true, 0, 0, true},
	} {
		a, e, err := negotiateEncryption(tc.opt, tc.present)
		if (err != nil) != tc.err || a != tc.answer || e != tc.enc {
			t.Errorf("negotiateEncryption(%v, %v) = %d, %s, %v", tc.opt, tc.present, a, e, err)
		}
	}
}
