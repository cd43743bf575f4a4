package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/storage"
)

// deletePath is the admin path that deletes version vid of key.
func deletePath(key, vid string, query ...string) string {
	return "/v1/objects/" + key + "?version_id=" + url.QueryEscape(vid) + strings.Join(query, "")
}

// wantStoreGone fails unless the store no longer has version o.
func (h *Harness) wantStoreGone(tb testing.TB, o objectJSON) {
	tb.Helper()
	_, err := h.Store.Stat(context.Background(), storage.Ref{Bucket: o.Bucket, Key: o.Key, VersionID: o.VersionID})
	if !errors.Is(err, storage.ErrNotFound) {
		tb.Fatalf("Stat(%s@%s) after its deletion = %v, want ErrNotFound", o.Key, o.VersionID, err)
	}
}

func (h *Harness) wantStored(tb testing.TB, o objectJSON, want ledger.ObjectState) {
	tb.Helper()
	got, err := h.DB.ObjectGet(context.Background(), o.Bucket, o.Key, o.VersionID)
	if err != nil || got.State != want {
		tb.Fatalf("StoredObject(%s@%s) = %+v, %v; want state %s", o.Key, o.VersionID, got, err, want)
	}
}

func TestPutObjectRecordsTheVersionItStored(t *testing.T) {
	h := MustHarness(t)
	o := h.MustPutObject(t, "docs/a.pdf", "application/pdf", []byte("pdf bytes"))
	got, err := h.DB.ObjectGet(context.Background(), o.Bucket, o.Key, o.VersionID)
	if err != nil || got.State != ledger.ObjectStored || got.Size != o.Size || got.ETag != o.ETag ||
		got.ContentType != "application/pdf" || !got.StoredAt.Equal(h.Clock.Now()) {
		t.Fatalf("StoredObject = %+v, %v; want the uploaded version, stored now", got, err)
	}
}

func TestPutObjectUndoesTheUploadWhenItCannotBeRecorded(t *testing.T) {
	h := MustHarness(t)
	h.DB.Close() // every ledger call now fails
	resp, body := h.AdminDo(t, http.MethodPut, "/v1/objects/k", "data", nil)
	if resp.StatusCode < 500 {
		t.Fatalf("PUT with the database gone = %d %s, want a 5xx", resp.StatusCode, body)
	}
	if _, err := h.Store.Stat(context.Background(), storage.Ref{Key: "k"}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Stat(k) after a PUT that could not be recorded = %v, want the version deleted again", err)
	}
}

func TestDeleteObject(t *testing.T) {
	h := MustHarness(t)
	o := h.MustPutObject(t, "reports/q1.pdf", "application/pdf", []byte("q1"))
	other := h.MustPutObject(t, "reports/q1.pdf", "application/pdf", []byte("q1, second version"))

	resp, body := h.AdminDo(t, http.MethodDelete, deletePath(o.Key, o.VersionID), nil, nil)
	if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
		t.Fatalf("DELETE = %d %s, want 204 without a body", resp.StatusCode, body)
	}
	h.wantStoreGone(t, o)
	h.wantStored(t, o, ledger.ObjectDeleted)
	if got, err := h.Store.Stat(context.Background(), storage.Ref{Key: o.Key}); err != nil || got.VersionID != other.VersionID {
		t.Fatalf("the other version after the deletion: %+v, %v", got, err)
	}
	if recs := h.Logs.Records(t, "object deleted"); len(recs) != 1 || recs[0]["version_id"] != o.VersionID {
		t.Errorf("log records %v, want one \"object deleted\" naming the version", recs)
	}

	resp, body = h.AdminDo(t, http.MethodDelete, deletePath(o.Key, o.VersionID), nil, nil)
	mustProblem(t, resp, body, http.StatusNotFound, "object-version-not-found")
}

func TestDeleteObjectRefusals(t *testing.T) {
	h := MustHarness(t)
	o := h.MustPutObject(t, "k", "text/plain", []byte("data"))
	// Written to the store behind the gateway's back: not its upload.
	foreign, err := h.Store.Put(context.Background(), "", "theirs", bytes.NewReader([]byte("theirs")), 6, "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, path string
		status             int
		suffix             string
	}{
		{"UnknownVersion", http.MethodDelete, deletePath("k", "0192e7a4-0000-7000-8000-000000000000"), 404, "object-version-not-found"},
		{"UnknownKey", http.MethodDelete, deletePath("nothing/here", o.VersionID), 404, "object-version-not-found"},
		{"NotUploadedByTheGateway", http.MethodDelete, deletePath("theirs", foreign.VersionID, "&force=true"), 404, "object-version-not-found"},
		{"NoVersion", http.MethodDelete, "/v1/objects/k", 400, "bad-request"},
		{"BadForce", http.MethodDelete, deletePath("k", o.VersionID, "&force=yes please"), 400, "bad-request"},
		{"InvalidKey", http.MethodDelete, deletePath("a%2F..%2Fb", o.VersionID), 400, "invalid-key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := h.AdminDo(t, tt.method, strings.ReplaceAll(tt.path, " ", "%20"), nil, nil)
			mustProblem(t, resp, body, tt.status, tt.suffix)
		})
	}
	if _, err := h.Store.Stat(context.Background(), storage.Ref{Key: "theirs", VersionID: foreign.VersionID}); err != nil {
		t.Fatalf("an object the gateway did not upload after refused deletions: %v", err)
	}
	h.wantStored(t, o, ledger.ObjectStored)
	req, _ := http.NewRequest(http.MethodDelete, h.Admin.URL+deletePath("k", o.VersionID), nil)
	if resp, _ := mustDo(t, http.DefaultClient, req); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("DELETE without the admin token = %d, want 401", resp.StatusCode)
	}
}

func TestDeleteObjectPinnedByALiveLinkIsRefusedUnlessForced(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "pinned.bin", []byte("pinned"), map[string]any{"delivery": "session"})
	o := l.Object
	x := h.MustMint(t, l)

	resp, body := h.AdminDo(t, http.MethodDelete, deletePath(o.Key, o.VersionID), nil, nil)
	p := mustProblem(t, resp, body, http.StatusConflict, "object-pinned")
	if p.Detail != "1 live link and 1 live session pin this version; revoke them first or pass force=true." {
		t.Errorf("detail = %q", p.Detail)
	}
	h.wantStored(t, o, ledger.ObjectStored)

	resp, body = h.AdminDo(t, http.MethodDelete, deletePath(o.Key, o.VersionID, "&force=true"), nil, nil)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE with force = %d %s, want 204", resp.StatusCode, body)
	}
	h.wantStoreGone(t, o)
	if got := h.MustShowLink(t, l.ID); got.RevokedAt == nil || *got.ActiveSessions != 0 {
		t.Fatalf("link after a forced deletion: %+v, want revoked without live sessions", got)
	}
	for _, u := range []string{l.URL, x.SessionURL} {
		resp, _ := h.Do(t, http.MethodGet, u, nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s after a forced deletion = %d, want the generic 404", u, resp.StatusCode)
		}
	}
}

func TestCreateLinkOnAVersionBeingDeletedIs409(t *testing.T) {
	h := MustHarness(t)
	o := h.MustPutObject(t, "going.bin", "application/octet-stream", []byte("going"))
	h.Store.DeleteFunc = func(context.Context, storage.Version) error { return storage.ErrTimeout }
	resp, body := h.AdminDo(t, http.MethodDelete, deletePath(o.Key, o.VersionID), nil, nil)
	mustProblem(t, resp, body, http.StatusGatewayTimeout, "storage-timeout")
	h.wantStored(t, o, ledger.ObjectDeleting)
	// The version is still in the store, but no link may pin it now.
	resp, body = h.AdminDo(t, http.MethodPost, "/v1/links", map[string]any{
		"object":    map[string]any{"key": o.Key, "version_id": o.VersionID},
		"downloads": 1, "expires_in": 60,
	}, nil)
	mustProblem(t, resp, body, http.StatusConflict, "object-deleted")
}

func TestAFailedStoreDeletionIsRetriedByTheSweeper(t *testing.T) {
	h := MustHarness(t)
	o := h.MustPutObject(t, "flaky.bin", "application/octet-stream", []byte("flaky"))
	var calls int
	h.Store.DeleteFunc = func(context.Context, storage.Version) error {
		calls++
		return storage.ErrUnavailable
	}
	resp, body := h.AdminDo(t, http.MethodDelete, deletePath(o.Key, o.VersionID), nil, nil)
	mustProblem(t, resp, body, http.StatusBadGateway, "storage-unavailable")
	h.wantStored(t, o, ledger.ObjectDeleting)

	h.Server.Retain(context.Background())
	if calls != 1 {
		t.Fatalf("the sweeper retried before the backoff: %d store calls", calls)
	}
	h.Clock.Advance(ledger.DeletionRetryMin)
	h.Server.Retain(context.Background())
	if calls != 2 {
		t.Fatalf("%d store calls after the backoff, want the retry", calls)
	}
	h.Store.DeleteFunc = nil
	h.Clock.Advance(2 * ledger.DeletionRetryMin)
	h.Server.Retain(context.Background())
	h.wantStoreGone(t, o)
	h.wantStored(t, o, ledger.ObjectDeleted)
}

func TestRetentionDeletesADeadLinksVersionAndPurgesTheLink(t *testing.T) {
	const objects, audit = 2 * time.Hour, 24 * time.Hour
	h := MustHarness(t, func(o *gateway.Options) { o.ObjectRetention, o.AuditRetention = objects, audit })
	l := h.MustObjectLink(t, "report.pdf", []byte("report"), map[string]any{"downloads": 1, "expires_in": 30 * 24 * 3600})
	kept := h.MustObjectLink(t, "kept.pdf", []byte("kept"), map[string]any{"downloads": 1, "expires_in": 30 * 24 * 3600})
	if resp, _ := h.Do(t, http.MethodGet, l.URL, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("download = %d", resp.StatusCode)
	}
	h.WaitIdle()

	h.Clock.Advance(objects - time.Second) // the link died at its only download
	h.Server.Retain(context.Background())
	h.wantStored(t, l.Object, ledger.ObjectStored)
	h.Clock.Advance(time.Second)
	h.Server.Retain(context.Background())
	h.wantStoreGone(t, l.Object)
	h.wantStored(t, l.Object, ledger.ObjectDeleted)
	h.wantStored(t, kept.Object, ledger.ObjectStored)
	// Used up but not expired: revoked with its version, so that no
	// top-up brings it back pointing at nothing.
	if got := h.MustShowLink(t, l.ID); got.RevokedAt == nil {
		t.Fatalf("the used-up link of a deleted version is not revoked: %+v", got)
	}
	resp, body := h.AdminDo(t, http.MethodPost, "/v1/links/"+l.ID+"/allowance", map[string]any{"add": 1}, nil)
	mustProblem(t, resp, body, http.StatusConflict, "link-revoked")

	h.Clock.Advance(audit)
	h.Server.Retain(context.Background())
	resp, body = h.AdminDo(t, http.MethodGet, "/v1/links/"+l.ID, nil, nil)
	mustProblem(t, resp, body, http.StatusNotFound, "not-found")
	h.MustShowLink(t, kept.ID)
	if _, err := h.DB.ObjectGet(context.Background(), l.Object.Bucket, l.Object.Key, l.Object.VersionID); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("tombstone after the audit retention = %v, want purged", err)
	}
}

func TestRetentionZeroKeepsEverything(t *testing.T) {
	h := MustHarness(t) // ObjectRetention and AuditRetention 0
	o := h.MustPutObject(t, "forever.bin", "application/octet-stream", []byte("forever"))
	h.Clock.Advance(10 * 365 * 24 * time.Hour)
	h.Server.Retain(context.Background())
	h.wantStored(t, o, ledger.ObjectStored)
	if h.Ledger.Calls("LinkPurge") != 0 {
		t.Errorf("LinkPurge called with the audit retention off")
	}
}
