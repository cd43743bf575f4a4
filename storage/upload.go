package storage

import (
	"crypto/sha256"
	"encoding"
	"fmt"
	"hash"
)

// NewSHA256State returns the digest state of an upload that holds no
// bytes yet (Upload.SHA256 of a new upload).
func NewSHA256State() []byte {
	b, err := sha256.New().(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		panic("storage: crypto/sha256 cannot marshal its state: " + err.Error())
	}
	return b
}

// ResumeSHA256 returns a SHA-256 that continues from state, an
// Upload.SHA256. Errors: ErrInvalid when state is not one crypto/sha256
// marshaled.
func ResumeSHA256(state []byte) (hash.Hash, error) {
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
		return nil, fmt.Errorf("%w: upload digest state: %v", ErrInvalid, err)
	}
	return h, nil
}

// SHA256State returns the state of h, a SHA-256 from ResumeSHA256 or
// crypto/sha256, for Upload.SHA256.
func SHA256State(h hash.Hash) []byte {
	b, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		panic("storage: crypto/sha256 cannot marshal its state: " + err.Error())
	}
	return b
}
