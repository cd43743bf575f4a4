package client

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// Error is a non-2xx answer from the admin API, read from its
// problem+json body (RFC 9457) when it has one.
type Error struct {
	Status int
	Type   string
	Title  string
	Detail string
	// Scope is the scope a 403 insufficient-scope names, from its
	// WWW-Authenticate challenge (RFC 6750 §3): the one the key lacks.
	Scope string
}

// Error returns one line, even when the server's text has several: CLI
// errors are printed as one line. A 403 for a missing scope says just
// which.
func (e *Error) Error() string {
	if e.Scope != "" {
		return fmt.Sprintf("admin API: %d: the key does not hold the scope %s", e.Status, e.Scope)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "admin API: %d", e.Status)
	title := e.Title
	if title == "" {
		title = http.StatusText(e.Status)
	}
	if title != "" {
		b.WriteString(" " + title)
	}
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// maxErrorBody bounds what is read of an error answer: a proxy's HTML error
// page is of no use beyond its status.
const maxErrorBody = 64 << 10

// readError builds the *Error for a non-2xx response.
func readError(resp *http.Response) *Error {
	e := &Error{Status: resp.StatusCode}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/problem+json" || mt == "application/json" {
		var p struct {
			Type   string `json:"type"`
			Title  string `json:"title"`
			Detail string `json:"detail"`
		}
		if json.Unmarshal(body, &p) == nil {
			e.Type, e.Title, e.Detail = p.Type, p.Title, p.Detail
		}
	}
	if e.Title == "" {
		e.Title = http.StatusText(resp.StatusCode)
	}
	if resp.StatusCode == http.StatusForbidden {
		e.Scope = challengeScope(resp.Header.Get("WWW-Authenticate"))
	}
	return e
}

// challengeScope returns the scope parameter of a Bearer challenge
// (RFC 6750 §3: scope="links:write"), "" when it has none. Scope names
// are tokens of [a-z:], so no quoted-pair needs undoing; anything else
// is not taken.
func challengeScope(challenge string) string {
	scheme, params, ok := strings.Cut(challenge, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	for _, p := range strings.Split(params, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(name, "scope") || len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
			continue
		}
		val = val[1 : len(val)-1]
		if val == "" || strings.ContainsFunc(val, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r == ':' || r == ' ') }) {
			return ""
		}
		return val
	}
	return ""
}
