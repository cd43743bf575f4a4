package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// docAPI is a fake admin API made of the gateway's OpenAPI document: it
// validates every request against the document and answers with the
// document's examples.
type docAPI struct {
	tb     testing.TB
	router routers.Router

	mu     sync.Mutex
	status int      // the documented status to answer; 0 for the lowest 2xx
	seen   []string // operationId of each request, valid or not
}

// MustDocAPI starts a docAPI on ../gateway/admin/openapi.json and a Client of it
// with the token "tok".
func MustDocAPI(tb testing.TB) (*docAPI, *Client) {
	tb.Helper()
	data, err := os.ReadFile("../gateway/admin/openapi.json")
	if err != nil {
		tb.Fatal(err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		tb.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		tb.Fatal(err)
	}
	// An OpenAPI path template cannot say that {key} spans path segments;
	// the gateway's route does, and so must the fake's.
	const objects = "/v1/objects/{key}"
	item := doc.Paths.Value(objects)
	if item == nil {
		tb.Fatalf("openapi.json has no %s", objects)
	}
	doc.Paths.Delete(objects)
	doc.Paths.Set("/v1/objects/{key:.+}", item)
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		tb.Fatal(err)
	}
	d := &docAPI{tb: tb, router: r}
	srv := httptest.NewServer(d)
	tb.Cleanup(srv.Close)
	return d, New(srv.URL, "tok", srv.Client())
}

func (d *docAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.Method + " " + r.URL.RequestURI()
	route, params, err := d.router.FindRoute(r)
	if err != nil {
		d.tb.Errorf("%s: not a documented operation: %v", name, err)
		d.record("undocumented")
		http.NotFound(w, r)
		return
	}
	d.record(route.Operation.OperationID)
	in := &openapi3filter.RequestValidationInput{
		Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: bearerAuth, SkipSettingDefaults: true, MultiError: true},
	}
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		d.tb.Errorf("%s: the request does not validate against openapi.json: %v", name, err)
	}

	status, body := d.answer(route.Operation)
	w.Header().Set("X-Request-Id", "0123456789abcdef01234567")
	if body != nil {
		w.Header().Set("Content-Type", "application/json")
		if status >= 400 {
			w.Header().Set("Content-Type", "application/problem+json")
		}
	}
	switch status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="admin"`)
	case http.StatusForbidden:
		w.Header().Set("WWW-Authenticate", `Bearer realm="admin", error="insufficient_scope", scope="links:write"`)
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "10")
	}
	if status == http.StatusCreated && route.Operation.OperationID == "createKey" {
		w.Header().Set("Cache-Control", "no-store")
	}
	// The answer is the document's own; check it too, so that a wrong
	// example cannot make a wrong client pass.
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: w.Header(),
		Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(r.Context(), out); err != nil {
		d.tb.Errorf("%s: the document's own example answer does not validate: %v", name, err)
	}
	w.WriteHeader(status)
	w.Write(body)
}

func (d *docAPI) record(op string) {
	d.mu.Lock()
	d.seen = append(d.seen, op)
	d.mu.Unlock()
}

// answer picks the status to answer and the first of its examples.
func (d *docAPI) answer(op *openapi3.Operation) (int, []byte) {
	d.mu.Lock()
	status := d.status
	d.mu.Unlock()
	if status == 0 {
		for _, code := range op.Responses.Keys() {
			if n, err := strconv.Atoi(code); err == nil && n >= 200 && n < 300 && (status == 0 || n < status) {
				status = n
			}
		}
	}
	rr := op.Responses.Status(status)
	if rr == nil {
		d.tb.Fatalf("%s has no documented %d answer", op.OperationID, status)
	}
	for _, mt := range rr.Value.Content {
		if names := slices.Sorted(maps.Keys(mt.Examples)); len(names) > 0 {
			b, err := json.Marshal(mt.Examples[names[0]].Value.Value)
			if err != nil {
				d.tb.Fatal(err)
			}
			return status, b
		}
	}
	return status, nil
}

// take returns the operations requested since the last take.
func (d *docAPI) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.seen
	d.seen = nil
	return s
}

// bearerAuth is the check of the document's one security scheme: an
// Authorization header with a non-empty bearer token.
func bearerAuth(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	s := in.SecurityScheme
	if s.Type != "http" || !strings.EqualFold(s.Scheme, "bearer") {
		return fmt.Errorf("unexpected security scheme %q", in.SecuritySchemeName)
	}
	scheme, tok, ok := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return errors.New("no bearer token")
	}
	return nil
}

// TestClientMatchesOpenAPI calls every method of Client against the
// document: each request must be a valid request of the operation it
// names, and each documented example answer must decode.
func TestClientMatchesOpenAPI(t *testing.T) {
	d, c := MustDocAPI(t)
	ctx := context.Background()
	const id = "01a22fc7-6c02-7b12-bdf2-6e8ae977759d"
	when := time.Date(2031, 3, 4, 5, 6, 7, 890000000, time.UTC)

	cases := []struct {
		method string // the Client method this case calls
		op     string // the operationId it must request
		status int    // the documented answer to give; 0 for the lowest 2xx
		call   func() error
	}{
		{"PutObject", "putObject", 0, func() error {
			o, err := c.PutObject(ctx, "docs/hello.txt", strings.NewReader("hello"), 5, "text/plain")
			return want(err, o.VersionID != "" && o.Size > 0, o)
		}},
		{"PutObject", "putObject", 0, func() error {
			_, err := c.PutObject(ctx, "dir/a b?#%.bin", strings.NewReader("streamed"), -1, "")
			return err
		}},
		{"PutObject", "putObject", 0, func() error {
			_, err := c.PutObject(ctx, "empty", bytes.NewReader(nil), 0, "application/octet-stream")
			return err
		}},
		{"PutObject", "putObject", http.StatusBadRequest, func() error {
			_, err := c.PutObject(ctx, "docs/hello.txt", strings.NewReader("hello"), 5, "text/plain")
			return wantProblem(err, http.StatusBadRequest, "invalid-key")
		}},
		{"DeleteObject", "deleteObject", 0, func() error {
			return c.DeleteObject(ctx, "", "dir/a b?#%.bin", "01a22fc7-6bf7-76f5-973d-13bcf4ddd9a7", true)
		}},
		{"DeleteObject", "deleteObject", 0, func() error {
			return c.DeleteObject(ctx, "", "docs/hello.txt", "01a22fc7-6be3-7431-9a8f-7cd2c1c8523a", false)
		}},
		{"DeleteObject", "deleteObject", 0, func() error {
			return c.DeleteObject(ctx, "local", "dir/a b?#%.bin", "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY+MTRCxf3vjVBH40Nr8X8gdRQBpUMLUo", true)
		}},
		{"DeleteObject", "deleteObject", http.StatusNotFound, func() error {
			err := c.DeleteObject(ctx, "", "docs/hello.txt", "01a22fc7-6be3-7431-9a8f-7cd2c1c8523a", false)
			return wantProblem(err, http.StatusNotFound, "object-version-not-found")
		}},
		{"DeleteObject", "deleteObject", http.StatusConflict, func() error {
			err := c.DeleteObject(ctx, "", "big.iso", "01a22fc7-6bf7-76f5-973d-13bcf4ddd9a7", false)
			return wantProblem(err, http.StatusConflict, "object-pinned")
		}},
		{"CreateLink", "createLink", 0, func() error {
			l, err := c.CreateLink(ctx, CreateLinkRequest{Object: ObjectRef{Key: "big.iso"}, Downloads: 3, ExpiresIn: 86400, IdempotencyKey: "order-1234"})
			return want(err, l.ID != "" && l.URL != "" && len(l.Raw) > 0, l)
		}},
		{"CreateLink", "createLink", http.StatusCreated, func() error {
			l, err := c.CreateLink(ctx, CreateLinkRequest{
				Object:    ObjectRef{Key: "big.iso", Bucket: "local", VersionID: "01a22fc7-6bf7-76f5-973d-13bcf4ddd9a7"},
				Downloads: 2, ExpiresAt: when, AccountID: "user-42", Filename: "Ubuntu 24.04.iso",
				Delivery: "session", Confirm: true, Session: &SessionSettings{TTL: 7200, ByteBudget: 100 << 20, MaxConcurrency: 8},
			})
			return want(err, l.ID != "" && l.Session != nil && l.Session.TTL > 0, l)
		}},
		{"CreateLink", "createLink", http.StatusUnprocessableEntity, func() error {
			_, err := c.CreateLink(ctx, CreateLinkRequest{Object: ObjectRef{Key: "missing.bin"}, Downloads: 1, ExpiresIn: 60})
			return wantProblem(err, http.StatusUnprocessableEntity, "object-not-found")
		}},
		{"CreateLink", "createLink", 0, func() error {
			l, err := c.CreateLink(ctx, CreateLinkRequest{Object: ObjectRef{Key: "big.iso"}, Downloads: 1, ExpiresIn: 86400, Retries: 1})
			return want(err, l.ID != "", l)
		}},
		{"GetLink", "getLink", 0, func() error {
			l, err := c.GetLink(ctx, id)
			return want(err, l.ID != "" && l.Grants["granted"] > 0 && l.Deliveries["complete"]+l.Deliveries["none"] == l.Grants["granted"], l)
		}},
		{"GetLink", "getLink", http.StatusNotFound, func() error {
			_, err := c.GetLink(ctx, id)
			return wantProblem(err, http.StatusNotFound, "not-found")
		}},
		{"GetLink", "getLink", http.StatusUnauthorized, func() error {
			_, err := c.GetLink(ctx, id)
			return wantProblem(err, http.StatusUnauthorized, "unauthorized")
		}},
		{"RevokeLink", "revokeLink", 0, func() error {
			l, err := c.RevokeLink(ctx, id)
			return want(err, l.RevokedAt != nil, l)
		}},
		{"AddAllowance", "addAllowance", 0, func() error {
			l, err := c.AddAllowance(ctx, id, 2, "customer asked")
			return want(err, l.Downloads > 0, l)
		}},
		{"AddAllowance", "addAllowance", 0, func() error {
			_, err := c.AddAllowance(ctx, id, 1, "")
			return err
		}},
		{"AddAllowance", "addAllowance", http.StatusConflict, func() error {
			_, err := c.AddAllowance(ctx, id, 1, "again")
			return wantProblem(err, http.StatusConflict, "link-revoked")
		}},
		{"AllowanceChanges", "listAllowanceChanges", 0, func() error {
			ch, err := c.AllowanceChanges(ctx, id)
			return want(err, len(ch) == 1 && ch[0].Add > 0 && !ch[0].CreatedAt.IsZero(), ch)
		}},
		{"Grants", "listGrants", 0, func() error {
			p, err := c.Grants(ctx, id, GrantOptions{})
			return want(err, len(p.Grants) == 1 && p.NextCursor != "" && p.Grants[0].SessionID != "" &&
				p.Grants[0].Delivery.Status == "partial" && p.Grants[0].Delivery.Coverage > 0, p)
		}},
		{"Grants", "listGrants", 0, func() error {
			_, err := c.Grants(ctx, id, GrantOptions{Delivery: "partial"})
			return err
		}},
		{"Grants", "listGrants", 0, func() error {
			_, err := c.Grants(ctx, id, GrantOptions{Cursor: "MTkzMDM2NzE2ODAwMDAwMC8wMWEy", Limit: 50})
			return err
		}},
		{"ListLinks", "listLinks", 0, func() error {
			p, err := c.ListLinks(ctx, ListOptions{})
			return want(err, len(p.Links) == 1 && p.NextCursor != "" && p.Links[0].Token == "", p)
		}},
		{"ListLinks", "listLinks", 0, func() error {
			_, err := c.ListLinks(ctx, ListOptions{Cursor: "MTkzMDM2NzE2ODAwMDAwMC8wMWEy", Limit: 500, Account: "user-42",
				ObjectKey: "dir/a b.bin", State: "exhausted", CreatedAfter: when, CreatedBefore: when.Add(time.Hour)})
			return err
		}},
		{"ListLinks", "listLinks", http.StatusBadRequest, func() error {
			_, err := c.ListLinks(ctx, ListOptions{State: "revoked"})
			return wantProblem(err, http.StatusBadRequest, "bad-request")
		}},
		{"ListLinks", "listLinks", http.StatusForbidden, func() error {
			_, err := c.ListLinks(ctx, ListOptions{})
			if err := wantProblem(err, http.StatusForbidden, "insufficient-scope"); err != nil {
				return err
			}
			var e *Error
			errors.As(err, &e)
			return want(nil, e.Scope == "links:write" && err.Error() == "admin API: 403: the key does not hold the scope links:write", err.Error())
		}},
		{"GetLink", "getLink", http.StatusTooManyRequests, func() error {
			_, err := c.GetLink(ctx, id)
			return wantProblem(err, http.StatusTooManyRequests, "too-many-authentication-failures")
		}},
		{"CreateKey", "createKey", 0, func() error {
			k, err := c.CreateKey(ctx, CreateKeyRequest{Name: "ci uploads", Scopes: []string{"objects:write", "links:write"}, ExpiresIn: 7776000})
			return want(err, strings.HasPrefix(k.Secret, "dlk_") && k.ID != "" && len(k.Scopes) == 2 && k.ExpiresAt != nil && len(k.Raw) > 0, k)
		}},
		{"CreateKey", "createKey", 0, func() error {
			k, err := c.CreateKey(ctx, CreateKeyRequest{Name: "support", Scopes: []string{"links:read"}})
			return want(err, k.Secret != "", k)
		}},
		{"CreateKey", "createKey", http.StatusForbidden, func() error {
			_, err := c.CreateKey(ctx, CreateKeyRequest{Name: "escalation", Scopes: []string{"links:write"}})
			return wantProblem(err, http.StatusForbidden, "insufficient-scope")
		}},
		{"CreateKey", "createKey", http.StatusBadRequest, func() error {
			_, err := c.CreateKey(ctx, CreateKeyRequest{Name: "x", Scopes: []string{"links:read"}})
			return wantProblem(err, http.StatusBadRequest, "bad-request")
		}},
		{"ListKeys", "listKeys", 0, func() error {
			p, err := c.ListKeys(ctx, "", 0)
			return want(err, len(p.Keys) == 1 && p.NextCursor != "" && p.Keys[0].RevokedAt != nil && p.Keys[0].LastUsedAt == nil && len(p.Keys[0].Raw) > 0, p)
		}},
		{"ListKeys", "listKeys", 0, func() error {
			_, err := c.ListKeys(ctx, "MTkzMDM2NzE2NzAwMDAwMC8wMWEy", 500)
			return err
		}},
		{"RevokeKey", "revokeKey", 0, func() error { return c.RevokeKey(ctx, "01a2350b-8881-77a6-a36d-d4adfac94b3b") }},
		{"RevokeKey", "revokeKey", http.StatusNotFound, func() error {
			return wantProblem(c.RevokeKey(ctx, "01a2350b-8881-77a6-a36d-d4adfac94b3b"), http.StatusNotFound, "not-found")
		}},
		{"Audit", "listAudit", 0, func() error {
			p, err := c.Audit(ctx, AuditOptions{})
			ok := len(p.Entries) == 3 && p.Entries[0].Action == "link.revoked" && p.Entries[0].Actor.KeyName == "support" &&
				p.Entries[1].Target.Type == "link" && p.Entries[2].RequestID != "" && len(p.Entries[1].Details) > 0 && !p.Entries[0].At.IsZero()
			return want(err, ok, p)
		}},
		{"Audit", "listAudit", 0, func() error {
			_, err := c.Audit(ctx, AuditOptions{Cursor: "MTkzMDM2NzE2NzAwMDAwMC8wMWEy", Limit: 50, Actor: "bootstrap",
				Action: "link.allowance_added", TargetID: "dir/a b.bin", After: when, Before: when.Add(time.Hour)})
			return err
		}},
		{"Audit", "listAudit", http.StatusBadRequest, func() error {
			_, err := c.Audit(ctx, AuditOptions{Action: "link.created"})
			return wantProblem(err, http.StatusBadRequest, "bad-request")
		}},
	}

	covered := map[string]bool{}
	for i, tc := range cases {
		covered[tc.method] = true
		d.mu.Lock()
		d.status = tc.status
		d.mu.Unlock()
		if err := tc.call(); err != nil {
			t.Errorf("case %d, %s: %v", i, tc.method, err)
		}
		if got := d.take(); !slices.Equal(got, []string{tc.op}) {
			t.Errorf("case %d, %s requested %v, want one %s", i, tc.method, got, tc.op)
		}
	}
	ct := reflect.TypeFor[*Client]()
	for i := range ct.NumMethod() {
		if m := ct.Method(i).Name; !covered[m] {
			t.Errorf("Client.%s is not checked against openapi.json: add a case", m)
		}
	}
}

// want returns err, or an error showing v when ok is false.
func want(err error, ok bool, v any) error {
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("decoded the documented example answer as %+v", v)
	}
	return nil
}

// wantProblem checks that err is the *Error of a problem of the given
// status and type name.
func wantProblem(err error, status int, name string) error {
	var e *Error
	if !errors.As(err, &e) {
		return fmt.Errorf("err = %v, want an *Error", err)
	}
	if e.Status != status || !strings.HasSuffix(e.Type, "/"+name) || e.Title == "" {
		return fmt.Errorf("err = %+v, want status %d, type …/%s and a title", e, status, name)
	}
	return nil
}
