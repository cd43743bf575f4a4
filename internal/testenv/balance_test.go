package testenv

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// get makes one request on a connection of its own through addr and
// returns the body.
func get(t *testing.T, addr string) (string, error) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func named(t *testing.T, name string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, name+" "+r.Host)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestBalancerSendsConnectionsToEachBackendInTurn(t *testing.T) {
	a, b := named(t, "a"), named(t, "b")
	lb := newBalancer("127.0.0.1:"+strconv.Itoa(FreePort(t)), a.Listener.Addr().String(), b.Listener.Addr().String())
	if err := lb.start(); err != nil {
		t.Fatal(err)
	}
	defer lb.stop()
	seen := map[string]int{}
	for range 6 {
		body, err := get(t, lb.addr)
		if err != nil {
			t.Fatal(err)
		}
		seen[body]++
	}
	// The Host header is the balancer's, as the client signed it.
	if seen["a "+lb.addr] != 3 || seen["b "+lb.addr] != 3 {
		t.Errorf("6 connections reached %v, want 3 each, with the balancer's Host", seen)
	}
	if lb.accepted[0].Load() != 3 || lb.accepted[1].Load() != 3 {
		t.Errorf("accepted = %d, %d; want 3, 3", lb.accepted[0].Load(), lb.accepted[1].Load())
	}
}

func TestBalancerPassesOverABackendThatIsDown(t *testing.T) {
	up := named(t, "up")
	down := named(t, "down")
	downAddr := down.Listener.Addr().String()
	down.Close()
	lb := newBalancer("127.0.0.1:"+strconv.Itoa(FreePort(t)), downAddr, up.Listener.Addr().String())
	if err := lb.start(); err != nil {
		t.Fatal(err)
	}
	defer lb.stop()
	for range 4 {
		if body, err := get(t, lb.addr); err != nil || body != "up "+lb.addr {
			t.Errorf("GET through the balancer = %q, %v; want the backend that is up", body, err)
		}
	}
}

func TestBalancerStopsAndStartsAgainOnItsAddress(t *testing.T) {
	a := named(t, "a")
	lb := newBalancer("127.0.0.1:"+strconv.Itoa(FreePort(t)), a.Listener.Addr().String())
	if err := lb.start(); err != nil {
		t.Fatal(err)
	}
	idle, err := net.Dial("tcp", lb.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	lb.stop() // returns only once the open connection is cut
	if _, err := idle.Read(make([]byte, 1)); err == nil {
		t.Errorf("a connection open across stop still reads")
	}
	if body, err := get(t, lb.addr); err == nil {
		t.Errorf("GET through a stopped balancer = %q, want an error", body)
	}
	if err := lb.start(); err != nil {
		t.Fatalf("start after stop: %v", err)
	}
	defer lb.stop()
	if body, err := get(t, lb.addr); err != nil || body != "a "+lb.addr {
		t.Errorf("GET after restart = %q, %v", body, err)
	}
}
