package admin

import (
	"net/http"
	"net/http/pprof"

	"github.com/gorilla/mux"
)

// Pprof serves Go's profiler under /debug/pprof/ on the admin
// listener only, behind the admin token: profiles reveal memory contents
// and cost CPU, so they are never on the public listener.
func Pprof(w http.ResponseWriter, r *http.Request) {
	switch mux.Vars(r)["profile"] {
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		pprof.Trace(w, r)
	default:
		// The index, and the named profiles (heap, goroutine, allocs, …).
		pprof.Index(w, r)
	}
}
