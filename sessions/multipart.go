package sessions

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// Multipart plans a multipart/byteranges response body (RFC 9110 §14.6)
// without doing any I/O, so that the exact Content-Length is known before
// the first byte is sent. The body is, for each range i:
//
//	PartHeader(i), then the range's Length bytes of the representation,
//
// followed by Closing(). A Multipart is immutable and safe for concurrent
// use.
type Multipart struct {
	boundary string
	headers  []string
	closing  string
	length   int64
}

// NewMultipart plans the body for ranges (as returned by ParseRange, so
// disjoint and within size), one part each in the order given, of a
// representation of size bytes whose own Content-Type is contentType (""
// when it has none; §14.6 then omits it from the parts).
//
// boundary must be 1 to 70 characters from the RFC 2046 §5.1.1 bchars set,
// not ending in a space; RandomBoundary returns one. NewMultipart panics
// otherwise, since the boundary is chosen by the caller, never by a client.
//
// A contentType containing control characters (which would let it end its
// header line early and inject others) is replaced by
// application/octet-stream.
func NewMultipart(ranges []Range, size int64, contentType string, boundary string) *Multipart {
	if !validBoundary(boundary) {
		panic(fmt.Sprintf("sessions: invalid multipart boundary %q", boundary))
	}
	if !validFieldValue(contentType) {
		contentType = "application/octet-stream"
	}
	m := &Multipart{
		boundary: boundary,
		headers:  make([]string, len(ranges)),
		// RFC 2046 §5.1.1: the CRLF before "--boundary" belongs to the
		// delimiter, not to the preceding part's bytes.
		closing: "\r\n--" + boundary + "--\r\n",
	}
	for i, r := range ranges {
		h := "--" + boundary + "\r\n"
		if i > 0 {
			h = "\r\n" + h
		}
		if contentType != "" {
			h += "Content-Type: " + contentType + "\r\n"
		}
		h += "Content-Range: " + r.ContentRange(size) + "\r\n\r\n"
		m.headers[i] = h
		m.length += int64(len(h)) + r.Length
	}
	m.length += int64(len(m.closing))
	return m
}

// ContentType returns the response's Content-Type field value,
// "multipart/byteranges; boundary=...".
func (m *Multipart) ContentType() string {
	// bchars include characters that are not token characters (e.g. ':'),
	// so quote those, as RFC 2046 §5.1.1 advises.
	if isToken(m.boundary) {
		return "multipart/byteranges; boundary=" + m.boundary
	}
	return `multipart/byteranges; boundary="` + m.boundary + `"`
}

// ContentLength returns the exact number of bytes of the whole body: every
// part header, every range's bytes and the closing delimiter.
func (m *Multipart) ContentLength() int64 {
	return m.length
}

// PartHeader returns the bytes to send before the bytes of range i: the
// delimiter (preceded by CRLF for every part but the first), the part's
// Content-Type and Content-Range lines and the empty line ending them. It
// panics if i is out of range. The caller owns the returned slice.
func (m *Multipart) PartHeader(i int) []byte {
	return []byte(m.headers[i])
}

// Closing returns the bytes that end the body after the last range: CRLF,
// the close delimiter and a final CRLF. The caller owns the returned slice.
func (m *Multipart) Closing() []byte {
	return []byte(m.closing)
}

// RandomBoundary returns a fresh multipart boundary of 60 hexadecimal
// characters read from crypto/rand, so that no representation can contain
// it by chance or by a client's design.
func RandomBoundary() string {
	var b [30]byte
	// crypto/rand.Read never returns an error; it crashes the program if
	// the system's randomness is unavailable.
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// validBoundary implements RFC 2046 §5.1.1:
// boundary := 0*69<bchars> bcharsnospace, 1 to 70 characters.
func validBoundary(s string) bool {
	if len(s) < 1 || len(s) > 70 || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '\'', c == '(', c == ')', c == '+', c == '_', c == ',',
			c == '-', c == '.', c == '/', c == ':', c == '=', c == '?', c == ' ':
		default:
			return false
		}
	}
	return true
}

// isToken reports whether s is an RFC 9110 §5.6.2 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '!', c == '#', c == '$', c == '%', c == '&', c == '\'', c == '*',
			c == '+', c == '-', c == '.', c == '^', c == '_', c == '`', c == '|', c == '~':
		default:
			return false
		}
	}
	return true
}

// validFieldValue reports whether s can be written as a header field value
// without breaking the header block: no CTLs other than HTAB (RFC 9110
// §5.5).
func validFieldValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
