package httpx

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/dlgate/dlgate/storage"
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

// Object is an object version as the admin API writes it (the object of
// a link, PUT /v1/objects, a finished upload): sha256 null when unknown.
type Object struct {
	Bucket      string  `json:"bucket"`
	Key         string  `json:"key"`
	VersionID   string  `json:"version_id"`
	Size        int64   `json:"size"`
	ETag        string  `json:"etag"`
	ContentType string  `json:"content_type,omitempty"`
	SHA256      *string `json:"sha256"`
}

// ObjectOf is v's JSON.
func ObjectOf(v storage.Version) Object {
	o := Object{Bucket: v.Bucket, Key: v.Key, VersionID: v.VersionID, Size: v.Size, ETag: v.ETag, ContentType: v.ContentType}
	if v.SHA256 != "" {
		o.SHA256 = &v.SHA256
	}
	return o
}
