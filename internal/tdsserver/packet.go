package tdsserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Packet types (MS-TDS 2.2.3.1.1, Type).
const (
	pktSQLBatch  = 1
	pktRPC       = 3
	pktReply     = 4
	pktAttention = 6
	pktTransMgr  = 14
	pktLogin7    = 16
	pktPrelogin  = 18
)

// Packet status bits (MS-TDS 2.2.3.1.2, Status).
const (
	statusEOM        = 0x01
	statusIgnore     = 0x02
	statusReset      = 0x08 // RESETCONNECTION
	statusResetSkipT = 0x10 // RESETCONNECTIONSKIPTRAN
)

const (
	headerLen = 8
	// LOGIN7 PacketSize is 512..32767 (MS-TDS 2.2.6.4); go-mssqldb clamps
	// its request to the same range (tds.go, connect).
	minPacketSize = 512
	maxPacketSize = 32767
	// maxMessageSize bounds one request message so a hostile or broken
	// client cannot make the server buffer without limit.
	maxMessageSize = 256 << 20
)

// message is one whole TDS message: the payloads of its packets joined.
type message struct {
	typ    byte
	status byte // the first packet's status (the reset bits live there)
	data   []byte
}

// errPacket marks framing errors: after one the stream cannot be resynced
// and the connection is closed.
var errPacket = errors.New("tdsserver: bad packet")

// readMessage reads packets up to and including the one with EOM set
// (MS-TDS 2.2.3.1.2) and returns their joined payload. A packet whose Length
// is below the header size or above maxPacket, a type change inside a
// message, or a message over maxMessageSize is an error wrapping errPacket.
// hdr is scratch space of headerLen bytes.
func readMessage(r io.Reader, maxPacket int, hdr []byte) (message, error) {
	var m message
	for first := true; ; first = false {
		if _, err := io.ReadFull(r, hdr[:headerLen]); err != nil {
			if !first && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return m, err
		}
		typ, status := hdr[0], hdr[1]
		size := int(binary.BigEndian.Uint16(hdr[2:4]))
		if size < headerLen || size > maxPacket {
			return m, fmt.Errorf("%w: packet length %d outside %d..%d", errPacket, size, headerLen, maxPacket)
		}
		if first {
			m.typ, m.status = typ, status
		} else if typ != m.typ {
			return m, fmt.Errorf("%w: packet type %d inside a message of type %d", errPacket, typ, m.typ)
		}
		n := size - headerLen
		if len(m.data)+n > maxMessageSize {
			return m, fmt.Errorf("%w: message longer than %d bytes", errPacket, maxMessageSize)
		}
		start := len(m.data)
		m.data = slices.Grow(m.data, n)[:start+n]
		if _, err := io.ReadFull(r, m.data[start:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return m, err
		}
		if status&statusEOM != 0 {
			return m, nil
		}
	}
}

// packetWriter splits one outgoing message into packets of the negotiated
// size, every packet but the last one full (MS-TDS 2.2.3.1, Length). A packet is sent
// as soon as it is full and more data follows, so a long response streams
// with one packet of memory. Errors are sticky.
type packetWriter struct {
	w    io.Writer
	buf  []byte // header + payload; cap is the packet size
	size int
	typ  byte
	seq  byte
	spid uint16
	err  error
}

func newPacketWriter(w io.Writer, size int, spid uint16) *packetWriter {
	return &packetWriter{w: w, buf: make([]byte, headerLen, size), size: size, spid: spid}
}

// resize changes the packet size between messages (after the login's
// ENVCHANGE packet size, MS-TDS 2.2.7.9).
func (p *packetWriter) resize(size int) {
	p.size = size
	if cap(p.buf) < size {
		p.buf = make([]byte, headerLen, size)
	}
}

// begin starts a message of type typ.
func (p *packetWriter) begin(typ byte) {
	p.typ, p.seq, p.buf = typ, 1, p.buf[:headerLen]
}

// Write appends b to the message, sending each packet that fills up.
func (p *packetWriter) Write(b []byte) (int, error) {
	total := len(b)
	for len(b) > 0 {
		if p.err != nil {
			return total - len(b), p.err
		}
		if len(p.buf) == p.size {
			p.send(0)
			continue
		}
		n := copy(p.buf[len(p.buf):p.size], b)
		p.buf = p.buf[:len(p.buf)+n]
		b = b[n:]
	}
	return total, p.err
}

// end sends the last packet of the message, with EOM.
func (p *packetWriter) end() error {
	if p.err == nil {
		p.send(statusEOM)
	}
	return p.err
}

func (p *packetWriter) send(status byte) {
	h := p.buf[:headerLen]
	h[0], h[1] = p.typ, status
	binary.BigEndian.PutUint16(h[2:4], uint16(len(p.buf)))
	binary.BigEndian.PutUint16(h[4:6], p.spid)
	h[6], h[7] = p.seq, 0 // PacketID, modulo 256, and Window 0 (MS-TDS 2.2.3.1)
	if _, err := p.w.Write(p.buf); err != nil {
		p.err = fmt.Errorf("tdsserver: writing a packet: %w", err)
	}
	p.seq++
	p.buf = p.buf[:headerLen]
}
