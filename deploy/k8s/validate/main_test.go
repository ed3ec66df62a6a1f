package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The repository's own manifests pass.
func TestRepositoryManifests(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if status := run(&stdout, &stderr, []string{".."}); status != 0 {
		t.Fatalf("validate ..: status %d\n%s%s", status, stdout.String(), stderr.String())
	}
	for _, dir := range []string{"base", "overlays/cpu", "overlays/gpu", "overlays/tls", "overlays/sidecar", "overlays/monitoring"} {
		if !strings.Contains(stdout.String(), "ok "+filepath.Join("..", dir)+": ") {
			t.Errorf("no ok line for %s in\n%s", dir, stdout.String())
		}
	}
}

// overlay writes a copy of the real base and an overlay "bad" on top of it
// holding files (its kustomization.yaml first of all) into a temporary
// directory, and returns that directory (the validator's DIR).
func overlay(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	entries, err := os.ReadDir("../base")
	if err != nil {
		t.Fatal(err)
	}
	write := func(path string, data []byte) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, entry := range entries {
		data, err := os.ReadFile(filepath.Join("../base", entry.Name()))
		if err != nil {
			t.Fatal(err)
		}
		write(filepath.Join(root, "base", entry.Name()), data)
	}
	for name, text := range files {
		write(filepath.Join(root, "overlays", "bad", name), []byte(text))
	}
	return root
}

// patched is a kustomization on the base with one inline patch.
func patched(patch string) map[string]string {
	indented := "      " + strings.ReplaceAll(strings.TrimSpace(patch), "\n", "\n      ")
	return map[string]string{"kustomization.yaml": "resources: [../../base]\npatches:\n  - patch: |-\n" + indented + "\n"}
}

// jsonPatch is a kustomization on the base with one JSON 6902 patch.
func jsonPatch(kind, name, op, path, value string) map[string]string {
	return map[string]string{"kustomization.yaml": "resources: [../../base]\npatches:\n" +
		"  - target: {kind: " + kind + ", name: " + name + "}\n" +
		"    patch: |-\n      - op: " + op + "\n        path: " + path + "\n        value: " + value + "\n"}
}

// deploymentPatch is a strategic-merge patch on the Deployment's spec.
func deploymentPatch(spec string) map[string]string {
	return patched("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: tensord\nspec:\n" +
		"  " + strings.ReplaceAll(strings.TrimSpace(spec), "\n", "\n  "))
}

// containerPatch is a strategic-merge patch on the tensord container.
func containerPatch(container string) map[string]string {
	return deploymentPatch("template:\n  spec:\n    containers:\n      - name: tensord\n" +
		"        " + strings.ReplaceAll(strings.TrimSpace(container), "\n", "\n        "))
}

// withResource adds one more object to the base.
func withResource(yaml string) map[string]string {
	return map[string]string{
		"kustomization.yaml": "resources: [../../base, extra.yaml]\n",
		"extra.yaml":         yaml,
	}
}

// withFlags replaces the flag file.
func withFlags(flags string) map[string]string {
	return map[string]string{
		"kustomization.yaml": "resources: [../../base]\nconfigMapGenerator:\n  - name: tensord-flags\n    behavior: merge\n    files: [tensord.flags]\n",
		"tensord.flags":      flags,
	}
}

// baseFlags is the base's tensord.flags, to which a test adds lines.
func baseFlags(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../base/tensord.flags")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// editedOverlay is a copy of overlays/<overlay>'s `files` (on the real base)
// with file `name` edited; the edit must change something.
func editedOverlay(t *testing.T, overlay string, files []string, name string,
	edit func(string) string) map[string]string {
	t.Helper()
	copied := map[string]string{}
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join("../overlays", overlay, file))
		if err != nil {
			t.Fatal(err)
		}
		copied[file] = string(data)
	}
	edited := edit(copied[name])
	if edited == copied[name] {
		t.Fatalf("the edit of %s changed nothing", name)
	}
	copied[name] = edited
	return copied
}

// tlsOverlay is overlays/tls with one file edited (editedOverlay).
func tlsOverlay(t *testing.T, name string, edit func(string) string) map[string]string {
	t.Helper()
	return editedOverlay(t, "tls", []string{"kustomization.yaml", "security.flags", "deployment-tls.yaml"},
		name, edit)
}

// sidecarOverlay is overlays/sidecar (on the real base) with its kustomization
// edited; the edit must change something.
func sidecarOverlay(t *testing.T, edit func(string) string) map[string]string {
	t.Helper()
	data, err := os.ReadFile("../overlays/sidecar/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	edited := edit(string(data))
	if edited == string(data) {
		t.Fatal("the edit of overlays/sidecar changed nothing")
	}
	return map[string]string{"kustomization.yaml": edited}
}

const (
	deployment = "Deployment/tensord: "
	container  = `Deployment/tensord container "tensord": `
)

func TestProblems(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{
			name:  "unix socket outside any volume",
			files: jsonPatch("Deployment", "tensord", "add", "/spec/template/spec/containers/0/command/-", "--address=unix:///run/tensord/tensord.sock"),
			want:  []string{container + "--address=unix:///run/tensord/tensord.sock: /run/tensord is in no mounted volume (the root filesystem is read-only)"},
		},
		{
			name: "sidecar sharing another /dev/shm",
			files: sidecarOverlay(t, func(s string) string {
				return strings.Replace(s, "          name: dshm\n          mountPath: /dev/shm\n      - op: add", "          name: tmp\n          mountPath: /dev/shm\n      - op: add", 1)
			}),
			want: []string{`Deployment/tensord container "app": mounts volume "dshm" at /dev/shm, but container "tensord" does not mount it there`},
		},
		{
			name: "sidecar told a socket tensord does not share",
			files: sidecarOverlay(t, func(s string) string {
				return strings.Replace(s, "value: unix:///run/tensord/tensord.sock", "value: unix:///tmp/tensord.sock", 1)
			}),
			want: []string{`Deployment/tensord container "app": TENSOROP_TARGET=unix:///tmp/tensord.sock: /tmp is not in a volume ("") that container "tensord" mounts at the same place`},
		},
		{
			name:  "unknown field",
			files: deploymentPatch("replicass: 2"),
			want:  []string{deployment + `unknown field "spec.replicass"`},
		},
		{
			name:  "unknown field deep in the pod",
			files: containerPatch("securityContext:\n  readOnlyRootFileSystem: true"),
			want:  []string{deployment + `unknown field "spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem"`},
		},
		{
			name:  "wrong type",
			files: deploymentPatch(`revisionHistoryLimit: "5"`),
			want: []string{deployment +
				"json: cannot unmarshal string into Go struct field DeploymentSpec.spec.revisionHistoryLimit of type int32"},
		},
		{
			name:  "not a quantity",
			files: containerPatch("resources:\n  limits:\n    memory: 4GB"),
			want: []string{deployment +
				"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
		},
		{
			name: "duplicate field",
			files: withResource("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata:\n" +
				"  a: \"1\"\n  a: \"2\"\n"),
			want: []string{
				`extra.yaml: yaml: unmarshal errors: line 7: mapping key "a" already defined at line 6`,
				`ConfigMap/extra: yaml: unmarshal errors: line 7: mapping key "a" already defined at line 6`,
			},
		},
		{
			// kustomize merges the patch keeping one of the two values.
			name: "duplicate field in a patch",
			files: map[string]string{
				"kustomization.yaml": "resources: [../../base]\npatches:\n  - path: patch.yaml\n",
				"patch.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: tensord\nspec:\n" +
					"  revisionHistoryLimit: 3\n  revisionHistoryLimit: 4\n",
			},
			want: []string{`patch.yaml: yaml: unmarshal errors: line 7: mapping key "revisionHistoryLimit" already defined at line 6`},
		},
		{
			name:  "unknown kind",
			files: withResource("apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: extra\n"),
			want: []string{`StatefulSet/extra: unknown kind "StatefulSet" in "apps/v1" ` +
				"(the validator decodes only the kinds listed in newObject)"},
		},
		{
			name: "Service selecting nothing",
			files: withResource("apiVersion: v1\nkind: Service\nmetadata:\n  name: extra\nspec:\n" +
				"  selector:\n    app.kubernetes.io/name: tensor\n  ports:\n    - port: 50051\n"),
			want: []string{"Service/extra: selector app.kubernetes.io/name=tensor selects no Deployment's pods"},
		},
		{
			name:  "Service targetPort naming no container port",
			files: jsonPatch("Service", "tensord-headless", "replace", "/spec/ports/0/targetPort", "gprc"),
			want:  []string{`Service/tensord-headless: port "grpc": targetPort "gprc" is not a container port of Deployment/tensord`},
		},
		{
			name:  "Deployment selector missing its pods",
			files: deploymentPatch("selector:\n  matchLabels:\n    tier: api"),
			want: []string{deployment + "spec.selector app.kubernetes.io/name=tensord,tier=api does not match the pod template's labels " +
				"app.kubernetes.io/component=server,app.kubernetes.io/name=tensord,app.kubernetes.io/part-of=tensorop"},
		},
		{
			name:  "replicas under an autoscaler",
			files: deploymentPatch("replicas: 2"),
			want: []string{"HorizontalPodAutoscaler/tensord: Deployment/tensord sets spec.replicas, " +
				"which every apply would reset the autoscaled count to"},
		},
		{
			name:  "autoscaler aimed elsewhere",
			files: jsonPatch("HorizontalPodAutoscaler", "tensord", "replace", "/spec/scaleTargetRef/name", "tensord-old"),
			want:  []string{"HorizontalPodAutoscaler/tensord: scaleTargetRef apps/v1 Deployment/tensord-old is not a Deployment in the output"},
		},
		{
			name:  "autoscaler on CPU without a CPU request",
			files: containerPatch("resources:\n  requests:\n    cpu: null"),
			want:  []string{`HorizontalPodAutoscaler/tensord: scales on cpu utilization, but container "tensord" of Deployment/tensord requests no cpu`},
		},
		{
			name: "PodDisruptionBudget selecting nothing",
			files: patched("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: tensord\nspec:\n" +
				"  selector:\n    matchLabels:\n      app.kubernetes.io/name: tensordd"),
			want: []string{"PodDisruptionBudget/tensord: selector app.kubernetes.io/name=tensordd selects no Deployment's pods"},
		},
		{
			name:  "mount without a volume",
			files: containerPatch("volumeMounts:\n  - name: cache\n    mountPath: /var/cache/tensord"),
			want:  []string{container + `mounts volume "cache", which the pod does not define`},
		},
		{
			name: "volume of a ConfigMap not rendered",
			files: deploymentPatch("template:\n  spec:\n    volumes:\n      - name: flags\n" +
				"        configMap:\n          name: tensord-flagz"),
			want: []string{
				deployment + `volume "flags" refers to ConfigMap "tensord-flagz", which is not in the output`,
				container + `--flagfile=/etc/tensord/tensord.flags: ConfigMap "tensord-flagz" is not in the output`,
				container + `--flagfile=/etc/tensord/backends.flags: ConfigMap "tensord-flagz" is not in the output`,
			},
		},
		{
			name: "command-line flags",
			files: containerPatch("command:\n  - /usr/local/bin/tensord\n  - --flagfile=/etc/tensord/tensord.flags\n" +
				"  - --flagfile=/etc/tensord/backends.flags\n  - --metrics_address=$(NODE_IP):9465\n" +
				"  - --advertise_address=$(POD_IP):50051\n  - --no_such=1\n  - --worker_threads=3"),
			want: []string{
				container + "--metrics_address=$(NODE_IP):9465 refers to $(NODE_IP), which the container's env does not define",
				container + "command-line flag --no_such: tensord has no flag --no_such",
				container + "--worker_threads is set both in a flag file and on the command line",
				container + "--metrics_address=$(NODE_IP):9465 does not listen on the container port named metrics (9464)",
			},
		},
		{
			name: "no --advertise_address",
			files: containerPatch("command:\n  - /usr/local/bin/tensord\n  - --flagfile=/etc/tensord/tensord.flags\n" +
				"  - --flagfile=/etc/tensord/backends.flags\n  - --metrics_address=$(POD_IP):9464"),
			want: []string{container + "has no --advertise_address: handles would name no replica for clients to send " +
				"calls on them to; set --advertise_address=$(POD_IP):50051 on the command line, POD_IP from the " +
				"downward API (status.podIP)"},
		},
		{
			name: "--advertise_address on another port, or not the pod's IP",
			files: containerPatch("command:\n  - /usr/local/bin/tensord\n  - --flagfile=/etc/tensord/tensord.flags\n" +
				"  - --flagfile=/etc/tensord/backends.flags\n  - --metrics_address=$(POD_IP):9464\n" +
				"  - --advertise_address=$(HOST_IP):50052\nenv:\n  - name: HOST_IP\n    valueFrom:\n" +
				"      fieldRef:\n        fieldPath: status.hostIP"),
			want: []string{
				container + "--advertise_address=$(HOST_IP):50052: the host must be the pod's IP, $(VAR) of an env var " +
					"from the downward API (status.podIP)",
				container + "--advertise_address=$(HOST_IP):50052 does not name the container port named grpc (50051)",
			},
		},
		{
			name:  "probe on the metrics port",
			files: containerPatch("readinessProbe:\n  grpc:\n    port: 9464"),
			want:  []string{container + "readiness probe asks port 9464, not the grpc port 50051"},
		},
		{
			name:  "writable root filesystem, root user",
			files: containerPatch("securityContext:\n  readOnlyRootFilesystem: false\n  runAsUser: 0"),
			want: []string{
				container + "does not run as non-root (runAsNonRoot: true, runAsUser not 0)",
				container + "securityContext.readOnlyRootFilesystem is not true",
			},
		},
		{
			name: "bad flag file",
			files: withFlags("# comment\n\n--address=0.0.0.0:50052\n--backend_s=cpu\n--backends=cpu # CPU only\n" +
				"backends=cpu\n--worker_threads=2\n--worker_threads=4\n--shutdown_grace_seconds=60\n"),
			want: []string{
				container + "/etc/tensord/tensord.flags line 4: tensord has no flag --backend_s",
				container + "/etc/tensord/tensord.flags line 5: a comment must have a line of its own",
				container + `/etc/tensord/tensord.flags line 6: "backends=cpu" is not --name=value`,
				container + "/etc/tensord/tensord.flags line 8: --worker_threads is set twice",
				container + "--address=0.0.0.0:50052 does not listen on the container port named grpc (50051)",
				container + "terminationGracePeriodSeconds 45 is less than the preStop sleep (5) plus " +
					"--drain_seconds (0) plus --shutdown_grace_seconds (60): draining calls would be killed",
			},
		},
		{
			// The v2 HTTP API may stay on: it serves HTTPS with the same certificate.
			name:  "TLS with the v2 HTTP API left on",
			files: withFlags(baseFlags(t) + "--tls_cert_file=/etc/tensord/tls.crt\n--tls_key_file=/etc/tensord/tls.key\n"),
			want: []string{
				container + "--tls_cert_file makes the grpc port TLS-only, which kubelet gRPC probes cannot speak: " +
					"set --health_address to the container port named health and probe that",
				container + "--tls_cert_file=/etc/tensord/tls.crt is in volume \"flags\", which is not a Secret",
				container + "--tls_key_file=/etc/tensord/tls.key is in volume \"flags\", which is not a Secret",
			},
		},
		{
			name:  "TLS with probes on the TLS port and no health listener",
			files: withFlags(baseFlags(t) + "--tls_cert_file=/etc/tensord/tls.crt\n--tls_key_file=/etc/tensord/tls.key\n--http_address=\n"),
			want: []string{
				container + "--tls_cert_file makes the grpc port TLS-only, which kubelet gRPC probes cannot speak: " +
					"set --health_address to the container port named health and probe that",
				container + "--tls_cert_file=/etc/tensord/tls.crt is in volume \"flags\", which is not a Secret",
				container + "--tls_key_file=/etc/tensord/tls.key is in volume \"flags\", which is not a Secret",
			},
		},
		{
			name:  "security flags that tensord refuses",
			files: withFlags(baseFlags(t) + "--tls_key_file=/x/tls.key\n--auth_token_file=/x/tokens\n--reflection=maybe\n"),
			want: []string{
				container + "--tls_cert_file and --tls_key_file go together: give both, or neither",
				container + "--auth_token_file needs --tls_cert_file and --tls_key_file (tokens never travel in plaintext)",
				container + "--reflection=maybe: expected on, off or auth",
				container + "--tls_key_file=/x/tls.key is in no mounted volume",
				container + "--auth_token_file=/x/tokens is in no mounted volume",
			},
		},
		{
			name: "TLS overlay with probes left on the grpc port",
			files: tlsOverlay(t, "deployment-tls.yaml", func(text string) string {
				return strings.Replace(text, "readinessProbe:\n            grpc:\n              port: 50052",
					"readinessProbe:\n            grpc:\n              port: 50051", 1)
			}),
			want: []string{container + "readiness probe asks port 50051, not the health port 50052"},
		},
		{
			name: "TLS overlay with the health listener off its container port",
			files: tlsOverlay(t, "security.flags", func(text string) string {
				return strings.Replace(text, "--health_address=0.0.0.0:50052", "--health_address=0.0.0.0:8080", 1)
			}),
			want: []string{container + "--health_address=0.0.0.0:8080 does not listen on the container port named health (50052)"},
		},
		{
			name: "TLS overlay mounting the certificate with subPath",
			files: tlsOverlay(t, "deployment-tls.yaml", func(text string) string {
				return strings.Replace(text, "            - name: tls\n              mountPath: /var/run/tensord/tls\n",
					"            - name: tls\n              mountPath: /var/run/tensord/tls/tls.crt\n              subPath: tls.crt\n"+
						"            - name: tls\n              mountPath: /var/run/tensord/tls\n", 1)
			}),
			want: []string{container + "--tls_cert_file=/var/run/tensord/tls/tls.crt is mounted with subPath \"tls.crt\", " +
				"which Kubernetes never updates: rotation would not reach tensord"},
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

// A kustomization that does not render fails with kustomize's error, on the
// line of its directory; the other kustomizations are still checked.
func TestRenderFailureNamesTheDirectory(t *testing.T) {
	root := overlay(t, map[string]string{"kustomization.yaml": "resources: [../../base, missing.yaml]\n"})
	var stdout, stderr bytes.Buffer
	if status := run(&stdout, &stderr, []string{root}); status != 1 {
		t.Fatalf("status %d, want 1\n%s", status, stdout.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got\n%s", stdout.String())
	}
	if want := "ok " + filepath.Join(root, "base") + ": 6 objects"; lines[0] != want {
		t.Errorf("line 1 = %q, want %q", lines[0], want)
	}
	prefix := "FAIL " + filepath.Join(root, "overlays", "bad") + ": kustomize: "
	if !strings.HasPrefix(lines[1], prefix) || !strings.Contains(lines[1], "missing.yaml") {
		t.Errorf("line 2 = %q, want %q... naming missing.yaml", lines[1], prefix)
	}
}

func TestUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if status := run(&stdout, &stderr, nil); status != 2 || !strings.HasPrefix(stderr.String(), "usage: ") {
		t.Errorf("no arguments: status %d, stderr %q", status, stderr.String())
	}
}

// The flag names come from server/process/config.cc's TENSORD_FLAG and
// TENSORD_RANGED_FLAG lines, with or without _SHOWN: the macros' own definitions
// are not flags.
func TestTensordFlagsAreReadFromTheirDefinitions(t *testing.T) {
	if tensordFlagsErr != nil {
		t.Fatal(tensordFlagsErr)
	}
	// docs/flags.md is tensord's own --help=markdown (check_docs.py keeps it so):
	// the definitions read here must be exactly the flags listed there, less
	// --flagfile, which the flags library defines and the validator treats apart.
	table, err := os.ReadFile("../../../docs/flags.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `--(\\w+)`").FindAllStringSubmatch(string(table), -1) {
		if m[1] == "flagfile" {
			continue
		}
		listed[m[1]] = true
		if !tensordFlags[m[1]] {
			t.Errorf("tensordFlags lacks %q, which docs/flags.md lists", m[1])
		}
	}
	if len(listed) < 40 || len(tensordFlags) != len(listed) {
		t.Errorf("tensordFlags has %d flags, docs/flags.md lists %d", len(tensordFlags), len(listed))
	}
	for _, name := range []string{"name", "Type", "flagfile"} {
		if tensordFlags[name] {
			t.Errorf("tensordFlags has %q, which is not a TENSORD_FLAG", name)
		}
	}
}
