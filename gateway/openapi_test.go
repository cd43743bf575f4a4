package gateway_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/internal/refusal"
	"github.com/dlgate/dlgate/storage"
)

// ---- the document ----

// mustOpenAPI loads and validates the embedded document, examples
// included (kin-openapi validates them by default).
func mustOpenAPI(tb testing.TB) *openapi3.T {
	tb.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(admin.OpenAPI())
	if err != nil {
		tb.Fatalf("loading openapi.json: %v", err)
	}
	if err := doc.Validate(loader.Context, openapi3.EnableExamplesValidation()); err != nil {
		tb.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	return doc
}

// docOp is one documented operation.
type docOp struct {
	Method, Path string
	Item         *openapi3.PathItem
	Op           *openapi3.Operation
}

func (o docOp) String() string { return o.Method + " " + o.Path }

// docOps lists the document's operations in a stable order.
func docOps(doc *openapi3.T) []docOp {
	var out []docOp
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			out = append(out, docOp{Method: method, Path: path, Item: item, Op: op})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// secured reports whether op needs the admin token.
func secured(doc *openapi3.T, op *openapi3.Operation) bool {
	sec := doc.Security
	if op.Security != nil {
		sec = *op.Security
	}
	return len(sec) > 0
}

// adminRoute is one line of the admin route table.
type adminRoute struct {
	gateway.AdminRoute
	Path string // OpenAPI path template: /v1/objects/{key}
}

func (r adminRoute) String() string { return r.Method + " " + r.Pattern }

func adminRoutes(tb testing.TB, s *gateway.Server) []adminRoute {
	tb.Helper()
	var out []adminRoute
	for _, rt := range s.AdminRoutes() {
		if rt.Console {
			continue // the console's pages are HTML for people, not the API
		}
		out = append(out, adminRoute{AdminRoute: rt, Path: openAPIPath(rt.Pattern)})
	}
	return out
}

// openAPIPath writes a mux pattern's variables as OpenAPI templates:
// {key:.+} becomes {key}. Regular expressions may hold braces of their
// own ({n:[0-9]{3}}), so braces are counted.
func openAPIPath(pattern string) string {
	var b strings.Builder
	depth, skipping := 0, false
	for _, c := range pattern {
		switch {
		case c == '{':
			depth++
			if depth == 1 {
				b.WriteRune(c)
				continue
			}
		case c == '}':
			depth--
			if depth == 0 {
				skipping = false
				b.WriteRune(c)
				continue
			}
		case c == ':' && depth == 1:
			skipping = true
		}
		if !skipping {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// mustDocRouter returns a kin-openapi router for doc whose paths match as
// the gateway's do. An OpenAPI path template cannot say that {key} spans
// path segments; the route table can, so its patterns replace the
// documented templates they stand for. doc is changed.
func mustDocRouter(tb testing.TB, doc *openapi3.T, routes []adminRoute) routers.Router {
	tb.Helper()
	for _, rt := range routes {
		if rt.Pattern == rt.Path {
			continue
		}
		if item := doc.Paths.Value(rt.Path); item != nil {
			doc.Paths.Delete(rt.Path)
			doc.Paths.Set(rt.Pattern, item)
		}
	}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		tb.Fatal(err)
	}
	return r
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

func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc := mustOpenAPI(t)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	scheme := doc.Components.SecuritySchemes["adminToken"]
	if scheme == nil || scheme.Value.Type != "http" || scheme.Value.Scheme != "bearer" {
		t.Fatalf("securitySchemes.adminToken = %+v, want http bearer", scheme)
	}
	// SPEC §6: the /v1 API and the profiler need the admin token; health,
	// readiness, metrics and this document do not.
	for _, o := range docOps(doc) {
		want := strings.HasPrefix(o.Path, "/v1/") || strings.HasPrefix(o.Path, "/debug/")
		if got := secured(doc, o.Op); got != want {
			t.Errorf("%s: needs the admin token = %v, want %v", o, got, want)
		}
		if o.Op.OperationID == "" {
			t.Errorf("%s has no operationId", o)
		}
	}
}

func TestOpenAPIServedWithoutToken(t *testing.T) {
	h := MustHarness(t)
	resp, body := mustDo(t, http.DefaultClient, mustOARequest(t, http.MethodGet, h.Admin.URL+"/openapi.json", nil))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json = %d %q, want 200 application/json", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !bytes.Equal(body, admin.OpenAPI()) {
		t.Error("GET /openapi.json is not the embedded document")
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("GET /openapi.json has no X-Request-Id")
	}
	resp, body = mustDo(t, http.DefaultClient, mustOARequest(t, http.MethodHead, h.Admin.URL+"/openapi.json", nil))
	if resp.StatusCode != http.StatusOK || len(body) != 0 || resp.ContentLength != int64(len(admin.OpenAPI())) {
		t.Errorf("HEAD /openapi.json = %d, %d body bytes, Content-Length %d; want 200, none, %d",
			resp.StatusCode, len(body), resp.ContentLength, len(admin.OpenAPI()))
	}
}

func mustOARequest(tb testing.TB, method, u string, body []byte) *http.Request {
	tb.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		tb.Fatal(err)
	}
	return req
}

// ---- the router, both ways ----

// TestOpenAPIDocumentsEveryRoute: every method of every admin route is a
// documented operation.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	h := MustHarness(t)
	doc := mustOpenAPI(t)
	routes := adminRoutes(t, h.Server)
	if len(routes) == 0 {
		t.Fatal("AdminRoutes is empty")
	}
	for _, rt := range routes {
		item := doc.Paths.Value(rt.Path)
		if item == nil || item.GetOperation(rt.Method) == nil {
			t.Errorf("route %s is not documented as %s %s in openapi.json", rt, rt.Method, rt.Path)
		}
	}
}

// TestOpenAPIEveryDocumentedRouteIsServed: every documented operation
// reaches one of the router's routes (not its 404 or 405), and needs the
// admin token exactly when the document says so.
func TestOpenAPIEveryDocumentedRouteIsServed(t *testing.T) {
	h := MustHarness(t)
	doc := mustOpenAPI(t)
	for _, o := range docOps(doc) {
		u, body, ctype, hdr := sampleRequest(t, o)
		if strings.HasSuffix(o.Path, "/{profile}") {
			// A sample that answers at once: a CPU profile or a trace
			// would take their default 30 s and 1 s.
			u = strings.Replace(u, "/heap", "/goroutine", 1)
		}
		for _, withToken := range []bool{true, false} {
			// One failed authentication per window: not the throttle's test.
			h.Clock.Advance(refusal.AuthWindow)
			req := mustOARequest(t, o.Method, h.Admin.URL+u, body)
			for k, v := range hdr {
				req.Header[k] = v
			}
			if ctype != "" {
				req.Header.Set("Content-Type", ctype)
			}
			if withToken {
				req.Header.Set("Authorization", "Bearer "+testAdminToken)
			}
			resp, got := mustDo(t, http.DefaultClient, req)
			route := routeOf(t, h, resp)
			if route == "unknown" || route == "method_not_allowed" || resp.StatusCode == http.StatusMethodNotAllowed {
				t.Errorf("%s (%s %s) is documented but not served: %d, route %q", o, o.Method, u, resp.StatusCode, route)
				break
			}
			switch unauthorized := resp.StatusCode == http.StatusUnauthorized; {
			case !withToken && secured(doc, o.Op) && !unauthorized:
				t.Errorf("%s without a token = %d, want 401 (the document says it needs the admin token)", o, resp.StatusCode)
			case !withToken && secured(doc, o.Op):
				if o.Method != http.MethodHead { // a HEAD's 401 has no body
					mustProblem(t, resp, got, http.StatusUnauthorized, "unauthorized")
				}
			case !withToken && unauthorized:
				t.Errorf("%s without a token = 401; the document says it needs none", o)
			}
		}
	}
}

// TestOpenAPIScopesAreTheRouteTables: each operation's x-scopes, and the
// roles of its security requirement (OpenAPI 3.1 §4.8.30 allows them for
// any scheme), are the one scope its route declares in the route table;
// none for an open route. Its description says it too.
func TestOpenAPIScopesAreTheRouteTables(t *testing.T) {
	h := MustHarness(t)
	doc := mustOpenAPI(t)
	for _, rt := range adminRoutes(t, h.Server) {
		item := doc.Paths.Value(rt.Path)
		if item == nil || item.GetOperation(rt.Method) == nil {
			continue // TestOpenAPIDocumentsEveryRoute says so
		}
		op := item.GetOperation(rt.Method)
		want := []string{rt.Scope}
		if rt.Scope == gateway.ScopeOpen {
			want = []string{}
		}
		var got []string
		raw, ok := op.Extensions["x-scopes"].([]any)
		if !ok {
			t.Errorf("%s %s has no x-scopes list", rt.Method, rt.Path)
			continue
		}
		for _, v := range raw {
			s, _ := v.(string)
			got = append(got, s)
		}
		if got == nil {
			got = []string{}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s %s: x-scopes %v, want %v (route %s)", rt.Method, rt.Path, got, want, rt.Name)
		}
		var roles []string
		if op.Security != nil {
			for _, req := range *op.Security {
				roles = append(roles, req["adminToken"]...)
			}
		}
		if rt.Scope == gateway.ScopeOpen {
			if op.Security == nil || len(*op.Security) != 0 {
				t.Errorf("%s %s is open but its security is %v, want []", rt.Method, rt.Path, op.Security)
			}
			continue
		}
		if !slices.Equal(roles, want) {
			t.Errorf("%s %s: the security requirement's roles are %v, want %v", rt.Method, rt.Path, roles, want)
		}
		mention := "Scope: `" + rt.Scope + "`."
		if rt.Scope == gateway.ScopeBootstrap {
			mention = "Only the bootstrap admin token"
		}
		if !strings.Contains(op.Description, mention) {
			t.Errorf("%s %s: the description does not say %q", rt.Method, rt.Path, mention)
		}
	}
}

// routeOf returns the route label the gateway logged for resp's request.
func routeOf(tb testing.TB, h *Harness, resp *http.Response) string {
	tb.Helper()
	id := resp.Header.Get("X-Request-Id")
	// The access line is written when the handler returns, which may be
	// after a large answer reached the client.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, rec := range h.Logs.Records(tb, "http") {
			if rec["request_id"] == id {
				route, _ := rec["route"].(string)
				return route
			}
		}
	}
	tb.Fatalf("no access line for request %s", id)
	return ""
}

// sampleRequest builds a request of o from the document alone: path and
// required query parameters from their examples, the body from the first
// request example.
func sampleRequest(tb testing.TB, o docOp) (u string, body []byte, contentType string, hdr http.Header) {
	tb.Helper()
	u = o.Path
	q := url.Values{}
	hdr = http.Header{}
	for _, p := range append(slices.Clone(o.Item.Parameters), o.Op.Parameters...) {
		v := fmt.Sprint(p.Value.Example)
		switch {
		case p.Value.In == "path" && p.Value.Name == "key":
			u = strings.Replace(u, "{key}", v, 1) // already a path, segments and all
		case p.Value.In == "path":
			u = strings.Replace(u, "{"+p.Value.Name+"}", url.PathEscape(v), 1)
		case p.Value.In == "query" && p.Value.Required:
			q.Set(p.Value.Name, v)
		case p.Value.In == "header" && p.Value.Required:
			hdr.Set(p.Value.Name, v)
		}
	}
	if strings.Contains(u, "{") {
		tb.Fatalf("%s: a path parameter has no example: %s", o, u)
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	if o.Op.RequestBody == nil {
		return u, nil, "", hdr
	}
	for ct, mt := range o.Op.RequestBody.Value.Content {
		switch ct {
		case "*/*":
			return u, []byte("hello"), "text/plain", hdr
		case "application/offset+octet-stream": // tus: bytes at an offset
			hdr.Set("Content-Type", ct)
			return u, []byte("hello"), ct, hdr
		}
		if names := slices.Sorted(maps.Keys(mt.Examples)); len(names) > 0 {
			b, err := json.Marshal(mt.Examples[names[0]].Value.Value)
			if err != nil {
				tb.Fatal(err)
			}
			return u, b, ct, hdr
		}
	}
	tb.Fatalf("%s: a request body without an example", o)
	return "", nil, "", nil
}

// ---- examples ----

// TestOpenAPIExamplesValidate: every body and parameter has an example;
// each validates against its schema (JSON Schema 2020-12), names no
// property the schema does not, and a problem's status is its response's.
func TestOpenAPIExamplesValidate(t *testing.T) {
	doc := mustOpenAPI(t)
	for _, o := range docOps(doc) {
		for _, p := range append(slices.Clone(o.Item.Parameters), o.Op.Parameters...) {
			where := fmt.Sprintf("%s parameter %s", o, p.Value.Name)
			if p.Value.Example == nil {
				t.Errorf("%s has no example", where)
				continue
			}
			if err := p.Value.Schema.Value.VisitJSON(p.Value.Example, openapi3.EnableJSONSchema2020()); err != nil {
				t.Errorf("%s: example does not validate: %v", where, err)
			}
		}
		if rb := o.Op.RequestBody; rb != nil {
			for ct, mt := range rb.Value.Content {
				checkExamples(t, fmt.Sprintf("%s request %s", o, ct), mt, 0, openapi3.VisitAsRequest())
			}
		}
		for code, r := range o.Op.Responses.Map() {
			status, _ := strconv.Atoi(strings.ReplaceAll(code, "XX", "00"))
			for ct, mt := range r.Value.Content {
				checkExamples(t, fmt.Sprintf("%s %s %s", o, code, ct), mt, status, openapi3.VisitAsResponse())
			}
		}
	}
}

// checkExamples validates the examples of one media type. status is the
// response's (500 for 5XX), or 0 for a request.
func checkExamples(t *testing.T, where string, mt *openapi3.MediaType, status int, dir openapi3.SchemaValidationOption) {
	t.Helper()
	if mt.Schema == nil {
		return // opaque bytes: nothing to show
	}
	values := map[string]any{}
	if mt.Example != nil {
		values["example"] = mt.Example
	}
	for name, ex := range mt.Examples {
		if ex.Value.ExternalValue != "" {
			values[name] = nil // the document itself; see its own test
			continue
		}
		values[name] = ex.Value.Value
	}
	if len(values) == 0 {
		t.Errorf("%s has no example", where)
	}
	for name, v := range values {
		if v == nil {
			continue
		}
		if err := mt.Schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020(), dir); err != nil {
			t.Errorf("%s example %q does not validate: %v", where, name, err)
		}
		for _, f := range undocumented(mt.Schema.Value, v, "") {
			t.Errorf("%s example %q has a property the schema does not name: %s", where, name, f)
		}
		if p, ok := v.(map[string]any); ok && strings.HasSuffix(where, "application/problem+json") {
			got, _ := p["status"].(float64)
			if status%100 == 0 && int(got)/100 == status/100 {
				continue // a range: 5XX
			}
			if int(got) != status {
				t.Errorf("%s example %q: problem status %v, want %d", where, name, p["status"], status)
			}
		}
	}
}

// undocumented lists the properties of v, a decoded JSON value, that s
// does not name, where s names any. Answers may grow new fields, so the
// schemas do not forbid them; this keeps the document complete.
func undocumented(s *openapi3.Schema, v any, at string) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		if len(s.Properties) == 0 {
			return nil
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			p := s.Properties[k]
			if p == nil {
				out = append(out, at+"."+k)
				continue
			}
			out = append(out, undocumented(p.Value, v[k], at+"."+k)...)
		}
	case []any:
		if s.Items == nil {
			return nil
		}
		for i, x := range v {
			out = append(out, undocumented(s.Items.Value, x, fmt.Sprintf("%s[%d]", at, i))...)
		}
	}
	return out
}

// ---- real exchanges ----

// exchanger sends admin requests to a harness, validating each request
// and each response against the document and counting which documented
// statuses of which operations were seen.
type exchanger struct {
	h      *Harness
	doc    *openapi3.T
	router routers.Router
	seen   map[string]map[string]bool // operation → status seen
}

func newExchanger(tb testing.TB, h *Harness) *exchanger {
	doc := mustOpenAPI(tb)
	// A second copy for the router, whose paths it changes.
	r := mustDocRouter(tb, mustOpenAPI(tb), adminRoutes(tb, h.Server))
	return &exchanger{h: h, doc: doc, router: r, seen: map[string]map[string]bool{}}
}

// call is one admin request of a scenario.
type call struct {
	method, path string
	body         string
	header       http.Header
	noToken      bool
	key          string // the credential, when not the bootstrap token
	want         int
	// docRefuses: the document itself refuses the request (an unknown
	// field, a value out of range, no token), as the server does.
	docRefuses bool
	// upload, when set, is the body sent instead of body (which is
	// still what the request is validated with).
	upload func() (io.Reader, int64)
}

func (x *exchanger) do(tb testing.TB, c call) (*http.Response, []byte) {
	tb.Helper()
	name := c.method + " " + c.path
	build := func() *http.Request {
		req := mustOARequest(tb, c.method, x.h.Admin.URL+c.path, nil)
		if c.body != "" {
			b := []byte(c.body)
			req.Body = io.NopCloser(bytes.NewReader(b))
			req.ContentLength = int64(len(b))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range c.header {
			req.Header[k] = v
		}
		if !c.noToken {
			tok := testAdminToken
			if c.key != "" {
				tok = c.key
			}
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		return req
	}

	vreq := build()
	route, params, err := x.router.FindRoute(vreq)
	if err != nil {
		tb.Fatalf("%s: no documented operation: %v", name, err)
	}
	in := &openapi3filter.RequestValidationInput{
		Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: bearerAuth, SkipSettingDefaults: true, MultiError: true},
	}
	err = openapi3filter.ValidateRequest(context.Background(), in)
	switch {
	case c.docRefuses && err == nil:
		tb.Errorf("%s: the document accepts a request the server refuses (%s)", name, c.body)
	case !c.docRefuses && err != nil:
		tb.Errorf("%s: the request does not validate against the document: %v", name, err)
	}

	sreq := build()
	if c.upload != nil {
		rd, n := c.upload()
		sreq.Body, sreq.ContentLength, sreq.GetBody = io.NopCloser(rd), n, nil
	}
	resp, body := mustDo(tb, http.DefaultClient, sreq)
	if resp.StatusCode != c.want {
		tb.Fatalf("%s = %d %s, want %d", name, resp.StatusCode, body, c.want)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		tb.Errorf("%s: the %d answer does not validate against the document: %v\n%s", name, resp.StatusCode, err, body)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		tb.Errorf("%s: no X-Request-Id", name)
	}
	if rr := route.Operation.Responses.Status(resp.StatusCode); rr != nil && len(body) > 0 {
		if mt := rr.Value.Content.Get(resp.Header.Get("Content-Type")); mt != nil && mt.Schema != nil {
			var v any
			if json.Unmarshal(body, &v) == nil {
				for _, f := range undocumented(mt.Schema.Value, v, "") {
					tb.Errorf("%s: the %d answer has a property the document does not name: %s", name, resp.StatusCode, f)
				}
			}
		}
	}
	op := route.Method + " " + openAPIPath(route.Path)
	if x.seen[op] == nil {
		x.seen[op] = map[string]bool{}
	}
	x.seen[op][strconv.Itoa(resp.StatusCode)] = true
	if resp.StatusCode >= 500 {
		x.seen[op]["5XX"] = true
	}
	return resp, body
}

// TestOpenAPIRealExchangesValidate runs every admin route against a real
// ledger and store, and validates each request and answer.
func TestOpenAPIRealExchangesValidate(t *testing.T) {
	h := MustHarness(t, func(o *gateway.Options) {
		// Short enough for the stalled upload below (5 s of silence), long
		// enough that a loaded machine never stalls an ordinary one.
		o.UploadIdleTimeout = time.Second
		o.UploadLockWait = 100 * time.Millisecond
	})
	x := newExchanger(t, h)
	ok := func(method, path, body string, want int) []byte {
		t.Helper()
		_, b := x.do(t, call{method: method, path: path, body: body, want: want})
		return b
	}
	const unknownID = "01a226c5-36c5-7cc5-9846-1e57c78d008f"

	// Objects.
	hello := mustJSON[objectJSON](t, x.doPut(t, "/v1/objects/docs/hello.txt", "hello", "text/plain", http.StatusCreated))
	x.doPut(t, "/v1/objects/big.iso", strings.Repeat("x", 4096), "application/x-cd-image", http.StatusCreated)
	x.doPut(t, "/v1/objects/dir/a%20b.bin?bucket=local", "", "", http.StatusCreated)
	x.doPut(t, "/v1/objects/a%5Cb", "x", "", http.StatusBadRequest)
	x.do(t, call{method: http.MethodPut, path: "/v1/objects/stalled.bin", body: "first bytes", want: http.StatusRequestTimeout,
		header: http.Header{"Content-Type": {"application/octet-stream"}},
		upload: func() (io.Reader, int64) {
			// Some bytes, then nothing for longer than UploadIdleTimeout.
			pr, pw := io.Pipe()
			go func() {
				pw.Write([]byte("first bytes")) //nolint:errcheck // the reader may be gone
				time.Sleep(5 * time.Second)
				pw.Close()
			}()
			return pr, 1000
		}})

	// Links.
	idem := http.Header{"Idempotency-Key": {"order-1234"}}
	_, b := x.do(t, call{method: "POST", path: "/v1/links", body: `{"object":{"key":"big.iso"},"downloads":3,"expires_in":86400}`, header: idem, want: http.StatusCreated})
	l := mustJSON[linkJSON](t, b)
	x.do(t, call{method: "POST", path: "/v1/links", body: `{"object":{"key":"big.iso"},"downloads":3,"expires_in":86400}`, header: idem, want: http.StatusOK})
	x.do(t, call{method: "POST", path: "/v1/links", body: `{"object":{"key":"big.iso"},"downloads":4,"expires_in":86400}`, header: idem, want: http.StatusConflict})
	x.do(t, call{method: "POST", path: "/v1/links", body: `{"object":{"key":"big.iso"},"downloads":1,"expires_in":60}`,
		header: http.Header{"Idempotency-Key": {"no spaces allowed"}}, want: http.StatusBadRequest, docRefuses: true})
	bound := mustJSON[linkJSON](t, ok("POST", "/v1/links", `{"object":{"key":"big.iso","bucket":"local","version_id":"`+l.Object.VersionID+`"},"downloads":2,"expires_at":"2031-03-11T00:00:00Z","account_id":"user-42","filename":"Ubuntu 24.04.iso","delivery":"session","confirm":true,"session":{"ttl":7200,"byte_budget":104857600,"max_concurrency":8}}`, http.StatusCreated))
	x.do(t, call{method: "POST", path: "/v1/links", body: `{"object":{"key":"big.iso"},"downloads":1,"expires_in":60,"colour":"red"}`, want: http.StatusBadRequest, docRefuses: true})
	x.do(t, call{method: "POST", path: "/v1/links", body: `{"object":{"key":"big.iso"},"downloads":0,"expires_in":60}`, want: http.StatusBadRequest, docRefuses: true})
	x.do(t, call{method: "POST", path: "/v1/links", body: `{"object":{"key":"big.iso"},"downloads":1,"expires_in":60,"expires_at":"2031-03-11T00:00:00Z"}`, want: http.StatusBadRequest, docRefuses: true})
	x.do(t, call{method: "POST", path: "/v1/links", body: `{"object":{"key":"missing.bin"},"downloads":1,"expires_in":60}`, want: http.StatusUnprocessableEntity})
	ok("POST", "/v1/links", `{"object":{"key":"big.iso"},"downloads":1,"expires_in":86400,"retries":1}`, http.StatusCreated)
	x.do(t, call{method: "POST", path: "/v1/links", body: `{"object":{"key":"big.iso"},"downloads":1,"expires_in":60,"retries":11}`, want: http.StatusBadRequest, docRefuses: true})
	ok("POST", "/v1/links", `{"object":{"key":"big.iso"},"downloads":1,"expires_in":60,"delivery":"session","retries":1}`, http.StatusBadRequest)

	// Downloads, so that grants, sessions and counts are not empty.
	h.Do(t, http.MethodGet, l.URL, nil)
	s := h.MustMint(t, l)

	ok("GET", "/v1/links/"+l.ID, "", http.StatusOK)
	ok("GET", "/v1/links/"+unknownID, "", http.StatusNotFound)

	ok("POST", "/v1/links/"+l.ID+"/allowance", `{"add":2,"reason":"customer asked"}`, http.StatusOK)
	ok("POST", "/v1/links/"+l.ID+"/allowance", `{"add":1}`, http.StatusOK)
	x.do(t, call{method: "POST", path: "/v1/links/" + l.ID + "/allowance", body: `{"add":0}`, want: http.StatusBadRequest, docRefuses: true})
	ok("POST", "/v1/links/"+unknownID+"/allowance", `{"add":1}`, http.StatusNotFound)
	ok("GET", "/v1/links/"+l.ID+"/allowance", "", http.StatusOK)
	ok("GET", "/v1/links/"+bound.ID+"/allowance", "", http.StatusOK)
	ok("GET", "/v1/links/"+unknownID+"/allowance", "", http.StatusNotFound)

	page := mustJSON[struct {
		Next string `json:"next_cursor"`
	}](t, ok("GET", "/v1/links/"+l.ID+"/grants?limit=1", "", http.StatusOK))
	if page.Next == "" {
		t.Fatal("grants page of 1 of 2 has no next_cursor")
	}
	ok("GET", "/v1/links/"+l.ID+"/grants?limit=1&cursor="+url.QueryEscape(page.Next), "", http.StatusOK)
	ok("GET", "/v1/links/"+l.ID+"/grants?cursor=not-a-cursor", "", http.StatusBadRequest)
	ok("GET", "/v1/links/"+l.ID+"/grants?delivery=complete", "", http.StatusOK)
	x.do(t, call{method: "GET", path: "/v1/links/" + l.ID + "/grants?delivery=done", want: http.StatusBadRequest, docRefuses: true})
	x.do(t, call{method: "GET", path: "/v1/links/" + l.ID + "/grants?limit=0", want: http.StatusBadRequest, docRefuses: true})
	ok("GET", "/v1/links/"+unknownID+"/grants", "", http.StatusNotFound)

	page = mustJSON[struct {
		Next string `json:"next_cursor"`
	}](t, ok("GET", "/v1/links?limit=1", "", http.StatusOK))
	ok("GET", "/v1/links?limit=1&cursor="+url.QueryEscape(page.Next), "", http.StatusOK)
	ok("GET", "/v1/links?"+url.Values{"account": {"user-42"}, "object_key": {"big.iso"}, "state": {"active"},
		"created_after": {"2031-03-04T00:00:00Z"}, "created_before": {"2031-03-05T00:00:00Z"}}.Encode(), "", http.StatusOK)
	x.do(t, call{method: "GET", path: "/v1/links?state=gone", want: http.StatusBadRequest, docRefuses: true})
	ok("GET", "/v1/links?colour=red", "", http.StatusBadRequest)

	// Sessions.
	ok("DELETE", "/v1/sessions/"+s.SessionID, "", http.StatusNoContent)
	ok("DELETE", "/v1/sessions/"+s.SessionID, "", http.StatusNoContent)
	ok("DELETE", "/v1/sessions/"+unknownID, "", http.StatusNotFound)

	// Revocation.
	ok("POST", "/v1/links/"+bound.ID+"/revoke", "", http.StatusOK)
	ok("POST", "/v1/links/"+bound.ID+"/revoke", "", http.StatusOK)
	ok("POST", "/v1/links/"+unknownID+"/revoke", "", http.StatusNotFound)
	ok("POST", "/v1/links/"+bound.ID+"/allowance", `{"add":1,"reason":"again"}`, http.StatusConflict)

	// Object deletion (SPEC §6): unpinned, already deleted, pinned, forced.
	ok("DELETE", "/v1/objects/docs/hello.txt?version_id="+url.QueryEscape(hello.VersionID), "", http.StatusNoContent)
	ok("DELETE", "/v1/objects/docs/hello.txt?version_id="+url.QueryEscape(hello.VersionID), "", http.StatusNotFound)
	x.do(t, call{method: "DELETE", path: "/v1/objects/big.iso", want: http.StatusBadRequest, docRefuses: true})
	ok("DELETE", "/v1/objects/big.iso?version_id="+url.QueryEscape(l.Object.VersionID), "", http.StatusConflict)
	x.do(t, call{method: "DELETE", path: "/v1/objects/big.iso?force=maybe&version_id=" + url.QueryEscape(l.Object.VersionID), want: http.StatusBadRequest, docRefuses: true})
	ok("DELETE", "/v1/objects/a%5Cb?version_id=x", "", http.StatusBadRequest)
	ok("DELETE", "/v1/objects/big.iso?force=true&bucket=local&version_id="+url.QueryEscape(l.Object.VersionID), "", http.StatusNoContent)
	// A version being deleted cannot be pinned by a new link.
	doomed := mustJSON[objectJSON](t, x.doPut(t, "/v1/objects/doomed.bin", "bye", "", http.StatusCreated))
	if _, err := h.DB.DeletionBegin(context.Background(), doomed.Bucket, doomed.Key, doomed.VersionID, false); err != nil {
		t.Fatal(err)
	}
	ok("POST", "/v1/links", `{"object":{"key":"doomed.bin"},"downloads":1,"expires_in":60}`, http.StatusConflict)

	// Keys.
	_, b = x.do(t, call{method: "POST", path: "/v1/keys", body: `{"name":"ci uploads","scopes":["objects:write","links:write"],"expires_in":7776000}`, want: http.StatusCreated})
	ci := mustJSON[keyJSON](t, b)
	_, b = x.do(t, call{method: "POST", path: "/v1/keys", body: `{"name":"manager","scopes":["keys:write","audit:read"]}`, want: http.StatusCreated})
	manager := mustJSON[keyJSON](t, b)
	x.do(t, call{method: "POST", path: "/v1/keys", key: manager.Key, body: `{"name":"reader","scopes":["audit:read"]}`, want: http.StatusCreated})
	x.do(t, call{method: "POST", path: "/v1/keys", key: manager.Key, body: `{"name":"escalation","scopes":["links:write"]}`, want: http.StatusForbidden})
	x.do(t, call{method: "POST", path: "/v1/keys", body: `{"name":"x","scopes":["links:admin"]}`, want: http.StatusBadRequest, docRefuses: true})
	x.do(t, call{method: "POST", path: "/v1/keys", body: `{"name":"x","scopes":[]}`, want: http.StatusBadRequest, docRefuses: true})
	x.do(t, call{method: "POST", path: "/v1/keys", body: `{"name":" x","scopes":["links:read"]}`, want: http.StatusBadRequest})
	x.do(t, call{method: "POST", path: "/v1/keys", body: `{"name":"x","scopes":["links:read"],"expires_in":0}`, want: http.StatusBadRequest, docRefuses: true})
	// The CI key at work, and seen used.
	x.doPut(t, "/v1/objects/ci/build.tar", "tar", "application/x-tar", http.StatusCreated)
	x.do(t, call{method: "POST", path: "/v1/links", key: ci.Key, body: `{"object":{"key":"ci/build.tar"},"downloads":1,"expires_in":60}`, want: http.StatusCreated})
	keys := mustJSON[struct {
		Next string `json:"next_cursor"`
	}](t, ok("GET", "/v1/keys?limit=1", "", http.StatusOK))
	ok("GET", "/v1/keys?limit=2&cursor="+url.QueryEscape(keys.Next), "", http.StatusOK)
	ok("GET", "/v1/keys?cursor=nonsense", "", http.StatusBadRequest)
	x.do(t, call{method: "GET", path: "/v1/keys?limit=0", want: http.StatusBadRequest, docRefuses: true})
	ok("DELETE", "/v1/keys/"+ci.ID, "", http.StatusNoContent)
	ok("DELETE", "/v1/keys/"+ci.ID, "", http.StatusNoContent)
	ok("DELETE", "/v1/keys/"+unknownID, "", http.StatusNotFound)

	// Audit.
	audit := mustJSON[struct {
		Next string `json:"next_cursor"`
	}](t, ok("GET", "/v1/audit?limit=2", "", http.StatusOK))
	ok("GET", "/v1/audit?limit=2&cursor="+url.QueryEscape(audit.Next), "", http.StatusOK)
	x.do(t, call{method: "GET", path: "/v1/audit?" + url.Values{"actor": {manager.ID}, "action": {"key.created"}, "target_id": {ci.ID},
		"after": {"2031-03-04T00:00:00Z"}, "before": {"2031-03-05T00:00:00Z"}}.Encode(), key: manager.Key, want: http.StatusOK})
	x.do(t, call{method: "GET", path: "/v1/audit?action=link.deleted", want: http.StatusBadRequest, docRefuses: true})
	ok("GET", "/v1/audit?colour=red", "", http.StatusBadRequest)
	ok("GET", "/v1/audit?cursor=nonsense", "", http.StatusBadRequest)
	// Resumable uploads (tus 1.0, SPEC §11). The refusals above count
	// against the address's failed authentications: a new window.
	h.Clock.Advance(refusal.AuthWindow)
	tus := func(hd ...string) http.Header {
		out := http.Header{"Tus-Resumable": {"1.0.0"}}
		for i := 0; i < len(hd); i += 2 {
			out.Set(hd[i], hd[i+1])
		}
		return out
	}
	meta := "key " + base64.StdEncoding.EncodeToString([]byte("docs/report.pdf")) + ",content_type " + base64.StdEncoding.EncodeToString([]byte("application/pdf"))
	create := func(length string) string {
		t.Helper()
		resp, _ := x.do(t, call{method: "POST", path: "/v1/uploads/", header: tus("Upload-Length", length, "Upload-Metadata", meta), want: http.StatusCreated})
		u, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || !strings.HasPrefix(u.Path, "/v1/uploads/") {
			t.Fatalf("POST /v1/uploads/: Location %q", resp.Header.Get("Location"))
		}
		return u.Path
	}
	bytesAt := func(offset string) http.Header {
		return tus("Upload-Offset", offset, "Content-Type", "application/offset+octet-stream")
	}
	x.do(t, call{method: "OPTIONS", path: "/v1/uploads/", want: http.StatusOK})
	x.do(t, call{method: "POST", path: "/v1/uploads/", header: tus("Upload-Length", "5"), want: http.StatusBadRequest, docRefuses: true})
	x.do(t, call{method: "POST", path: "/v1/uploads/", header: http.Header{"Upload-Length": {"5"}, "Upload-Metadata": {meta}}, want: http.StatusPreconditionFailed, docRefuses: true})
	x.do(t, call{method: "POST", path: "/v1/uploads/", header: tus("Upload-Length", strconv.FormatInt(1<<62, 10), "Upload-Metadata", meta), want: http.StatusRequestEntityTooLarge})
	up := create("5")
	x.do(t, call{method: "HEAD", path: up, header: tus(), want: http.StatusOK})
	x.do(t, call{method: "GET", path: up, want: http.StatusConflict})
	x.do(t, call{method: "PATCH", path: up, header: bytesAt("3"), upload: func() (io.Reader, int64) { return strings.NewReader("lo"), 2 }, body: "lo", want: http.StatusConflict})
	x.do(t, call{method: "PATCH", path: up, header: bytesAt("0"), upload: func() (io.Reader, int64) { return strings.NewReader("hello world"), 11 }, body: "hello world", want: http.StatusRequestEntityTooLarge})
	// A PATCH that holds the upload's lock while its bytes trickle in: a
	// second PATCH and a DELETE wait UploadLockWait, then 423.
	held := create(strconv.Itoa(1 << 20))
	pr, pw := io.Pipe()
	patched := make(chan struct{})
	go func() {
		defer close(patched)
		req, err := http.NewRequest("PATCH", h.Admin.URL+held, pr)
		if err != nil {
			return
		}
		req.Header = bytesAt("0")
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		req.ContentLength = 1 << 20
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest { // its body breaks off: ERR_UNEXPECTED_EOF
				t.Logf("the PATCH that held the lock ended %d", resp.StatusCode)
			}
		}
	}()
	if _, err := pw.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	// The PATCH holds the lock once the ledger says so (a written pipe
	// only says the client's transport took the bytes).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		u, err := h.DB.UploadGet(context.Background(), path.Base(held))
		if err == nil && u.Holder != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trickling PATCH never took the upload's lock: %+v, %v", u, err)
		}
	}
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				pw.CloseWithError(io.ErrUnexpectedEOF)
				return
			case <-time.After(50 * time.Millisecond):
				pw.Write([]byte("x")) //nolint:errcheck // the reader may be gone
			}
		}
	}()
	x.do(t, call{method: "PATCH", path: held, header: bytesAt("0"), upload: func() (io.Reader, int64) { return strings.NewReader("hello"), 5 }, body: "hello", want: http.StatusLocked})
	x.do(t, call{method: "DELETE", path: held, header: tus(), want: http.StatusLocked})
	close(stop)
	<-patched
	for _, m := range []string{"HEAD", "PATCH", "DELETE", "GET"} {
		c := call{method: m, path: "/v1/uploads/" + unknownID, header: tus(), want: http.StatusNotFound}
		if m == "PATCH" {
			c.header, c.body, c.upload = bytesAt("0"), "hello", func() (io.Reader, int64) { return strings.NewReader("hello"), 5 }
		}
		x.do(t, c)
	}
	x.do(t, call{method: "PATCH", path: up, header: bytesAt("0"), upload: func() (io.Reader, int64) { return strings.NewReader("hello"), 5 }, body: "hello", want: http.StatusNoContent})
	if got := mustJSON[objectJSON](t, ok("GET", up, "", http.StatusOK)); got.Key != "docs/report.pdf" || got.Size != 5 || got.SHA256 != hex.EncodeToString(sha256sum([]byte("hello"))) {
		t.Errorf("GET of a finished upload = %+v", got)
	}
	x.do(t, call{method: "DELETE", path: create("5"), header: tus(), want: http.StatusNoContent})
	// Expired unfinished: 410 everywhere.
	expired := create("5")
	h.Clock.Advance(25 * time.Hour)
	x.do(t, call{method: "HEAD", path: expired, header: tus(), want: http.StatusGone})
	x.do(t, call{method: "GET", path: expired, want: http.StatusGone})
	x.do(t, call{method: "PATCH", path: expired, header: bytesAt("0"), upload: func() (io.Reader, int64) { return strings.NewReader("hello"), 5 }, body: "hello", want: http.StatusGone})

	// Without the token: every secured operation is a documented 401.
	// Then a key without the operation's scope: a documented 403.
	h.Clock.Advance(refusal.AuthWindow)
	noScope := mustJSON[keyJSON](t, ok("POST", "/v1/keys", `{"name":"objects reader","scopes":["objects:read"]}`, http.StatusCreated))
	for _, o := range docOps(x.doc) {
		if !secured(x.doc, o.Op) {
			continue
		}
		u, body, ctype, hdr := sampleRequest(t, o)
		c := call{method: o.Method, path: u, body: string(body), header: hdr, noToken: true, want: http.StatusUnauthorized, docRefuses: true}
		if ctype != "" && ctype != "application/json" {
			c.body = "" // an upload: the 401 comes before the body is read
		}
		h.Clock.Advance(refusal.AuthWindow) // one failure per window: the throttle comes next
		x.do(t, c)
		c.noToken, c.key, c.want, c.docRefuses, c.body = false, noScope.Key, http.StatusForbidden, false, string(body)
		x.do(t, c)
	}
	// An address that failed 21 times within 10 s: every secured
	// operation is a documented 429 for 10 s, even with the admin token.
	h.Clock.Advance(refusal.AuthWindow)
	for range refusal.AuthFailures + 1 {
		x.do(t, call{method: "GET", path: "/v1/links", key: unknownKey, want: http.StatusUnauthorized})
	}
	for _, o := range docOps(x.doc) {
		if !secured(x.doc, o.Op) {
			continue
		}
		u, body, _, hdr := sampleRequest(t, o)
		x.do(t, call{method: o.Method, path: u, body: string(body), header: hdr, want: http.StatusTooManyRequests})
	}
	h.Clock.Advance(refusal.AuthWindow)

	// Operations.
	for _, m := range []string{"GET", "HEAD"} {
		for _, p := range []string{"/healthz", "/readyz", "/openapi.json"} {
			x.do(t, call{method: m, path: p, noToken: true, want: http.StatusOK})
		}
	}
	x.do(t, call{method: "GET", path: "/metrics", noToken: true, want: http.StatusOK})
	ok("GET", "/debug/pprof/", "", http.StatusOK)
	ok("POST", "/debug/pprof/", "", http.StatusOK)
	ok("GET", "/debug/pprof/goroutine?debug=1", "", http.StatusOK)
	ok("GET", "/debug/pprof/cmdline", "", http.StatusOK)
	ok("POST", "/debug/pprof/symbol", "", http.StatusOK)
	ok("GET", "/debug/pprof/no-such-profile", "", http.StatusNotFound)
	ok("POST", "/debug/pprof/no-such-profile", "", http.StatusNotFound)

	// Failures: the store, then the database.
	h.Store.PingFunc = func(context.Context) error { return fmt.Errorf("test: %w", storage.ErrUnavailable) }
	for _, m := range []string{"GET", "HEAD"} {
		x.do(t, call{method: m, path: "/readyz", noToken: true, want: http.StatusServiceUnavailable})
	}
	h.Store.PingFunc = nil
	h.DB.Close()
	ok("GET", "/v1/links/"+l.ID, "", http.StatusInternalServerError)

	// Every documented answer of every operation was seen, but 5XX,
	// seen once: a failing database or store answers alike everywhere.
	for _, o := range docOps(x.doc) {
		for _, code := range o.Op.Responses.Keys() {
			if code == "5XX" {
				continue
			}
			if !x.seen[o.String()][code] {
				t.Errorf("%s %s is documented but no exchange of this test produced it", o, code)
			}
		}
	}
	if !slices.ContainsFunc(docOps(x.doc), func(o docOp) bool { return x.seen[o.String()]["5XX"] }) {
		t.Error("no 5XX answer was validated")
	}
}

// doPut uploads body under path with contentType ("" for none).
func (x *exchanger) doPut(tb testing.TB, path, body, contentType string, want int) []byte {
	tb.Helper()
	c := call{method: http.MethodPut, path: path, body: body, want: want, header: http.Header{}}
	if contentType != "" {
		c.header.Set("Content-Type", contentType)
	} else {
		c.header["Content-Type"] = nil
	}
	_, b := x.do(tb, c)
	return b
}

// ---- lengths ----

// TestOpenAPILengthLimitsSayWhatTheServerCounts: JSON Schema's maxLength
// counts characters, and some of the server's limits are bytes of UTF-8.
// For each length-limited field, a value of multi-byte characters within
// maxLength but over the server's limit is one the document accepts; the
// server refuses it (400) only where the field's description and the
// refusal's detail both say the limit is in bytes, and accepts it where
// the limit is in characters.
func TestOpenAPILengthLimitsSayWhatTheServerCounts(t *testing.T) {
	h := MustHarness(t)
	x := newExchanger(t, h)
	x.doPut(t, "/v1/objects/big.iso", "iso", "", http.StatusCreated)
	_, b := x.do(t, call{method: "POST", path: "/v1/links", body: `{"object":{"key":"big.iso"},"downloads":1,"expires_in":60}`, want: http.StatusCreated})
	link := mustJSON[linkJSON](t, b)
	doc := x.doc
	bodyProp := func(schema, prop string) *openapi3.Schema {
		s := doc.Components.Schemas[schema].Value
		for _, part := range strings.Split(prop, ".") {
			s = s.Properties[part].Value
		}
		return s
	}
	queryParam := func(name string) *openapi3.Parameter {
		for _, p := range doc.Paths.Value("/v1/links").Get.Parameters {
			if p.Value.Name == name {
				return p.Value
			}
		}
		t.Fatalf("GET /v1/links has no parameter %s", name)
		return nil
	}
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	type limit struct {
		field       string
		description string
		maxLength   *uint64
		// request builds the request with the field set to v.
		request func(v string) call
		unit    string // "bytes" or "characters": what the server counts
		n       int    // the server's limit
		problem string // the type of the server's refusal
	}
	linkWith := func(field string) func(string) call {
		return func(v string) call {
			obj := `"object":{"key":"big.iso"}`
			extra := `,"` + field + `":` + quote(v)
			if field == "object.key" {
				obj, extra = `"object":{"key":`+quote(v)+`}`, ""
			}
			return call{method: "POST", path: "/v1/links", body: `{` + obj + `,"downloads":1,"expires_in":60` + extra + `}`}
		}
	}
	listWith := func(param string) func(string) call {
		return func(v string) call {
			return call{method: "GET", path: "/v1/links?" + url.Values{param: {v}}.Encode()}
		}
	}
	limits := []limit{
		{field: "object.key", request: linkWith("object.key"), unit: "bytes", n: 1024, problem: "invalid-key"},
		{field: "account_id", request: linkWith("account_id"), unit: "bytes", n: 255, problem: "bad-request"},
		{field: "filename", request: linkWith("filename"), unit: "characters", n: 1024, problem: "bad-request"},
		{field: "reason", unit: "bytes", n: 1024, problem: "bad-request", request: func(v string) call {
			return call{method: "POST", path: "/v1/links/" + link.ID + "/allowance", body: `{"add":1,"reason":` + quote(v) + `}`}
		}},
		{field: "query account", request: listWith("account"), unit: "bytes", n: 255, problem: "bad-request"},
		{field: "query object_key", request: listWith("object_key"), unit: "bytes", n: 1024, problem: "bad-request"},
	}
	for i := range limits {
		l := &limits[i]
		var s *openapi3.Schema
		switch l.field {
		case "object.key":
			s = bodyProp("ObjectRef", "key")
		case "account_id", "filename":
			s = bodyProp("CreateLinkRequest", l.field)
		case "reason":
			s = bodyProp("AllowanceRequest", "reason")
		default:
			p := queryParam(strings.TrimPrefix(l.field, "query "))
			s, l.description = p.Schema.Value, p.Description
		}
		if l.description == "" {
			l.description = s.Description
		}
		l.maxLength = s.MaxLength
	}
	for _, l := range limits {
		if l.maxLength == nil || int(*l.maxLength) != l.n {
			t.Errorf("%s: maxLength %v, want %d", l.field, l.maxLength, l.n)
			continue
		}
		if !strings.Contains(l.description, fmt.Sprintf("%d %s", l.n, l.unit)) {
			t.Errorf("%s: the description %q does not say the limit is %d %s", l.field, l.description, l.n, l.unit)
		}
		// n two-byte characters: within maxLength, over a limit in bytes.
		c := l.request(strings.Repeat("é", l.n))
		if l.unit == "bytes" {
			c.want = http.StatusBadRequest
			resp, body := x.do(t, c) // fails if the document refuses it
			if p := mustProblem(t, resp, body, http.StatusBadRequest, l.problem); !strings.Contains(p.Detail, "bytes") {
				t.Errorf("%s of %d × é: the 400's detail %q does not say the limit is in bytes", l.field, l.n, p.Detail)
			}
		} else {
			c.want = http.StatusCreated
			x.do(t, c)
		}
		// One more character: both refuse.
		c = l.request(strings.Repeat("é", l.n+1))
		c.want, c.docRefuses = http.StatusBadRequest, true
		resp, body := x.do(t, c)
		if p := mustProblem(t, resp, body, http.StatusBadRequest, l.problem); !strings.Contains(p.Detail, l.unit) {
			t.Errorf("%s of %d × é: the 400's detail %q does not say the limit is in %s", l.field, l.n+1, p.Detail, l.unit)
		}
	}
}
