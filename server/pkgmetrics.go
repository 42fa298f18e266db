package server

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	tallydb "github.com/tallydb/tally"
	"github.com/tallydb/tally/internal/commands"
)

// RegisterDB registers the one command table on db (DBCommands) and
// exports every package's figures (tally.DB.PackageStats) as Prometheus
// metrics: "tally serve" calls it once, before Serve.
func (s *Server) RegisterDB(db *tallydb.DB) error {
	if err := s.Register(DBCommands(db)...); err != nil {
		return err
	}
	return s.metrics.reg.Register(&packageCollector{db: db})
}

// RegisterCollector adds a host's own metrics (a replica's, say) to what
// MetricsHandler exports. Names must not clash with the server's.
func (s *Server) RegisterCollector(c prometheus.Collector) error {
	return s.metrics.reg.Register(c)
}

// packageCollector exports the packages' Stats at scrape time:
// PACKAGE.KEY VALUE becomes tally_PACKAGE_KEY, a counter named ..._total
// for the figures that only grow (deliveries, rebuilds, cache hits,
// transitions, ...), a gauge in seconds for durations, a gauge otherwise.
// Figures that are not numbers (unread's feed mode) are left to tally
// stats. It describes nothing up front: the figures are the packages'.
type packageCollector struct{ db *tallydb.DB }

func (pc *packageCollector) Describe(chan<- *prometheus.Desc) {}

func (pc *packageCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range pc.db.PackageStats() {
		for _, st := range p.Stats {
			name := "tally_" + p.Name + "_" + st.Key
			full := p.Name + "." + st.Key
			help := "tally stats' " + full + "."
			if v, err := strconv.ParseFloat(st.Value, 64); err == nil {
				if _, counts := commands.SinceOpen(full); counts {
					ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name+"_total", help, nil, nil), prometheus.CounterValue, v)
				} else {
					ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, nil, nil), prometheus.GaugeValue, v)
				}
				continue
			}
			if d, err := time.ParseDuration(st.Value); err == nil {
				name = strings.TrimSuffix(name, "_seconds") + "_seconds"
				ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, nil, nil), prometheus.GaugeValue, d.Seconds())
			}
		}
	}
}
