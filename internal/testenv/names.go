package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
)

// uniqueName builds a name for a database or bucket that is unique across
// processes (random suffix) yet shows which test made it, which helps when
// reading a server's log. It uses only [a-z0-9] and sep, starts with "t" and
// is at most maxLen bytes long.
func uniqueName(tb testing.TB, sep byte, maxLen int) string {
	suffix := string(sep) + randHex(5)
	var b strings.Builder
	b.WriteString("t")
	b.WriteByte(sep)
	lastSep := true
	for _, r := range strings.ToLower(tb.Name()) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			lastSep = false
		} else if !lastSep {
			b.WriteByte(sep)
			lastSep = true
		}
	}
	name := strings.TrimRight(b.String(), string(sep))
	if len(name) > maxLen-len(suffix) {
		name = strings.TrimRight(name[:maxLen-len(suffix)], string(sep))
	}
	return name + suffix
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
