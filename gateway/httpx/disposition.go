package httpx

import (
	"net/url"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ContentDisposition builds `attachment` with a safe filename (RFC 6266
// §4.3): an ASCII fallback in filename="…" and, when the name is not plain
// ASCII, the exact name in filename* as a UTF-8 ext-value (RFC 8187). Control
// characters, quotes, backslashes and path separators never reach the
// header, so a stored filename cannot inject headers or directories.
func ContentDisposition(name string) string {
	name = CleanFilename(name)
	var ascii strings.Builder
	plain := true
	for _, r := range name {
		switch {
		case r >= 0x20 && r < 0x7f && r != '"' && r != '\\' && r != '%':
			ascii.WriteRune(r)
		default:
			plain = false
			ascii.WriteByte('_')
		}
	}
	v := `attachment; filename="` + ascii.String() + `"`
	if !plain {
		// Not mime.FormatMediaType: given "filename*" it writes
		// "filename**=" for non-ASCII and a quoted string for ASCII names
		// with quotes or percent signs, neither of them an RFC 8187
		// ext-value, so clients fell back to the lossy ASCII name.
		v += "; filename*=UTF-8''" + pctEncode(name)
	}
	return v
}

// CleanFilename keeps the last path element, drops control and format
// characters, and never returns an empty or dot-only name.
func CleanFilename(name string) string {
	if !utf8.ValidString(name) {
		name = strings.ToValidUTF8(name, "_")
	}
	name = strings.ReplaceAll(name, "\\", "/")
	name = path.Base(name)
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '/' {
			return -1
		}
		return r
	}, name)
	name = strings.TrimSpace(name)
	if strings.Trim(name, ".") == "" {
		return "download"
	}
	if len(name) > 255 {
		// Cut at a rune boundary.
		cut := 255
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = name[:cut]
	}
	return name
}

// FileName is the name an object version is sent and shown as: the
// link's file name, or its key's when it has none, cleaned.
func FileName(filename, key string) string {
	if filename == "" {
		filename = key
	}
	return CleanFilename(filename)
}

// URLName is the last segment of a named URL (SPEC §3): FileName escaped
// as one path segment. The gateway ignores it when serving.
func URLName(filename, key string) string { return url.PathEscape(FileName(filename, key)) }

func pctEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
