package testenv

import (
	"regexp"
	"strings"
	"testing"
)

// namedTB gives uniqueName a test name of our choosing.
type namedTB struct {
	testing.TB
	name string
}

func (n namedTB) Name() string { return n.name }

func TestUniqueName(t *testing.T) {
	tests := []struct {
		testName string
		sep      byte
		maxLen   int
		valid    *regexp.Regexp
	}{
		{"TestClaim", '_', 64, regexp.MustCompile(`^t_testclaim_[0-9a-f]{10}$`)},
		{"TestClaim/Refuses_When-Exhausted#01", '_', 64, regexp.MustCompile(`^t_testclaim_refuses_when_exhausted_01_[0-9a-f]{10}$`)},
		{"TestS3/Upload√ünicode", '-', 63, regexp.MustCompile(`^t-tests3-upload-nicode-[0-9a-f]{10}$`)},
		{strings.Repeat("TestVeryLong/", 20), '-', 63, regexp.MustCompile(`^t-[a-z0-9-]*[a-z0-9]-[0-9a-f]{10}$`)},
		{strings.Repeat("x", 100) + "/" + "y", '_', 64, regexp.MustCompile(`^t_x+_[0-9a-f]{10}$`)},
		{"///", '-', 63, regexp.MustCompile(`^t-[0-9a-f]{10}$`)},
	}
	for _, tt := range tests {
		a := uniqueName(namedTB{name: tt.testName}, tt.sep, tt.maxLen)
		b := uniqueName(namedTB{name: tt.testName}, tt.sep, tt.maxLen)
		if !tt.valid.MatchString(a) || len(a) > tt.maxLen {
			t.Errorf("uniqueName(%q, %q, %d) = %q (len %d), want match %s", tt.testName, tt.sep, tt.maxLen, a, len(a), tt.valid)
		}
		if a == b {
			t.Errorf("uniqueName(%q) returned %q twice", tt.testName, a)
		}
	}
}
