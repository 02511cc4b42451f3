package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestKubernetesManifest decodes k8s/snapshot-jobs.yaml strictly into the
// Kubernetes API types (an unknown or misspelt field fails), checks what
// the layout relies on (an Indexed Job whose indexes are the plan's
// partitions, retried per index, the commit held until the workers are
// done, the DSN only from a Secret file), then runs the containers'
// commands as written, with the mounted paths mapped to temporary files
// and the source served over TDS: plan, one worker per index with
// JOB_COMPLETION_INDEX set, commit.
func TestKubernetesManifest(t *testing.T) {
	b, err := os.ReadFile("k8s/snapshot-jobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%d documents, want the workers' Job and the commit Job", len(docs))
	}
	var workers, commit batchv1.Job
	for i, j := range []*batchv1.Job{&workers, &commit} {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), j); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if j.APIVersion != "batch/v1" || j.Kind != "Job" || len(j.Spec.Template.Spec.Containers) != 1 {
			t.Fatalf("document %d is %s %s with %d containers", i, j.APIVersion, j.Kind, len(j.Spec.Template.Spec.Containers))
		}
	}
	ws := workers.Spec
	if ws.CompletionMode == nil || *ws.CompletionMode != batchv1.IndexedCompletion || ws.Completions == nil || ws.BackoffLimitPerIndex == nil ||
		ws.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Fatalf("workers' Job: %+v; want Indexed, completions set, backoffLimitPerIndex with restartPolicy Never", ws)
	}
	if commit.Spec.Suspend == nil || !*commit.Spec.Suspend {
		t.Error("the commit Job is not suspended: it would commit before the workers finish")
	}
	partitions := int(*ws.Completions)

	ctx := t.Context()
	dir := t.TempDir()
	_, srv := serveDemo(t, SourceSpec{Seed: 9, Rows: 6000})
	target := filepath.Join(dir, "table")
	planDir := filepath.Join(dir, "plan")
	secretDir := filepath.Join(dir, "secret")
	for _, d := range []string{planDir, secretDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The Secret and ConfigMap volumes, as the kubelet would mount them.
	volumes := map[string]string{}
	for _, j := range []*batchv1.Job{&workers, &commit} {
		for _, v := range j.Spec.Template.Spec.Volumes {
			switch {
			case v.Secret != nil:
				volumes[v.Name] = secretDir
			case v.ConfigMap != nil:
				volumes[v.Name] = planDir
			default:
				t.Fatalf("volume %s is neither a Secret nor a ConfigMap", v.Name)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(secretDir, "dsn"), []byte(srv.DSN("cdcsnap")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// localize maps a container's paths to the temporary ones and its
	// object-store target to a local folder.
	localize := func(c corev1.Container, s string) string {
		if strings.Contains(s, "://") {
			return target
		}
		for _, m := range c.VolumeMounts {
			if rest, ok := strings.CutPrefix(s, m.MountPath+"/"); ok {
				return filepath.Join(volumes[m.Name], rest)
			}
		}
		return s
	}
	runContainer := func(c corev1.Container, index string) string {
		t.Helper()
		if len(c.Command) != 1 || c.Command[0] != "/fanout" {
			t.Fatalf("container %s runs %q, want /fanout", c.Name, c.Command)
		}
		for _, e := range c.Env {
			if e.Name == envDSN || strings.Contains(e.Value, "sqlserver://") {
				t.Fatalf("container %s carries a DSN in its spec (%s)", c.Name, e.Name)
			}
			t.Setenv(e.Name, localize(c, e.Value))
		}
		if f := os.Getenv(envDSNFile); !strings.HasPrefix(f, secretDir) {
			t.Fatalf("container %s reads the DSN from %q, not from the Secret's volume", c.Name, f)
		}
		t.Setenv(completionIndexEnv, index)
		args := make([]string, len(c.Args))
		for i, a := range c.Args {
			args[i] = localize(c, a)
		}
		out, errOut, err := runCLI(ctx, "", args...)
		if err != nil {
			t.Fatalf("%s %q (index %s): %v\n%s", c.Name, args, index, err, errOut)
		}
		return out
	}

	// Step 1, as the manifest's comment says, with the same DSN file.
	t.Setenv(envDSNFile, filepath.Join(secretDir, "dsn"))
	plan, _, err := runCLI(ctx, "", "plan", "-target", target, "-partitions", strconv.Itoa(partitions), "-min-partition-rows", "0")
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if err := os.WriteFile(filepath.Join(planDir, "plan.json"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range partitions {
		if out := runContainer(workers.Spec.Template.Spec.Containers[0], strconv.Itoa(i)); !strings.Contains(out, `"partition":`+strconv.Itoa(i)+",") {
			t.Fatalf("worker %d printed %q", i, out)
		}
	}
	out := runContainer(commit.Spec.Template.Spec.Containers[0], "")
	if !strings.Contains(out, "committed: 6003 rows of sales_orders") {
		t.Fatalf("commit printed %q", out)
	}
	if n := tableRows(t, target); n != 6003 {
		t.Errorf("the table holds %d rows, want 6003", n)
	}
	if out := runContainer(commit.Spec.Template.Spec.Containers[0], ""); !strings.Contains(out, "exists:") {
		t.Errorf("a rerun of the commit Job printed %q, want the existing snapshot", out)
	}
}
