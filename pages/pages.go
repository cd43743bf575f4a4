// Package pages renders the few HTML pages the gateway shows to people:
// error pages for browser navigations, the landing page of a confirm link
// and the preview that link checkers get (SPEC §3 "People in browsers",
// §8 "Preview safety"). Templates are embedded html/template files, so every
// value is escaped by context; handlers pass data and never build HTML.
package pages

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"
)

// CSP is the Content-Security-Policy of every page (SPEC §3): nothing may be
// loaded, only the inline stylesheet applies, forms post back to the
// gateway only, and no other site may frame the page (clickjacking of the
// download button).
const CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

//go:embed templates/*.html
var files embed.FS

var funcs = template.FuncMap{
	"humanSize": HumanSize,
	"relative":  Relative,
	"utc":       func(t time.Time) string { return t.UTC().Format("2 Jan 2006 15:04 UTC") },
}

func parse(name string) *template.Template {
	return template.Must(template.New(name).Funcs(funcs).ParseFS(files, "templates/base.html", "templates/"+name+".html"))
}

var (
	errorPage   = parse("error")
	landingPage = parse("landing")
	previewPage = parse("preview")
)

// Error is an error page: the problem of a refused request, in words.
type Error struct {
	Status    int
	Title     string // the problem's title
	Message   string // one sentence for a person
	Type      string // the problem type URI, as in the JSON answer
	RequestID string
}

// File describes the file a landing page or preview shows.
type File struct {
	Name      string // already cleaned of control and bidi characters
	Size      int64
	ExpiresAt time.Time
	Now       time.Time // reference for the relative expiry
}

// Landing is the page of a confirm link: the claim is its form's POST.
type Landing struct{ File }

// Preview is what link checkers and prefetches get. Without Details it
// names nothing (GATEWAY_PREVIEW_DETAILS=false, or an account-bound link).
// A browser may show a prefetched answer when its user then opens the
// link, so the preview carries a download button for that person: a form
// with FormMethod ("post" on a link, which claims; "get" on a session)
// to the page's own URL, which link checkers never submit.
type Preview struct {
	File
	Details    bool
	FormMethod string
}

// WriteError renders p with status p.Status.
func WriteError(w http.ResponseWriter, r *http.Request, p Error) {
	write(w, r, p.Status, errorPage, p)
}

// WriteLanding renders a confirm link's landing page with status 200.
func WriteLanding(w http.ResponseWriter, r *http.Request, p Landing) {
	write(w, r, http.StatusOK, landingPage, p)
}

// WritePreview renders a preview with status 200.
func WritePreview(w http.ResponseWriter, r *http.Request, p Preview) {
	write(w, r, http.StatusOK, previewPage, p)
}

// write renders into a buffer first, so that a template error can never
// leave a half-written page, and so HEAD gets the exact Content-Length.
func write(w http.ResponseWriter, r *http.Request, status int, t *template.Template, data any) {
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "base", data); err != nil {
		// The templates are fixed and tested; this is a programming error.
		panic(fmt.Sprintf("pages: rendering %s: %v", t.Name(), err))
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(buf.Bytes()) //nolint:errcheck // the client is gone
	}
}

// HumanSize writes n bytes the way a person reads it: "40.0 MiB" for
// large sizes, "512 bytes" for small ones.
func HumanSize(n int64) string {
	const unit = 1024
	if n < unit {
		if n == 1 {
			return "1 byte"
		}
		return strconv.FormatInt(n, 10) + " bytes"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Relative says how far t is from now in the largest unit that reads
// well, rounded: "in 3 hours", "in 1 minute", "now", "2 days ago". A link
// made to last 3 days reads "in 3 days", not "in 2 days", a moment later.
func Relative(now, t time.Time) string {
	d := t.Sub(now)
	past := d < 0
	if past {
		d = -d
	}
	round := func(unit time.Duration) int64 { return int64((d + unit/2) / unit) }
	var n int64
	var u string
	switch {
	case d < 30*time.Second:
		return "now"
	case round(time.Minute) < 60:
		n, u = round(time.Minute), "minute"
	case round(time.Hour) < 48:
		n, u = round(time.Hour), "hour"
	default:
		n, u = round(24*time.Hour), "day"
	}
	s := strconv.FormatInt(n, 10) + " " + u
	if n != 1 {
		s += "s"
	}
	if past {
		return s + " ago"
	}
	return "in " + s
}
