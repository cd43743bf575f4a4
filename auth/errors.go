package auth

import "errors"

// ErrInvalidCredential is wrapped by every refusal of a credential that was
// presented but failed verification; the gateway answers 401 with
// `WWW-Authenticate: Bearer error="invalid_token"` (SPEC §8). The wrapping
// error's text carries only the reason, never the credential.
var ErrInvalidCredential = errors.New("auth: invalid credential")

// ErrUnavailable means the token could not be checked because no key set has
// been loaded yet (the JWKS source is down or unreachable). It is not the
// caller's fault: the gateway should answer 503, not 401.
var ErrUnavailable = errors.New("auth: verification keys unavailable")

// Reasons, a closed set so they can be metric labels.
const (
	ReasonMalformed       = "malformed"        // not a JWT, bad base64/JSON, empty Bearer, repeated headers
	ReasonTooLarge        = "too_large"        // over maxTokenLen, refused before parsing
	ReasonAlgMismatch     = "alg_mismatch"     // alg none, unknown, or not the key's (algorithm confusion)
	ReasonBadSignature    = "bad_signature"    // signature does not verify
	ReasonUnknownKID      = "unknown_kid"      // kid not in the key set, even after a refresh
	ReasonMissingKID      = "missing_kid"      // no kid and the key set has more than one key
	ReasonExpired         = "expired"          // exp passed (beyond the leeway)
	ReasonNotYetValid     = "not_yet_valid"    // nbf ahead (beyond the leeway)
	ReasonWrongIssuer     = "wrong_issuer"     // iss differs from GATEWAY_JWT_ISSUER
	ReasonWrongAudience   = "wrong_audience"   // aud lacks GATEWAY_JWT_AUDIENCE
	ReasonMissingClaim    = "missing_claim"    // exp, a required iss/aud, or the account claim absent or empty
	ReasonBadAccount      = "bad_account"      // account not a string, too long, or with control characters
	ReasonInvalid         = "invalid"          // any other refusal by the JWT library
	ReasonKeysUnavailable = "keys_unavailable" // ErrUnavailable
	ReasonOther           = "other"            // an error from outside this package
)

// credError is a refusal. Its text is fixed per reason, so nothing the
// caller sent (token, kid, claim values) can reach a log line through it.
type credError struct{ reason string }

func (e *credError) Error() string { return "auth: invalid credential: " + e.reason }
func (e *credError) Unwrap() error { return ErrInvalidCredential }

func refuse(reason string) error { return &credError{reason: reason} }

// Reason returns a short, bounded label for err: one of the Reason
// constants, or "" for a nil error.
func Reason(err error) string {
	var ce *credError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ce):
		return ce.reason
	case errors.Is(err, ErrUnavailable):
		return ReasonKeysUnavailable
	case errors.Is(err, ErrInvalidCredential):
		return ReasonInvalid
	}
	return ReasonOther
}
