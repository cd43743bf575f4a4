// Package metrics holds the gateway's Prometheus series. Labels never
// carry tokens or ids: only routes, statuses and reasons, all from small
// fixed sets.
package metrics

import (
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the gateway's Prometheus series, registered on Reg.
type Metrics struct {
	// series keeps the three series of each route, method and status
	// that Observe updates (requestKey → *requestSeries): looked up by
	// their labels, they cost a hash of the labels and a lock each.
	series sync.Map

	Reg          *prometheus.Registry
	Requests     *prometheus.CounterVec
	Duration     *prometheus.HistogramVec
	BodyBytes    *prometheus.CounterVec
	Claims       *prometheus.CounterVec
	Refunds      *prometheus.CounterVec
	Sessions     *prometheus.CounterVec
	Previews     *prometheus.CounterVec
	AuthFailures *prometheus.CounterVec
	Streaming    prometheus.Gauge
	BudgetDraw   prometheus.Counter
	Swept        *prometheus.CounterVec
	// The refusal limiter (refusals.go).
	RefusalsThrottled *prometheus.CounterVec
	RefusalPenalties  *prometheus.CounterVec
	// The admin listener's authentication (gateway/admin/auth.go).
	AdminAuthFailures  *prometheus.CounterVec
	AdminAuthThrottled prometheus.Counter
	AdminAuthPenalties prometheus.Counter
	AdminKeyLookups    prometheus.Counter
	// Group claims (ledger/sqlcore/group.go): how many claims each claim
	// transaction decided, how many transactions by result, and how long
	// each claim waited in the queue for the transaction that decided it.
	ClaimBatchSize prometheus.Histogram
	ClaimBatches   *prometheus.CounterVec
	ClaimQueueWait prometheus.Histogram
}

// New makes the series, and the build, Go and process collectors, on a
// registry of their own.
func New(version string) *Metrics {
	m := &Metrics{
		Reg: prometheus.NewRegistry(),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gateway_http_request_duration_seconds", Help: "Time to the end of the response.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"route"}),
		BodyBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_http_response_bytes_total", Help: "Response body bytes written by route.",
		}, []string{"route"}),
		Claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_claims_total", Help: "Claims by result: granted or the refusal reason.",
		}, []string{"kind", "result"}),
		Refunds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_refunds_total", Help: "Claims refunded because no byte left: cause storage_error or client_disconnect.",
		}, []string{"cause"}),
		Sessions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_sessions_minted_total", Help: "Transfer sessions by outcome (created or replayed).",
		}, []string{"outcome"}),
		Previews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_previews_total", Help: "Previews served to link checkers and prefetches, which claim nothing.",
		}, []string{"route"}),
		AuthFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_auth_failures_total", Help: "Credentials refused on public routes, by reason.",
		}, []string{"reason"}),
		Streaming: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gateway_streams_in_flight", Help: "Responses currently sending object bytes.",
		}),
		BudgetDraw: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_budget_draws_total", Help: "Byte-budget chunks drawn from the database.",
		}),
		Swept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_sweeper_rows_total", Help: "Rows handled by the sweeper.",
		}, []string{"what"}),
		RefusalsThrottled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_refusals_throttled_total", Help: "Requests answered 429 too-many-refusals, by route and answer (held, or closed at once).",
		}, []string{"route", "answer"}),
		RefusalPenalties: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_refusal_penalties_total", Help: "Penalties begun: a client drew too many refusals on one token.",
		}, []string{"route"}),
		AdminAuthFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_admin_auth_failures_total", Help: "Admin requests refused 401, by reason (missing, malformed, unknown, revoked, expired).",
		}, []string{"reason"}),
		AdminAuthThrottled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_admin_auth_throttled_total", Help: "Admin requests answered 429 because their address failed to authenticate too often.",
		}),
		AdminAuthPenalties: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_admin_auth_penalties_total", Help: "Penalties begun: an address failed to authenticate on the admin listener too often.",
		}),
		AdminKeyLookups: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_admin_key_lookups_total", Help: "Admin API keys looked up in the database (not found in this process's short cache of verified keys).",
		}),
		ClaimBatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gateway_claim_batch_size", Help: "Claims decided by one claim transaction (1: a claim alone).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024},
		}),
		ClaimBatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_claim_batches_total", Help: "Claim transactions by result: committed, or failed (its claims then decided alone).",
		}, []string{"result"}),
		ClaimQueueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gateway_claim_queue_wait_seconds", Help: "How long each claim waited in the queue for the claim transaction that decided it (0: it found none in flight and went at once).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9),
		}),
	}
	if version == "" {
		version = "dev"
	}
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gateway_build_info", Help: "Always 1; the labels say which build runs.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	})
	buildInfo.Set(1)
	m.Reg.MustRegister(buildInfo)
	m.Reg.MustRegister(m.Requests, m.Duration, m.BodyBytes, m.Claims, m.Refunds, m.Sessions, m.Previews, m.AuthFailures,
		m.Streaming, m.BudgetDraw, m.Swept, m.RefusalsThrottled, m.RefusalPenalties,
		m.AdminAuthFailures, m.AdminAuthThrottled, m.AdminAuthPenalties, m.AdminKeyLookups,
		m.ClaimBatchSize, m.ClaimBatches, m.ClaimQueueWait,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Observe counts one finished request.
func (m *Metrics) Observe(route, method string, status int, d time.Duration, bytes int64) {
	k := requestKey{route: route, method: methodLabel(method), status: status}
	v, ok := m.series.Load(k)
	if !ok {
		v, _ = m.series.LoadOrStore(k, &requestSeries{
			requests: m.Requests.WithLabelValues(route, k.method, strconv.Itoa(status)),
			duration: m.Duration.WithLabelValues(route),
			bytes:    m.BodyBytes.WithLabelValues(route),
		})
	}
	s := v.(*requestSeries)
	s.requests.Inc()
	s.duration.Observe(d.Seconds())
	s.bytes.Add(float64(bytes))
}

// requestKey is the labels of a request's series; as bounded as they are
// (routes are the route table's, methods folded by methodLabel, statuses
// the handlers').
type requestKey struct {
	route, method string
	status        int
}

type requestSeries struct {
	requests, bytes prometheus.Counter
	duration        prometheus.Observer
}

// ClaimBatch counts one claim transaction of size claims, queueWaits
// being how long each claim it decided waited in the queue for it (one
// observation each); failed when it did not commit (its claims are then
// decided alone, each a batch of its own, which observes its wait).
func (m *Metrics) ClaimBatch(size int, queueWaits []time.Duration, failed bool) {
	result := "committed"
	if failed {
		result = "failed"
	}
	m.ClaimBatches.WithLabelValues(result).Inc()
	m.ClaimBatchSize.Observe(float64(size))
	for _, w := range queueWaits {
		m.ClaimQueueWait.Observe(w.Seconds())
	}
}

// methodLabel keeps the method label to a fixed set: a client can send any
// token as a method, and each would become a new series.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
		http.MethodPatch, http.MethodOptions:
		return m
	}
	return "other"
}
