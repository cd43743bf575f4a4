package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/ledger"
)

// The pages: templates/layout.html around one page template each, parsed
// once, rendered by render, the one function that writes HTML. Handlers
// pass data; html/template escapes every value by its context.

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// pages are the parsed templates by name (the file name without .html).
var pages = mustParse()

func mustParse() map[string]*template.Template {
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/parts.html"))
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		base := path.Base(n)
		if base == "layout.html" || base == "parts.html" {
			continue
		}
		t := template.Must(template.Must(layout.Clone()).ParseFS(templateFiles, n))
		out[strings.TrimSuffix(base, ".html")] = t
	}
	return out
}

// view is what the layout reads of every page.
type view struct {
	Title string
	// Nav names the navigation entry of the page ("links", "objects", …).
	Nav string
	// Session is the signed-in session, nil on the sign-in page.
	Session *ledger.ConsoleSession
	// Page is the page's own data.
	Page any
}

// Can reports whether the signed-in key holds the scope named sc: the
// templates show a control only when it does.
func (v view) Can(sc string) bool {
	if v.Session == nil {
		return false
	}
	s, err := apikey.ParseScope(sc)
	return err == nil && v.Session.Key.Scopes.Has(s)
}

// titled is a page's data that names its title.
type titled interface{ title() string }

// render writes the page name with data, status and the page headers.
// It renders into a buffer first, so that a template failure is a 500,
// not half a page.
func (h *site) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	t, ok := pages[name]
	if !ok {
		panic("console: no page " + name)
	}
	v := view{Session: sessionOf(r), Page: data, Nav: name}
	if td, ok := data.(titled); ok {
		v.Title = td.title()
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", v); err != nil {
		h.Log.ErrorContext(r.Context(), "console page failed", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	// A page shows what the key may see now (and a new key's text once):
	// no cache keeps it.
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(buf.Bytes()) //nolint:errcheck // the client is gone
	}
}

// staticVersion is a short hash of each static file, by its name under
// static/: its URL carries it (?v=), so a browser may keep the file for
// good and still gets the new one after an upgrade.
var staticVersion = func() map[string]string {
	out := map[string]string{}
	err := fs.WalkDir(staticFiles, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFiles.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[strings.TrimPrefix(p, "static/")] = hex.EncodeToString(sum[:6])
		return nil
	})
	if err != nil {
		panic(err)
	}
	return out
}()

var funcs = template.FuncMap{
	// static is the versioned URL of a static file.
	"static": func(name string) (string, error) {
		v, ok := staticVersion[name]
		if !ok {
			return "", fmt.Errorf("console: no static file %q", name)
		}
		return Base + "static/" + name + "?v=" + v, nil
	},
	"time":     formatTime,
	"timeptr":  func(t *time.Time) string { return formatTimePtr(t) },
	"rfc3339":  parseFormat,
	"bytes":    formatBytes,
	"percent":  func(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + " %" },
	"deref":    func(s *string) string { return derefStr(s) },
	"join":     strings.Join,
	"contains": func(list []string, s string) bool { return contains(list, s) },
	"scopes":   func() []string { return apikey.All().Strings() },
	"actions":  ledger.Actions,
	"add":      func(a, b int) int { return a + b },
	"list":     func(xs ...string) []string { return xs },
	// dcount is a link's count of grants of one delivery status.
	"dcount": func(m map[ledger.DeliveryStatus]int, s string) int { return m[ledger.DeliveryStatus(s)] },
	// query writes name, value pairs as a URL's query.
	"query": func(kv ...string) template.URL {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				v.Set(kv[i], kv[i+1])
			}
		}
		// Encode escapes every name and value: the result is a query,
		// typed so that html/template does not escape it as one value.
		return template.URL(v.Encode())
	},
	// fe is the error of one field, for the fielderror template.
	"fe": func(errs map[string]string, field string) fieldError {
		return fieldError{ID: fieldID(field), Message: errs[field]}
	},
	// invalid are the attributes of an input whose field has an error in
	// errs: aria-invalid, and aria-describedby naming the error's
	// paragraph (the fielderror template), so that a screen reader says
	// the error with the field; nothing when the field has none.
	"invalid": func(errs map[string]string, field string) template.HTMLAttr {
		if errs[field] == "" {
			return ""
		}
		return template.HTMLAttr(` aria-invalid="true" aria-describedby="` + template.HTMLEscapeString(fieldID(field)) + `-error"`)
	},
	// describedby is invalid without aria-invalid, for what the ARIA
	// roles do not let carry it (a group of checkboxes, a radio).
	"describedby": func(errs map[string]string, field string) template.HTMLAttr {
		if errs[field] == "" {
			return ""
		}
		return template.HTMLAttr(` aria-describedby="` + template.HTMLEscapeString(fieldID(field)) + `-error"`)
	},
}

// fieldError is a refusal shown beside the field it is about.
type fieldError struct {
	ID      string
	Message string
}

// fieldID is the id of a field's error paragraph, less "-error": the
// admin API's name of the field with "_" for ".".
func fieldID(field string) string { return strings.ReplaceAll(field, ".", "_") }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func derefStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// formatTime writes t as people read it, in UTC to the second.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return formatTime(*t)
}

// parseFormat writes an RFC 3339 time of the admin API's JSON as
// formatTime does; "" (null) is a dash.
func parseFormat(s string) string {
	if s == "" {
		return "—"
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return formatTime(t)
}

// formatBytes writes n bytes in binary units: 64.0 MiB.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + string("KMGTPE"[exp]) + "iB"
}

// parseTime reads an RFC 3339 time of the admin API's JSON; the zero time
// when it is not one.
func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}
