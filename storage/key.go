package storage

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxKeyLen is the longest key, in bytes, that ValidateKey accepts. It is
// S3's limit, so a key valid here is valid on every store.
const MaxKeyLen = 1024

// ValidateKey reports whether key may name an object in any Store. It
// returns an error wrapping ErrInvalidKey when key is empty, longer than
// MaxKeyLen bytes, not valid UTF-8, contains a control character (NUL
// included) or a backslash, starts with "/", or has a "." or ".." segment.
//
// The rules are stricter than S3's own: a key that a file-system-backed
// store (or a user's download manager, which derives a file name from the
// key) could read as a path must not be able to leave its directory.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidKey, MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)
	case strings.HasPrefix(key, "/"):
		return fmt.Errorf("%w: absolute", ErrInvalidKey)
	case strings.ContainsRune(key, '\\'):
		// Windows clients and some servers read a backslash as a separator.
		return fmt.Errorf("%w: contains a backslash", ErrInvalidKey)
	}
	for _, r := range key {
		// unicode.IsControl covers NUL, C0, DEL and C1: none of them has a
		// place in a key and several split log lines or HTTP headers.
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: contains control character %U", ErrInvalidKey, r)
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("%w: contains a %q segment", ErrInvalidKey, seg)
		}
	}
	return nil
}

// ValidateBucket reports whether name is a valid S3-style bucket name: 3 to
// 63 characters of lowercase letters, digits, '.' and '-', starting and
// ending with a letter or digit, without ".." and not shaped like an IPv4
// address. It returns an error wrapping ErrInvalidKey otherwise, because a
// bucket is part of an object's name.
func ValidateBucket(name string) error {
	if len(name) < 3 || len(name) > 63 {
		return fmt.Errorf("%w: bucket name must be 3 to 63 characters", ErrInvalidKey)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && c != '.' && c != '-' {
			return fmt.Errorf("%w: bucket name has character %q", ErrInvalidKey, c)
		}
		if !alnum && (i == 0 || i == len(name)-1) {
			return fmt.Errorf("%w: bucket name must start and end with a letter or digit", ErrInvalidKey)
		}
	}
	if strings.Contains(name, "..") {
		return fmt.Errorf("%w: bucket name contains \"..\"", ErrInvalidKey)
	}
	if looksLikeIPv4(name) {
		return fmt.Errorf("%w: bucket name is shaped like an IP address", ErrInvalidKey)
	}
	return nil
}

func looksLikeIPv4(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 3 || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}
