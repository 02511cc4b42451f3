package tdsserver

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"fmt"
	"io"
	"math/big"
	"net"
	"time"
)

// Encryption at login, as SQL Server does it for TDS 7.x (MS-TDS 2.2.6.5
// PRELOGIN, 3.3.5.2 TLS/SSL Negotiation State): SQL Server always has a
// certificate (a self-signed one it generates at start when none is
// configured), so a client that says ENCRYPT_OFF still gets its LOGIN7
// encrypted, and one that says ENCRYPT_ON (or ENCRYPT_REQ) gets the whole
// connection encrypted. Only a client that says ENCRYPT_NOT_SUP (go-mssqldb's
// encrypt=disable) logs in in the clear. The TLS handshake's records travel
// as the payload of PRELOGIN (0x12) packets; after it, TDS packets travel
// inside TLS records (3.2.5.2: with login-only encryption, the first packet
// of LOGIN7 only, and everything after it in plaintext).

// PRELOGIN ENCRYPTION values (MS-TDS 2.2.6.5, B_FENCRYPTION).
const (
	encryptOff    = 0x00
	encryptOn     = 0x01
	encryptNotSup = 0x02
	encryptReq    = 0x03
)

// Encryption is what a connection encrypts, negotiated in PRELOGIN.
type Encryption uint8

const (
	// EncryptNone: the client said ENCRYPT_NOT_SUP; nothing is encrypted.
	EncryptNone Encryption = iota
	// EncryptLogin: the client said ENCRYPT_OFF; the first packet of LOGIN7
	// is encrypted, everything else is plaintext.
	EncryptLogin
	// EncryptFull: the client said ENCRYPT_ON or ENCRYPT_REQ; every packet
	// after the TLS handshake is encrypted.
	EncryptFull
)

func (e Encryption) String() string {
	switch e {
	case EncryptNone:
		return "none"
	case EncryptLogin:
		return "login"
	case EncryptFull:
		return "full"
	}
	return fmt.Sprintf("Encryption(%d)", uint8(e))
}

// negotiateEncryption answers the client's PRELOGIN ENCRYPTION value as a
// server with a certificate and "force encryption" off answers it: the
// value it sends back and what the connection then encrypts. A client
// that sends no ENCRYPTION option is taken as ENCRYPT_NOT_SUP. The high
// bit (ENCRYPT_CLIENT_CERT, client certificate authentication) is not
// supported.
func negotiateEncryption(opt []byte, present bool) (byte, Encryption, error) {
	if !present {
		return encryptNotSup, EncryptNone, nil
	}
	if len(opt) != 1 {
		return 0, 0, fmt.Errorf("tdsserver: PRELOGIN ENCRYPTION of %d bytes, want 1", len(opt))
	}
	switch opt[0] {
	case encryptOff:
		return encryptOff, EncryptLogin, nil
	case encryptOn, encryptReq:
		return encryptOn, EncryptFull, nil
	case encryptNotSup:
		return encryptNotSup, EncryptNone, nil
	}
	return 0, 0, fmt.Errorf("tdsserver: PRELOGIN ENCRYPTION 0x%02X is not supported (client certificates are not)", opt[0])
}

// newCertificate makes the self-signed certificate a server presents, as
// SQL Server makes one at start when none is configured: ECDSA P-256, for
// 127.0.0.1 and localhost, valid for a year.
func newCertificate() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tdsserver: certificate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tdsserver: certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "tdsserver self-signed certificate"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tdsserver: certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tdsserver: certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// tlsConfig is the server side of the login handshake. TLS 1.2 at most:
// SQL Server runs TLS 1.3 only for TDS 8.0 (strict), where TLS comes before
// PRELOGIN, which this server does not speak. No session tickets: a ticket
// sent after the handshake would land in the client's TLS stream after it
// stopped reading PRELOGIN packets.
func tlsConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates:           []tls.Certificate{cert},
		MinVersion:             tls.VersionTLS12,
		MaxVersion:             tls.VersionTLS12,
		SessionTicketsDisabled: true,
	}
}

// preloginFraming carries TLS handshake records as PRELOGIN messages: a
// Read takes the payload of the client's next PRELOGIN message (after
// sending what was written since the last one, as one message), a Write
// holds its bytes until then.
type preloginFraming struct {
	nc  net.Conn
	hdr []byte
	in  []byte
	out []byte
}

// preloginPacketSize is the size of the handshake's packets: the packet
// size before LOGIN7 negotiates one (MS-TDS 2.2.6.4, PacketSize; go-mssqldb
// and ODBC start at 4096).
const preloginPacketSize = 4096

func (f *preloginFraming) Read(b []byte) (int, error) {
	if len(f.in) == 0 {
		if err := f.flush(); err != nil {
			return 0, err
		}
		m, err := readMessage(f.nc, maxPacketSize, f.hdr)
		if err != nil {
			return 0, err
		}
		if m.typ != pktPrelogin {
			return 0, fmt.Errorf("%w: packet type %d during the TLS handshake, not PRELOGIN", errPacket, m.typ)
		}
		f.in = m.data
	}
	n := copy(b, f.in)
	f.in = f.in[n:]
	return n, nil
}

func (f *preloginFraming) Write(b []byte) (int, error) {
	f.out = append(f.out, b...)
	return len(b), nil
}

// flush sends the bytes written since the last flush as one PRELOGIN
// message.
func (f *preloginFraming) flush() error {
	if len(f.out) == 0 {
		return nil
	}
	pw := newPacketWriter(f.nc, preloginPacketSize, 0)
	pw.begin(pktPrelogin)
	_, _ = pw.Write(f.out)
	f.out = f.out[:0]
	return pw.end()
}

// switchConn is the connection under tls.Conn: PRELOGIN framing during the
// handshake, the socket itself afterwards (tls.Conn cannot change its
// connection).
type switchConn struct {
	net.Conn
	framing *preloginFraming
}

func (s *switchConn) Read(b []byte) (int, error) {
	if s.framing != nil {
		return s.framing.Read(b)
	}
	return s.Conn.Read(b)
}

func (s *switchConn) Write(b []byte) (int, error) {
	if s.framing != nil {
		return s.framing.Write(b)
	}
	return s.Conn.Write(b)
}

// startTLS runs the server side of the TLS handshake inside PRELOGIN
// packets on nc and returns the TLS connection, which from then on reads
// and writes TLS records on nc directly.
func startTLS(nc net.Conn, cfg *tls.Config) (*tls.Conn, error) {
	f := &preloginFraming{nc: nc, hdr: make([]byte, headerLen)}
	sc := &switchConn{Conn: nc, framing: f}
	tc := tls.Server(sc, cfg)
	if err := tc.Handshake(); err != nil {
		return nil, fmt.Errorf("tdsserver: TLS handshake: %w", err)
	}
	// The server's last flight (ChangeCipherSpec, Finished) is still held.
	if err := f.flush(); err != nil {
		return nil, err
	}
	if len(f.in) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the client's last handshake record", errPacket, len(f.in))
	}
	sc.framing = nil
	return tc, nil
}

// readLoginOnly reads LOGIN7 under login-only encryption: its first
// packet inside TLS, any further packets in plaintext (MS-TDS 3.2.5.2).
func readLoginOnly(tc *tls.Conn, nc net.Conn, hdr []byte) (message, error) {
	if _, err := io.ReadFull(tc, hdr[:headerLen]); err != nil {
		return message{}, err
	}
	size := int(binary.BigEndian.Uint16(hdr[2:4]))
	if size < headerLen || size > maxPacketSize {
		return message{}, fmt.Errorf("%w: packet length %d outside %d..%d", errPacket, size, headerLen, maxPacketSize)
	}
	first := make([]byte, size)
	copy(first, hdr[:headerLen])
	if _, err := io.ReadFull(tc, first[headerLen:]); err != nil {
		return message{}, err
	}
	return readMessage(io.MultiReader(bytes.NewReader(first), nc), maxPacketSize, hdr)
}
