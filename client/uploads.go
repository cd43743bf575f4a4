package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Uploads is a client of the gateway's resumable uploads, tus 1.0 (SPEC
// §11): core, creation and termination, enough for the CLI. It speaks the
// tus protocol, not the JSON admin API that Client covers (and
// gateway/openapi.json describes), so it is a type of its own, made from
// a Client to share its URL, token and HTTP client.
type Uploads struct{ c *Client }

// NewUploads returns the resumable-uploads client of c's admin API.
func NewUploads(c *Client) *Uploads { return &Uploads{c: c} }

// UploadsPath is where the gateway serves resumable uploads.
const UploadsPath = "/v1/uploads/"

const tusVersion = "1.0.0"

// UploadCreate creates a resumable upload of size bytes that will become
// the object key (POST /v1/uploads/, tus creation), and returns its URL.
// filename and contentType may be empty. A gateway without resumable
// uploads answers an *Error with Status 404 or 405.
func (up *Uploads) UploadCreate(ctx context.Context, key string, size int64, filename, contentType string) (string, error) {
	if size < 0 {
		return "", errors.New("upload size must not be negative")
	}
	meta := map[string]string{"key": key}
	if filename != "" {
		meta["filename"] = filename
	}
	if contentType != "" {
		meta["content_type"] = contentType
	}
	resp, err := up.tus(ctx, http.MethodPost, UploadsPath, nil, func(req *http.Request) {
		req.Header.Set("Upload-Length", strconv.FormatInt(size, 10))
		req.Header.Set("Upload-Metadata", encodeMetadata(meta))
	})
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusCreated || loc == "" {
		return "", fmt.Errorf("admin API: upload creation answered %d without a Location", resp.StatusCode)
	}
	return up.uploadPath(loc)
}

// UploadOffset returns how many bytes of the upload at uploadURL the
// gateway holds, and the upload's length (HEAD, tus core). An upload
// that is gone is an *Error with Status 404 or 410.
func (up *Uploads) UploadOffset(ctx context.Context, uploadURL string) (offset, length int64, err error) {
	p, err := up.uploadPath(uploadURL)
	if err != nil {
		return 0, 0, err
	}
	resp, err := up.tus(ctx, http.MethodHead, p, nil, nil)
	if err != nil {
		return 0, 0, err
	}
	resp.Body.Close()
	offset, oerr := strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
	length, lerr := strconv.ParseInt(resp.Header.Get("Upload-Length"), 10, 64)
	if oerr != nil || lerr != nil || offset < 0 || offset > length {
		return 0, 0, fmt.Errorf("admin API: HEAD of the upload answered offset %q of %q", resp.Header.Get("Upload-Offset"), resp.Header.Get("Upload-Length"))
	}
	return offset, length, nil
}

// UploadPatch sends n bytes of body at offset of the upload at uploadURL
// (PATCH, tus core) and returns the upload's offset after them. The
// client does not close body. A stale offset is an *Error with Status
// 409, an upload another request is writing one with Status 423.
func (up *Uploads) UploadPatch(ctx context.Context, uploadURL string, offset int64, body io.Reader, n int64) (int64, error) {
	p, err := up.uploadPath(uploadURL)
	if err != nil {
		return 0, err
	}
	resp, err := up.tus(ctx, http.MethodPatch, p, body, func(req *http.Request) {
		req.ContentLength = n
		if n == 0 {
			req.Body = http.NoBody
		}
		req.Header.Set("Upload-Offset", strconv.FormatInt(offset, 10))
		req.Header.Set("Content-Type", "application/offset+octet-stream")
	})
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	got, err := strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("admin API: PATCH of the upload answered offset %q", resp.Header.Get("Upload-Offset"))
	}
	return got, nil
}

// UploadObject returns the object a finished upload became (GET
// /v1/uploads/{id}). An upload still missing bytes is an *Error with
// Status 409.
func (up *Uploads) UploadObject(ctx context.Context, uploadURL string) (Object, error) {
	p, err := up.uploadPath(uploadURL)
	if err != nil {
		return Object{}, err
	}
	resp, err := up.tus(ctx, http.MethodGet, p, nil, func(req *http.Request) { req.Header.Set("Accept", "application/json") })
	if err != nil {
		return Object{}, err
	}
	defer resp.Body.Close()
	var obj Object
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&obj); err != nil {
		return Object{}, fmt.Errorf("admin API: invalid JSON answer: %v", err)
	}
	return obj, nil
}

// UploadTerminate ends an unfinished upload, whose bytes the gateway then
// removes (DELETE, tus termination). One already gone is not an error.
func (up *Uploads) UploadTerminate(ctx context.Context, uploadURL string) error {
	p, err := up.uploadPath(uploadURL)
	if err != nil {
		return err
	}
	resp, err := up.tus(ctx, http.MethodDelete, p, nil, nil)
	var e *Error
	if errors.As(err, &e) && (e.Status == http.StatusNotFound || e.Status == http.StatusGone) {
		return nil
	}
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// uploadPath returns the path of an upload URL, which must be under
// UploadsPath: requests carry the admin token, so they go to this
// client's admin API and nowhere a Location header could point.
func (up *Uploads) uploadPath(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("admin API: %q is not an upload URL", raw)
	}
	p := u.EscapedPath()
	if base, err := url.Parse(up.c.baseURL); err == nil {
		// An admin API under a path prefix answers Locations with it.
		p = strings.TrimPrefix(p, strings.TrimSuffix(base.EscapedPath(), "/"))
	}
	if !strings.HasPrefix(p, UploadsPath) || p == UploadsPath {
		return "", fmt.Errorf("admin API: %q is not an upload URL", raw)
	}
	return p, nil
}

// tus sends one tus request to path and returns its 2xx response, whose
// body the caller closes; other answers are an *Error.
func (up *Uploads) tus(ctx context.Context, method, path string, body io.Reader, prepare func(*http.Request)) (*http.Response, error) {
	u, err := url.Parse(up.c.baseURL + path)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("invalid admin API URL %q", up.c.baseURL)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("invalid admin API URL %q", up.c.baseURL)
	}
	if body != nil {
		req.Body = io.NopCloser(body) // the caller owns body
	}
	req.Header.Set("Tus-Resumable", tusVersion)
	if up.c.token != "" {
		req.Header.Set("Authorization", "Bearer "+up.c.token)
	}
	if prepare != nil {
		prepare(req)
	}
	resp, err := up.c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("admin API at %s: %w", u.Host, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	return resp, nil
}

// encodeMetadata is an Upload-Metadata value (tus 1.0): key and base64
// value pairs, in a fixed order.
func encodeMetadata(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + " " + base64.StdEncoding.EncodeToString([]byte(m[k]))
	}
	return strings.Join(pairs, ",")
}

// BaseURL is the admin API's base URL the client was made with.
func (up *Uploads) BaseURL() string { return up.c.baseURL }
