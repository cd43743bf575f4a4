package tlsserve

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPairReloadKeepsTheOldOneUnlessTheNewLoadsWhole(t *testing.T) {
	ca := MustCA(t)
	dir := t.TempDir()
	certFile, keyFile := ca.MustWritePair(t, dir, 100, time.Now().Add(time.Hour), "")
	p, err := LoadPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	serial := func() int64 { return p.Certificate().Leaf.SerialNumber.Int64() }
	if serial() != 100 {
		t.Fatalf("serial %d, want 100", serial())
	}
	if changed, err := p.Reload(); changed || err != nil {
		t.Errorf("Reload of the same files = %v, %v; want false, nil", changed, err)
	}

	otherCert, otherKey := ca.leaf(t, 101, time.Now().Add(time.Hour), "")
	expiredCert, expiredKey := ca.leaf(t, 102, time.Now().Add(-time.Minute), "")
	for _, tc := range []struct {
		name       string
		cert, key  []byte
		wantErr    string
		wantSerial int64
	}{
		{"KeyOfAnotherCertificate", otherCert, mustRead(t, keyFile), "private key does not match public key", 100},
		{"NotPEM", []byte("not a certificate"), otherKey, "failed to find any PEM data in certificate input", 100},
		{"Expired", expiredCert, expiredKey, ErrExpired.Error(), 100},
		{"EmptyKey", otherCert, nil, "failed to find any PEM data in key input", 100},
		{"GoodPair", otherCert, otherKey, "", 101},
	} {
		t.Run(tc.name, func(t *testing.T) {
			MustReplace(t, certFile, tc.cert)
			MustReplace(t, keyFile, tc.key)
			if !p.changed() {
				t.Errorf("changed() = false after both files were replaced")
			}
			changed, err := p.Reload()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Reload() = %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Reload() = %v, want an error containing %q", err, tc.wantErr)
			case changed != (tc.wantErr == ""):
				t.Errorf("Reload() changed = %v, want %v", changed, tc.wantErr == "")
			}
			if serial() != tc.wantSerial {
				t.Errorf("serving serial %d, want %d", serial(), tc.wantSerial)
			}
			if p.changed() {
				t.Errorf("changed() = true right after Reload: a refused pair would be retried at every poll")
			}
		})
	}
}

func TestLoadPairNamesTheMissingFile(t *testing.T) {
	dir := t.TempDir()
	_, err := LoadPair(filepath.Join(dir, "none.crt"), filepath.Join(dir, "none.key"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "certificate file") {
		t.Errorf("LoadPair of missing files = %v, want a not-exist error naming the certificate file", err)
	}
}

func mustRead(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
