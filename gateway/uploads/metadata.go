package uploads

import (
	"encoding/base64"
	"fmt"
	"mime"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlgate/dlgate/storage"
)

// Metadata keys of Upload-Metadata the gateway reads (SPEC §11). Others
// are ignored, except filetype, which tus clients such as Uppy send for
// the content type.
const (
	metaKey         = "key"
	metaFilename    = "filename"
	metaContentType = "content_type"
	metaFiletype    = "filetype"
)

// DefaultContentType is an upload's content type when its metadata names
// none, as PUT /v1/objects has it.
const DefaultContentType = "application/octet-stream"

// metadata is an upload's Upload-Metadata as the gateway takes it.
type metadata struct {
	key, filename, contentType string
}

// parseMetadata reads header, an Upload-Metadata value (tus 1.0
// "Upload-Metadata": comma-separated pairs of a key and a base64 value,
// the value optional, keys unique). tusd's own parser skips what it cannot
// read; here anything malformed is refused, so that a client never
// uploads gigabytes under metadata the gateway silently dropped.
func parseMetadata(header string) (metadata, error) {
	pairs := map[string]string{}
	for element := range strings.SplitSeq(header, ",") {
		element = strings.TrimSpace(element)
		if element == "" {
			if strings.TrimSpace(header) == "" {
				break
			}
			return metadata{}, invalidMetadata("Upload-Metadata has an empty pair.")
		}
		k, v, hasValue := strings.Cut(element, " ")
		if k == "" || strings.ContainsAny(v, " ") || !isToken(k) {
			return metadata{}, invalidMetadata(fmt.Sprintf("Upload-Metadata pair %q is not a key and a base64 value.", clip(element)))
		}
		if _, dup := pairs[k]; dup {
			return metadata{}, invalidMetadata(fmt.Sprintf("Upload-Metadata names %q twice.", k))
		}
		value := ""
		if hasValue {
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				return metadata{}, invalidMetadata(fmt.Sprintf("Upload-Metadata value of %q is not base64.", k))
			}
			value = string(b)
		}
		pairs[k] = value
	}
	m := metadata{key: pairs[metaKey], filename: pairs[metaFilename], contentType: pairs[metaContentType]}
	if m.contentType == "" {
		m.contentType = pairs[metaFiletype]
	}
	return m, m.validate()
}

// keyRules is the detail of a refused key, the rules of PUT
// /v1/objects's keys.
const keyRules = `The metadata "key" must be at most 1024 bytes of UTF-8 without control characters, ` +
	`backslashes or empty segments ("//", a trailing "/"), must not start with "/", and must have no "." or ".." segment.`

func (m metadata) validate() error {
	switch {
	case m.key == "":
		return invalidMetadata(`Upload-Metadata must name the object's "key".`)
	case !validKey(m.key):
		return invalidKey(keyRules)
	case utf8.RuneCountInString(m.filename) > 1024 || !utf8.ValidString(m.filename) || strings.ContainsFunc(m.filename, unicode.IsControl):
		return invalidMetadata(`The metadata "filename" must be at most 1024 characters of UTF-8 without control characters.`)
	}
	if m.contentType != "" {
		if _, _, err := mime.ParseMediaType(m.contentType); err != nil || len(m.contentType) > 255 || strings.ContainsAny(m.contentType, "\r\n") {
			return invalidMetadata(`The metadata "content_type" must be a media type (RFC 9110 §8.3.1) of at most 255 bytes.`)
		}
	}
	return nil
}

// validKey applies the rules of PUT /v1/objects's keys (gateway pathKey):
// storage's, and no empty segment, which a URL path would not carry
// unchanged.
func validKey(key string) bool {
	return storage.ValidateKey(key) == nil && !strings.Contains(key, "//") && !strings.HasSuffix(key, "/")
}

// isToken reports whether k may be a metadata key: tus asks for ASCII
// without spaces and commas; control characters have no place either.
func isToken(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || c == ',' {
			return false
		}
	}
	return true
}

// clip shortens s for a message, between two characters.
func clip(s string) string {
	if len(s) <= 40 {
		return s
	}
	n := 40
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// tusMetadata is m as tusd keeps it (and HEAD answers it).
func (m metadata) tusMetadata() map[string]string {
	out := map[string]string{metaKey: m.key, metaContentType: m.contentType}
	if m.filename != "" {
		out[metaFilename] = m.filename
	}
	return out
}
