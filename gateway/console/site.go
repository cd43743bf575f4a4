package console

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/ledger"
)

// Base is the path the console is served under.
const Base = "/console/"

// Config is what the console needs; every field but Uploads is required.
type Config struct {
	// Admin is the admin API's handlers: their cores do every operation,
	// and its Auth checks sign-ins and counts failures.
	Admin *admin.Handler
	// Sessions keeps the console sessions (in the ledger, so every
	// process serves them).
	Sessions ledger.ConsoleSessions
	// Views are the ledger's reads the pages show beside the API's.
	Views ledger.Views
	// Uploads serves tus at UploadsPath for the browser (the uploads
	// package's handler); nil answers 501.
	Uploads http.Handler
	Log     *slog.Logger
	Now     func() time.Time
}

// site is what every handler of the console is built on: the
// configuration, the one function that renders a page (render.go), the
// answers of a refusal or an error (answer.go), and the session check and
// the reading of a form (session.go).
type site struct {
	Config
}

// sessionKey carries the request's console session in its context.
type sessionKey struct{}

// sessionOf is the signed-in session of a request that passed Require.
func sessionOf(r *http.Request) *ledger.ConsoleSession {
	s, _ := r.Context().Value(sessionKey{}).(*ledger.ConsoleSession)
	return s
}
