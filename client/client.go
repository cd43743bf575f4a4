// Package client is a small client of the gateway's admin API (SPEC §6),
// used by the `gateway links` commands.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client calls one gateway's admin API. It is safe for concurrent use.
type Client struct {
	baseURL string
	token   string
	http    *http.Client
}

// New returns a client of the admin API at baseURL (for example
// "http://127.0.0.1:8081") authenticating with token. A nil httpClient
// means http.DefaultClient. An invalid baseURL is reported by each call.
func New(baseURL, token string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Client{baseURL: strings.TrimRight(baseURL, "/"), token: token, http: httpClient}
}

// maxAnswer bounds a successful JSON answer: a link is a few hundred bytes,
// a page of 500 links with long keys a few megabytes.
const maxAnswer = 16 << 20

// PutObject uploads body as the object key into the gateway's configured
// store, streaming it. size is the body's length, or -1 when unknown. The
// client does not close body.
func (c *Client) PutObject(ctx context.Context, key string, body io.Reader, size int64, contentType string) (Object, error) {
	if err := checkKey(key); err != nil {
		return Object{}, err
	}
	var obj Object
	err := c.do(ctx, http.MethodPut, "/v1/objects/"+escapeKey(key), func(req *http.Request) {
		// NopCloser: the caller owns body. The transport still sees
		// through it to an *os.File for sendfile.
		req.Body = io.NopCloser(body)
		req.ContentLength = size
		if size == 0 {
			req.Body = http.NoBody
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
	}, &obj, nil)
	return obj, err
}

// CreateLink creates a link (POST /v1/links).
func (c *Client) CreateLink(ctx context.Context, r CreateLinkRequest) (Link, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return Link{}, err
	}
	var l Link
	err = c.do(ctx, http.MethodPost, "/v1/links", func(req *http.Request) {
		setJSON(req, body)
		if r.IdempotencyKey != "" {
			req.Header.Set("Idempotency-Key", r.IdempotencyKey)
		}
	}, &l, &l.Raw)
	return l, err
}

// GetLink returns a link with its remaining allowance, revocation, grant
// counts and active sessions (GET /v1/links/{id}).
func (c *Client) GetLink(ctx context.Context, id string) (Link, error) {
	p, err := linkPath(id, "")
	if err != nil {
		return Link{}, err
	}
	var l Link
	err = c.do(ctx, http.MethodGet, p, nil, &l, &l.Raw)
	return l, err
}

// RevokeLink revokes a link and ends its sessions (POST
// /v1/links/{id}/revoke). Revoking a revoked link succeeds.
func (c *Client) RevokeLink(ctx context.Context, id string) (Link, error) {
	p, err := linkPath(id, "/revoke")
	if err != nil {
		return Link{}, err
	}
	var l Link
	err = c.do(ctx, http.MethodPost, p, nil, &l, &l.Raw)
	return l, err
}

// AddAllowance grants a link add more claims, recording reason in the
// audit trail (POST /v1/links/{id}/allowance).
func (c *Client) AddAllowance(ctx context.Context, id string, add int, reason string) (Link, error) {
	p, err := linkPath(id, "/allowance")
	if err != nil {
		return Link{}, err
	}
	body, err := json.Marshal(allowanceRequest{Add: add, Reason: reason})
	if err != nil {
		return Link{}, err
	}
	var l Link
	err = c.do(ctx, http.MethodPost, p, func(req *http.Request) { setJSON(req, body) }, &l, &l.Raw)
	return l, err
}

func linkPath(id, suffix string) (string, error) {
	if id == "" {
		return "", errors.New("missing link id")
	}
	return "/v1/links/" + url.PathEscape(id) + suffix, nil
}

func setJSON(req *http.Request, body []byte) {
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req.Header.Set("Content-Type", "application/json")
}

// checkKey refuses keys that cannot travel in a URL path unchanged: the
// server's router would clean "a//b" or "a/../b" into another path and
// answer with a redirect, which turns a PUT into a GET.
func checkKey(key string) error {
	for _, s := range strings.Split(key, "/") {
		if s == "" || s == "." || s == ".." {
			return fmt.Errorf("invalid object key %q: empty, \".\" or \"..\" path segment", key)
		}
	}
	return nil
}

// escapeKey escapes each segment of an object key, keeping the slashes
// that separate them, so that "a b/c?d" reaches the server as the key it is.
func escapeKey(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// do sends one request and decodes a 2xx JSON answer into out, keeping
// the raw bytes in raw when it is not nil. An empty answer leaves out as it
// is. prepare sets the body and headers.
func (c *Client) do(ctx context.Context, method, path string, prepare func(*http.Request), out any, raw *json.RawMessage) error {
	u, err := url.Parse(c.baseURL + path)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("invalid admin API URL %q", c.baseURL)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return fmt.Errorf("invalid admin API URL %q", c.baseURL)
	}
	if prepare != nil {
		prepare(req)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Accept", "application/json, application/problem+json")

	resp, err := c.http.Do(req)
	if err != nil {
		// The *url.Error would repeat the full URL; the host says enough
		// and the path may carry an object key the operator did not
		// mean to log.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("admin API at %s: %w", u.Host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return readError(resp)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("admin API at %s: reading answer: %w", u.Host, err)
	}
	if len(body) > maxAnswer {
		return fmt.Errorf("admin API at %s: answer larger than %d bytes", u.Host, maxAnswer)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("admin API at %s: invalid JSON answer: %v", u.Host, err)
	}
	if raw != nil {
		*raw = body
	}
	return nil
}
