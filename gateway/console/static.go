package console

import (
	"mime"
	"net/http"
	"path"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/dlgate/dlgate/gateway/problem"
)

// Static serves GET /console/static/{file}: the style sheet, the scripts
// and the vendored tus-js-client, embedded in the binary. A request that
// names the file's current version (?v=, as the pages write it) may be
// kept by the browser for good; any other must be checked again.
func (h *Handler) Static(w http.ResponseWriter, r *http.Request) {
	name := mux.Vars(r)["file"]
	v, ok := staticVersion[name]
	if !ok {
		h.fail(w, r, problem.NotFound, "")
		return
	}
	b, err := staticFiles.ReadFile("static/" + name)
	if err != nil {
		h.fail(w, r, problem.NotFound, "")
		return
	}
	hd := w.Header()
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "text/plain; charset=utf-8" // LICENSE, VERSION
	}
	hd.Set("Content-Type", ct)
	hd.Set("Content-Length", strconv.Itoa(len(b)))
	if r.URL.Query().Get("v") == v {
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hd.Set("Cache-Control", "no-cache")
	}
	hd.Set("ETag", `"`+v+`"`)
	if r.Header.Get("If-None-Match") == `"`+v+`"` {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.Method == http.MethodHead {
		return
	}
	w.Write(b) //nolint:errcheck // the client is gone
}
