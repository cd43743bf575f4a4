package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // reading session rows behind the gateways
)

// chaosEnv is the configuration of clusters that go through faults: short
// limits so that each fault shows within seconds, and JSON logs that a
// test can read.
// chaosDBTimeout is the chaos gateways' GATEWAY_DB_TIMEOUT.
const chaosDBTimeout = 2 * time.Second

func chaosEnv(extra map[string]string) map[string]string {
	env := map[string]string{
		"GATEWAY_STORE_OPEN_TIMEOUT": chaosOpenTimeout.String(),
		"GATEWAY_STORE_IDLE_TIMEOUT": chaosIdleTimeout.String(),
		"GATEWAY_SLOT_LEASE":         chaosLease.String(),
		// Bounded waits on the database, where the gateway has them;
		// a gateway without the setting ignores it.
		"GATEWAY_DB_TIMEOUT": chaosDBTimeout.String(),
		"GATEWAY_LOG_FORMAT": "json",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

const (
	chaosOpenTimeout = 2 * time.Second
	chaosIdleTimeout = 3 * time.Second
	chaosLease       = 3 * time.Second
)

// envOf returns the value of key in the environment g was started with.
func envOf(g *Gateway, key string) string {
	for _, kv := range g.Cmd.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// MustLedgerDB opens the cluster's database itself, to read what the
// admin API does not show (a session's bytes_drawn).
func MustLedgerDB(tb testing.TB, c *Cluster) *sql.DB {
	tb.Helper()
	dsn := envOf(c.Gateways[0], "GATEWAY_DB_DSN")
	if dsn == "" {
		tb.Fatal("the cluster has no GATEWAY_DB_DSN")
	}
	db, err := sql.Open("mysql", dsn+"?timeout=5s&readTimeout=10s")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// bytesDrawn is a session's bytes_drawn, as the ledger has it.
func bytesDrawn(tb testing.TB, db *sql.DB, sessionID string) int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT bytes_drawn FROM sessions WHERE id = ?", sessionID).Scan(&n); err != nil {
		tb.Fatalf("bytes_drawn of session %s: %v", sessionID, err)
	}
	return n
}

// checkConsistent checks the ledger's invariant on a link through the admin
// API: grants = allowance − remaining (no oversell, no lost claim), and
// returns the link.
func checkConsistent(tb testing.TB, a *Admin, id string) *Link {
	tb.Helper()
	l := a.MustLink(tb, id)
	if l.Remaining < 0 || l.Grants["granted"] != l.Downloads-l.Remaining {
		tb.Errorf("link %s: downloads %d, remaining %d, grants %v: granted must be downloads − remaining",
			id, l.Downloads, l.Remaining, l.Grants)
	}
	return l
}

// sessionLog is the part of a JSON log line about a session that the
// tests read.
type sessionLog struct {
	Msg       string `json:"msg"`
	SessionID string `json:"session_id"`
	Bytes     int64  `json:"bytes"`
	Status    int    `json:"status"`
}

// eachSessionLog calls fn with every JSON log line of the gateways about
// the session.
func eachSessionLog(tb testing.TB, sessionID string, gws []*Gateway, fn func(sessionLog)) {
	tb.Helper()
	for _, g := range gws {
		f, err := os.Open(g.StderrPath)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var rec sessionLog
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.SessionID == sessionID {
				fn(rec)
			}
		}
		f.Close()
	}
}

// streamedGrants counts, by grant id, the streams of link the gateways'
// logs say they sent whole ("streamed").
func streamedGrants(tb testing.TB, linkID string, gws []*Gateway) map[string]int {
	tb.Helper()
	out := map[string]int{}
	for _, g := range gws {
		f, err := os.Open(g.StderrPath)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var rec struct {
				Msg     string `json:"msg"`
				LinkID  string `json:"link_id"`
				GrantID string `json:"grant_id"`
			}
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "streamed" && rec.LinkID == linkID {
				out[rec.GrantID]++
			}
		}
		f.Close()
	}
	return out
}

// grantStatuses reads the status of each of ids from the ledger ("" for
// a grant it does not have).
func grantStatuses(tb testing.TB, db *sql.DB, ids []string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	for len(ids) > 0 {
		n := min(len(ids), 500)
		args := make([]any, n)
		for i := range n {
			args[i] = ids[i]
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		rows, err := db.QueryContext(ctx, "SELECT id, status FROM grants WHERE id IN (?"+strings.Repeat(", ?", n-1)+")", args...)
		if err != nil {
			cancel()
			tb.Fatalf("grant statuses: %v", err)
		}
		for rows.Next() {
			var id, status string
			if err := rows.Scan(&id, &status); err != nil {
				tb.Fatal(err)
			}
			out[id] = status
		}
		rows.Close()
		cancel()
		ids = ids[n:]
	}
	return out
}

// sentBytes sums the bytes the gateways' logs say they sent for a session
// (every finished response, whole or cut). A process killed mid-response
// logs nothing for it.
func sentBytes(tb testing.TB, sessionID string, gws ...*Gateway) int64 {
	tb.Helper()
	var total int64
	eachSessionLog(tb, sessionID, gws, func(rec sessionLog) {
		if rec.Msg == "session bytes sent" || rec.Msg == "session response ended early" {
			total += rec.Bytes
		}
	})
	return total
}

// Download is one GET in the background whose progress a test can watch.
type Download struct {
	Name  string
	URL   string
	start time.Time
	got   atomic.Int64
	done  chan struct{}

	// Valid once Done is closed.
	Status  int
	Length  int64 // Content-Length, -1 when absent
	Body    []byte
	BodyErr error // non-nil: the transfer broke off
	Err     error // no response at all
	Ended   time.Time
}

// StartDownload sends GET url (hdr: name/value pairs) and reads the answer
// in the background.
func StartDownload(name, url string, hdr ...string) *Download {
	d := &Download{Name: name, URL: url, start: time.Now(), done: make(chan struct{})}
	go d.run(hdr)
	return d
}

func (d *Download) run(hdr []string) {
	defer close(d.done)
	defer func() { d.Ended = time.Now() }()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL, nil)
	if err != nil {
		d.Err = err
		return
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := plainClient.Do(req)
	if err != nil {
		d.Err = err
		return
	}
	defer resp.Body.Close()
	d.Status, d.Length = resp.StatusCode, resp.ContentLength
	var body bytes.Buffer
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		body.Write(buf[:n])
		d.got.Add(int64(n))
		if err == io.EOF {
			break
		}
		if err != nil {
			d.BodyErr = err
			break
		}
	}
	d.Body = body.Bytes()
}

// Received is how many body bytes arrived so far.
func (d *Download) Received() int64 { return d.got.Load() }

// Done is closed when the download ended, whole or not.
func (d *Download) Done() <-chan struct{} { return d.done }

// WaitBytes waits until n body bytes arrived.
func (d *Download) WaitBytes(tb testing.TB, n int64, bound time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(bound)
	for d.Received() < n {
		select {
		case <-d.done:
			tb.Fatalf("%s ended after %d bytes (status %d, %v, %v) before %d had arrived", d.Name, d.Received(), d.Status, d.Err, d.BodyErr, n)
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: %d bytes after %v, waiting for %d", d.Name, d.Received(), bound, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Wait waits until the download ended.
func (d *Download) Wait(tb testing.TB, bound time.Duration) {
	tb.Helper()
	select {
	case <-d.done:
	case <-time.After(bound):
		tb.Fatalf("%s still running after %v (%d bytes)", d.Name, bound, d.Received())
	}
}

// checkTruncatedPrefix checks that d broke off, short of its
// Content-Length, and that what it received is the start of want: a cut
// transfer, never a complete-looking wrong file.
func checkTruncatedPrefix(tb testing.TB, d *Download, want []byte) {
	tb.Helper()
	if d.Err != nil {
		tb.Errorf("%s: no response: %v", d.Name, d.Err)
		return
	}
	if d.BodyErr == nil || int64(len(d.Body)) >= d.Length {
		tb.Errorf("%s: %d of %d bytes, read error %v; want a truncated transfer", d.Name, len(d.Body), d.Length, d.BodyErr)
	}
	if !bytes.HasPrefix(want, d.Body) {
		tb.Errorf("%s: the %d bytes received are not the expected ones", d.Name, len(d.Body))
	}
}

// Tally counts answers by status, safely from many goroutines.
type Tally struct {
	mu     sync.Mutex
	counts map[int]int
	slow   time.Duration // the longest request
}

func (t *Tally) Add(status int, took time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = map[int]int{}
	}
	t.counts[status]++
	t.slow = max(t.slow, took)
}

func (t *Tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprintf("%v (slowest %v)", t.counts, t.slow.Round(time.Millisecond))
}

// Slowest is the longest request, and Total how many answers there were.
func (t *Tally) Slowest() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.slow
}

func (t *Tally) Total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range t.counts {
		n += c
	}
	return n
}

// Count returns how many answers had status.
func (t *Tally) Count(status int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts[status]
}

// Statuses returns the statuses seen.
func (t *Tally) Statuses() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []int
	for s := range t.counts {
		out = append(out, s)
	}
	return out
}

// jsonInto decodes b into v and reports whether that worked.
func jsonInto(b []byte, v any) bool { return json.Unmarshal(b, v) == nil }

// Phases tallies answers by the phase of a fault (before, during, after…)
// in which each request started.
type Phases struct {
	names   []string
	tallies []Tally
	cur     atomic.Int32
}

// NewPhases starts in the first of names.
func NewPhases(names ...string) *Phases {
	return &Phases{names: names, tallies: make([]Tally, len(names))}
}

// Enter makes the phase named name current.
func (p *Phases) Enter(name string) {
	p.cur.Store(int32(slices.Index(p.names, name)))
}

// Now is the current phase, for Add once the request ended.
func (p *Phases) Now() int { return int(p.cur.Load()) }

// Add counts an answer to a request started in phase.
func (p *Phases) Add(phase, status int, took time.Duration) {
	if phase >= 0 {
		p.tallies[phase].Add(status, took)
	}
}

// Of returns the tally of the phase named name.
func (p *Phases) Of(name string) *Tally { return &p.tallies[slices.Index(p.names, name)] }

func (p *Phases) String() string {
	var parts []string
	for i, n := range p.names {
		parts = append(parts, n+": "+p.tallies[i].String())
	}
	return strings.Join(parts, "; ")
}
