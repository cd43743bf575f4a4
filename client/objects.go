package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
)

// DeleteObject deletes one version the gateway stored (DELETE
// /v1/objects/{key}?version_id=…). bucket "" means the gateway's default.
// With force, the live links and sessions that pin the version are revoked
// first; without it, a pinned version is an *Error with Status 409. A
// version the gateway did not store, or already deleted, is an *Error with
// Status 404.
func (c *Client) DeleteObject(ctx context.Context, bucket, key, versionID string, force bool) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if versionID == "" {
		return errors.New("missing version id")
	}
	q := url.Values{"version_id": {versionID}}
	if bucket != "" {
		q.Set("bucket", bucket)
	}
	if force {
		q.Set("force", "true")
	}
	var none struct{}
	return c.do(ctx, http.MethodDelete, "/v1/objects/"+escapeKey(key)+"?"+q.Encode(), nil, &none, nil)
}
