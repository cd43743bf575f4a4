package httpx

import (
	"strings"

	"github.com/dlgate/dlgate/token"
)

// ValidIdempotencyKey: 1–255 visible ASCII characters (SPEC §3).
func ValidIdempotencyKey(k string) bool {
	if len(k) < 1 || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// TokenPath splits the path of a link or session URL, /d/{token} or
// /s/{token} with or without more after it, into the token's kind, the
// token and what follows it. ok is false for any other path: a token of
// the wrong length, an empty name after it ("/d/{token}/"), or one with a
// newline (which no route matches).
func TokenPath(p string) (kind token.Kind, tok, rest string, ok bool) {
	if len(p) < 3+token.Len || p[0] != '/' || p[2] != '/' {
		return "", "", "", false
	}
	switch p[1] {
	case 'd':
		kind = token.Link
	case 's':
		kind = token.Session
	default:
		return "", "", "", false
	}
	tok, rest = p[3:], ""
	if i := strings.IndexByte(tok, '/'); i >= 0 {
		tok, rest = tok[:i], tok[i:]
	}
	if len(tok) != token.Len || rest == "/" || strings.IndexByte(rest, '\n') >= 0 {
		return "", "", "", false
	}
	return kind, tok, rest, true
}
