package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"
)

// The headers of the Standard Webhooks specification ("Webhook headers").
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Symmetric keys of the specification are 24 to 64 bytes ("Signing
// secret: random, at least 24 bytes, 512 bits maximum").
const (
	MinKeyLen = 24
	MaxKeyLen = 64
)

// Signer makes the v1 signature of the Standard Webhooks specification:
// HMAC-SHA256 over "{webhook-id}.{webhook-timestamp}.{body}" with the
// secret's bytes (the base64 after "whsec_", decoded), base64-encoded.
type Signer struct{ key []byte }

// NewSigner returns a signer with key, the decoded secret. Errors: a key
// outside MinKeyLen..MaxKeyLen bytes.
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < MinKeyLen || len(key) > MaxKeyLen {
		return nil, fmt.Errorf("webhook: the secret must decode to %d to %d bytes, got %d", MinKeyLen, MaxKeyLen, len(key))
	}
	return &Signer{key: append([]byte(nil), key...)}, nil
}

// Sign returns the webhook-signature header value for the attempt made
// at ts of the event id with body: "v1," and the base64 HMAC.
func (s *Signer) Sign(id string, ts time.Time, body []byte) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(ts.Unix(), 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
