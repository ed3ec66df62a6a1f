package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// kserveCRDs loads the CRDs from $KSERVE_CRD_DIR, which scripts/k8s-validate.sh
// sets to config/crd/full of the pinned github.com/kserve/kserve module.
func kserveCRDs(t *testing.T) (string, crdSchemas) {
	t.Helper()
	dir := os.Getenv("KSERVE_CRD_DIR")
	if dir == "" {
		t.Fatal("KSERVE_CRD_DIR is not set: run scripts/k8s-validate.sh, which fetches KServe's CRDs")
	}
	schemas, err := loadCRDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, schemas
}

// The repository's KServe manifests pass.
func TestKServeManifests(t *testing.T) {
	crdDir, _ := kserveCRDs(t)
	var stdout, stderr bytes.Buffer
	if status := run(&stdout, &stderr, []string{"kserve", "../../kserve", crdDir}); status != 0 {
		t.Fatalf("validate kserve: status %d\n%s%s", status, stdout.String(), stderr.String())
	}
	if want := "ok ../../kserve: 2 objects\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
}

// The broken manifest in testdata/kserve-broken fails with one line per
// problem, and status 1.
func TestKServeBrokenTestdata(t *testing.T) {
	crdDir, _ := kserveCRDs(t)
	var stdout, stderr bytes.Buffer
	dir := filepath.Join("testdata", "kserve-broken")
	if status := run(&stdout, &stderr, []string{"kserve", dir, crdDir}); status != 1 {
		t.Fatalf("status %d, want 1\n%s%s", status, stdout.String(), stderr.String())
	}
	prefix := "FAIL " + filepath.Join(dir, "servingruntime.yaml") + ": ServingRuntime/tensord: "
	want := prefix + `unknown field "spec.containers[0].readinessProbe.grpc.services"` + "\n" +
		prefix + `unknown field "spec.protocolVersion"` + "\n"
	if stdout.String() != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout.String(), want)
	}
}

// kserveCopy writes the real deploy/kserve manifests, each edited by edits
// (file name -> old -> new, every edit must change something), into a
// temporary directory and returns it.
func kserveCopy(t *testing.T, edits map[string][][2]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"servingruntime.yaml", "inferenceservice.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../kserve", name))
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		for _, edit := range edits[name] {
			edited := strings.Replace(text, edit[0], edit[1], 1)
			if edited == text {
				t.Fatalf("%s: the edit of %q changed nothing", name, edit[0])
			}
			text = edited
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestKServeProblems(t *testing.T) {
	_, schemas := kserveCRDs(t)
	const (
		sr   = "servingruntime.yaml: ServingRuntime/tensord: "
		ctr  = "servingruntime.yaml: ServingRuntime/tensord container \"kserve-container\": "
		isvc = "inferenceservice.yaml: InferenceService/tensorop: "
	)
	runtime := func(old, new string) map[string][][2]string {
		return map[string][][2]string{"servingruntime.yaml": {{old, new}}}
	}
	service := func(old, new string) map[string][][2]string {
		return map[string][][2]string{"inferenceservice.yaml": {{old, new}}}
	}
	for _, tc := range []struct {
		name  string
		edits map[string][][2]string
		want  []string
	}{
		{
			name:  "unknown field in the runtime's container",
			edits: runtime("readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true"),
			want:  []string{sr + `unknown field "spec.containers[0].securityContext.readOnlyRootFileSystem"`},
		},
		{
			name:  "unknown field in the InferenceService",
			edits: service("runtime: tensord", "runtime: tensord\n      protocol: v2"),
			want:  []string{isvc + `unknown field "spec.predictor.model.protocol"`},
		},
		{
			name:  "unknown field in the metadata",
			edits: service("  annotations:", "  annotation:\n    a: b\n  annotations:"),
			want:  []string{isvc + `unknown field "metadata.annotation"`},
		},
		{
			name:  "wrong type",
			edits: runtime("periodSeconds: 10", `periodSeconds: "10"`),
			want:  []string{sr + `spec.containers[0].livenessProbe.periodSeconds in body must be of type integer: "string"`},
		},
		{
			name:  "not a quantity",
			edits: runtime("memory: 4Gi", "memory: 4GB"),
			want: []string{sr + `spec.containers[0].resources.limits.memory in body should match ` +
				`'^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$'`},
		},
		{
			name:  "duplicate key",
			edits: runtime("  name: tensord\n", "  name: tensord\n  name: other\n"),
			want:  []string{"servingruntime.yaml document 1: yaml: unmarshal errors: line 10: key \"name\" already set in map"},
		},
		{
			name:  "unknown kind",
			edits: service("kind: InferenceService", "kind: InferenceGraph"),
			want:  []string{`inferenceservice.yaml document 1: unknown kind "InferenceGraph" in "serving.kserve.io/v1beta1" (the validator checks only ServingRuntime serving.kserve.io/v1alpha1 and InferenceService serving.kserve.io/v1beta1)`},
		},
		{
			name:  "no v2 protocol",
			edits: runtime("  protocolVersions:\n    - v2\n    - grpc-v2", "  protocolVersions:\n    - grpc-v1"),
			want: []string{
				sr + "spec.protocolVersions [grpc-v1] does not include v2 (the Open Inference Protocol tensord speaks)",
				isvc + "spec.predictor.model.protocolVersion v2 is not in spec.protocolVersions [grpc-v1] of ServingRuntime/tensord",
			},
		},
		{
			name:  "unknown tensord flag",
			edits: runtime("--worker_threads=2", "--worker_thread=2"),
			want:  []string{ctr + "command-line flag --worker_thread: tensord has no flag --worker_thread"},
		},
		{
			name:  "flag file",
			edits: runtime("- --worker_threads=2", "- --flagfile=/etc/tensord/tensord.flags"),
			want:  []string{ctr + "--flagfile=/etc/tensord/tensord.flags: a ServingRuntime mounts no flag file; give the flags as args"},
		},
		{
			name:  "address off the declared port",
			edits: runtime("--address=0.0.0.0:50051", "--address=0.0.0.0:50052"),
			want:  []string{ctr + "--address=0.0.0.0:50052 does not listen on the h2c container port 50051"},
		},
		{
			name:  "gRPC port not named h2c",
			edits: runtime("- name: h2c", "- name: grpc"),
			want:  []string{ctr + "ports [grpc http1]: want the gRPC port named h2c first (KServe routes gRPC to it), then optionally the HTTP/REST port named http1"},
		},
		{
			name:  "HTTP address off the declared port",
			edits: runtime("--http_address=0.0.0.0:8000", "--http_address=0.0.0.0:8080"),
			want:  []string{ctr + "--http_address=0.0.0.0:8080 does not listen on the http1 container port 8000"},
		},
		{
			name:  "HTTP port declared while HTTP is off",
			edits: runtime("--http_address=0.0.0.0:8000", "--http_address="),
			want:  []string{ctr + "--http_address= does not listen on the http1 container port 8000"},
		},
		{
			name:  "probe on another port",
			edits: runtime("port: 50051\n          service: tensorop.v1.TensorOp", "port: 50052\n          service: tensorop.v1.TensorOp"),
			want:  []string{ctr + "readiness probe asks port 50052, not the h2c port 50051"},
		},
		{
			name:  "writable root filesystem, privilege escalation",
			edits: runtime("readOnlyRootFilesystem: true\n        allowPrivilegeEscalation: false", "readOnlyRootFilesystem: false\n        allowPrivilegeEscalation: true"),
			want: []string{
				ctr + "securityContext.readOnlyRootFilesystem is not true",
				ctr + "securityContext allows privilege escalation (allowPrivilegeEscalation must be false, privileged not true)",
			},
		},
		{
			name:  "root",
			edits: runtime("runAsUser: 10001\n        runAsGroup: 10001\n        readOnly", "runAsUser: 0\n        runAsGroup: 10001\n        readOnly"),
			want:  []string{ctr + "does not run as non-root (securityContext.runAsNonRoot: true, runAsUser not 0)"},
		},
		{
			name:  "no runtime container",
			edits: runtime("- name: kserve-container", "- name: tensord"),
			want:  []string{sr + "has no container named kserve-container (KServe merges the model into it)"},
		},
		{
			name:  "runtime not in the directory",
			edits: service("runtime: tensord", "runtime: triton"),
			want:  []string{isvc + `spec.predictor.model.runtime "triton" is no ServingRuntime in the directory`},
		},
		{
			name:  "model format the runtime does not support",
			edits: service("name: tensorop\n        version: \"1\"", "name: onnx\n        version: \"1\""),
			want:  []string{isvc + `spec.predictor.model.modelFormat "onnx" version "1" is not among the supportedModelFormats of ServingRuntime/tensord`},
		},
		{
			name:  "protocol v1",
			edits: service("protocolVersion: v2", "protocolVersion: v1"),
			want:  []string{isvc + "spec.predictor.model.protocolVersion v1: tensord speaks v2 (or grpc-v2)"},
		},
		{
			name:  "model arguments with an unknown flag",
			edits: service("runtime: tensord", "runtime: tensord\n      args: [--backend_list=cpu]"),
			want:  []string{isvc + "spec.predictor.model (merged into ServingRuntime/tensord): command-line flag --backend_list: tensord has no flag --backend_list"},
		},
		{
			name:  "grace period shorter than the drain",
			edits: service("terminationGracePeriodSeconds: 45", "terminationGracePeriodSeconds: 30"),
			want: []string{isvc + "spec.predictor.terminationGracePeriodSeconds 30 is less than the preStop sleep plus --drain_seconds plus " +
				"--shutdown_grace_seconds of ServingRuntime/tensord (40): draining calls would be killed"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := kserveCopy(t, tc.edits)
			_, got, err := validateKServe(dir, schemas)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				got[i] = strings.TrimPrefix(got[i], dir+string(filepath.Separator))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

func TestKServeUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if status := run(&stdout, &stderr, []string{"kserve", "../../kserve", t.TempDir()}); status != 2 ||
		!strings.Contains(stderr.String(), "no served CRD version for serving.kserve.io/v1") {
		t.Errorf("empty CRD directory: status %d, stderr %q", status, stderr.String())
	}
}

// Both objects in one file, "---" between them and a document of only a
// comment, pass as two objects.
func TestKServeOneFile(t *testing.T) {
	_, schemas := kserveCRDs(t)
	var text []string
	for _, name := range []string{"servingruntime.yaml", "inferenceservice.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../kserve", name))
		if err != nil {
			t.Fatal(err)
		}
		text = append(text, string(data))
	}
	dir := t.TempDir()
	all := text[0] + "---\n# nothing here\n---\n" + text[1] + "---\n"
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(all), 0o644); err != nil {
		t.Fatal(err)
	}
	n, problems, err := validateKServe(dir, schemas)
	if err != nil || n != 2 || len(problems) != 0 {
		t.Errorf("%d objects, problems %q, error %v; want 2 objects, no problems", n, problems, err)
	}
}
