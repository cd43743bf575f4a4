package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// minUnknownKIDRefresh bounds refetches caused by tokens: a kid nobody
// published must not let anyone make the gateway hammer the provider.
const minUnknownKIDRefresh = 10 * time.Second

// maxJWKSSize bounds a fetched key set; real ones are a few KiB.
const maxJWKSSize = 1 << 20

var errRateLimited = errors.New("jwks refresh rate-limited")

// keySet is a JSON Web Key Set from a URL or file, cached and refreshed on a
// timer and when a token names an unknown kid.
type keySet struct {
	source  string // URL or file path
	isURL   bool
	client  *http.Client
	timeout time.Duration
	now     func() time.Time
	log     *slog.Logger
	life    context.Context // New's ctx: fetches outlive the request that caused them

	mu      sync.Mutex
	byKID   map[string]setKey
	keys    []setKey
	loaded  bool
	lastTry time.Time // start of the last fetch, for the unknown-kid limit
	flight  *fetchFlight
}

// fetchFlight is one fetch in progress; concurrent callers wait on done
// instead of starting their own.
type fetchFlight struct {
	done chan struct{}
	err  error
}

func newKeySet(ctx context.Context, c Config) (*keySet, error) {
	s := &keySet{client: c.HTTPClient, timeout: c.FetchTimeout, now: c.Now, log: c.Logger, life: ctx}
	u, err := url.Parse(c.JWKSURL)
	switch {
	case err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "":
		s.source, s.isURL = c.JWKSURL, true
	case err == nil && u.Scheme == "file" && u.Path != "":
		s.source = u.Path
	case err == nil && u.Scheme == "":
		s.source = c.JWKSURL
	default:
		return nil, fmt.Errorf("GATEWAY_JWT_JWKS_URL: want an http(s) URL or a file path")
	}
	if err := s.refresh(ctx, false); err != nil {
		if !s.isURL {
			return nil, fmt.Errorf("GATEWAY_JWT_JWKS_URL: %v", err)
		}
		s.log.Warn("auth: JWKS not loaded yet, tokens are refused until it is", "jwks", s.where(), "err", err)
	}
	go s.refreshEvery(ctx, c.JWKSRefresh)
	return s, nil
}

// key is the jwt.Keyfunc of a JWKS: it picks the key by kid, refetching the
// set once (rate-limited) when the kid is unknown, and checks the key's
// kty and alg against the token's alg.
func (s *keySet) key(ctx context.Context, t *jwt.Token) (any, error) {
	var kid string
	raw, hasKID := t.Header["kid"]
	if hasKID {
		var ok bool
		if kid, ok = raw.(string); !ok {
			return nil, refuse(ReasonMalformed)
		}
	}
	k, found := s.find(kid, hasKID)
	if !found && hasKID {
		// Rotation: the provider may have published a key since our last
		// fetch. Without a kid a refetch could not tell us which key to use.
		if err := s.refresh(ctx, true); err != nil && !errors.Is(err, errRateLimited) {
			s.log.Debug("auth: JWKS refresh for unknown kid failed", "jwks", s.where(), "err", err)
		}
		k, found = s.find(kid, hasKID)
	}
	switch {
	case !found && !s.isLoaded():
		return nil, ErrUnavailable
	case !found && hasKID:
		return nil, refuse(ReasonUnknownKID)
	case !found:
		return nil, refuse(ReasonMissingKID)
	case !k.accepts(t.Method.Alg()):
		return nil, refuse(ReasonAlgMismatch)
	}
	return k.key, nil
}

// find returns the key named kid. A token without kid is verified only
// when the set holds exactly one key: trying every key would let a token
// pick among keys meant for different algorithms or audiences.
func (s *keySet) find(kid string, hasKID bool) (setKey, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if hasKID {
		k, ok := s.byKID[kid]
		return k, ok
	}
	if len(s.keys) == 1 {
		return s.keys[0], true
	}
	return setKey{}, false
}

func (s *keySet) isLoaded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loaded
}

// refresh fetches the set, or waits for the fetch already in flight. With
// limited set, it returns errRateLimited instead when the last fetch started
// less than minUnknownKIDRefresh ago. It returns when the fetch ends (at
// most s.timeout) or ctx ends, whichever is first.
func (s *keySet) refresh(ctx context.Context, limited bool) error {
	s.mu.Lock()
	f := s.flight
	if f == nil {
		now := s.now()
		if limited && !s.lastTry.IsZero() && now.Sub(s.lastTry) < minUnknownKIDRefresh {
			s.mu.Unlock()
			return errRateLimited
		}
		s.lastTry = now
		f = &fetchFlight{done: make(chan struct{})}
		s.flight = f
		go s.fetch(f)
	}
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fetch runs one flight: it loads and parses the set and, only when that
// worked, replaces the cached keys, so a failed or broken fetch keeps the
// keys we had.
func (s *keySet) fetch(f *fetchFlight) {
	ctx, cancel := context.WithTimeout(s.life, s.timeout)
	defer cancel()
	var keys []setKey
	var skipped int
	b, err := s.read(ctx)
	if err == nil {
		keys, skipped, err = parseJWKS(b)
	}
	s.mu.Lock()
	if err == nil {
		s.byKID = make(map[string]setKey, len(keys))
		for _, k := range keys {
			if k.kid != "" {
				s.byKID[k.kid] = k
			}
		}
		s.keys, s.loaded = keys, true
	}
	s.flight, f.err = nil, err
	s.mu.Unlock()
	close(f.done)
	if err == nil {
		s.log.Debug("auth: JWKS loaded", "jwks", s.where(), "keys", len(keys), "skipped", skipped)
	}
}

func (s *keySet) read(ctx context.Context) ([]byte, error) {
	var body io.ReadCloser
	if s.isURL {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.source, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/jwk-set+json, application/json")
		resp, err := s.client.Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) { // its text repeats the whole URL
				err = ue.Err
			}
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("status %d", resp.StatusCode)
		}
		body = resp.Body
	} else {
		f, err := os.Open(s.source)
		if err != nil {
			return nil, err
		}
		body = f
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, maxJWKSSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxJWKSSize {
		return nil, fmt.Errorf("key set larger than %d bytes", maxJWKSSize)
	}
	return b, nil
}

// refreshEvery refetches the set on a timer, so keys that were rotated out
// stop working even if no token with a new kid comes along.
func (s *keySet) refreshEvery(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.refresh(ctx, false); err != nil && ctx.Err() == nil {
				s.log.Warn("auth: JWKS refresh failed, keeping the keys we have", "jwks", s.where(), "err", err)
			}
		}
	}
}

// where names the source for logs without a query string or user info,
// which could hold a credential.
func (s *keySet) where() string {
	if !s.isURL {
		return s.source
	}
	u, err := url.Parse(s.source)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Scheme + "://" + u.Host + u.Path
}
