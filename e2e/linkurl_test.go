package e2e

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// linkTool is how one download manager fetches a URL into a file and how
// it resumes that file itself, the way its users run it.
type linkTool struct {
	name, bin string
	// agent is a prefix of the User-Agent it sends, to find its requests
	// in the access lines.
	agent string
	// first and resume are its command lines for url into file; resume
	// is what a user types again after an interruption.
	first, resume func(url, file string, obj *Object) []string
	// stop interrupts it the way its users do (Ctrl-C, or a kill).
	stop syscall.Signal
}

func linkTools() []linkTool {
	return []linkTool{
		{name: "aria2c -x16 -s16", bin: "aria2c", agent: "aria2/", stop: syscall.SIGINT,
			first: func(url, file string, _ *Object) []string {
				return aria2cArgs(url, file)
			},
			resume: func(url, file string, obj *Object) []string {
				sum := sha256.Sum256(obj.Data)
				return append(aria2cArgs(url, file), "--checksum=sha-256="+hex.EncodeToString(sum[:]))
			}},
		// lftp saves its chunk positions every pget:save-status (10 s by
		// default) and not when it is stopped, so a cut within 10 s
		// resumes from nothing: the setting is what a user who resumes
		// sets (as in e2e/budget_report_test.go).
		{name: "lftp pget -n 6", bin: "lftp", agent: "lftp/", stop: syscall.SIGTERM,
			first: func(url, file string, _ *Object) []string {
				return []string{"--norc", "-c", fmt.Sprintf("set pget:save-status 1s; set net:max-retries 5; set net:reconnect-interval-base 1; pget -n 6 '%s' -o '%s'", url, file)}
			},
			resume: func(url, file string, _ *Object) []string {
				return []string{"--norc", "-c", fmt.Sprintf("set pget:save-status 1s; set net:max-retries 5; set net:reconnect-interval-base 1; pget -c -n 6 '%s' -o '%s'", url, file)}
			}},
		{name: "curl -C -", bin: "curl", agent: "curl/", stop: syscall.SIGINT,
			first: func(url, file string, _ *Object) []string {
				return []string{"-q", "-sS", "-L", "-o", file, url}
			},
			resume: func(url, file string, _ *Object) []string {
				return []string{"-q", "-fsS", "-L", "-C", "-", "-o", file, url}
			}},
		{name: "wget -c", bin: "wget", agent: "Wget/", stop: syscall.SIGINT,
			first: func(url, file string, _ *Object) []string {
				return []string{"--no-config", "-q", "-O", file, url}
			},
			resume: func(url, file string, _ *Object) []string {
				return []string{"--no-config", "-q", "-c", "-O", file, url}
			}},
		{name: "wget2 -c", bin: "wget2", agent: "wget2/", stop: syscall.SIGINT,
			first: func(url, file string, _ *Object) []string {
				return []string{"--no-robots", "-q", "-O", file, url}
			},
			resume: func(url, file string, _ *Object) []string {
				return []string{"--no-robots", "-q", "-c", "-O", file, url}
			}},
	}
}

func aria2cArgs(url, file string) []string {
	return []string{"--no-conf", "-x16", "-s16", "-k1M", "--max-tries=0", "--retry-wait=1",
		"--file-allocation=none", "--summary-interval=0", "--console-log-level=warn",
		"--allow-overwrite=false", "--auto-file-renaming=false",
		"-d", filepath.Dir(file), "-o", filepath.Base(file), url}
}

// TestDownloadManagersResumeFromTheLinkURL: each download manager is
// pointed at the link URL of a session-delivery link (the URL people are
// handed), on three processes behind the balancer, cut half-way through a
// slow network by the signal its users send, and resumed by the tool
// itself against the same link URL. What the gateway guarantees: a
// byte-exact file for exactly one download, through one session (SPEC §5:
// the resume is the same client, sent to its session instead of claiming
// again), its budget never exceeded. The requests each tool made, its
// 429s and what it drew from the budget are reported, not asserted: they
// depend on the tool and on the machine's speed.
func TestDownloadManagersResumeFromTheLinkURL(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t, ClusterOptions{})
	admin := c.Admin()
	obj := admin.MustUpload(t, "linkurl/film.bin", 16<<20)
	db := MustLedgerDB(t, c)
	var report []string
	for _, tool := range linkTools() {
		ok := t.Run(strings.Fields(tool.name)[0], func(t *testing.T) {
			report = append(report, resumeFromLinkURL(t, c, db, obj, tool))
		})
		if !ok {
			report = append(report, tool.name+": failed")
		}
	}
	t.Logf("download managers on a session-delivery link URL of %d MiB (3 processes, 2 MiB/s a connection until cut half-way, resumed at full speed):\n%s",
		len(obj.Data)>>20, strings.Join(report, "\n"))
}

// resumeFromLinkURL runs one tool's interrupted and resumed download of a
// fresh 2-download link and returns its report line.
func resumeFromLinkURL(t *testing.T, c *Cluster, db *sql.DB, obj *Object, tool linkTool) string {
	bin := MustBinary(t, tool.bin)
	admin := c.Admin()
	// A budget of 16 × the size rather than the default 2 ×: this test is
	// about what affinity guarantees (one download, one session), and at
	// loopback speed lftp's own race reads chunks twice: its resume drew
	// 1.9, 2.0, 2.5 and, once, more than 3 × the file, after which the
	// spent session rightly answered its next range 409. Whether the
	// default budget fits each tool is e2e/budget_report_test.go's to
	// measure; here what each drew is only reported, and never over its
	// budget.
	// And 16 concurrent requests, aria2c's -x16: aria2c 1.36 drops a
	// connection answered 429 and, when the cut lands while its working
	// ones end, gives up with exit 22 (seen once in four full runs); the
	// cap and its 429s are the session report's and sessions_test's.
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 2, Delivery: "session", Filename: "film.bin",
		Session: &SessionSettings{ByteBudget: 16 * int64(len(obj.Data)), MaxConcurrency: 16}})
	dir := t.TempDir()
	file := filepath.Join(dir, "film.bin")
	size := int64(len(obj.Data))
	logs := logOffsets(t, c.Gateways...)

	c.Balancer.SetRate(2 << 20)
	start := c.Balancer.Carried()
	received := func() int64 { return c.Balancer.Carried() - start }
	bg := MustStart(t, dir, bin, tool.first(link.URL, file, obj)...)
	cutHalfWay(t, bg, tool.name, received, size/2, tool.stop, 10*time.Second, func() { c.Balancer.SetRate(0) })
	c.Balancer.SetRate(0)
	part := received()
	if part >= size {
		t.Fatalf("%s had received %d bytes of %d when it was cut: nothing to resume", tool.name, part, size)
	}

	// What the cut run drew, once each process gave back what it kept
	// of the budget (the session idle for config.DefaultWarmIdle).
	time.Sleep(2500 * time.Millisecond)
	var cutDrawn int64
	if ids := linkSessions(t, db, link.ID); len(ids) == 1 {
		cutDrawn = bytesDrawn(t, db, ids[0])
	}

	out, err := run(t, dir, bin, tool.resume(link.URL, file, obj)...)
	if err != nil {
		t.Fatalf("%s resumed (cut at %d of %d bytes, having drawn %d): %v\n%s", tool.name, part, size, cutDrawn, err, lastLines(out, 15))
	}
	checkFile(t, file, obj)
	// Exactly one download spent, through one session.
	admin.checkCounts(t, link.ID, 1, 1, 0)
	l := admin.MustLink(t, link.ID)
	if l.ActiveSessions == nil || *l.ActiveSessions != 1 {
		t.Errorf("link shows active_sessions %v, want 1", l.ActiveSessions)
	}
	ids := linkSessions(t, db, link.ID)
	if len(ids) != 1 {
		t.Fatalf("the link has sessions %v, want one", ids)
	}
	time.Sleep(2500 * time.Millisecond)
	drawn, budget := bytesDrawn(t, db, ids[0]), sessionBudget(t, db, ids[0])
	if drawn > budget {
		t.Errorf("bytes_drawn %d over the budget %d", drawn, budget)
	}
	if drawn < size {
		t.Errorf("bytes_drawn %d, less than the file's %d bytes that were sent", drawn, size)
	}
	reqs, refused := toolRequests(t, logs, tool.agent, c.Gateways...)
	return fmt.Sprintf("%-17s cut at %5.1f%% (%.2f × size drawn), resumed: byte-exact, 1 download, 1 session; %3d requests (%s); drawn %.2f × size (budget %.1f ×)",
		tool.name, 100*float64(part)/float64(size), float64(cutDrawn)/float64(size), reqs, refused, float64(drawn)/float64(size), float64(budget)/float64(size))
}

// logOffsets are the current sizes of the processes' logs.
func logOffsets(tb testing.TB, gws ...*Gateway) []int64 {
	tb.Helper()
	out := make([]int64, len(gws))
	for i, g := range gws {
		out[i] = fileSize(g.StderrPath)
	}
	return out
}

// toolRequests counts the access lines of the tool's requests written
// since the offsets, and how many of them were answered with each status
// over 299 but 303.
func toolRequests(tb testing.TB, from []int64, agent string, gws ...*Gateway) (int, string) {
	tb.Helper()
	n := 0
	statuses := map[string]int{}
	for i, g := range gws {
		b, err := os.ReadFile(g.StderrPath)
		if err != nil {
			tb.Fatal(err)
		}
		for line := range strings.Lines(string(b[min(from[i], int64(len(b))):])) {
			if !strings.Contains(line, "msg=http ") || !strings.Contains(line, "user_agent="+agent) &&
				!strings.Contains(line, `user_agent="`+agent) {
				continue
			}
			n++
			if st := fieldOf(line, "status"); st != "" && st >= "400" {
				statuses[st]++
			}
		}
	}
	var parts []string
	for _, st := range []string{"403", "404", "409", "416", "429"} {
		if statuses[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d × %s", statuses[st], st))
		}
	}
	if len(parts) == 0 {
		return n, "no refusals"
	}
	return n, strings.Join(parts, ", ")
}

// fieldOf returns the value of key=value in a text log line.
func fieldOf(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return strings.TrimSpace(v)
}

// linkSessions lists the ids of a link's sessions in the ledger.
func linkSessions(tb testing.TB, db *sql.DB, linkID string) []string {
	tb.Helper()
	rows, err := db.Query("SELECT id FROM sessions WHERE link_id = ? ORDER BY id", linkID)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			tb.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return ids
}

// sessionBudget is a session's byte_budget.
func sessionBudget(tb testing.TB, db *sql.DB, id string) int64 {
	tb.Helper()
	var n int64
	if err := db.QueryRow("SELECT byte_budget FROM sessions WHERE id = ?", id).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}
