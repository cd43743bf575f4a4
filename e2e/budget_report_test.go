package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlgate/dlgate/config"
	"github.com/dlgate/dlgate/internal/testenv"
)

// TestDownloadManagersOnASessionReport runs lftp, aria2c and axel the way
// people run them on a transfer session of a 64 MiB object with the
// default budget (2 × size) and concurrency cap (4), on two processes:
// whole, straight to one process at full loopback speed; whole, over a
// network of 16 MiB/s per connection; and interrupted half way (SIGINT,
// over a network of 4 MiB/s per connection), then resumed by the tool's
// own mechanism. It asserts only what the gateway guarantees — a
// byte-exact file, bytes_drawn within the budget and at least the file —
// and logs, per tool, the requests, the 429s, the cut responses and
// bytes_drawn against the size: the numbers of the README's "What the
// budget means in practice".
func TestDownloadManagersOnASessionReport(t *testing.T) {
	t.Parallel()
	tools := []downloadManager{lftpPget, aria2cSplit, axelSplit}
	for i := range tools {
		tools[i].bin = testenv.MustBinary(t, tools[i].name, tools[i].pkg)
	}
	c := MustStartCluster(t, ClusterOptions{Processes: 2, Env: map[string]string{"GATEWAY_LOG_FORMAT": "json"}})
	admin := c.Admin()
	db := MustLedgerDB(t, c)
	obj := admin.MustUpload(t, "managers/big.iso", 64<<20)
	size := int64(len(obj.Data))
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 3 * len(tools), Delivery: "session"})
	// Three paths to the gateways: straight to one process, and two
	// networks with a rate per connection, spread over both processes.
	direct := c.Gateways[0].On
	network := MustStartBalancer(t, 16<<20, c.Balancer.Backends()...).On
	slow := MustStartBalancer(t, 4<<20, c.Balancer.Backends()...).On

	for _, dm := range tools {
		t.Run(dm.name, func(t *testing.T) {
			t.Parallel()
			var rows []string
			run := func(how string, phases ...func(t *testing.T, s *Session, file string) string) {
				s := MustMintSession(t, c.PublicURL, link)
				if s.ByteBudget != 2*size || s.MaxConcurrency != 4 {
					t.Fatalf("session byte_budget %d, max_concurrency %d; want the defaults %d and 4", s.ByteBudget, s.MaxConcurrency, 2*size)
				}
				file := filepath.Join(t.TempDir(), obj.Key[strings.LastIndexByte(obj.Key, '/')+1:])
				var notes []string
				for _, phase := range phases {
					if note := phase(t, s, file); note != "" {
						notes = append(notes, note)
					}
				}
				checkFile(t, file, obj)
				st := settledSession(t, db, s.SessionID, c.Gateways...)
				if st.drawn > s.ByteBudget {
					t.Errorf("%s: bytes_drawn %d over the byte budget %d", how, st.drawn, s.ByteBudget)
				}
				if st.drawn < size {
					t.Errorf("%s: bytes_drawn %d, less than the %d-byte file the tool received whole", how, st.drawn, size)
				}
				rows = append(rows, fmt.Sprintf("%-44s %4d requests %4d × 429 %3d cut %5.1f MB drawn = %.3f × size %s",
					how, st.requests, st.busy, st.cut, float64(st.drawn)/1e6, float64(st.drawn)/float64(size), strings.Join(notes, ", ")))
			}
			run("whole, loopback, straight to one process", dm.whole(direct))
			run("whole, 16 MiB/s per connection", dm.whole(network))
			run("SIGINT half way at 4 MiB/s, resumed at 16", dm.interrupt(slow, obj, db, c.Gateways), dm.resume(network))
			t.Logf("%s on a session of a %d-byte object (byte budget 2 × size, max_concurrency 4), two processes:\n  %s",
				dm.command, size, strings.Join(rows, "\n  "))
		})
	}
}

// downloadManager is how a tool downloads a URL into a file, and resumes.
type downloadManager struct {
	name, pkg, command string
	bin                string
	args               func(url, file string, resume bool) []string
}

var (
	// lftp saves its chunk positions every pget:save-status (10 s) and
	// not when interrupted: the resume starts from the last save. On a
	// transfer ten times shorter than one worth interrupting, 1 s keeps
	// that loss in proportion.
	lftpPget = downloadManager{name: "lftp", pkg: "lftp", command: "lftp -c 'pget -n 6 URL' (resume: pget -c)",
		args: func(url, file string, resume bool) []string {
			c := ""
			if resume {
				c = "-c "
			}
			return []string{"--norc", "-c", fmt.Sprintf("set pget:save-status 1s; pget %s-n 6 '%s' -o '%s'", c, url, file)}
		}}
	// aria2c keeps its progress in FILE.aria2 and resumes from it.
	aria2cSplit = downloadManager{name: "aria2c", pkg: "aria2", command: "aria2c -x16 -s16 URL (resume: the same with -c and its .aria2 file)",
		args: func(url, file string, resume bool) []string {
			a := []string{"--no-conf", "-x16", "-s16", "--summary-interval=0", "--console-log-level=warn",
				"-d", filepath.Dir(file), "-o", filepath.Base(file)}
			if resume {
				a = append(a, "-c")
			}
			return append(a, url)
		}}
	// axel keeps its progress in FILE.st and resumes from it.
	axelSplit = downloadManager{name: "axel", pkg: "axel", command: "axel -n 8 URL (resume: the same, with its .st file)",
		args: func(url, file string, resume bool) []string {
			return []string{"-n", "8", "-q", "-o", file, url}
		}}
)

// whole downloads the session's file to its end through net (a Balancer's
// or a Gateway's On).
func (dm downloadManager) whole(net func(string) string) func(*testing.T, *Session, string) string {
	return func(t *testing.T, s *Session, file string) string {
		dmRun(t, dm, net(s.NamedSessionURL), file, false)
		return ""
	}
}

// resume finishes an interrupted download through net.
func (dm downloadManager) resume(net func(string) string) func(*testing.T, *Session, string) string {
	return func(t *testing.T, s *Session, file string) string {
		dmRun(t, dm, net(s.NamedSessionURL), file, true)
		return ""
	}
}

// interrupt starts the download through net and sends the tool SIGINT, as
// Ctrl-C does, once half of obj is saved in the file. It returns once the
// session settled (its requests ended, its warm slots and budget went
// back), as a person resuming does not do it within the second.
func (dm downloadManager) interrupt(net func(string) string, obj *Object, db *sql.DB, gws []*Gateway) func(*testing.T, *Session, string) string {
	return func(t *testing.T, s *Session, file string) string {
		bg := dmStart(t, dm, net(s.NamedSessionURL), file, false)
		saved := func() int64 { return savedOf(file, obj.Data) }
		if !cutHalfWay(t, bg, dm.name, saved, int64(len(obj.Data))/2, syscall.SIGINT, 15*time.Second, func() {}) {
			t.Errorf("%s still ran 15 s after SIGINT", dm.name)
		}
		size := float64(len(obj.Data))
		return fmt.Sprintf("(SIGINT with %.0f%% saved, %.3f × size drawn by then)",
			100*float64(savedOf(file, obj.Data))/size, float64(settledSession(t, db, s.SessionID, gws...).drawn)/size)
	}
}

// dmStart starts the tool in the file's directory, with that directory as
// its home so that no configuration of the machine applies.
func dmStart(t *testing.T, dm downloadManager, url, file string, resume bool) *Background {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	b := &Background{out: &strings.Builder{}}
	cmd := toolCommand(ctx, t, filepath.Dir(file), dm.bin, dm.args(url, file, resume)...)
	cmd.Env = append(cmd.Env, "HOME="+filepath.Dir(file))
	cmd.Stdout, cmd.Stderr = b.out, b.out
	var err error
	if b.Proc, err = testenv.StartProc(cmd); err != nil {
		cancel()
		t.Fatalf("starting %s: %v", dm.name, err)
	}
	go func() {
		<-b.Done()
		cancel()
	}()
	t.Cleanup(func() {
		cancel()
		<-b.Done()
	})
	return b
}

// dmRun runs the tool to its end; it must exit 0.
func dmRun(t *testing.T, dm downloadManager, url, file string, resume bool) {
	t.Helper()
	if out, err := dmStart(t, dm, url, file, resume).Wait(); err != nil {
		t.Fatalf("%s %s: %v\n%s", dm.name, redactArgs(dm.args(url, file, resume)), err, lastLines(out, 20))
	}
}

// savedOf counts the bytes of the file at path that already hold data's
// bytes, in 64 KiB blocks: tools preallocate or write sparse files, and a
// random object has no block a fresh file could match by chance.
func savedOf(path string, data []byte) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	const block = 64 << 10
	var n int64
	for off := 0; off < len(b) && off < len(data); off += block {
		end := min(off+block, len(b), len(data))
		if bytes.Equal(b[off:end], data[off:end]) {
			n += int64(end - off)
		}
	}
	return n
}

// sessionStats is what the gateways' logs and the ledger say of one
// session's requests.
type sessionStats struct {
	requests, busy, cut int
	charged, drawn      int64
}

// settledSession waits until every request of the session ended and its
// warm budget went back (bytes_drawn equals what the logs charged, for a
// second after the warm window), at most ten seconds, and returns the
// session's numbers.
func settledSession(t *testing.T, db *sql.DB, sessionID string, gws ...*Gateway) sessionStats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	time.Sleep(config.DefaultWarmIdle)
	for {
		st := sessionRecords(t, sessionID, gws...)
		st.drawn = bytesDrawn(t, db, sessionID)
		if st.drawn == st.charged || time.Now().After(deadline) {
			if st.drawn != st.charged {
				t.Logf("session %s: bytes_drawn %d, the logs charged %d", sessionID, st.drawn, st.charged)
			}
			return st
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sessionRecords reads the per-request log lines of a session from the
// gateways' JSON logs.
func sessionRecords(t *testing.T, sessionID string, gws ...*Gateway) sessionStats {
	t.Helper()
	var st sessionStats
	eachSessionLog(t, sessionID, gws, func(rec sessionLog) {
		switch rec.Msg {
		case "session bytes sent":
			st.requests++
			st.charged += rec.Bytes
		case "session response ended early":
			st.requests++
			st.cut++
			st.charged += rec.Bytes
		case "request failed":
			st.requests++
			if rec.Status == 429 {
				st.busy++
			}
		}
	})
	return st
}
