package main

// KServe manifests (deploy/kserve): validate kserve DIR CRDDIR checks every
// YAML document in DIR against the OpenAPI schema of KServe's published CRDs
// in CRDDIR (config/crd/full of the github.com/kserve/kserve module, a pinned
// version that scripts/k8s-validate.sh fetches through the Go module proxy),
// strictly: an unknown field is an error, as with the API server's strict
// field validation. Then it checks what a schema cannot: the tensord flags,
// the port, the protocol and the runtime an InferenceService names.
//
// Why the schema and not KServe's Go API types: v0.14 of the module does not
// build against the k8s.io v0.32 modules here (its PodSpec copy predates
// them), v0.15 needs Go 1.23.6 (Debian's backport is 1.23.5) and both pull in
// knative, istio and controller-runtime, minutes of building on two cores.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	openapivalidate "k8s.io/kube-openapi/pkg/validation/validate"
	kjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// The kinds deploy/kserve may hold, as "apiVersion kind".
var kserveKinds = map[string]bool{
	"serving.kserve.io/v1alpha1 ServingRuntime":  true,
	"serving.kserve.io/v1beta1 InferenceService": true,
}

// crdSchemas maps "group/version kind" to the CRD's openAPIV3Schema.
type crdSchemas map[string]*spec.Schema

// loadCRDs reads the CustomResourceDefinitions of the kinds in kserveKinds
// from the YAML files in dir.
func loadCRDs(dir string) (crdSchemas, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	schemas := crdSchemas{}
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		var crd struct {
			Kind string `json:"kind"`
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Kind string `json:"kind"`
				} `json:"names"`
				Versions []struct {
					Name   string `json:"name"`
					Served bool   `json:"served"`
					Schema struct {
						OpenAPIV3Schema *spec.Schema `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := sigsyaml.Unmarshal(data, &crd); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue
		}
		for _, v := range crd.Spec.Versions {
			key := crd.Spec.Group + "/" + v.Name + " " + crd.Spec.Names.Kind
			if kserveKinds[key] && v.Served && v.Schema.OpenAPIV3Schema != nil {
				schemas[key] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	for key := range kserveKinds {
		if schemas[key] == nil {
			return nil, fmt.Errorf("%s: no served CRD version for %s", dir, key)
		}
	}
	return schemas, nil
}

// kserveObject is one document of a manifest file, decoded.
type kserveObject struct {
	file, id string
	raw      map[string]any
}

// runKServe is `validate kserve DIR CRDDIR`: "ok DIR: N objects", or a
// "FAIL FILE: problem" line for each problem.
func runKServe(stdout, stderr io.Writer, dir, crdDir string) int {
	schemas, err := loadCRDs(crdDir)
	if err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return 2
	}
	n, problems, err := validateKServe(dir, schemas)
	if err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return 2
	}
	if len(problems) == 0 {
		fmt.Fprintf(stdout, "ok %s: %d objects\n", dir, n)
		return 0
	}
	for _, problem := range problems {
		fmt.Fprintf(stdout, "FAIL %s\n", problem)
	}
	return 1
}

// validateKServe checks the YAML files in dir and returns the number of
// objects and the problems, each "FILE: Kind/name: problem".
func validateKServe(dir string, schemas crdSchemas) (int, []string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return 0, nil, err
	}
	if len(names) == 0 {
		return 0, nil, fmt.Errorf("%s: no *.yaml files", dir)
	}
	var p problems
	var objects []kserveObject
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return 0, nil, err
		}
		for i, doc := range splitDocuments(data) {
			obj, docProblems := decodeKServe(doc, schemas)
			id := fmt.Sprintf("%s document %d", name, i+1)
			if obj != nil {
				id = name + ": " + obj.id
			}
			for _, problem := range docProblems {
				p.add(id, "%s", problem)
			}
			if obj != nil && len(docProblems) == 0 {
				obj.file = name
				objects = append(objects, *obj)
			}
		}
	}
	// Relations are checked between well-formed objects only.
	if len(p) == 0 {
		checkKServe(&p, objects)
	}
	return len(objects), p, nil
}

// splitDocuments splits a YAML stream on its "---" lines, dropping documents
// of only comments and blank lines. The text is kept as written, so the line
// numbers of errors count from the document's first line.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var doc []string
	flush := func() {
		for _, line := range doc {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				docs = append(docs, []byte(strings.Join(doc, "\n")))
				break
			}
		}
		doc = nil
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimRight(line, " \t\r") == "---" {
			flush()
			continue
		}
		doc = append(doc, line)
	}
	flush()
	return docs
}

// decodeKServe decodes one document and validates it against its CRD schema.
func decodeKServe(doc []byte, schemas crdSchemas) (*kserveObject, []string) {
	// Strict: duplicate keys are errors.
	data, err := sigsyaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, []string{oneLine(err.Error())}
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, []string{oneLine(err.Error())}
	}
	apiVersion, _ := raw["apiVersion"].(string)
	kind, _ := raw["kind"].(string)
	key := apiVersion + " " + kind
	group, _, _ := strings.Cut(apiVersion, "/")
	schema := schemas[group+"/"+strings.TrimPrefix(apiVersion, group+"/")+" "+kind]
	if !kserveKinds[key] || schema == nil {
		return nil, []string{fmt.Sprintf("unknown kind %q in %q (the validator checks only ServingRuntime serving.kserve.io/v1alpha1 and InferenceService serving.kserve.io/v1beta1)", kind, apiVersion)}
	}
	var meta struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	metaJSON, _ := json.Marshal(map[string]any{"metadata": raw["metadata"]})
	var out []string
	if strict, err := kjson.UnmarshalStrict(metaJSON, &meta); err != nil {
		out = append(out, oneLine(err.Error()))
	} else {
		for _, e := range strict {
			out = append(out, oneLine(e.Error()))
		}
	}
	obj := &kserveObject{id: kind + "/" + meta.Metadata.Name, raw: raw}
	if meta.Metadata.Name == "" {
		out = append(out, "metadata.name is empty")
	}
	for k, v := range raw {
		if k == "metadata" || k == "apiVersion" || k == "kind" {
			continue
		}
		prop, ok := schema.Properties[k]
		if !ok {
			out = append(out, fmt.Sprintf("unknown field %q", k))
			continue
		}
		unknownFields(&prop, v, k, &out)
	}
	// Integers as int64, as the API server decodes them.
	var typed any
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.UseNumber()
	if err := decoder.Decode(&typed); err != nil {
		return nil, append(out, err.Error())
	}
	typed = jsonNumbers(typed)
	result := openapivalidate.NewSchemaValidator(schema, nil, "", strfmt.Default).Validate(typed)
	var schemaErrors []string
	for _, e := range result.Errors {
		schemaErrors = append(schemaErrors, oneLine(e.Error()))
	}
	sort.Strings(schemaErrors)
	return obj, append(out, schemaErrors...)
}

// jsonNumbers turns json.Numbers into int64 or float64.
func jsonNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = jsonNumbers(e)
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// unknownFields adds an "unknown field" problem for each key of v that the
// structural schema s would prune: not a property, not allowed by
// additionalProperties, under no x-kubernetes-preserve-unknown-fields.
func unknownFields(s *spec.Schema, v any, path string, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			child := path + "." + k
			if prop, ok := s.Properties[k]; ok {
				unknownFields(&prop, x[k], child, out)
				continue
			}
			switch {
			case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
				unknownFields(s.AdditionalProperties.Schema, x[k], child, out)
			case s.AdditionalProperties != nil && s.AdditionalProperties.Allows:
			case extensionTrue(s, "x-kubernetes-preserve-unknown-fields"):
			case extensionTrue(s, "x-kubernetes-embedded-resource") && (k == "apiVersion" || k == "kind" || k == "metadata"):
			default:
				*out = append(*out, fmt.Sprintf("unknown field %q", child))
			}
		}
	case []any:
		if s.Items != nil && s.Items.Schema != nil {
			for i, e := range x {
				unknownFields(s.Items.Schema, e, fmt.Sprintf("%s[%d]", path, i), out)
			}
		}
	}
}

func extensionTrue(s *spec.Schema, name string) bool {
	b, ok := s.Extensions.GetBool(name)
	return ok && b
}

// servingRuntime is the part of a ServingRuntime the checks read.
type servingRuntime struct {
	Spec struct {
		SupportedModelFormats []struct {
			Name    string  `json:"name"`
			Version *string `json:"version"`
		} `json:"supportedModelFormats"`
		ProtocolVersions []string           `json:"protocolVersions"`
		Containers       []corev1.Container `json:"containers"`
	} `json:"spec"`
}

// inferenceService is the part of an InferenceService the checks read.
type inferenceService struct {
	Spec struct {
		Predictor struct {
			TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds"`
			Model                         *struct {
				corev1.Container
				ModelFormat struct {
					Name    string  `json:"name"`
					Version *string `json:"version"`
				} `json:"modelFormat"`
				Runtime         *string `json:"runtime"`
				ProtocolVersion *string `json:"protocolVersion"`
			} `json:"model"`
		} `json:"predictor"`
	} `json:"spec"`
}

// kserveContainer is the runtime container KServe merges the model into.
const kserveContainer = "kserve-container"

// checkKServe checks what the schema cannot: for each ServingRuntime, its
// protocols and the tensord container's flags, port and probes; for each
// InferenceService, the runtime it names and what it adds to it.
func checkKServe(p *problems, objects []kserveObject) {
	runtimes := map[string]*servingRuntime{}
	for _, o := range objects {
		if o.raw["kind"] != "ServingRuntime" {
			continue
		}
		id := o.file + ": " + o.id
		var sr servingRuntime
		if err := json.Unmarshal(mustJSON(o.raw), &sr); err != nil {
			p.add(id, "%s", oneLine(err.Error()))
			continue
		}
		runtimes[strings.TrimPrefix(o.id, "ServingRuntime/")] = &sr
		if !contains(sr.Spec.ProtocolVersions, "v2") {
			p.add(id, "spec.protocolVersions %v does not include v2 (the Open Inference Protocol tensord speaks)", sr.Spec.ProtocolVersions)
		}
		if len(sr.Spec.SupportedModelFormats) == 0 {
			p.add(id, "spec.supportedModelFormats is empty: no InferenceService could select the runtime")
		}
		var tensord *corev1.Container
		for i := range sr.Spec.Containers {
			if sr.Spec.Containers[i].Name == kserveContainer {
				tensord = &sr.Spec.Containers[i]
			}
		}
		if tensord == nil {
			p.add(id, "has no container named %s (KServe merges the model into it)", kserveContainer)
			continue
		}
		checkRuntimeContainer(p, id+fmt.Sprintf(" container %q", kserveContainer), *tensord)
	}
	for _, o := range objects {
		if o.raw["kind"] != "InferenceService" {
			continue
		}
		id := o.file + ": " + o.id
		var isvc inferenceService
		if err := json.Unmarshal(mustJSON(o.raw), &isvc); err != nil {
			p.add(id, "%s", oneLine(err.Error()))
			continue
		}
		model := isvc.Spec.Predictor.Model
		if model == nil {
			p.add(id, "spec.predictor.model is not set (the example uses the tensord runtime through it)")
			continue
		}
		if model.Runtime == nil {
			p.add(id, "spec.predictor.model.runtime is not set: name the ServingRuntime")
			continue
		}
		sr := runtimes[*model.Runtime]
		if sr == nil {
			p.add(id, "spec.predictor.model.runtime %q is no ServingRuntime in the directory", *model.Runtime)
			continue
		}
		supported := false
		for _, f := range sr.Spec.SupportedModelFormats {
			if f.Name == model.ModelFormat.Name && (model.ModelFormat.Version == nil || f.Version == nil || *f.Version == *model.ModelFormat.Version) {
				supported = true
			}
		}
		if !supported {
			p.add(id, "spec.predictor.model.modelFormat %s is not among the supportedModelFormats of ServingRuntime/%s", formatString(model.ModelFormat.Name, model.ModelFormat.Version), *model.Runtime)
		}
		protocol := "v1" // KServe's default
		if model.ProtocolVersion != nil {
			protocol = *model.ProtocolVersion
		}
		if protocol != "v2" && protocol != "grpc-v2" {
			p.add(id, "spec.predictor.model.protocolVersion %s: tensord speaks v2 (or grpc-v2)", protocol)
		} else if !contains(sr.Spec.ProtocolVersions, protocol) {
			p.add(id, "spec.predictor.model.protocolVersion %s is not in spec.protocolVersions %v of ServingRuntime/%s", protocol, sr.Spec.ProtocolVersions, *model.Runtime)
		}
		// KServe merges the model's container fields into the runtime's
		// container: its arguments come after the runtime's.
		var merged corev1.Container
		for _, c := range sr.Spec.Containers {
			if c.Name == kserveContainer {
				merged = c
			}
		}
		merged.Args = append(append([]string{}, merged.Args...), model.Args...)
		merged.Env = append(append([]corev1.EnvVar{}, merged.Env...), model.Env...)
		if len(model.Ports) > 0 {
			merged.Ports = model.Ports
		}
		if len(model.Args) > 0 || len(model.Ports) > 0 || len(model.Command) > 0 {
			if len(model.Command) > 0 {
				merged.Command = model.Command
			}
			checkRuntimeContainer(p, id+": spec.predictor.model (merged into ServingRuntime/"+*model.Runtime+")", merged)
		}
		grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
		if g := isvc.Spec.Predictor.TerminationGracePeriodSeconds; g != nil {
			grace = *g
		}
		if need := drainSeconds(merged); grace < need {
			p.add(id, "spec.predictor.terminationGracePeriodSeconds %d is less than the preStop sleep plus --drain_seconds plus --shutdown_grace_seconds of ServingRuntime/%s (%d): draining calls would be killed",
				grace, *model.Runtime, need)
		}
	}
}

// checkRuntimeContainer checks the tensord container of a runtime: real
// tensord flags only (no flag file: a ServingRuntime has no ConfigMap to hold
// one), the security context of deploy/k8s, the gRPC port named h2c that
// --address listens on (and the HTTP/REST one named http1 that --http_address
// listens on, when declared), and the probes on the gRPC port.
func checkRuntimeContainer(p *problems, cid string, c corev1.Container) {
	flags := map[string]string{}
	for _, arg := range append(append([]string{}, c.Command...), c.Args...) {
		if strings.HasPrefix(arg, "--flagfile=") {
			p.add(cid, "%s: a ServingRuntime mounts no flag file; give the flags as args", arg)
		}
	}
	checkCommandLineFlags(p, cid, c, flags)
	// As deploy/k8s: a ServingRuntime has no pod security context, so the
	// container's own must say it all.
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || (sc.RunAsUser != nil && *sc.RunAsUser == 0) {
		p.add(cid, "does not run as non-root (securityContext.runAsNonRoot: true, runAsUser not 0)")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		p.add(cid, "securityContext.readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || (sc.Privileged != nil && *sc.Privileged) {
		p.add(cid, "securityContext allows privilege escalation (allowPrivilegeEscalation must be false, privileged not true)")
	}
	if sc.Capabilities == nil || !containsCapability(sc.Capabilities.Drop, "ALL") {
		p.add(cid, "securityContext.capabilities.drop does not include ALL")
	}
	if len(c.Ports) == 0 || c.Ports[0].Name != "h2c" || len(c.Ports) > 2 ||
		(len(c.Ports) == 2 && c.Ports[1].Name != "http1") {
		var names []string
		for _, port := range c.Ports {
			names = append(names, port.Name)
		}
		p.add(cid, "ports %v: want the gRPC port named h2c first (KServe routes gRPC to it), then optionally the HTTP/REST port named http1", names)
		return
	}
	grpcPort := c.Ports[0].ContainerPort
	checkListens(p, cid, flags, "address", "0.0.0.0:50051", "h2c", grpcPort)
	if len(c.Ports) == 2 {
		checkListens(p, cid, flags, "http_address", "0.0.0.0:8000", "http1", c.Ports[1].ContainerPort)
	}
	for _, probe := range []struct {
		name  string
		probe *corev1.Probe
	}{{"startup", c.StartupProbe}, {"readiness", c.ReadinessProbe}, {"liveness", c.LivenessProbe}} {
		switch {
		case probe.probe == nil:
			if probe.name != "startup" {
				p.add(cid, "has no %s probe", probe.name)
			}
		case probe.probe.GRPC == nil:
			p.add(cid, "%s probe is not a gRPC health probe", probe.name)
		case probe.probe.GRPC.Port != grpcPort:
			p.add(cid, "%s probe asks port %d, not the h2c port %d", probe.name, probe.probe.GRPC.Port, grpcPort)
		}
	}
}

// checkListens checks that tensord's --`flag` (its default `fallback` when
// not given) listens on the container port `name`.
func checkListens(p *problems, cid string, flags map[string]string, flag, fallback, name string, port int32) {
	address, set := flags[flag]
	if !set {
		address = fallback
	}
	if got := address[strings.LastIndex(address, ":")+1:]; address == "" || got != strconv.Itoa(int(port)) {
		p.add(cid, "--%s=%s does not listen on the %s container port %d", flag, address, name, port)
	}
}

// drainSeconds is the container's preStop sleep plus tensord's
// --drain_seconds and --shutdown_grace_seconds (its defaults: 0 and 30).
func drainSeconds(c corev1.Container) int64 {
	drain, grace, sleep := 0, 30, 0
	for _, arg := range c.Args {
		if v, ok := strings.CutPrefix(arg, "--drain_seconds="); ok {
			drain, _ = strconv.Atoi(v)
		}
		if v, ok := strings.CutPrefix(arg, "--shutdown_grace_seconds="); ok {
			grace, _ = strconv.Atoi(v)
		}
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Exec != nil {
		if cmd := c.Lifecycle.PreStop.Exec.Command; len(cmd) == 2 && filepath.Base(cmd[0]) == "sleep" {
			sleep, _ = strconv.Atoi(cmd[1])
		}
	}
	return int64(sleep + drain + grace)
}

func mustJSON(v any) []byte {
	data, _ := json.Marshal(v)
	return data
}

func contains(list []string, want string) bool {
	for _, s := range list {
		if s == want {
			return true
		}
	}
	return false
}

func formatString(name string, version *string) string {
	if version == nil {
		return strconv.Quote(name)
	}
	return fmt.Sprintf("%q version %q", name, *version)
}
