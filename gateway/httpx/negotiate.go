package httpx

import (
	"net/http"
	"strconv"
	"strings"
)

// WantsHTML reports whether r is a person's browser navigating (SPEC §3):
// Sec-Fetch-Dest: document, or an Accept header that names text/html
// (or XHTML) with a higher or equal weight than any JSON type it names.
// Wildcards count for neither side: curl, wget and aria2c send */* and
// keep getting problem+json.
func WantsHTML(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Dest") == "document" {
		return true
	}
	html, json := -1.0, -1.0
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			typ, q := mediaRange(part)
			switch typ {
			case "text/html", "application/xhtml+xml":
				html = max(html, q)
			case "application/json", "application/problem+json":
				json = max(json, q)
			}
		}
	}
	return html > 0 && html >= json
}

// mediaRange splits one Accept element into its lower-cased type and its
// weight (RFC 9110 §12.5.1); a malformed weight counts as 0.
func mediaRange(s string) (string, float64) {
	typ, params, _ := strings.Cut(s, ";")
	q := 1.0
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		if strings.EqualFold(strings.TrimSpace(k), "q") {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || f < 0 || f > 1 {
				f = 0
			}
			q = f
		}
	}
	return strings.ToLower(strings.TrimSpace(typ)), q
}
