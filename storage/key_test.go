package storage_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlgate/dlgate/storage"
)

func TestValidateKey(t *testing.T) {
	tests := []struct {
		key string
		ok  bool
	}{
		{"a", true},
		{"a/b/c.txt", true},
		{"reports/2024/q1 final (v2).pdf", true},
		{"été/naïve.txt", true},
		{"a..b", true},
		{".hidden", true},
		{"a/.../b", true},
		{"dir/", true},
		{strings.Repeat("k", storage.MaxKeyLen), true},

		{"", false},
		{strings.Repeat("k", storage.MaxKeyLen+1), false},
		{"/abs", false},
		{"../x", false},
		{"a/../b", false},
		{"a/..", false},
		{"..", false},
		{".", false},
		{"./a", false},
		{"a/./b", false},
		{"a\x00b", false},
		{"a\nb", false},
		{"a\rb", false},
		{"a\x7fb", false},
		{"a\u0085b", false},
		{"a\\b", false},
		{"..\\x", false},
		{"bad\xffutf8", false},
	}
	for _, tt := range tests {
		err := storage.ValidateKey(tt.key)
		if tt.ok && err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", tt.key, err)
		}
		if !tt.ok && !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalidKey", tt.key, err)
		}
	}
}

func TestValidateBucket(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"local", true},
		{"my-bucket.v2", true},
		{"abc", true},
		{"123", true},
		{strings.Repeat("b", 63), true},
		{"10.0.0.1a", true},

		{"", false},
		{"ab", false},
		{strings.Repeat("b", 64), false},
		{"My-Bucket", false},
		{"under_score", false},
		{"-start", false},
		{"end-", false},
		{".start", false},
		{"a..b", false},
		{"../x", false},
		{"a/b", false},
		{"192.168.1.1", false},
	}
	for _, tt := range tests {
		err := storage.ValidateBucket(tt.name)
		if tt.ok && err != nil {
			t.Errorf("ValidateBucket(%q) = %v, want nil", tt.name, err)
		}
		if !tt.ok && !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("ValidateBucket(%q) = %v, want ErrInvalidKey", tt.name, err)
		}
	}
}
