package webhook

import "github.com/prometheus/client_golang/prometheus"

// Results of gateway_webhook_deliveries_total: one per attempt, and
// "expired" once per event given up after the maximum age.
const (
	ResultSuccess      = "success"
	ResultHTTPError    = "http_error"
	ResultNetworkError = "network_error"
	ResultExpired      = "expired"
)

type metrics struct {
	deliveries *prometheus.CounterVec
	oldest     prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_webhook_deliveries_total",
			Help: "Webhook delivery attempts by result (success, http_error, network_error), and events given up (expired).",
		}, []string{"result"}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gateway_webhook_outbox_oldest_seconds",
			Help: "Age of the oldest undelivered webhook event, 0 when none waits.",
		}),
	}
	for _, r := range []string{ResultSuccess, ResultHTTPError, ResultNetworkError, ResultExpired} {
		m.deliveries.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.deliveries, m.oldest} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
