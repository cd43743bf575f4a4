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
}

// Error returns one line, even when the server's text has several: CLI
// errors are printed as one line.
func (e *Error) Error() string {
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
	return e
}
