package config

import (
	"strings"
	"testing"
)

func TestURLSettingsNeverLogTheirCredentials(t *testing.T) {
	c := MustLoad(t, nil, map[string]string{
		"GATEWAY_STORE": "s3", "GATEWAY_S3_BUCKET": "b",
		"GATEWAY_S3_ENDPOINT":  "https://AKIAEXAMPLE:s3cr3t-pass@minio.internal:9000",
		"GATEWAY_JWT_JWKS_URL": "https://id.example/jwks.json?api_key=k3y-value",
	})
	got := c.Redacted()
	for k, v := range got {
		for _, secret := range []string{"s3cr3t-pass", "AKIAEXAMPLE", "k3y-value"} {
			if strings.Contains(v, secret) {
				t.Errorf("%s = %q shows %q", k, v, secret)
			}
		}
	}
	if ep := got["GATEWAY_S3_ENDPOINT"]; !strings.Contains(ep, "minio.internal:9000") {
		t.Errorf("GATEWAY_S3_ENDPOINT = %q: the host should stay visible", ep)
	}
}
