package tlsserve

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Pair is a certificate and its key read from two PEM files, served from
// memory and replaced only by a pair that loads whole: a renewal written
// half-way, a key that does not match or a certificate already expired is
// refused and the pair in memory keeps serving (SPEC §10).
type Pair struct {
	certFile, keyFile string
	now               func() time.Time

	cur atomic.Pointer[tls.Certificate]

	mu    sync.Mutex // serialises Reload
	stamp [2]fileStamp
}

// ErrExpired is a certificate whose NotAfter has passed.
var ErrExpired = errors.New("certificate has expired")

// LoadPair reads the pair at certFile and keyFile. Errors name the file
// and what is wrong with it; see Reload.
func LoadPair(certFile, keyFile string) (*Pair, error) {
	p := &Pair{certFile: certFile, keyFile: keyFile, now: time.Now}
	if _, err := p.Reload(); err != nil {
		return nil, err
	}
	return p, nil
}

// Certificate is the pair in force.
func (p *Pair) Certificate() *tls.Certificate { return p.cur.Load() }

// Files are the certificate and key file names.
func (p *Pair) Files() (cert, key string) { return p.certFile, p.keyFile }

// Reload reads the files again and, when they hold a valid pair, puts it
// in force. It reports whether the certificate in force changed. On an
// error the previous pair stays in force; the error says which file is
// unreadable, that the key does not match the certificate, or that the
// certificate expired (ErrExpired).
func (p *Pair) Reload() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	stamps := [2]fileStamp{stampOf(p.certFile), stampOf(p.keyFile)}
	cert, err := readPair(p.certFile, p.keyFile, p.now())
	// The stamps are kept even for a refused pair, so that a bad pair is
	// reported once, not at every poll, and the next write is tried.
	p.stamp = stamps
	if err != nil {
		return false, err
	}
	old := p.cur.Load()
	if old != nil && sameChain(old, cert) {
		return false, nil
	}
	p.cur.Store(cert)
	return true, nil
}

// changed reports whether either file looks different from when it was
// last read.
func (p *Pair) changed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return stampOf(p.certFile) != p.stamp[0] || stampOf(p.keyFile) != p.stamp[1]
}

// setStaple puts an OCSP response on the certificate in force, if it is
// still leaf.
func (p *Pair) setStaple(leaf *x509.Certificate, staple []byte) {
	for {
		old := p.cur.Load()
		if old == nil || old.Leaf == nil || !old.Leaf.Equal(leaf) {
			return
		}
		c := *old
		c.OCSPStaple = staple
		if p.cur.CompareAndSwap(old, &c) {
			return
		}
	}
}

func readPair(certFile, keyFile string, now time.Time) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("certificate file: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// crypto/tls says "private key does not match public key", or
		// what it could not find in which of the two.
		return nil, fmt.Errorf("%s and %s: %w", certFile, keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%s: %w", certFile, err)
		}
	}
	if now.After(cert.Leaf.NotAfter) {
		return nil, fmt.Errorf("%s: %w (not after %s)", certFile, ErrExpired, cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return &cert, nil
}

func sameChain(a, b *tls.Certificate) bool {
	if len(a.Certificate) != len(b.Certificate) {
		return false
	}
	for i := range a.Certificate {
		if string(a.Certificate[i]) != string(b.Certificate[i]) {
			return false
		}
	}
	return true
}

// fileStamp is what stat says of a file: a renewal that replaces the file
// (a rename, as certbot and Kubernetes secrets do) changes the inode, one
// that rewrites it in place changes size or time.
type fileStamp struct {
	ino   uint64
	size  int64
	mtime time.Time
	err   bool
}

func stampOf(name string) fileStamp {
	fi, err := os.Stat(name) // follows symlinks: the target is what is served
	if err != nil {
		return fileStamp{err: true}
	}
	return fileStamp{ino: inode(fi), size: fi.Size(), mtime: fi.ModTime()}
}
