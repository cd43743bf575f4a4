package deliver

import "testing"

func TestKernelVersion(t *testing.T) {
	for _, tc := range []struct {
		in           string
		major, minor int
		ok           bool
	}{
		{"6.1.0-18-amd64", 6, 1, true},
		{"4.6", 4, 6, true},
		{"5.15.0-1051-azure", 5, 15, true},
		{"3.10.0-1160.el7.x86_64", 3, 10, true},
		{"weird", 0, 0, false},
	} {
		if major, minor, ok := kernelVersion(tc.in); major != tc.major || minor != tc.minor || ok != tc.ok {
			t.Errorf("kernelVersion(%q) = %d, %d, %v, want %d, %d, %v", tc.in, major, minor, ok, tc.major, tc.minor, tc.ok)
		}
	}
}
