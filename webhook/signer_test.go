package webhook_test

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/webhook"
)

// The test vector of the Standard Webhooks reference libraries
// (libraries/go/webhook_test.go, TestWebhookSign, in
// github.com/standard-webhooks/standard-webhooks).
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func mustKey(tb testing.TB, secret string) []byte {
	tb.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

func TestSignMatchesTheSpecificationsTestVector(t *testing.T) {
	s, err := webhook.NewSigner(mustKey(t, specSecret))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Sign(specID, time.Unix(specTimestamp, 0), []byte(specBody)); got != specSignature {
		t.Fatalf("Sign(spec vector) = %q, want %q", got, specSignature)
	}
}

// verify is a receiver's check written from the specification's text,
// sharing nothing with the package: HMAC-SHA256 with the decoded secret
// over "id.timestamp.body", compared in constant time with each v1
// signature of the space-separated header.
func verify(secret, id, timestamp string, body []byte, header string) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + timestamp + "."))
	m.Write(body)
	want := m.Sum(nil)
	for _, sig := range strings.Fields(header) {
		v, b64, ok := strings.Cut(sig, ",")
		got, err := base64.StdEncoding.DecodeString(b64)
		if ok && v == "v1" && err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

func TestSignVerifiesWithAnIndependentImplementation(t *testing.T) {
	for _, n := range []int{webhook.MinKeyLen, 32, webhook.MaxKeyLen} {
		key := make([]byte, n)
		rand.Read(key)
		secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
		s, err := webhook.NewSigner(key)
		if err != nil {
			t.Fatal(err)
		}
		ts := time.Unix(1_700_000_000+int64(n), 0)
		body := []byte(fmt.Sprintf(`{"type":"grant.created","n":%d}`, n))
		sig := s.Sign("0190a5e4-1c2b-7d3e-8f40-123456789abc", ts, body)
		if !verify(secret, "0190a5e4-1c2b-7d3e-8f40-123456789abc", fmt.Sprint(ts.Unix()), body, sig) {
			t.Errorf("%d-byte key: signature %q does not verify", n, sig)
		}
		if verify(secret, "0190a5e4-1c2b-7d3e-8f40-123456789abc", fmt.Sprint(ts.Unix()+1), body, sig) {
			t.Errorf("%d-byte key: signature verifies with another timestamp", n)
		}
		if verify(secret, "0190a5e4-1c2b-7d3e-8f40-123456789abc", fmt.Sprint(ts.Unix()), append(body, ' '), sig) {
			t.Errorf("%d-byte key: signature verifies with another body", n)
		}
	}
}

func TestNewSignerRefusesKeysOutsideTheSpecificationsSizes(t *testing.T) {
	for _, n := range []int{0, webhook.MinKeyLen - 1, webhook.MaxKeyLen + 1} {
		if _, err := webhook.NewSigner(make([]byte, n)); err == nil {
			t.Errorf("NewSigner(%d bytes) = nil error", n)
		}
	}
}
