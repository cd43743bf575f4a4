package gateway

import (
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the gateway's Prometheus series. Labels never carry tokens
// or ids: only routes, statuses and reasons, all from small fixed sets.
type metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	bodyBytes    *prometheus.CounterVec
	claims       *prometheus.CounterVec
	refunds      *prometheus.CounterVec
	sessions     *prometheus.CounterVec
	previews     *prometheus.CounterVec
	authFailures *prometheus.CounterVec
	streaming    prometheus.Gauge
	budgetDraw   prometheus.Counter
	swept        *prometheus.CounterVec
	// The refusal limiter (refusals.go).
	refusalsThrottled *prometheus.CounterVec
	refusalPenalties  *prometheus.CounterVec
}

func newMetrics(version string) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gateway_http_request_duration_seconds", Help: "Time to the end of the response.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"route"}),
		bodyBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_http_response_bytes_total", Help: "Response body bytes written by route.",
		}, []string{"route"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_claims_total", Help: "Claims by result: granted or the refusal reason.",
		}, []string{"kind", "result"}),
		refunds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_refunds_total", Help: "Claims refunded because no byte left: cause storage_error or client_disconnect.",
		}, []string{"cause"}),
		sessions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_sessions_minted_total", Help: "Transfer sessions by outcome (created or replayed).",
		}, []string{"outcome"}),
		previews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_previews_total", Help: "Previews served to link checkers and prefetches, which claim nothing.",
		}, []string{"route"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_auth_failures_total", Help: "Credentials refused on public routes, by reason.",
		}, []string{"reason"}),
		streaming: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gateway_streams_in_flight", Help: "Responses currently sending object bytes.",
		}),
		budgetDraw: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_budget_draws_total", Help: "Byte-budget chunks drawn from the database.",
		}),
		swept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_sweeper_rows_total", Help: "Rows handled by the sweeper.",
		}, []string{"what"}),
		refusalsThrottled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_refusals_throttled_total", Help: "Requests answered 429 too-many-refusals, by route and answer (held, or closed at once).",
		}, []string{"route", "answer"}),
		refusalPenalties: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_refusal_penalties_total", Help: "Penalties begun: a client drew too many refusals on one token.",
		}, []string{"route"}),
	}
	if version == "" {
		version = "dev"
	}
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gateway_build_info", Help: "Always 1; the labels say which build runs.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	})
	buildInfo.Set(1)
	m.reg.MustRegister(buildInfo)
	m.reg.MustRegister(m.requests, m.duration, m.bodyBytes, m.claims, m.refunds, m.sessions, m.previews, m.authFailures,
		m.streaming, m.budgetDraw, m.swept, m.refusalsThrottled, m.refusalPenalties,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is where the gateway's metrics live. Other parts of the process
// (the webhook deliverer) register their collectors on it, so that
// /metrics shows them too.
func (s *Server) Registry() prometheus.Registerer { return s.metrics.reg }

func (m *metrics) observe(route, method string, status int, d time.Duration, bytes int64) {
	m.requests.WithLabelValues(route, methodLabel(method), strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
	m.bodyBytes.WithLabelValues(route).Add(float64(bytes))
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
