package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const whatSeaweedFS = "SeaweedFS (weed, built into ./bin by `make test-seaweedfs` or `WITH_SEAWEEDFS=1 make deps`, not by `make test`)"

// weedStartTimeout bounds the start of a whole cluster, every process in
// turn; a start on an idle machine takes a few seconds.
const weedStartTimeout = 90 * time.Second

var sharedWeed shared[*S3]

// StartSeaweedFS starts a private SeaweedFS cluster for tb, on 127.0.0.1
// in a temporary directory: a master, two volume servers, a filer and two
// stateless S3 gateways, each its own weed process, behind a TCP load
// balancer that spreads connections over the gateways in turn. The
// returned S3's Endpoint is the balancer's; Gateways are the gateways'
// own. Stop, Restart, Freeze and Thaw act on the whole cluster. It is
// stopped, and its data removed, in tb.Cleanup. A missing weed stops the
// test through Require.
func StartSeaweedFS(tb testing.TB) *S3 {
	tb.Helper()
	return startPrivateS3(tb, whatSeaweedFS, startSeaweedFS)
}

// SharedSeaweedFS returns the SeaweedFS cluster shared by all tests of
// this test binary (see StartSeaweedFS), starting it on first use. Tests
// isolate themselves with NewBucket. The package's TestMain must call
// Main, which stops it. It is started whether or not EnvS3Endpoint is set:
// a test that asks for SeaweedFS gets SeaweedFS.
func SharedSeaweedFS(tb testing.TB) *S3 {
	tb.Helper()
	requireMain(tb, "SharedSeaweedFS")
	s, err := sharedWeed.get(startShared(startSeaweedFS))
	Require(tb, whatSeaweedFS, err)
	return s
}

// weedCluster is the processes of one SeaweedFS cluster and the balancer
// in front of its S3 gateways. Its ports stay the same across restarts,
// so clients keep working. The caller of launch and stop holds the S3's
// mu, or owns it exclusively.
type weedCluster struct {
	bin   string
	dir   string
	env   []string
	roles []*weedRole
	lb    *balancer
	// probe checks, through one gateway, that it serves signed requests.
	probe func(ctx context.Context, endpoint string) error
}

// weedRole is one process of the cluster.
type weedRole struct {
	name  string // "master", "volume-1", …: its log is name.log
	addr  string // HTTP address, 127.0.0.1:PORT
	ready string // a path on addr that answers once it serves
	args  []string
	proc  *process
}

func (r *weedRole) logPath(dir string) string { return filepath.Join(dir, r.name+".log") }

func startSeaweedFS() (*S3, error) {
	bin, err := FindBinary("weed")
	if err != nil {
		return nil, err
	}
	dir, err := mkServerDir(tempParent(), "dlgate-weed-")
	if err != nil {
		return nil, err
	}
	s := newS3(dir)
	if err := writeWeedIdentity(filepath.Join(dir, "s3.json"), s.AccessKey, s.SecretKey); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// Another process may take a port between probe and bind: then a
	// fresh set of ports, over the same (still empty) directory.
	var w *weedCluster
	err = retryBind(3, 0, func() error {
		var err error
		if w, err = newWeedCluster(bin, dir, s.probeGateway); err != nil {
			return err
		}
		return w.launch()
	}, func(err error) bool { return w.lostPort(err) })
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.weed = w
	s.addr = w.lb.addr
	s.Endpoint = "http://" + w.lb.addr
	for _, r := range w.gateways() {
		s.Gateways = append(s.Gateways, "http://"+r.addr)
	}
	return s, nil
}

// writeWeedIdentity writes the S3 gateways' identity file: one identity
// with every action, under the test's credentials.
func writeWeedIdentity(path, access, secret string) error {
	type credential struct {
		AccessKey string `json:"accessKey"`
		SecretKey string `json:"secretKey"`
	}
	type identity struct {
		Name        string       `json:"name"`
		Credentials []credential `json:"credentials"`
		Actions     []string     `json:"actions"`
	}
	b, err := json.Marshal(map[string][]identity{"identities": {{
		Name:        "dlgate-test",
		Credentials: []credential{{access, secret}},
		Actions:     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// newWeedCluster lays out a cluster on fresh ports in dir.
func newWeedCluster(bin, dir string, probe func(context.Context, string) error) (*weedCluster, error) {
	ports := make([]int, 13)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	host := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	// SeaweedFS names a server's gRPC port after its HTTP one:
	// 127.0.0.1:HTTP.GRPC.
	peer := func(i int) string { return host(i) + "." + strconv.Itoa(ports[i+1]) }
	common := func(i int, command string) []string {
		// Global flags first: logs go to the process's stderr (our log
		// file) instead of files under /tmp.
		return []string{"-logtostderr", command,
			"-ip=127.0.0.1", "-ip.bind=127.0.0.1",
			"-port=" + strconv.Itoa(ports[i]), "-port.grpc=" + strconv.Itoa(ports[i+1])}
	}
	sub := func(name string) string { return filepath.Join(dir, name) }
	w := &weedCluster{bin: bin, dir: dir, lb: newBalancer(host(12), host(8), host(10)), probe: probe}
	w.roles = []*weedRole{
		{name: "master", addr: host(0), ready: "/cluster/status", args: append(common(0, "master"),
			"-mdir="+sub("master"), "-peers=none",
			// Never send usage statistics anywhere.
			"-telemetry=false",
			// Small volumes: every bucket is a collection of its own,
			// with volumes of its own.
			"-volumeSizeLimitMB=256", "-defaultReplication=000")},
		{name: "volume-1", addr: host(2), ready: "/status", args: append(common(2, "volume"),
			"-dir="+sub("volume-1"), "-max=300", "-master="+peer(0), "-preStopSeconds=0")},
		{name: "volume-2", addr: host(4), ready: "/status", args: append(common(4, "volume"),
			"-dir="+sub("volume-2"), "-max=300", "-master="+peer(0), "-preStopSeconds=0")},
		{name: "filer", addr: host(6), ready: "/", args: append(common(6, "filer"),
			"-master="+peer(0), "-defaultStoreDir="+sub("filer"), "-localSocket="+sub("filer.sock"))},
	}
	for i, port := range []int{8, 10} {
		name := fmt.Sprintf("s3-%d", i+1)
		w.roles = append(w.roles, &weedRole{name: name, addr: host(port), ready: "/", args: append(common(port, "s3"),
			"-filer="+peer(6), "-config="+sub("s3.json"), "-localSocket="+sub(name+".sock"),
			// Nothing beside S3 on ports of its own (their defaults,
			// 8181 and 9101, are fixed and would collide).
			"-port.iceberg=0", "-port.lance=0", "-iam=false")})
	}
	for _, d := range []string{"master", "volume-1", "volume-2", "filer"} {
		// Empty: a start that lost a port to another process may have
		// left state naming its ports.
		_ = os.RemoveAll(sub(d))
		if err := os.MkdirAll(sub(d), 0o755); err != nil {
			return nil, err
		}
	}
	// The processes read configuration files (filer.toml, master.toml)
	// from their working directory, $HOME/.seaweedfs and /etc/seaweedfs,
	// and WEED_* variables: an environment of their own, so that nothing
	// of the developer's reaches them.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEED_") && !strings.HasPrefix(kv, "HOME=") {
			w.env = append(w.env, kv)
		}
	}
	w.env = append(w.env, "HOME="+dir,
		// The master grows one volume for a new collection, not seven:
		// each bucket is a collection, and tests make hundreds.
		"WEED_MASTER_VOLUME_GROWTH_COPY_1=1")
	return w, nil
}

func (w *weedCluster) gateways() []*weedRole {
	var gw []*weedRole
	for _, r := range w.roles {
		if strings.HasPrefix(r.name, "s3-") {
			gw = append(gw, r)
		}
	}
	return gw
}

// launch starts every process in turn, each once the one it needs
// serves, then the balancer, and returns when both gateways answer
// signed requests. On failure it stops whatever it started.
func (w *weedCluster) launch() error {
	ctx, cancel := context.WithTimeout(context.Background(), weedStartTimeout)
	defer cancel()
	err := w.launchAll(ctx)
	if err != nil {
		w.stop()
	}
	return err
}

func (w *weedCluster) launchAll(ctx context.Context) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	for _, r := range w.roles {
		cmd := exec.Command(w.bin, r.args...)
		cmd.Dir = w.dir
		cmd.Env = w.env
		p, err := startCmd(r.logPath(w.dir), cmd)
		if err != nil {
			return err
		}
		r.proc = p
		err = p.waitReady(ctx, func(ctx context.Context) error {
			return answers(ctx, hc, "http://"+r.addr+r.ready)
		})
		if err == nil && r.name == "volume-2" {
			// Writes need volumes, which the master can only place once
			// both servers have reported to it.
			err = p.waitReady(ctx, func(ctx context.Context) error { return w.dataNodes(ctx, hc, 2) })
		}
		if err != nil {
			return withLog(fmt.Errorf("weed %s on %s: %w", r.name, r.addr, err), r.logPath(w.dir))
		}
	}
	if err := w.lb.start(); err != nil {
		return err
	}
	for _, r := range w.gateways() {
		err := r.proc.waitReady(ctx, func(ctx context.Context) error { return w.probe(ctx, "http://"+r.addr) })
		if err != nil {
			return withLog(fmt.Errorf("weed %s on %s: signed requests: %w", r.name, r.addr, err), r.logPath(w.dir))
		}
	}
	return nil
}

// dataNodes succeeds once the master's topology holds n volume servers.
func (w *weedCluster) dataNodes(ctx context.Context, hc *http.Client, n int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+w.roles[0].addr+"/dir/status", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var status struct {
		Topology struct {
			DataCenters []struct {
				Racks []struct {
					DataNodes []json.RawMessage
				}
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&status); err != nil {
		return fmt.Errorf("master /dir/status: %w", err)
	}
	got := 0
	for _, dc := range status.Topology.DataCenters {
		for _, rack := range dc.Racks {
			got += len(rack.DataNodes)
		}
	}
	if got < n {
		return fmt.Errorf("master knows %d volume servers of %d", got, n)
	}
	return nil
}

// probeGateway lists the buckets through the gateway at endpoint itself,
// signed with s's credentials.
func (s *S3) probeGateway(ctx context.Context, endpoint string) error {
	_, err := s.clientOf(endpoint).ListBuckets(ctx, &s3.ListBucketsInput{})
	return err
}

// stop ends the processes, the gateways first, and the balancer with its
// connections. Stopping a stopped cluster does nothing.
func (w *weedCluster) stop() {
	w.lb.stop()
	for i := len(w.roles) - 1; i >= 0; i-- {
		if p := w.roles[i].proc; p != nil {
			p.Stop(10 * time.Second)
		}
	}
}

// restart stops the cluster and starts it again on its ports, with its
// data; a port that another process took meanwhile is waited for.
func (w *weedCluster) restart() error {
	w.stop()
	return retryBind(20, 250*time.Millisecond, w.launch, w.lostPort)
}

// lostPort reports whether err is of a process that died at startup
// because it lost its port to another process.
func (w *weedCluster) lostPort(err error) bool {
	if !errors.Is(err, errExited) {
		return false
	}
	for _, r := range w.roles {
		if r.proc != nil && r.proc.Exited() && bindConflict(r.logPath(w.dir)) {
			return true
		}
	}
	return false
}

// procs are the cluster's running processes.
func (w *weedCluster) procs() []*Proc {
	var ps []*Proc
	for _, r := range w.roles {
		if r.proc != nil && !r.proc.Exited() {
			ps = append(ps, r.proc.Proc)
		}
	}
	return ps
}

// tails is the last n lines of each process's log, for a failed test.
func (w *weedCluster) tails(n int) string {
	var b strings.Builder
	for _, r := range w.roles {
		fmt.Fprintf(&b, "--- weed %s (%s) ---\n%s\n", r.name, r.addr, logTail(r.logPath(w.dir), n))
	}
	return b.String()
}

// EnvSeaweedFS set to a true value (strconv.ParseBool) adds SeaweedFS to
// S3Servers and PrivateS3Servers. It is off by default because weed takes
// about 1,000 CPU-seconds to build from a cold module cache, more than
// `make deps` may take in CI; `make test-seaweedfs` builds it and sets
// this (docs/design.md, "The S3 servers the suite runs on").
const EnvSeaweedFS = "DLGATE_TEST_SEAWEEDFS"

func seaweedFSWanted() bool {
	v, err := strconv.ParseBool(os.Getenv(EnvSeaweedFS))
	return err == nil && v
}

// S3Server is one S3 server a test can run against, by name.
type S3Server struct {
	Name string // "versitygw", "seaweedfs" or "external"
	Get  func(testing.TB) *S3
}

// S3Servers are the S3 servers a storage suite runs against, each shared
// by the test binary: versitygw, or the server EnvS3Endpoint names
// ("external") in its place, and a SeaweedFS cluster when EnvSeaweedFS is
// set. A missing versitygw or weed stops that server's tests through
// Require.
func S3Servers() []S3Server {
	servers := []S3Server{{"versitygw", SharedS3}}
	if os.Getenv(EnvS3Endpoint) != "" {
		servers[0].Name = "external"
	}
	if seaweedFSWanted() {
		servers = append(servers, S3Server{"seaweedfs", SharedSeaweedFS})
	}
	return servers
}

// PrivateS3Servers are the S3 servers a test may stop, restart or freeze:
// a private versitygw, whatever EnvS3Endpoint says (an operator's server
// is never ours to stop), and a private SeaweedFS cluster when
// EnvSeaweedFS is set.
func PrivateS3Servers() []S3Server {
	servers := []S3Server{{"versitygw", func(tb testing.TB) *S3 { tb.Helper(); return StartS3(tb) }}}
	if seaweedFSWanted() {
		servers = append(servers, S3Server{"seaweedfs", StartSeaweedFS})
	}
	return servers
}
