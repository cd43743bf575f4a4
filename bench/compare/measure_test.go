package compare

import (
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// clockTicks is the unit of utime and stime in /proc/PID/stat: USER_HZ,
// 100 on every Linux this runs on.
const clockTicks = 100

// cpuSeconds is the CPU time (user + system) the processes pids have used
// since they started. A process that is gone counts 0.
func cpuSeconds(pids ...int) float64 {
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		// The command name may hold spaces: fields count from its ')'.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += utime + stime
	}
	return float64(ticks) / clockTicks
}

// rss is the resident memory of pid in bytes, 0 when unknown.
func rss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// peakRSS samples the resident memory of pid every 20 ms until stop is
// closed, and returns the largest.
func peakRSS(pid int, stop <-chan struct{}) int64 {
	var peak int64
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		peak = max(peak, rss(pid))
		select {
		case <-stop:
			return peak
		case <-t.C:
		}
	}
}

// children are the child processes of pid.
func children(pid int) []int {
	p := strconv.Itoa(pid)
	b, _ := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// questions reads MariaDB's count of statements received from all
// clients. The reading itself is one of them: a difference of two
// readings counts one statement too many.
type questions struct{ db *sql.DB }

// read takes the largest of three readings: the global value is the sum
// over live connections plus those gone, and a connection that closes
// between the two (the gateway's pool retires idle ones) can make one
// reading dip.
func (q questions) read(tb testing.TB) int64 {
	tb.Helper()
	var best int64
	for range 3 {
		var name string
		var n int64
		if err := q.db.QueryRow(`SHOW GLOBAL STATUS LIKE 'Questions'`).Scan(&name, &n); err != nil {
			tb.Fatal(err)
		}
		best = max(best, n)
	}
	return best - 2 // the two extra readings
}

// settled is how many statements MariaDB received since the reading q0,
// taken once the count stops moving, its own readings left out, and how
// long after the call it stopped. A gateway writes the delivery records
// of the responses it sent within its record window after them
// (ledger/sqlcore/records.go): they are the round's statements, and
// their CPU the round's, as much as the claims are, and a gateway whose
// records fall behind its downloads shows here as a long wait. Read at
// once, a round of 8,000 GETs of a hot link missed most of them (0.35
// statements per GET, where 1.1 were sent). Each read is three
// statements of its own.
func (q questions) settled(tb testing.TB, q0 int64) (int64, time.Duration) {
	tb.Helper()
	start := time.Now()
	last, reads := q.read(tb), int64(1)
	for range 100 {
		time.Sleep(100 * time.Millisecond)
		next := q.read(tb)
		reads++
		if next-last == 3 {
			// Steady since the reading before: the records were written
			// by then.
			return next - q0 - 3*reads, time.Since(start) - 100*time.Millisecond
		}
		last = next
	}
	tb.Errorf("MariaDB's statement count still moving 10 s after the round")
	return last - q0 - 3*reads, time.Since(start)
}

// sample is what one side measured in one round, by metric name.
type sample map[string]float64

// series collects one side's samples over the rounds.
type series []sample

// stat is the median, minimum and maximum of metric over the rounds.
func (s series) stat(metric string) stat {
	var v []float64
	for _, x := range s {
		if val, ok := x[metric]; ok {
			v = append(v, val)
		}
	}
	if len(v) == 0 {
		return stat{}
	}
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return stat{med: med, lo: v[0], hi: v[len(v)-1], n: len(v)}
}

type stat struct {
	med, lo, hi float64
	n           int
}

// format prints the median with the range of the rounds, each with f
// (a fmt verb for one float64).
func (s stat) format(f string) string {
	if s.n == 0 {
		return "–"
	}
	if s.n == 1 || s.lo == s.hi {
		return fmt.Sprintf(f, s.med)
	}
	return fmt.Sprintf(f+" ("+f+"–"+f+")", s.med, s.lo, s.hi)
}

// ratios is the per-round ratio of metric a on side x to metric b on side
// y, as a series of its own ("r").
func ratios(x series, a string, y series, b string) series {
	var out series
	for i := range min(len(x), len(y)) {
		if y[i][b] != 0 {
			out = append(out, sample{"r": x[i][a] / y[i][b]})
		}
	}
	return out
}

// row is one line of the table.
type row struct {
	work, gateway, reference, ratio, before string
	notes                                   []string // printed under the table
}

// report collects the rows and notes, and prints them as a Markdown
// table.
type report struct {
	mu    sync.Mutex
	rows  []row
	notes []string
}

func (r *report) add(x row) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, x)
	r.notes = append(r.notes, x.notes...)
	fmt.Printf("\n| %s | %s | %s | %s | %s |\n", x.work, x.gateway, x.reference, x.ratio, x.before)
}

func (r *report) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := fmt.Sprintf(format, args...)
	r.notes = append(r.notes, s)
	fmt.Println(s)
}

func (r *report) markdown(header string) string {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("\n\n| work | gateway | reference | ratio | issue 8, before |\n|---|---|---|---|---|\n")
	for _, x := range r.rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", x.work, x.gateway, x.reference, x.ratio, x.before)
	}
	if len(r.notes) > 0 {
		b.WriteString("\n")
		for _, n := range r.notes {
			b.WriteString(n)
			b.WriteString("\n")
		}
	}
	return b.String()
}
