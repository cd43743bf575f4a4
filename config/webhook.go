package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Sizes of a Standard Webhooks symmetric secret, in bytes.
const (
	minWebhookKey = 24
	maxWebhookKey = 64
)

// WebhookKey decodes GATEWAY_WEBHOOK_SECRET, "whsec_" followed by the
// standard base64 of the key, into the key's bytes: what the Standard
// Webhooks signature is made with. Errors never contain the secret.
func (c *Config) WebhookKey() ([]byte, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(c.WebhookSecret), "whsec_")
	if !ok {
		return nil, errors.New("must start with whsec_ (whsec_ and the base64 of 24 to 64 random bytes)")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errors.New("the part after whsec_ is not base64")
	}
	if len(key) < minWebhookKey || len(key) > maxWebhookKey {
		return nil, fmt.Errorf("must decode to %d to %d bytes, got %d", minWebhookKey, maxWebhookKey, len(key))
	}
	return key, nil
}

// validateWebhook checks the webhook settings: the receiver is an
// absolute http(s) URL (a query or user information may carry the
// receiver's own credential, so both are allowed and redacted in logs),
// and a URL needs a valid secret: unsigned webhooks are not sent.
func (c *Config) validateWebhook(bad func(name, format string, args ...any) error) error {
	if c.WebhookURL != "" {
		u, err := url.Parse(c.WebhookURL)
		switch {
		case err != nil:
			return bad("WEBHOOK_URL", "invalid URL")
		case u.Scheme != "http" && u.Scheme != "https":
			return bad("WEBHOOK_URL", "must be an absolute http or https URL, got %q", redactURL(c.WebhookURL))
		case u.Hostname() == "":
			return bad("WEBHOOK_URL", "must have a host, got %q", redactURL(c.WebhookURL))
		case u.Fragment != "":
			return bad("WEBHOOK_URL", "must not have a fragment")
		}
		if c.WebhookSecret == "" {
			return bad("WEBHOOK_SECRET", "required when GATEWAY_WEBHOOK_URL is set (whsec_ and the base64 of 24 to 64 random bytes)")
		}
	}
	if c.WebhookSecret != "" {
		if _, err := c.WebhookKey(); err != nil {
			return bad("WEBHOOK_SECRET", "%v", err)
		}
	}
	return nil
}
