// Command validate renders tensord's Kubernetes manifests — DIR/base and every
// DIR/overlays/* — with kustomize's Go API (the engine behind `kubectl
// kustomize`), decodes every rendered object strictly into its k8s.io/api type,
// and checks the references between objects that schema validation cannot see.
//
//	validate deploy/k8s
//	validate kserve deploy/kserve CRDDIR   (kserve.go: KServe's CRD schema)
//
// It prints "ok DIR: N objects" for each kustomization that passes and
// "FAIL DIR: problem" for each problem, and exits 1 if there was any (2 for a
// bad command line). scripts/k8s-validate.sh runs it, and its tests, in CI.
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

func main() {
	os.Exit(run(os.Stdout, os.Stderr, os.Args[1:]))
}

func run(stdout, stderr io.Writer, args []string) int {
	if tensordFlagsErr != nil {
		fmt.Fprintf(stderr, "validate: %v\n", tensordFlagsErr)
		return 2
	}
	if len(args) == 3 && args[0] == "kserve" {
		return runKServe(stdout, stderr, args[1], args[2]) // kserve.go
	}
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: validate DIR   (DIR holds base/ and overlays/*/, e.g. deploy/k8s)\n"+
			"       validate kserve DIR CRDDIR   (DIR holds KServe manifests, e.g. deploy/kserve; CRDDIR KServe's config/crd/full)")
		return 2
	}
	dirs, err := kustomizations(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "validate: %v\n", err)
		return 2
	}
	status := 0
	for _, dir := range dirs {
		n, problems := validate(filesys.MakeFsOnDisk(), dir)
		if len(problems) == 0 {
			fmt.Fprintf(stdout, "ok %s: %d objects\n", dir, n)
			continue
		}
		status = 1
		for _, problem := range problems {
			fmt.Fprintf(stdout, "FAIL %s: %s\n", dir, problem)
		}
	}
	return status
}

// kustomizations lists root/base and every directory in root/overlays. A
// directory there without a kustomization fails to render, as it should.
func kustomizations(root string) ([]string, error) {
	dirs := []string{filepath.Join(root, "base")}
	entries, err := os.ReadDir(filepath.Join(root, "overlays"))
	if err != nil {
		return nil, err
	}
	for _, entry := range entries {
		if entry.IsDir() {
			dirs = append(dirs, filepath.Join(root, "overlays", entry.Name()))
		}
	}
	return dirs, nil
}

// validate renders the kustomization in dir and returns the number of objects
// and the problems found, each naming the object ("Kind/name: ...").
func validate(fSys filesys.FileSystem, dir string) (int, []string) {
	p := duplicateKeys(fSys, dir)
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fSys, dir)
	if err != nil {
		return 0, append(p, "kustomize: "+oneLine(err.Error()))
	}
	var out rendered
	decoded := true
	for _, res := range resources.Resources() {
		id := res.GetKind() + "/" + res.GetName()
		obj, errs := decode(res)
		for _, err := range errs {
			p.add(id, "%s", oneLine(err.Error()))
		}
		if obj == nil {
			decoded = false
			continue
		}
		out.add(obj)
	}
	// References are checked between well-formed objects only: an object that
	// did not decode would make everything that refers to it fail too.
	if decoded {
		out.check(&p)
	}
	return resources.Size(), p
}

// duplicateKeys reports the keys defined twice in one mapping of the YAML
// files in dir. Rendering keeps one of the two silently when they are in a
// patch; in a resource they also fail to decode.
func duplicateKeys(fSys filesys.FileSystem, dir string) problems {
	var p problems
	names, err := fSys.ReadDir(dir)
	if err != nil {
		return nil // kustomize says what is wrong with dir
	}
	for _, name := range names {
		if ext := filepath.Ext(name); ext != ".yaml" && ext != ".yml" {
			continue
		}
		data, err := fSys.ReadFile(filepath.Join(dir, name))
		if err != nil {
			p.add(name, "%v", err)
			continue
		}
		for decoder := yaml.NewDecoder(bytes.NewReader(data)); ; {
			var document any
			if err := decoder.Decode(&document); err != nil {
				if err != io.EOF {
					p.add(name, "%s", oneLine(err.Error()))
				}
				break
			}
		}
	}
	return p
}

// newObject returns the k8s.io/api type for an apiVersion and kind. Only these
// may appear in the manifests: add a kind here before using it.
func newObject(apiVersion, kind string) any {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}
	case "v1 Service":
		return &corev1.Service{}
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}
	case "v1 Namespace":
		return &corev1.Namespace{}
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	case "monitoring.coreos.com/v1 ServiceMonitor": // monitoring.go
		return &ServiceMonitor{}
	case "monitoring.coreos.com/v1 PrometheusRule":
		return &PrometheusRule{}
	}
	return nil
}

// decode converts one rendered object to its typed struct the way the API
// server's strict field validation does (sigs.k8s.io/json, as in
// k8s.io/apimachinery's strict serializer): case-sensitive, and unknown fields,
// duplicate fields and wrong types are errors.
func decode(res *resource.Resource) (any, []error) {
	obj := newObject(res.GetApiVersion(), res.GetKind())
	if obj == nil {
		return nil, []error{fmt.Errorf("unknown kind %q in %q (the validator decodes only the kinds listed in newObject)",
			res.GetKind(), res.GetApiVersion())}
	}
	// Duplicate keys in the YAML survive rendering and fail here.
	data, err := res.MarshalJSON()
	if err != nil {
		return nil, []error{err}
	}
	strict, err := kjson.UnmarshalStrict(data, obj)
	if err != nil {
		return nil, []error{err}
	}
	if len(strict) > 0 {
		return nil, strict
	}
	return obj, nil
}

type problems []string

func (p *problems) add(id, format string, args ...any) {
	*p = append(*p, id+": "+fmt.Sprintf(format, args...))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// rendered holds the decoded objects of one kustomization.
type rendered struct {
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	configMaps  map[string]*corev1.ConfigMap
	hpas        []*autoscalingv2.HorizontalPodAutoscaler
	pdbs        []*policyv1.PodDisruptionBudget
	monitors    []*ServiceMonitor
	rules       []*PrometheusRule
}

func (r *rendered) add(obj any) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		r.deployments = append(r.deployments, o)
	case *corev1.Service:
		r.services = append(r.services, o)
	case *corev1.ConfigMap:
		if r.configMaps == nil {
			r.configMaps = map[string]*corev1.ConfigMap{}
		}
		r.configMaps[o.Name] = o
	case *autoscalingv2.HorizontalPodAutoscaler:
		r.hpas = append(r.hpas, o)
	case *policyv1.PodDisruptionBudget:
		r.pdbs = append(r.pdbs, o)
	case *ServiceMonitor:
		r.monitors = append(r.monitors, o)
	case *PrometheusRule:
		r.rules = append(r.rules, o)
	}
}

// selecting returns the Deployments whose pod template labels sel matches.
func (r *rendered) selecting(sel labels.Selector) []*appsv1.Deployment {
	var matched []*appsv1.Deployment
	for _, d := range r.deployments {
		if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			matched = append(matched, d)
		}
	}
	return matched
}

// check adds the problems of the references between objects.
func (r *rendered) check(p *problems) {
	for _, d := range r.deployments {
		r.checkDeployment(p, d)
	}
	for _, s := range r.services {
		id := "Service/" + s.Name
		if len(s.Spec.Selector) == 0 {
			p.add(id, "has no selector")
			continue
		}
		sel := labels.SelectorFromSet(s.Spec.Selector)
		matched := r.selecting(sel)
		if len(matched) == 0 {
			p.add(id, "selector %s selects no Deployment's pods", sel)
		}
		for _, port := range s.Spec.Ports {
			for _, d := range matched {
				if !hasContainerPort(d, port.TargetPort, port.Port) {
					p.add(id, "port %q: targetPort %s is not a container port of Deployment/%s",
						port.Name, targetPortString(port), d.Name)
				}
			}
		}
	}
	for _, h := range r.hpas {
		id := "HorizontalPodAutoscaler/" + h.Name
		ref := h.Spec.ScaleTargetRef
		d := r.deployment(ref.Name)
		if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || d == nil {
			p.add(id, "scaleTargetRef %s %s/%s is not a Deployment in the output", ref.APIVersion, ref.Kind, ref.Name)
			continue
		}
		if d.Spec.Replicas != nil {
			p.add(id, "Deployment/%s sets spec.replicas, which every apply would reset the autoscaled count to", d.Name)
		}
		for _, m := range h.Spec.Metrics {
			if m.Type != autoscalingv2.ResourceMetricSourceType || m.Resource == nil ||
				m.Resource.Target.Type != autoscalingv2.UtilizationMetricType {
				continue
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				if _, ok := c.Resources.Requests[m.Resource.Name]; !ok {
					p.add(id, "scales on %s utilization, but container %q of Deployment/%s requests no %s",
						m.Resource.Name, c.Name, d.Name, m.Resource.Name)
				}
			}
		}
	}
	for _, m := range r.monitors {
		r.checkServiceMonitor(p, m)
	}
	for _, pr := range r.rules {
		checkPrometheusRule(p, pr)
	}
	for _, pdb := range r.pdbs {
		id := "PodDisruptionBudget/" + pdb.Name
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		switch {
		case err != nil:
			p.add(id, "spec.selector: %v", err)
		case sel.Empty():
			p.add(id, "spec.selector is empty (it would cover every pod of the namespace)")
		case len(r.selecting(sel)) == 0:
			p.add(id, "selector %s selects no Deployment's pods", sel)
		}
	}
}

func (r *rendered) deployment(name string) *appsv1.Deployment {
	for _, d := range r.deployments {
		if d.Name == name {
			return d
		}
	}
	return nil
}

func (r *rendered) checkDeployment(p *problems, d *appsv1.Deployment) {
	id := "Deployment/" + d.Name
	pod := &d.Spec.Template.Spec
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	switch {
	case err != nil:
		p.add(id, "spec.selector: %v", err)
	case sel.Empty():
		p.add(id, "spec.selector is empty")
	case !sel.Matches(labels.Set(d.Spec.Template.Labels)):
		p.add(id, "spec.selector %s does not match the pod template's labels %s", sel, labels.Set(d.Spec.Template.Labels))
	}

	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
		if cm := v.ConfigMap; cm != nil && (cm.Optional == nil || !*cm.Optional) && r.configMaps[cm.Name] == nil {
			p.add(id, "volume %q refers to ConfigMap %q, which is not in the output", v.Name, cm.Name)
		}
	}
	podSecurity := pod.SecurityContext
	if podSecurity == nil {
		podSecurity = &corev1.PodSecurityContext{}
	}

	for _, c := range pod.Containers {
		cid := fmt.Sprintf("%s container %q", id, c.Name)
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				p.add(cid, "mounts volume %q, which the pod does not define", m.Name)
			}
		}

		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		nonRoot, user := sc.RunAsNonRoot, sc.RunAsUser
		if nonRoot == nil {
			nonRoot = podSecurity.RunAsNonRoot
		}
		if user == nil {
			user = podSecurity.RunAsUser
		}
		if nonRoot == nil || !*nonRoot || (user != nil && *user == 0) {
			p.add(cid, "does not run as non-root (runAsNonRoot: true, runAsUser not 0)")
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

		if !isTensord(c) {
			// A co-located client (overlays/sidecar): the pod's security rules
			// above, and the memory it shares with tensord.
			checkCompanion(p, cid, pod, c, volumes)
			continue
		}
		grpcPort := containerPort(c, "grpc")
		if grpcPort == 0 {
			p.add(cid, "has no container port named grpc")
		}
		flags := r.checkFlags(p, cid, pod, c, volumes)
		// Probes ask the plaintext health listener when there is one: with TLS
		// on the grpc port it is the only port a kubelet gRPC probe can speak to.
		probePortName, probePort := "grpc", grpcPort
		if flags["health_address"] != "" {
			probePortName, probePort = "health", containerPort(c, "health")
		}
		for _, probe := range []struct {
			name     string
			probe    *corev1.Probe
			required bool
		}{{"startup", c.StartupProbe, false}, {"readiness", c.ReadinessProbe, true}, {"liveness", c.LivenessProbe, true}} {
			switch {
			case probe.probe == nil:
				if probe.required {
					p.add(cid, "has no %s probe", probe.name)
				}
			case probe.probe.GRPC == nil:
				p.add(cid, "%s probe is not a gRPC health probe", probe.name)
			case probe.probe.GRPC.Port != probePort:
				p.add(cid, "%s probe asks port %d, not the %s port %d", probe.name, probe.probe.GRPC.Port, probePortName, probePort)
			}
		}
	}
}

// isTensord says whether a container runs tensord (its command is tensord or it
// reads flag files) rather than a co-located client.
func isTensord(c corev1.Container) bool {
	if len(c.Command) > 0 && filepath.Base(c.Command[0]) == "tensord" {
		return true
	}
	for _, arg := range append(append([]string{}, c.Command...), c.Args...) {
		if strings.HasPrefix(arg, "--flagfile=") {
			return true
		}
	}
	return false
}

// unixAddressKey is where a --address=unix:PATH goes in a flags map: --address
// may repeat for its Unix sockets, and a key with a space is no flag's name.
func unixAddressKey(value string) string { return "address " + value }

// mountOf returns the container's mount whose path holds `path`, and whether
// there is one.
func mountOf(c corev1.Container, path string) (corev1.VolumeMount, bool) {
	var best corev1.VolumeMount
	found := false
	for _, m := range c.VolumeMounts {
		dir := strings.TrimSuffix(m.MountPath, "/")
		if (path == dir || strings.HasPrefix(path, dir+"/")) && len(dir) >= len(best.MountPath) {
			best, found = m, true
		}
	}
	return best, found
}

// memoryEmptyDir says whether volume `name` is an emptyDir in memory (tmpfs).
func memoryEmptyDir(volumes map[string]corev1.Volume, name string) bool {
	v, ok := volumes[name]
	return ok && v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory
}

// checkUnixSockets checks each --address=unix:PATH of a tensord container: the
// socket's directory is a writable emptyDir mount (the root filesystem is
// read-only, and a client container must see the same directory).
func checkUnixSockets(p *problems, cid string, c corev1.Container, volumes map[string]corev1.Volume, flags map[string]string) {
	for key, value := range flags {
		if !strings.HasPrefix(key, "address ") || strings.HasPrefix(value, "unix-abstract:") {
			continue
		}
		path := strings.TrimPrefix(strings.TrimPrefix(value, "unix:"), "//")
		if !strings.HasPrefix(path, "/") {
			p.add(cid, "--address=%s: the socket path must be absolute", value)
			continue
		}
		m, ok := mountOf(c, filepath.Dir(path))
		switch {
		case !ok:
			p.add(cid, "--address=%s: %s is in no mounted volume (the root filesystem is read-only)", value, filepath.Dir(path))
		case m.ReadOnly:
			p.add(cid, "--address=%s: volume %q is mounted read-only", value, m.Name)
		case volumes[m.Name].EmptyDir == nil:
			p.add(cid, "--address=%s: volume %q is not an emptyDir, which the pod's containers share", value, m.Name)
		}
	}
}

// checkCompanion checks a client container beside tensord: a Unix socket it
// is told to use (TENSOROP_TARGET=unix:PATH) lies in a volume tensord mounts
// at the same place, and its /dev/shm, if it mounts one, is the in-memory
// emptyDir tensord mounts at /dev/shm (else tensord maps other objects).
func checkCompanion(p *problems, cid string, pod *corev1.PodSpec, c corev1.Container, volumes map[string]corev1.Volume) {
	var tensord *corev1.Container
	for i := range pod.Containers {
		if isTensord(pod.Containers[i]) {
			tensord = &pod.Containers[i]
		}
	}
	if tensord == nil {
		p.add(cid, "runs beside no tensord container")
		return
	}
	same := func(path string) (string, bool) {
		mine, ok := mountOf(c, path)
		if !ok {
			return "", false
		}
		theirs, ok := mountOf(*tensord, path)
		return mine.Name, ok && theirs.Name == mine.Name && theirs.MountPath == mine.MountPath
	}
	if m, ok := mountOf(c, "/dev/shm"); ok {
		if !memoryEmptyDir(volumes, m.Name) {
			p.add(cid, "mounts volume %q at /dev/shm, which is not an emptyDir with medium: Memory", m.Name)
		} else if _, shared := same("/dev/shm"); !shared {
			p.add(cid, "mounts volume %q at /dev/shm, but container %q does not mount it there", m.Name, tensord.Name)
		}
	}
	for _, e := range c.Env {
		if e.Name != "TENSOROP_TARGET" || !strings.HasPrefix(e.Value, "unix:") {
			continue
		}
		path := strings.TrimPrefix(strings.TrimPrefix(e.Value, "unix:"), "//")
		if name, shared := same(filepath.Dir(path)); !shared {
			p.add(cid, "TENSOROP_TARGET=%s: %s is not in a volume (%q) that container %q mounts at the same place", e.Value, filepath.Dir(path), name, tensord.Name)
		}
	}
}

// tensordFlags are the flags tensord accepts, read from their definitions (the
// TENSORD_FLAG and TENSORD_RANGED_FLAG lines of server/process/config.cc, either
// with _SHOWN) so they cannot drift: an unknown one in the flag file stops
// tensord at startup.
var tensordFlags, tensordFlagsErr = readTensordFlags()

var tensordFlagLine = regexp.MustCompile(`(?m)^TENSORD_(?:RANGED_)?FLAG(?:_SHOWN)?\(\s*[\w:]+\s*,\s*(\w+)\s*,`)

// readTensordFlags finds server/process/config.cc in the working directory or the
// nearest one above it (the repository root, or the module inside it under
// `go test`) and returns the flag names it defines.
func readTensordFlags() (map[string]bool, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for {
		path := filepath.Join(dir, "server", "process", "config.cc")
		text, err := os.ReadFile(path)
		if err == nil {
			flags := map[string]bool{}
			for _, m := range tensordFlagLine.FindAllStringSubmatch(string(text), -1) {
				flags[m[1]] = true
			}
			if len(flags) == 0 {
				return nil, fmt.Errorf("%s defines no TENSORD_FLAG", path)
			}
			return flags, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, fmt.Errorf("no server/process/config.cc in the working directory or above it: run from the repository")
		}
		dir = parent
	}
}

// secretFlags name files that tensord rereads when they change: they must come
// from a Secret mounted as a whole directory (Kubernetes never updates a subPath
// mount, so a rotated certificate or token would never arrive).
var secretFlags = []string{"tls_cert_file", "tls_key_file", "tls_client_ca_file", "auth_token_file"}

// checkFlags follows each of the container's --flagfile=PATH arguments to the
// ConfigMap key mounted there, checks the files' lines (no flag set in two
// places: an overlay replaces a whole file, it does not shadow a flag), and
// checks the flags that must agree with the pod: the two listening ports and
// the drain time.
func (r *rendered) checkFlags(p *problems, cid string, pod *corev1.PodSpec, c corev1.Container, volumes map[string]corev1.Volume) map[string]string {
	var paths []string
	for _, arg := range append(append([]string{}, c.Command...), c.Args...) {
		if value, ok := strings.CutPrefix(arg, "--flagfile="); ok {
			paths = append(paths, value)
		}
	}
	if len(paths) == 0 {
		p.add(cid, "has no --flagfile=PATH argument")
		return nil
	}
	flags := map[string]string{}
	for _, path := range paths {
		text, err := r.mountedConfigMapFile(c, volumes, path)
		if err != nil {
			p.add(cid, "--flagfile=%s: %v", path, err)
			continue
		}
		checkFlagFile(p, cid, path, text, flags)
	}
	checkCommandLineFlags(p, cid, c, flags)
	checkFlagsAgainstPod(p, cid, pod, c, flags)
	checkAdvertiseAddress(p, cid, c, flags)
	checkUnixSockets(p, cid, c, volumes, flags)
	checkSecurityFlags(p, cid, c, volumes, flags)
	return flags
}

// checkSecurityFlags checks the transport-security flags as tensord would at
// startup (pairs, tokens only over TLS, the reflection mode), that TLS on the
// grpc port comes with a plaintext health listener for the probes, and that
// every certificate, key and token file is in a Secret volume mounted whole.
func checkSecurityFlags(p *problems, cid string, c corev1.Container, volumes map[string]corev1.Volume, flags map[string]string) {
	tls := flags["tls_cert_file"] != ""
	if tls != (flags["tls_key_file"] != "") {
		p.add(cid, "--tls_cert_file and --tls_key_file go together: give both, or neither")
	}
	if !tls && flags["tls_client_ca_file"] != "" {
		p.add(cid, "--tls_client_ca_file needs --tls_cert_file and --tls_key_file")
	}
	if !tls && flags["auth_token_file"] != "" {
		p.add(cid, "--auth_token_file needs --tls_cert_file and --tls_key_file (tokens never travel in plaintext)")
	}
	if mode, set := flags["reflection"]; set && mode != "on" && mode != "off" && mode != "auth" {
		p.add(cid, "--reflection=%s: expected on, off or auth", mode)
	}
	if tls && flags["health_address"] == "" {
		p.add(cid, "--tls_cert_file makes the grpc port TLS-only, which kubelet gRPC probes cannot speak: "+
			"set --health_address to the container port named health and probe that")
	}
	for _, flag := range secretFlags {
		path := flags[flag]
		if path == "" {
			continue
		}
		if problem := secretMountProblem(c, volumes, path); problem != "" {
			p.add(cid, "--%s=%s %s", flag, path, problem)
		}
	}
}

// secretMountProblem says what is wrong with where path comes from, or "".
func secretMountProblem(c corev1.Container, volumes map[string]corev1.Volume, path string) string {
	for _, m := range c.VolumeMounts {
		rel, err := filepath.Rel(m.MountPath, path)
		if m.SubPath == "" && (err != nil || rel == "." || strings.HasPrefix(rel, "..")) {
			continue
		}
		if m.SubPath != "" && m.MountPath != path {
			continue
		}
		if m.SubPath != "" {
			return fmt.Sprintf("is mounted with subPath %q, which Kubernetes never updates: rotation would not reach tensord", m.SubPath)
		}
		v := volumes[m.Name]
		if v.Secret == nil {
			return fmt.Sprintf("is in volume %q, which is not a Secret", m.Name)
		}
		return ""
	}
	return "is in no mounted volume"
}

// checkCommandLineFlags adds the container's own --name=value arguments (they
// come after the flag files, so they win) to `flags`: known flags, not also
// set in a file, and every $(VAR) they use defined in the container's env
// (Kubernetes expands only those, and leaves an unknown one as it is written).
// The pod IP reaches --metrics_address this way: flag files cannot expand it.
func checkCommandLineFlags(p *problems, cid string, c corev1.Container, flags map[string]string) {
	env := map[string]bool{}
	for _, e := range c.Env {
		env[e.Name] = true
	}
	for _, arg := range append(append([]string{}, c.Command...), c.Args...) {
		if !strings.HasPrefix(arg, "--") || strings.HasPrefix(arg, "--flagfile=") {
			continue
		}
		name, value, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if !tensordFlags[name] {
			p.add(cid, "command-line flag --%s: tensord has no flag --%s", name, name)
			continue
		}
		if name == "address" && strings.HasPrefix(value, "unix") {
			flags[unixAddressKey(value)] = value // --address repeats for sockets
			continue
		}
		if _, twice := flags[name]; twice {
			p.add(cid, "--%s is set both in a flag file and on the command line", name)
		}
		for rest := value; ; {
			start := strings.Index(rest, "$(")
			if start < 0 {
				break
			}
			end := strings.Index(rest[start:], ")")
			if end < 0 {
				break
			}
			if v := rest[start+2 : start+end]; !env[v] {
				p.add(cid, "--%s=%s refers to $(%s), which the container's env does not define", name, value, v)
			}
			rest = rest[start+end:]
		}
		flags[name] = value
	}
}

// checkFlagFile checks one flag file's lines and adds its flags to `flags`.
func checkFlagFile(p *problems, cid, path, text string, flags map[string]string) {
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "--"), "=")
		switch {
		case !strings.HasPrefix(line, "--") || !ok:
			p.add(cid, "%s line %d: %q is not --name=value", path, i+1, line)
		case !tensordFlags[name]:
			p.add(cid, "%s line %d: tensord has no flag --%s", path, i+1, name)
		case strings.Contains(value, " #"):
			p.add(cid, "%s line %d: a comment must have a line of its own", path, i+1)
		case name == "address" && strings.HasPrefix(value, "unix"):
			flags[unixAddressKey(value)] = value // --address repeats for sockets
		default:
			if _, twice := flags[name]; twice {
				p.add(cid, "%s line %d: --%s is set twice", path, i+1, name)
			}
			flags[name] = value
		}
	}
}

// checkFlagsAgainstPod checks the flags that must agree with the pod spec.
func checkFlagsAgainstPod(p *problems, cid string, pod *corev1.PodSpec, c corev1.Container, flags map[string]string) {
	for _, listen := range []struct{ flag, fallback, port string }{
		{"address", "0.0.0.0:50051", "grpc"},
		{"metrics_address", "127.0.0.1:9464", "metrics"},
		{"health_address", "", "health"},
	} {
		address, set := flags[listen.flag]
		if !set {
			address = listen.fallback
		}
		if address == "" { // --metrics_address= turns metrics off
			continue
		}
		port := address[strings.LastIndex(address, ":")+1:]
		if want := containerPort(c, listen.port); strconv.Itoa(int(want)) != port {
			p.add(cid, "--%s=%s does not listen on the container port named %s (%d)", listen.flag, address, listen.port, want)
		}
	}

	seconds := func(flag string, fallback int) int {
		value, ok := flags[flag]
		if !ok {
			return fallback
		}
		n, err := strconv.Atoi(value)
		if err != nil {
			p.add(cid, "--%s=%s is not a number", flag, value)
		}
		return n
	}
	grace := seconds("shutdown_grace_seconds", 30) // tensord's defaults
	drain := seconds("drain_seconds", 0)
	sleep := 0
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Exec != nil {
		if cmd := c.Lifecycle.PreStop.Exec.Command; len(cmd) == 2 && filepath.Base(cmd[0]) == "sleep" {
			sleep, _ = strconv.Atoi(cmd[1])
		}
	}
	period := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.TerminationGracePeriodSeconds != nil {
		period = *pod.TerminationGracePeriodSeconds
	}
	if period < int64(sleep+drain+grace) {
		p.add(cid, "terminationGracePeriodSeconds %d is less than the preStop sleep (%d) plus --drain_seconds (%d) plus --shutdown_grace_seconds (%d): draining calls would be killed",
			period, sleep, drain, grace)
	}
}

// checkAdvertiseAddress checks --advertise_address, which every handle names
// as the replica holding it and clients send calls on the handle to: the pod's
// own IP ($(VAR) of an env var from the downward API's status.podIP, since
// flag files cannot expand it) and the container port named grpc. Without it
// handles name no replica (tensord listens on 0.0.0.0), and calls on them
// would be balanced to pods that do not have them.
func checkAdvertiseAddress(p *problems, cid string, c corev1.Container, flags map[string]string) {
	grpc := containerPort(c, "grpc")
	address, set := flags["advertise_address"]
	if !set {
		p.add(cid, "has no --advertise_address: handles would name no replica for clients to send calls on them to; "+
			"set --advertise_address=$(POD_IP):%d on the command line, POD_IP from the downward API (status.podIP)", grpc)
		return
	}
	colon := strings.LastIndex(address, ":")
	host, port := "", address
	if colon >= 0 {
		host, port = address[:colon], address[colon+1:]
	}
	podIP := false
	if name, ok := strings.CutPrefix(host, "$("); ok && strings.HasSuffix(name, ")") {
		name = strings.TrimSuffix(name, ")")
		for _, e := range c.Env {
			if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
				e.ValueFrom.FieldRef.FieldPath == "status.podIP" {
				podIP = true
			}
		}
	}
	if !podIP {
		p.add(cid, "--advertise_address=%s: the host must be the pod's IP, $(VAR) of an env var from the downward API (status.podIP)", address)
	}
	if port != strconv.Itoa(int(grpc)) {
		p.add(cid, "--advertise_address=%s does not name the container port named grpc (%d)", address, grpc)
	}
}

// mountedConfigMapFile returns the ConfigMap value that the container sees at
// path.
func (r *rendered) mountedConfigMapFile(c corev1.Container, volumes map[string]corev1.Volume, path string) (string, error) {
	for _, m := range c.VolumeMounts {
		key := m.SubPath
		if key == "" {
			rel, err := filepath.Rel(m.MountPath, path)
			if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
				continue
			}
			key = rel
		} else if m.MountPath != path {
			continue
		}
		source := volumes[m.Name].ConfigMap
		if source == nil {
			return "", fmt.Errorf("volume %q mounted at %s is not a ConfigMap", m.Name, m.MountPath)
		}
		for _, item := range source.Items {
			if item.Path == key {
				key = item.Key
			}
		}
		cm := r.configMaps[source.Name]
		if cm == nil {
			return "", fmt.Errorf("ConfigMap %q is not in the output", source.Name)
		}
		text, ok := cm.Data[key]
		if !ok {
			return "", fmt.Errorf("ConfigMap %q has no key %q", source.Name, key)
		}
		return text, nil
	}
	return "", fmt.Errorf("no volume is mounted there")
}

func containerPort(c corev1.Container, name string) int32 {
	for _, port := range c.Ports {
		if port.Name == name {
			return port.ContainerPort
		}
	}
	return 0
}

// hasContainerPort reports whether a Service port's targetPort (a name, a
// number, or unset: the Service port) is a container port of d's pods.
func hasContainerPort(d *appsv1.Deployment, target intstr.IntOrString, servicePort int32) bool {
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, port := range c.Ports {
			switch {
			case target.Type == intstr.String && target.StrVal != "":
				if port.Name == target.StrVal {
					return true
				}
			case target.IntVal != 0:
				if port.ContainerPort == target.IntVal {
					return true
				}
			case port.ContainerPort == servicePort:
				return true
			}
		}
	}
	return false
}

func targetPortString(port corev1.ServicePort) string {
	if port.TargetPort.Type == intstr.String && port.TargetPort.StrVal != "" {
		return strconv.Quote(port.TargetPort.StrVal)
	}
	if port.TargetPort.IntVal != 0 {
		return strconv.Itoa(int(port.TargetPort.IntVal))
	}
	return strconv.Itoa(int(port.Port))
}

func containsCapability(list []corev1.Capability, want corev1.Capability) bool {
	for _, c := range list {
		if c == want {
			return true
		}
	}
	return false
}
