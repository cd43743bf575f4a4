package deliver

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/storage"
)

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
			s := &Pipeline{Config: Config{Log: slog.New(slog.NewTextHandler(&logs, nil))}}
			o := storage.Version{Key: "k", VersionID: "v1", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
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

func TestClosingTheLastDownloadOfACheckStopsItsHash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.data")
	if err := os.WriteFile(path, make([]byte, 64<<20), 0o444); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s := &Pipeline{Config: Config{Log: slog.New(slog.DiscardHandler)}}
	o := storage.Version{Size: 64 << 20, SHA256: strings.Repeat("00", 32)}
	c := s.checkWhole(t.Context(), fileBody{f}, o, nil).(*checkedFile)
	if err := c.next(1 << 20); err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case <-c.check.ready:
	case <-time.After(30 * time.Second): // a hang guard, not a timing
		t.Fatal("the hash went on after its only download closed")
	}
	if !errors.Is(c.check.err, errUnchecked) {
		t.Errorf("a stopped check ended with %v, want errUnchecked", c.check.err)
	}
	// A later download of the file starts a check of its own.
	f2, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	c2 := s.checkWhole(t.Context(), fileBody{f2}, o, nil).(*checkedFile)
	defer c2.Close()
	if c2.check == c.check {
		t.Error("a download after the check stopped joined the stopped check")
	}
}

// openChecked opens path as the fs store would and returns checkWhole's body.
func openChecked(t *testing.T, s *Pipeline, path string, o storage.Version) *checkedFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := s.checkWhole(t.Context(), fileBody{f}, o, nil).(*checkedFile)
	if !ok {
		t.Fatal("checkWhole did not check a whole download")
	}
	return c
}

func TestConcurrentDownloadsOfOneFileShareOneCheck(t *testing.T) {
	for _, damaged := range []bool{false, true} {
		t.Run(map[bool]string{false: "Intact", true: "Damaged"}[damaged], func(t *testing.T) {
			data := bytes.Repeat([]byte("shared check "), 1<<18)
			sum := sha256.Sum256(data)
			if damaged {
				data[len(data)/2] ^= 1
			}
			path := filepath.Join(t.TempDir(), "v.data")
			if err := os.WriteFile(path, data, 0o444); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			s := &Pipeline{Config: Config{Log: slog.New(slog.NewTextHandler(&logs, nil))}}
			o := storage.Version{Key: "k", VersionID: "v1", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
			const n = 20
			cs := make([]*checkedFile, n)
			for i := range cs {
				cs[i] = openChecked(t, s, path, o)
			}
			for _, c := range cs[1:] {
				if c.check != cs[0].check {
					t.Fatal("two downloads of one file that run at once have checks of their own")
				}
			}
			errs := make(chan error, n)
			for _, c := range cs {
				go func() {
					_, err := io.Copy(io.Discard, struct{ io.Reader }{c})
					errs <- err
				}()
			}
			for range n {
				err := <-errs
				if damaged != errors.Is(err, errDigestMismatch) || !damaged && err != nil {
					t.Errorf("a download of the %s file ended with %v", map[bool]string{false: "intact", true: "damaged"}[damaged], err)
				}
			}
			for _, c := range cs {
				c.Close()
			}
			if got := s.verifier.hashes.Load(); got != 1 {
				t.Errorf("%d downloads at once hashed the file %d times, want once", n, got)
			}
			if damaged && strings.Count(logs.String(), "level=ERROR") != n {
				t.Errorf("want one error line per cut download, got:\n%s", logs.String())
			}
		})
	}
}

func TestChecksOfManyFilesHashAtMostHalfTheProcessorsAtOnce(t *testing.T) {
	dir := t.TempDir()
	s := &Pipeline{Config: Config{Log: slog.New(slog.DiscardHandler)}}
	const files = 8
	data := make([]byte, 8<<20)
	sum := sha256.Sum256(data)
	o := storage.Version{Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	var cs []*checkedFile
	for i := range files {
		path := filepath.Join(dir, strconv.Itoa(i))
		if err := os.WriteFile(path, data, 0o444); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, openChecked(t, s, path, o))
	}
	done := make(chan error, files)
	for _, c := range cs {
		go func() {
			_, err := io.Copy(io.Discard, struct{ io.Reader }{c})
			c.Close()
			done <- err
		}()
	}
	for range files {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if peak, limit := s.verifier.peak.Load(), int64(hashSlots()); peak > limit || peak < 1 {
		t.Errorf("%d checks hashed at once at the peak, want 1 to %d", peak, limit)
	}
	if got := s.verifier.hashes.Load(); got != files {
		t.Errorf("%d files were hashed %d times, want once each", files, got)
	}
}

func TestAnUnchangedFileIsHashedOncePerProcess(t *testing.T) {
	data := bytes.Repeat([]byte("dlgate"), 100_000)
	sum := sha256.Sum256(data)
	path := filepath.Join(t.TempDir(), "v.data")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Pipeline{Config: Config{Log: slog.New(slog.DiscardHandler)}}
	o := storage.Version{Key: "k", VersionID: "v1", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
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
