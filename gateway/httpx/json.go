package httpx

import (
	"encoding/json"
	"net/http"
	"time"
)

// WriteJSON answers v as JSON with status, HTML characters unescaped.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v) //nolint:errcheck // the client is gone
}

// RFC3339 writes t as the API's times are: RFC 3339 in UTC.
func RFC3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// RFC3339Ptr is RFC3339 of *t, nil for nil.
func RFC3339Ptr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := RFC3339(*t)
	return &s
}
