package mssqlconn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/microsoft/go-mssqldb/azuread"
	"github.com/microsoft/go-mssqldb/msdsn"

	"github.com/cdcsnap/cdcsnap/internal/testenv"
)

// readmeDSNs returns the DSN lines of README.md's "Against your SQL
// Server" block (between the dsncheck markers; # lines are comments).
func readmeDSNs(t *testing.T) []string {
	t.Helper()
	block := testenv.READMEBlock(t, "dsncheck")
	var dsns []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "```") {
			dsns = append(dsns, l)
		}
	}
	return dsns
}

// caFile writes a self-signed CA certificate as PEM, standing in for the
// README's /etc/cdcsnap/sql-ca.pem.
func caFile(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cdcsnap test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "sql-ca.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestREADMEDSNs parses every DSN README.md shows with go-mssqldb v1.11.2
// itself: msdsn.Parse for each, and azuread.NewConnector (which validates
// the Entra ID workflow's parameters without a network) for those with
// fedauth; each means what README says it means.
func TestREADMEDSNs(t *testing.T) {
	dsns := readmeDSNs(t)
	if len(dsns) != 8 {
		t.Fatalf("README shows %d DSNs, this test knows 8: %q", len(dsns), dsns)
	}
	ca := caFile(t)
	for _, dsn := range dsns {
		dsn = strings.ReplaceAll(dsn, "/etc/cdcsnap/sql-ca.pem", ca)
		cfg, err := msdsn.Parse(dsn)
		if err != nil {
			t.Errorf("%s: %v", dsn, err)
			continue
		}
		p := cfg.Parameters
		if cfg.Database != "Sales" || cfg.Encryption == msdsn.EncryptionOff || cfg.TLSConfig == nil || cfg.TLSConfig.InsecureSkipVerify {
			t.Errorf("%s: database %q, encryption %v, TLS config %v: want Sales, encrypted, the server's certificate verified", dsn, cfg.Database, cfg.Encryption, cfg.TLSConfig)
		}
		switch {
		case p["encrypt"] == "strict" && cfg.Encryption != msdsn.EncryptionStrict:
			t.Errorf("%s: encryption %v, want strict", dsn, cfg.Encryption)
		case p["certificate"] != "" && (cfg.TLSConfig.RootCAs == nil || cfg.TLSConfig.ServerName != "sql.example.com"):
			t.Errorf("%s: the CA file is not the trusted root, or the name checked is %q", dsn, cfg.TLSConfig.ServerName)
		case strings.Contains(dsn, "ApplicationIntent") && !cfg.ReadOnlyIntent:
			t.Errorf("%s: no read-only intent", dsn)
		case p["fedauth"] != "":
			if _, err := azuread.NewConnector(dsn); err != nil {
				t.Errorf("%s: the azuread driver refuses it: %v", dsn, err)
			}
		case p["authenticator"] == "krb5":
			// The keys integratedauth/krb5/krb5.go reads (keytabConfigFile,
			// realm, keytabFile) for a keytab login with a user name.
			for _, k := range []string{"krb5-configfile", "krb5-realm", "krb5-keytabfile", "user id"} {
				if p[k] == "" {
					t.Errorf("%s: no %s", dsn, k)
				}
			}
		}
	}
	// The README's warning: without encrypt the driver trusts any
	// certificate.
	if cfg, err := msdsn.Parse("sqlserver://u:p@sql.example.com?database=Sales"); err != nil || !cfg.TLSConfig.InsecureSkipVerify {
		t.Errorf("without encrypt: %v, skip verify %v; README says the driver trusts any certificate", err, cfg.TLSConfig != nil && cfg.TLSConfig.InsecureSkipVerify)
	}
}
