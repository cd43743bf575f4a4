package httpx

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"

	"github.com/dunglas/httpsfv"
)

// Digests of the representation (SPEC §3, §10): the SHA-256 of the whole
// pinned version, recorded when the gateway stored it or taken from the
// store's own full-object checksum, goes out in two fields, for two
// generations of clients:
//
//   - Repr-Digest: sha-256=:BASE64: (RFC 9530 §3), a Dictionary of Byte
//     Sequences; the digest of the whole representation, so the same on a
//     200, a 206 and a multipart/byteranges answer (§3: "the
//     representation data", not the content of this message).
//   - Digest: SHA-256=BASE64 (RFC 3230 §4.3.2, SHA-256 from RFC 5843),
//     obsoleted by RFC 9530 but what aria2c checks a finished file
//     against.
//
// Both are sent unless the request says SHA-256 is not acceptable
// (Want-Repr-Digest: sha-256=0, Want-Digest: SHA-256;q=0). A preference
// for an algorithm the gateway does not have changes nothing: RFC 9530 §4
// makes preferences hints, "it is not a protocol error if preferences
// are ignored", and nothing is ever refused because of them.

// SetDigests sets Repr-Digest and Digest on h for a representation whose
// hex SHA-256 is sum, as the request r accepts them; for an unknown
// digest ("", or anything but 64 hex digits) it sets neither.
func SetDigests(h http.Header, r *http.Request, sum string) {
	repr, legacy, ok := DigestFields(sum)
	if !ok {
		return
	}
	SetDigestFields(h, r, []string{repr}, []string{legacy})
}

// DigestFields returns the values of Repr-Digest and Digest for a
// representation whose hex SHA-256 is sum; ok is false for an unknown
// digest ("", or anything but 64 hex digits).
func DigestFields(sum string) (repr, legacy string, ok bool) {
	raw, err := hex.DecodeString(sum)
	if err != nil || len(raw) != sha256.Size {
		return "", "", false
	}
	b64 := base64.StdEncoding.EncodeToString(raw)
	return "sha-256=:" + b64 + ":", "SHA-256=" + b64, true
}

// SetDigestFields sets Repr-Digest to repr and Digest to legacy (values
// of DigestFields, as header values: they are shared, never written
// into) as the request r accepts them.
func SetDigestFields(h http.Header, r *http.Request, repr, legacy []string) {
	if acceptsReprDigest(r.Header.Values("Want-Repr-Digest")) {
		h["Repr-Digest"] = repr
	}
	if acceptsDigest(r.Header.Values("Want-Digest")) {
		h["Digest"] = legacy
	}
}

// acceptsReprDigest reports whether Want-Repr-Digest (RFC 9530 §4) lets
// sha-256 be sent: unless it is a valid Dictionary whose sha-256 member
// is the Integer 0, "not acceptable". A field that does not parse is a
// field not sent.
func acceptsReprDigest(values []string) bool {
	if len(values) == 0 {
		return true
	}
	d, err := httpsfv.UnmarshalDictionary(values)
	if err != nil {
		return true
	}
	m, ok := d.Get("sha-256")
	if !ok {
		return true
	}
	item, isItem := m.(httpsfv.Item)
	n, isInt := item.Value.(int64)
	return !isItem || !isInt || n != 0
}

// acceptsDigest reports whether Want-Digest (RFC 3230 §4.3.1:
// #(digest-algorithm [ ";q=" qvalue ]), algorithm names
// case-insensitive) lets SHA-256 be sent: unless SHA-256 is listed with
// qvalue 0. An element with a qvalue that does not parse says nothing.
func acceptsDigest(values []string) bool {
	for _, v := range values {
		for _, elem := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(elem, ";")
			if !strings.EqualFold(strings.TrimSpace(name), "SHA-256") {
				continue
			}
			k, q, _ := strings.Cut(strings.TrimSpace(params), "=")
			if !strings.EqualFold(strings.TrimSpace(k), "q") {
				continue
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(q), 64); err == nil && f == 0 {
				return false
			}
		}
	}
	return true
}
