package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dunglas/httpsfv"

	"github.com/dlgate/dlgate/ledger"
)

func TestStructuredDictionariesParseAsRFC8941Says(t *testing.T) {
	for _, tt := range []struct {
		in    string
		valid bool
	}{
		{"sha-256=10", true},
		{"sha-512=3, sha-256=10, unixsum=0", true},
		{"sha-256=0;q=1", true},
		{"sha-256", true}, // a bare key is true
		{"  sha-256=1  ", true},
		{"sha-256=1,\tsha-512=2", true},
		{`a, b=?0, c=:aGk=:, d="x\"y", e=tok/en:x, f=1.5, *g=-3, h=(1 "two" three);p, i=()`, true},
		{"a=1;b;c=?1;d=tok", true},
		{"a=123456789012345", true},
		{"a=123456789012.123", true},
		{"", true},
		{"sha-256=", false},
		{"SHA-256=1", false},
		{"sha-256=1,", false},
		{"sha-256=1 x", false},
		{"=1", false},
		{"1a=1", false},
		{`a="unterminated`, false},
		{`a="bad \q escape"`, false},
		{"a=1.", false},
		{"a=1.2345", false},
		{"a=1234567890123456", false},
		{"a=1234567890123.1", false},
		{"a=:not base64!:", false},
		{"a=:unterminated", false},
		{"a=?2", false},
		{"a=(1 2", false},
		{"a=(1,2)", false},
		{"a=-", false},
		{"a=1;", false},
		{"a=1;B=2", false},
		{"a=1,,b=2", false},
		{"a=é", false},
	} {
		_, err := sfDictionary([]string{tt.in})
		if (err == nil) != tt.valid {
			t.Errorf("sfDictionary(%q) = %v, want valid %v", tt.in, err, tt.valid)
		}
		// A second, independent RFC 8941 parser agrees.
		if _, err := httpsfv.UnmarshalDictionary([]string{tt.in}); (err == nil) != tt.valid {
			t.Errorf("httpsfv.UnmarshalDictionary(%q) = %v, want valid %v (the table is wrong)", tt.in, err, tt.valid)
		}
	}
}

func TestDigestPreferencesOnlyEverLeaveOutWhatIsRefused(t *testing.T) {
	for _, tt := range []struct {
		field  []string
		accept bool
	}{
		{nil, true},
		{[]string{"sha-256=1"}, true},
		{[]string{"sha-512=3, sha-256=10, unixsum=0"}, true},
		{[]string{"sha-512=10"}, true},     // a hint: we send what we have
		{[]string{"sha-256=0"}, false},     // "not acceptable" (RFC 9530 §4)
		{[]string{"sha-256=0;x=1"}, false}, // parameters change nothing
		{[]string{"sha-512=3", "sha-256=0"}, false},
		{[]string{"sha-256=0, sha-256=4"}, true}, // the last member wins
		{[]string{"sha-256=0,"}, true},           // not a dictionary: as if absent
		{[]string{"sha-256=?0"}, true},           // not an integer preference
		{[]string{"garbage!!"}, true},
	} {
		if got := acceptsReprDigest(tt.field); got != tt.accept {
			t.Errorf("acceptsReprDigest(%q) = %v, want %v", tt.field, got, tt.accept)
		}
	}
	for _, tt := range []struct {
		field  []string
		accept bool
	}{
		{nil, true},
		{[]string{"SHA-512;q=1, SHA-256;q=1, SHA;q=0.1"}, true}, // aria2c 1.36
		{[]string{"sha-256"}, true},
		{[]string{"MD5;q=0.3, sha;q=1"}, true},
		{[]string{"SHA-256;q=0"}, false},
		{[]string{"sha-256 ; Q = 0.000"}, false},
		{[]string{"md5", "SHA-256;q=0"}, false},
		{[]string{"SHA-256;q=zero"}, true},
		{[]string{";;;,,,"}, true},
	} {
		if got := acceptsDigest(tt.field); got != tt.accept {
			t.Errorf("acceptsDigest(%q) = %v, want %v", tt.field, got, tt.accept)
		}
	}
}

// fileBody is the fs store's reader shape: a storage.Filer over a file.
type fileBody struct{ f *os.File }

func (b fileBody) Read(p []byte) (int, error) { return b.f.Read(p) }
func (b fileBody) Close() error               { return b.f.Close() }
func (b fileBody) File() *os.File             { return b.f }

func TestTheCheckOfAWholeFileHoldsBackOnlyItsLastBytes(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB
	sum := sha256.Sum256(data)
	for _, tt := range []struct {
		name    string
		damage  bool
		viaRead bool
	}{{"IntactBySendfile", false, false}, {"DamagedBySendfile", true, false}, {"IntactByRead", false, true}, {"DamagedByRead", true, true}} {
		t.Run(tt.name, func(t *testing.T) {
			stored := bytes.Clone(data)
			if tt.damage {
				stored[len(stored)/3] ^= 1
			}
			path := filepath.Join(t.TempDir(), "v.data")
			if err := os.WriteFile(path, stored, 0o444); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			s := &Server{log: slog.New(slog.NewTextHandler(&logs, nil))}
			o := ledger.Object{Key: "k", VersionID: "v1", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
			body := s.checkWhole(t.Context(), fileBody{f}, o, []any{"link_id", "l1"})
			c, ok := body.(*checkedFile)
			if !ok {
				t.Fatalf("checkWhole returned %T, want a checkedFile", body)
			}
			var sent int64
			var last error
			if tt.viaRead {
				n, err := io.Copy(io.Discard, struct{ io.Reader }{c})
				sent, last = n, err
			} else {
				for sent < o.Size {
					step := min(o.Size-sent, 1<<20)
					if last = c.next(step); last != nil {
						break
					}
					k, _ := io.CopyN(io.Discard, c.File(), step) // what sendfile would send
					sent += k
				}
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if !tt.damage {
				if last != nil || sent != o.Size {
					t.Fatalf("sent %d of %d bytes, %v; want all, no error", sent, o.Size, last)
				}
				return
			}
			if !errors.Is(last, errDigestMismatch) || sent >= o.Size || sent < o.Size-1<<20 {
				t.Errorf("sent %d of %d bytes, %v; want all but the last slice, then errDigestMismatch", sent, o.Size, last)
			}
			if !strings.Contains(logs.String(), "version_id=v1") || !strings.Contains(logs.String(), "level=ERROR") {
				t.Errorf("log = %q, want an error naming the version", logs.String())
			}
		})
	}
}

func TestClosingACheckedFileEarlyStopsItsHash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.data")
	if err := os.WriteFile(path, make([]byte, 64<<20), 0o444); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{log: slog.New(slog.DiscardHandler)}
	o := ledger.Object{Size: 64 << 20, SHA256: strings.Repeat("00", 32)}
	c := s.checkWhole(t.Context(), fileBody{f}, o, nil).(*checkedFile)
	if err := c.next(1 << 20); err != nil {
		t.Fatal(err)
	}
	c.Close() // returns once the hash has stopped: it must not read a closed file
	select {
	case <-c.done:
	default:
		t.Fatal("Close returned while the hash still ran")
	}
}

func TestAnUnchangedFileIsHashedOncePerProcess(t *testing.T) {
	data := bytes.Repeat([]byte("dlgate"), 100_000)
	sum := sha256.Sum256(data)
	path := filepath.Join(t.TempDir(), "v.data")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Server{log: slog.New(slog.DiscardHandler)}
	o := ledger.Object{Key: "k", VersionID: "v1", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	download := func() (checked bool) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		body := s.checkWhole(t.Context(), fileBody{f}, o, nil)
		defer body.Close()
		_, checked = body.(*checkedFile)
		if _, err := io.Copy(io.Discard, struct{ io.Reader }{body}); err != nil && checked {
			t.Fatalf("download: %v", err)
		}
		return checked
	}
	if !download() {
		t.Fatal("the first whole download was not checked")
	}
	if download() {
		t.Fatal("the second download of the unchanged file was hashed again")
	}
	// A write behind the gateway changes the file's identity: checked again.
	damaged := bytes.Clone(data)
	damaged[7] ^= 1
	if err := os.WriteFile(path, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	body := s.checkWhole(t.Context(), fileBody{f}, o, nil)
	defer body.Close()
	if _, ok := body.(*checkedFile); !ok {
		t.Fatal("a file written since it was checked is not checked again")
	}
	if _, err := io.Copy(io.Discard, struct{ io.Reader }{body}); !errors.Is(err, errDigestMismatch) {
		t.Fatalf("download of the damaged file: %v, want errDigestMismatch", err)
	}
}
