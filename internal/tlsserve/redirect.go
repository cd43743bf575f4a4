package tlsserve

import (
	"log/slog"
	"net/http"
	"strings"
)

// Redirect is the handler of GATEWAY_REDIRECT_LISTEN: every request, of
// any method, is answered 308 (RFC 9110 §15.4.9: the method and body are
// kept on the way) to the same path and query under base, the https
// public URL, whatever Host it named, so it is no open redirect. It claims
// nothing, reads no body, and logs no path: a link URL's path is its
// token. No Strict-Transport-Security here: RFC 6797 §7.2 forbids it over
// plain HTTP.
func Redirect(base string, log *slog.Logger) http.Handler {
	base = strings.TrimRight(base, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uri := r.URL.RequestURI()
		if !strings.HasPrefix(uri, "/") {
			uri = "/" // OPTIONS *, or an absolute-form target's odd remains
		}
		h := w.Header()
		h.Set("Location", base+uri)
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if r.ContentLength != 0 {
			// A body is not read; the connection cannot be reused.
			h.Set("Connection", "close")
		}
		w.WriteHeader(http.StatusPermanentRedirect)
		if log != nil {
			log.Debug("redirected to https", "method", r.Method, "client", r.RemoteAddr)
		}
	})
}
