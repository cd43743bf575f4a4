package gateway_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/token"
)

// testKeys are the keys of a harness: tests use them to make well-formed
// tokens of rows that do not exist, and to check minted ones.
var testKeys = token.NewKeys(testSecret)

// isToken reports whether tok is a link or session token of testKeys.
func isToken(tok string) bool {
	return testKeys.Check(token.Link, tok) || testKeys.Check(token.Session, tok)
}

// withRawBytes decodes tok, lets edit change its 32 bytes, and re-encodes.
func withRawBytes(tb testing.TB, tok string, edit func(raw []byte)) string {
	tb.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) != 32 {
		tb.Fatalf("token %q does not decode to 32 bytes: %v", tok, err)
	}
	edit(raw)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// TestForgedTokensAreRefusedWithoutTheDatabase: a token of the right shape
// whose tag does not match is as unknown as a malformed one, and costs no
// database query (SPEC §2).
func TestForgedTokensAreRefusedWithoutTheDatabase(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "forged.bin", testData(100), nil)
	x := h.MustMint(t, l)
	linkTok := l.Token
	sessionTok := strings.TrimPrefix(x.SessionURL, h.Server.PublicURL+"/s/")
	if !testKeys.Check(token.Link, linkTok) || !testKeys.Check(token.Session, sessionTok) {
		t.Fatalf("minted tokens %q, %q do not check", linkTok, sessionTok)
	}

	const base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	forged := map[string]struct{ link, session string }{
		"ForgedTag": {
			withRawBytes(t, linkTok, func(raw []byte) { copy(raw[16:], bytes.Repeat([]byte{0x5a}, 16)) }),
			withRawBytes(t, sessionTok, func(raw []byte) { copy(raw[16:], bytes.Repeat([]byte{0x5a}, 16)) }),
		},
		"FlippedBitInIDPart": {
			withRawBytes(t, linkTok, func(raw []byte) { raw[3] ^= 0x04 }),
			withRawBytes(t, sessionTok, func(raw []byte) { raw[3] ^= 0x04 }),
		},
		"FlippedBitInTag": {
			withRawBytes(t, linkTok, func(raw []byte) { raw[31] ^= 0x01 }),
			withRawBytes(t, sessionTok, func(raw []byte) { raw[31] ^= 0x01 }),
		},
		"UnknownSecret": {
			token.NewKeys([]byte("not-the-gateway-secret-0123456789")).Derive(token.Link, l.ID),
			token.NewKeys([]byte("not-the-gateway-secret-0123456789")).Derive(token.Session, x.SessionID),
		},
		"OtherKind": {sessionTok, linkTok},
		"NonCanonicalSpelling": {
			linkTok[:42] + string(base64URL[strings.IndexByte(base64URL, linkTok[42])|1]),
			sessionTok[:42] + string(base64URL[strings.IndexByte(base64URL, sessionTok[42])|1]),
		},
	}
	for name, f := range forged {
		for _, c := range []struct{ method, path, suffix string }{
			{http.MethodGet, "/d/" + f.link, "link-unavailable"},
			{http.MethodHead, "/d/" + f.link, "link-unavailable"},
			{http.MethodPost, "/d/" + f.link + "/sessions", "link-unavailable"},
			{http.MethodGet, "/s/" + f.session, "session-unavailable"},
			{http.MethodHead, "/s/" + f.session, "session-unavailable"},
		} {
			t.Run(name+"/"+c.method+c.path[:2], func(t *testing.T) {
				before := h.Ledger.Calls("")
				resp, body := h.Do(t, c.method, h.Public.URL+c.path, nil)
				if c.method == http.MethodHead {
					if resp.StatusCode != http.StatusNotFound {
						t.Errorf("HEAD %s = %d, want 404", c.path, resp.StatusCode)
					}
				} else {
					mustProblem(t, resp, body, http.StatusNotFound, c.suffix)
				}
				if n := h.Ledger.Calls("") - before; n != 0 {
					t.Errorf("%s %s made %d ledger calls, want 0", c.method, c.path, n)
				}
			})
		}
	}
	// The real tokens still work: the refusals above were the tags.
	if resp, _ := h.Do(t, http.MethodHead, l.URL, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD of the real link = %d, want 200", resp.StatusCode)
	}
	if resp, _ := h.Do(t, http.MethodHead, x.SessionURL, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD of the real session = %d, want 200", resp.StatusCode)
	}
}

// rotated serves a second gateway on h's ledger and store, with secret
// and previous secrets replacing h's: the same deployment after a restart
// with a rotated GATEWAY_SECRET.
type rotated struct {
	Public, Admin *httptest.Server
	URL           string // the public URL links and sessions are under
}

func mustRotate(tb testing.TB, h *Harness, secret []byte, previous ...[]byte) *rotated {
	tb.Helper()
	public := httptest.NewUnstartedServer(nil)
	opts := h.Server.Options
	opts.Secret, opts.SecretPrevious = secret, previous
	opts.PublicURL = "http://" + public.Listener.Addr().String()
	srv, err := gateway.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	public.Config.Handler = srv.PublicHandler()
	public.Start()
	tb.Cleanup(public.Close)
	admin := httptest.NewServer(srv.AdminHandler())
	tb.Cleanup(admin.Close)
	return &rotated{Public: public, Admin: admin, URL: opts.PublicURL}
}

func TestTokensOfThePreviousSecretWorkAfterRotation(t *testing.T) {
	h := MustHarness(t)
	data := testData(3000)
	l := h.MustObjectLink(t, "rotate.bin", data, nil)
	x := h.MustMint(t, l)
	linkTok := l.Token
	sessionTok := strings.TrimPrefix(x.SessionURL, h.Server.PublicURL+"/s/")

	newSecret := []byte("the-rotated-secret-0123456789abcdef")
	g := mustRotate(t, h, newSecret, testSecret)

	t.Run("LinkStillDownloads", func(t *testing.T) {
		resp, body := h.Do(t, http.MethodGet, g.URL+"/d/"+linkTok, nil)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
			t.Fatalf("GET old link after rotation = %d, %d bytes; want 200 and the object", resp.StatusCode, len(body))
		}
	})
	t.Run("SessionStillServes", func(t *testing.T) {
		resp, body := h.Do(t, http.MethodGet, g.URL+"/s/"+sessionTok, http.Header{"Range": {"bytes=0-99"}})
		if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, data[:100]) {
			t.Fatalf("GET old session after rotation = %d %q; want 206 and the range", resp.StatusCode, body)
		}
	})
	t.Run("ShowLinkAnswersTheWorkingURL", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, g.Admin.URL+"/v1/links/"+l.ID, nil)
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		resp, body := mustDo(t, http.DefaultClient, req)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/links/%s = %d %s", l.ID, resp.StatusCode, body)
		}
		shown := mustJSON[linkJSON](t, body)
		if shown.Token != linkTok || shown.URL != g.URL+"/d/"+linkTok {
			t.Errorf("show after rotation = %q %q, want the token the link was made with, %q", shown.Token, shown.URL, linkTok)
		}
	})
	t.Run("NewLinksUseTheNewSecret", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, g.Admin.URL+"/v1/links",
			strings.NewReader(`{"object":{"key":"rotate.bin"},"downloads":1,"expires_in":60}`))
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		resp, body := mustDo(t, http.DefaultClient, req)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST /v1/links = %d %s", resp.StatusCode, body)
		}
		n := mustJSON[linkJSON](t, body)
		if want := token.NewKeys(newSecret).Derive(token.Link, n.ID); n.Token != want {
			t.Errorf("new link token = %q, want the new secret's %q", n.Token, want)
		}
		if testKeys.Check(token.Link, n.Token) {
			t.Errorf("new link token %q checks under the old secret", n.Token)
		}
		if resp, _ := h.Do(t, http.MethodHead, n.URL, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("HEAD new link = %d, want 200", resp.StatusCode)
		}
	})
	t.Run("DroppedSecretIsRefusedWithoutTheDatabase", func(t *testing.T) {
		g2 := mustRotate(t, h, newSecret)
		before := h.Ledger.Calls("")
		resp, body := h.Do(t, http.MethodGet, g2.URL+"/d/"+linkTok, nil)
		mustProblem(t, resp, body, http.StatusNotFound, "link-unavailable")
		resp, body = h.Do(t, http.MethodGet, g2.URL+"/s/"+sessionTok, nil)
		mustProblem(t, resp, body, http.StatusNotFound, "session-unavailable")
		if n := h.Ledger.Calls("") - before; n != 0 {
			t.Errorf("tokens of a dropped secret made %d ledger calls, want 0", n)
		}
	})
}

func TestNewRefusesAShortPreviousSecret(t *testing.T) {
	h := MustHarness(t)
	opts := h.Server.Options
	opts.SecretPrevious = [][]byte{[]byte("short")}
	if _, err := gateway.New(opts); err == nil {
		t.Fatal("New accepted a 5-byte previous secret")
	}
}
