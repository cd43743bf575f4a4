package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/config"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/storage/fs"
)

// TestObjectsDigestFillsInTheVersionsStoredBeforeDigests: versions the
// ledger recorded without a SHA-256 get the digest of their bytes, with
// the links that pin them; one the store cannot read is reported and left
// for the next run, which finds only it.
func TestObjectsDigestFillsInTheVersionsStoredBeforeDigests(t *testing.T) {
	dataDir := t.TempDir()
	env := map[string]string{"GATEWAY_DATA_DIR": dataDir}
	cfg, err := config.Load(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := openLedger(ctx, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := fs.New(cfg.FSRoot)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	contents := map[string][]byte{"a.bin": bytes.Repeat([]byte("a"), 3<<20), "b.txt": []byte("bee\n"), "gone.bin": []byte("lost")}
	versions := map[string]ledger.Object{}
	for key, data := range contents {
		v, err := st.Put(ctx, "", key, bytes.NewReader(data), int64(len(data)), "")
		if err != nil {
			t.Fatal(err)
		}
		// As the gateway recorded uploads before it computed digests.
		o := ledger.Object{Bucket: v.Bucket, Key: v.Key, VersionID: v.VersionID, Size: v.Size, ETag: v.ETag, ContentType: v.ContentType}
		if err := db.ObjectRecord(ctx, o); err != nil {
			t.Fatal(err)
		}
		versions[key] = o
	}
	id := uuid.Must(uuid.NewV7()).String()
	hash := sha256.Sum256([]byte(id))
	if _, _, err := db.LinkCreate(ctx, &ledger.Link{ID: id, TokenHash: hash[:], Object: versions["a.bin"], Filename: "a.bin",
		Allowance: 1, Remaining: 1, ExpiresAt: time.Now().Add(time.Hour), Delivery: ledger.DeliveryStream}); err != nil {
		t.Fatal(err)
	}
	gone, _ := filepath.Glob(filepath.Join(cfg.FSRoot, "local", "*", "*", versions["gone.bin"].VersionID+".data"))
	if len(gone) != 1 || os.Remove(gone[0]) != nil {
		t.Fatalf("could not remove the data of gone.bin (%v)", gone)
	}

	var stdout, stderr bytes.Buffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Env: func(k string) string { return env[k] },
		IsTerminal: func(w io.Writer) bool { return w == &stderr }} // with its progress bar
	err = m.Run(ctx, []string{"objects", "digest", "--all"})
	if err == nil || !strings.Contains(err.Error(), "1 versions could not be digested") {
		t.Errorf("objects digest --all = %v, want it to report the one version it could not read", err)
	}
	if want := "digested 2 versions"; !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout = %q, want %q", stdout.String(), want)
	}
	if !strings.Contains(stderr.String(), "3 stored versions without a SHA-256") || !strings.Contains(stderr.String(), "digesting") ||
		!strings.Contains(stderr.String(), "could not digest gone.bin version "+versions["gone.bin"].VersionID) {
		t.Errorf("stderr = %q, want the count, a progress bar and gone.bin named", stderr.String())
	}
	for key, data := range contents {
		got, err := db.ObjectGet(ctx, versions[key].Bucket, key, versions[key].VersionID)
		want := hex.EncodeToString(sha256sum(data))
		if key == "gone.bin" {
			want = ""
		}
		if err != nil || got.SHA256 != want {
			t.Errorf("%s: recorded SHA256 %q, %v, want %q", key, got.SHA256, err, want)
		}
	}
	l, err := db.LinkGet(ctx, id)
	if err != nil || l.Object.SHA256 != hex.EncodeToString(sha256sum(contents["a.bin"])) {
		t.Errorf("the link to a.bin has SHA256 %q, %v, want its digest", l.Object.SHA256, err)
	}

	// A second run takes up only what is still without one.
	r := MustRun(t, env, "objects", "digest", "--all")
	if r.code != 1 || !strings.Contains(r.stderr, "1 stored versions without a SHA-256, 4 bytes") || !strings.Contains(r.stdout, "digested 0 versions") {
		t.Errorf("second run: code %d, stdout %q, stderr %q; want gone.bin alone, failing again", r.code, r.stdout, r.stderr)
	}
	if r := MustRun(t, env, "objects", "digest"); r.code != 2 || !strings.Contains(r.line, "--all is required") {
		t.Errorf("objects digest without --all: code %d, %q; want a usage error", r.code, r.line)
	}
	if r := MustRun(t, env, "help", "objects", "digest"); r.code != 0 || !strings.Contains(r.stdout, "run again") {
		t.Errorf("help objects digest: code %d, %q", r.code, r.stdout)
	}
}

func sha256sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}
