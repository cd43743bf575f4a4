package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A flash crowd on a link just posted: the embedded default, just started
// (nothing verified yet), a large object, a link of 1,000 downloads, and
// 200 first GETs at once, each reading slowly as people clicking it do.
// Every one is claimed and answered 200, and the gateway's CPU for all of
// them stays below what two whole-file hashes cost: concurrent first
// downloads of one file share one integrity check (issue 21 point 7),
// where each used to hash the whole file for itself and starve the claims
// into 503s.
//
// It runs alone (not parallel): its CPU figure is the gateway's own, but a
// machine busy with other tests would spread the crowd out.
func TestAFlashCrowdOfFirstDownloadsSharesOneIntegrityCheck(t *testing.T) {
	const (
		size   = 4 << 30 // large enough that hashing it dominates the rest: claims, and filling 200 send queues
		crowd  = 200
		rcvbuf = 32 << 10 // a slow reader's window: little moves until it reads
	)
	start := time.Now()
	g := MustStartEmbeddedDefault(t)
	admin := g.Admin()
	obj := mustUploadStream(t, admin, "flash/big.bin", size)
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1000})
	uploaded := time.Now()
	hash := hashCPU(t, size)
	t.Logf("started and uploaded in %v, hashed in %v", uploaded.Sub(start).Round(time.Millisecond), time.Since(uploaded).Round(time.Millisecond))

	before := procCPU(t, g.Pid())
	var (
		wg       sync.WaitGroup
		answered sync.WaitGroup
		release  = make(chan struct{})
		mu       sync.Mutex
		statuses = map[int]int{}
		failures []string
	)
	answered.Add(crowd)
	for i := range crowd {
		wg.Go(func() {
			status, err := slowGet(link.URL, rcvbuf, &answered, release)
			mu.Lock()
			defer mu.Unlock()
			statuses[status]++
			if err != nil {
				failures = append(failures, fmt.Sprintf("GET %d: %v", i, err))
			}
		})
	}
	// Every client holds its connection open, reading nothing, until all
	// were answered and two seconds more: what the first downloads' checks
	// cost in that time is what the crowd costs.
	answered.Wait()
	time.Sleep(2 * time.Second)
	close(release)
	wg.Wait()
	spent := settledCPU(t, g.Pid()) - before

	if statuses[http.StatusOK] != crowd {
		t.Errorf("%d first GETs at once answered %v, want %d × 200; %s", crowd, statuses, crowd, strings.Join(failures, "; "))
	}
	t.Logf("gateway CPU for %d first downloads of a %d MiB object: %.2f s; one hash of it: %.2f s", crowd, size>>20, spent.Seconds(), hash.Seconds())
	if spent >= 2*hash {
		t.Errorf("the gateway spent %.2f CPU-s on %d first downloads of one file, want less than two whole-file hashes (%.2f s): they must share one check", spent.Seconds(), crowd, 2*hash.Seconds())
	}
	// A download is spent only for a client that was served: a 503 whose
	// claim's commit outcome was unknown is reconciled, never left spent.
	if got := admin.MustLink(t, link.ID); got.Remaining != 1000-statuses[http.StatusOK] {
		t.Errorf("remaining = %d of 1000 after %d × 200, want %d: a client that got no file had a download spent", got.Remaining, statuses[http.StatusOK], 1000-statuses[http.StatusOK])
	}
}

// slowGet sends one GET of rawURL on a connection whose receive buffer is
// rcvbuf, reads the status line and headers, marks answered, and holds the
// connection, reading nothing more, until release closes.
func slowGet(rawURL string, rcvbuf int, answered *sync.WaitGroup, release <-chan struct{}) (int, error) {
	var once sync.Once
	done := func() { once.Do(answered.Done) }
	defer done()
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0, err
	}
	d := net.Dialer{Timeout: 30 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", u.Host)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second)) //nolint:errcheck // a dead peer fails the read below
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: flash-crowd\r\n\r\n", u.RequestURI(), u.Host); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 4096), nil)
	if err != nil {
		return 0, err
	}
	done()
	<-release
	return resp.StatusCode, nil
}

// mustUploadStream uploads size bytes under key without holding them in
// memory (PUT /v1/objects/{key} with a streamed body): a random MiB,
// repeated. The Object has no Data and no Sum.
func mustUploadStream(tb testing.TB, a *Admin, key string, size int64) *Object {
	tb.Helper()
	block := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{1}).Read(block) //nolint:errcheck // never fails
	body := io.LimitReader(&repeating{block: block}, size)
	req, err := http.NewRequest(http.MethodPut, a.Base+"/v1/objects/"+url.PathEscape(key), body)
	if err != nil {
		tb.Fatal(err)
	}
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+a.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("PUT %s: %v", key, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		tb.Fatalf("PUT %s = %d %s", key, resp.StatusCode, b)
	}
	var got struct {
		VersionID string `json:"version_id"`
		ETag      string `json:"etag"`
		Size      int64  `json:"size"`
	}
	if err := json.Unmarshal(b, &got); err != nil || got.Size != size {
		tb.Fatalf("PUT %s answered %s (%v)", key, b, err)
	}
	return &Object{Key: key, VersionID: got.VersionID, ETag: got.ETag}
}

// repeating reads block over and over.
type repeating struct {
	block []byte
	off   int
}

func (r *repeating) Read(p []byte) (int, error) {
	n := copy(p, r.block[r.off:])
	r.off = (r.off + n) % len(r.block)
	return n, nil
}

// hashCPU is the CPU time this machine takes for one SHA-256 of size
// bytes, measured on a locked thread (crypto/sha256, as the gateway uses).
func hashCPU(tb testing.TB, size int64) time.Duration {
	tb.Helper()
	buf := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{2}).Read(buf) //nolint:errcheck // never fails
	done := make(chan time.Duration)
	go func() {
		// Locked, RUSAGE_THREAD is this goroutine's alone. Unlocked before
		// it exits: a goroutine that exits locked takes its thread with it,
		// and a server this test binary started from that thread dies with
		// it (testenv.SysProcAttr's Pdeathsig is the forking thread's, not
		// the process's): the gateway of this test was killed so in CI.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := threadCPU(tb)
		h := sha256.New()
		for n := int64(0); n < size; n += int64(len(buf)) {
			h.Write(buf)
		}
		h.Sum(nil)
		done <- threadCPU(tb) - start
	}()
	return <-done
}

func threadCPU(tb testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the user and system CPU pid has used, from /proc/PID/stat.
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		tb.Fatalf("reading the gateway's CPU time: %v", err)
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: utime and stime are the 14th and 15th of the line.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("reading the gateway's CPU time from %q", b)
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks
}

// settledCPU waits until pid's CPU time stops growing (work the crowd left,
// such as a check still finishing, is counted) and returns it.
func settledCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	last := procCPU(tb, pid)
	for {
		select {
		case <-ctx.Done():
			return last
		case <-time.After(300 * time.Millisecond):
		}
		now := procCPU(tb, pid)
		if now == last {
			return now
		}
		last = now
	}
}
