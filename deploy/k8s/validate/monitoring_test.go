package main

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// monitoringOverlay is overlays/monitoring with one file edited (editedOverlay).
func monitoringOverlay(t *testing.T, name string, edit func(string) string) map[string]string {
	t.Helper()
	return editedOverlay(t, "monitoring",
		[]string{"kustomization.yaml", "servicemonitor.yaml", "prometheusrule.yaml"}, name, edit)
}

func TestMonitoringProblems(t *testing.T) {
	const monitor = "ServiceMonitor/tensord: "
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{
			name: "ServiceMonitor on a port the Service lacks",
			files: monitoringOverlay(t, "servicemonitor.yaml", func(s string) string {
				return strings.Replace(s, "- port: metrics", "- port: prometheus", 1)
			}),
			want: []string{monitor + `endpoints[0]: Service/tensord has no port named "prometheus"`},
		},
		{
			name: "ServiceMonitor selecting both Services",
			files: monitoringOverlay(t, "servicemonitor.yaml", func(s string) string {
				return strings.Replace(s, "      tensorop/metrics: \"true\"\n", "", 1)
			}),
			want: []string{
				monitor + `endpoints[0]: Service/tensord-headless has no port named "metrics"`,
				monitor + "selector app.kubernetes.io/name=tensord selects 2 Services (tensord, tensord-headless): " +
					"every pod would be scraped once per Service",
			},
		},
		{
			name: "ServiceMonitor selecting no Service",
			files: monitoringOverlay(t, "servicemonitor.yaml", func(s string) string {
				return strings.Replace(s, "app.kubernetes.io/name: tensord", "app.kubernetes.io/name: tensorop", 1)
			}),
			want: []string{monitor + "selector app.kubernetes.io/name=tensorop,tensorop/metrics=true selects no Service in the output"},
		},
		{
			name: "ServiceMonitor on another path",
			files: monitoringOverlay(t, "servicemonitor.yaml", func(s string) string {
				return strings.Replace(s, "path: /metrics", "path: /stats", 1)
			}),
			want: []string{monitor + `endpoints[0].path "/stats": tensord serves its metrics at /metrics`},
		},
		{
			name: "ServiceMonitor with a misspelt field",
			files: monitoringOverlay(t, "servicemonitor.yaml", func(s string) string {
				return strings.Replace(s, "scrapeTimeout:", "scrapeTimout:", 1)
			}),
			want: []string{monitor + `unknown field "spec.endpoints[0].scrapeTimout"`},
		},
		{
			name: "PrometheusRule alert without a severity",
			files: monitoringOverlay(t, "prometheusrule.yaml", func(s string) string {
				return strings.Replace(s, "            severity: critical\n", "            team: tensorop\n", 1)
			}),
			want: []string{`PrometheusRule/tensord: group "tensord.requests" alert TensordHighErrorRatio: ` +
				"needs a severity label and a summary annotation"},
		},
		{
			name: "PrometheusRule rule without an alert name",
			files: withResource("apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: extra\n" +
				"spec:\n  groups:\n    - name: g\n      rules:\n        - expr: up == 0\n"),
			want: []string{`PrometheusRule/extra: group "g" rule 0: needs exactly one of alert and record`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := overlay(t, tc.files)
			_, got := validate(filesys.MakeFsOnDisk(), filepath.Join(root, "overlays", "bad"))
			if !reflect.DeepEqual([]string(got), tc.want) {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}
