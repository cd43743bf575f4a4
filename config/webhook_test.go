package config

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestWebhookKeyDecodesTheSecret(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	c := MustLoad(t, nil, map[string]string{
		"GATEWAY_WEBHOOK_URL":    "https://u:p@hooks.example.com/in?token=t0k3n",
		"GATEWAY_WEBHOOK_SECRET": "whsec_" + base64.StdEncoding.EncodeToString(key),
	})
	got, err := c.WebhookKey()
	if err != nil || string(got) != string(key) {
		t.Fatalf("WebhookKey() = %q, %v; want %q", got, err, key)
	}
	for k, v := range c.Redacted() {
		if strings.Contains(v, "t0k3n") || strings.Contains(v, "u:p@") || strings.Contains(v, "whsec_") {
			t.Errorf("%s = %q shows a webhook credential", k, v)
		}
	}
	if d := Default().WebhookMaxAge.String(); d != "72h0m0s" {
		t.Errorf("default GATEWAY_WEBHOOK_MAX_AGE = %s, want 72h (SPEC §6)", d)
	}
}

func TestWebhookSecretErrorsDoNotShowTheSecret(t *testing.T) {
	for _, secret := range []string{"whsec_c2VjcmV0LXZhbHVl", "s3cr3t-value-without-prefix", "whsec_s3cr3t!value"} {
		_, err := Load(nil, envOf(map[string]string{"GATEWAY_WEBHOOK_SECRET": secret}))
		if err == nil {
			t.Fatalf("secret %q accepted", secret)
		}
		if strings.Contains(err.Error(), strings.TrimPrefix(secret, "whsec_")) {
			t.Errorf("error %q shows the secret", err)
		}
	}
}
