package main

// The Prometheus Operator's kinds that overlays/monitoring uses
// (monitoring.coreos.com/v1). The operator's Go module is not a dependency:
// these structs hold the fields tensord's manifests use, so strict decoding
// rejects any other field (add it here first) as it rejects a misspelt one.

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ServiceMonitor selects Services whose endpoints Prometheus scrapes.
type ServiceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ServiceMonitorSpec `json:"spec"`
}

type ServiceMonitorSpec struct {
	JobLabel          string               `json:"jobLabel,omitempty"`
	TargetLabels      []string             `json:"targetLabels,omitempty"`
	PodTargetLabels   []string             `json:"podTargetLabels,omitempty"`
	Endpoints         []Endpoint           `json:"endpoints"`
	Selector          metav1.LabelSelector `json:"selector"`
	NamespaceSelector *NamespaceSelector   `json:"namespaceSelector,omitempty"`
	SampleLimit       *uint64              `json:"sampleLimit,omitempty"`
}

type NamespaceSelector struct {
	Any        bool     `json:"any,omitempty"`
	MatchNames []string `json:"matchNames,omitempty"`
}

type Endpoint struct {
	Port          string              `json:"port,omitempty"`
	TargetPort    *intstr.IntOrString `json:"targetPort,omitempty"`
	Path          string              `json:"path,omitempty"`
	Scheme        string              `json:"scheme,omitempty"`
	Interval      string              `json:"interval,omitempty"`
	ScrapeTimeout string              `json:"scrapeTimeout,omitempty"`
	HonorLabels   bool                `json:"honorLabels,omitempty"`
}

// PrometheusRule holds alerting and recording rules in Prometheus' rule file
// format under spec.
type PrometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PrometheusRuleSpec `json:"spec"`
}

type PrometheusRuleSpec struct {
	Groups []RuleGroup `json:"groups"`
}

type RuleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []Rule `json:"rules"`
}

type Rule struct {
	Record      string             `json:"record,omitempty"`
	Alert       string             `json:"alert,omitempty"`
	Expr        intstr.IntOrString `json:"expr"`
	For         string             `json:"for,omitempty"`
	Labels      map[string]string  `json:"labels,omitempty"`
	Annotations map[string]string  `json:"annotations,omitempty"`
}

// checkServiceMonitor: its selector picks a Service in the output, each
// endpoint names a port of every Service it picks, and the path is /metrics
// (tensord serves nothing else there).
func (r *rendered) checkServiceMonitor(p *problems, m *ServiceMonitor) {
	id := "ServiceMonitor/" + m.Name
	sel, err := metav1.LabelSelectorAsSelector(&m.Spec.Selector)
	switch {
	case err != nil:
		p.add(id, "spec.selector: %v", err)
		return
	case sel.Empty():
		p.add(id, "spec.selector is empty (it would select every Service of the namespace)")
		return
	}
	var matched []string
	for _, s := range r.services {
		if !sel.Matches(labels.Set(s.Labels)) {
			continue
		}
		matched = append(matched, s.Name)
		for i, e := range m.Spec.Endpoints {
			if e.Port == "" {
				p.add(id, "endpoints[%d] names no port (use the Service's port name)", i)
				continue
			}
			found := false
			for _, port := range s.Spec.Ports {
				found = found || port.Name == e.Port
			}
			if !found {
				p.add(id, "endpoints[%d]: Service/%s has no port named %q", i, s.Name, e.Port)
			}
		}
	}
	if len(matched) == 0 {
		p.add(id, "selector %s selects no Service in the output", sel)
	}
	if len(matched) > 1 {
		p.add(id, "selector %s selects %d Services (%s): every pod would be scraped once per Service",
			sel, len(matched), strings.Join(matched, ", "))
	}
	if len(m.Spec.Endpoints) == 0 {
		p.add(id, "has no endpoints")
	}
	for i, e := range m.Spec.Endpoints {
		if e.Path != "" && e.Path != "/metrics" {
			p.add(id, "endpoints[%d].path %q: tensord serves its metrics at /metrics", i, e.Path)
		}
	}
}

// checkPrometheusRule: every rule is an alert or a recording rule with an
// expression, and alerts carry a severity and a summary.
func checkPrometheusRule(p *problems, pr *PrometheusRule) {
	id := "PrometheusRule/" + pr.Name
	if len(pr.Spec.Groups) == 0 {
		p.add(id, "has no rule groups")
	}
	for _, g := range pr.Spec.Groups {
		for i, rule := range g.Rules {
			rid := fmt.Sprintf("group %q rule %d", g.Name, i)
			if rule.Alert != "" {
				rid = fmt.Sprintf("group %q alert %s", g.Name, rule.Alert)
			}
			if (rule.Alert == "") == (rule.Record == "") {
				p.add(id, "%s: needs exactly one of alert and record", rid)
			}
			if strings.TrimSpace(rule.Expr.String()) == "" {
				p.add(id, "%s: has no expr", rid)
			}
			if rule.Alert != "" && (rule.Labels["severity"] == "" || rule.Annotations["summary"] == "") {
				p.add(id, "%s: needs a severity label and a summary annotation", rid)
			}
		}
	}
}
