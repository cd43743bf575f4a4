package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestSweepStaleRemovesOnlyDirsOfDeadOwners(t *testing.T) {
	parent := t.TempDir()
	tests := []struct {
		dir      string
		owner    string // "" writes no owner file
		wantKept bool
	}{
		{"srv-dead", "2147483646", false},
		{"srv-self", strconv.Itoa(os.Getpid()), true},
		{"srv-init", "1", true},
		{"srv-noowner", "", true},
		{"srv-garbage", "not a pid", true},
		{"other-dead", "2147483646", true}, // another prefix
	}
	for _, tt := range tests {
		dir := filepath.Join(parent, tt.dir)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if tt.owner != "" {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(tt.owner), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	sweepStale(parent, "srv-")
	for _, tt := range tests {
		_, err := os.Stat(filepath.Join(parent, tt.dir))
		if kept := err == nil; kept != tt.wantKept {
			t.Errorf("sweepStale: %s (owner %q) kept = %v, want %v", tt.dir, tt.owner, kept, tt.wantKept)
		}
	}
}
