// Command flyte-corpus writes RayJobs exactly as Flyte v1 builds them, by running Flyte's
// own code (flyteplugins v1.13.0 and flytepropeller v1.13.0), into tests/fixtures/flyte/v1.
//
// What runs from Flyte, unchanged:
//   - flytepropeller pkg/compiler (CompileTask, CompileWorkflow) and
//     pkg/compiler/transformers/k8s BuildFlyteWorkflow: the FlyteWorkflow object and its
//     labels execution-id, project, domain, workflow-name, shard-key;
//   - flyteplugins' Ray plugin BuildResource (plugins/k8s/ray/ray.go), which calls
//     flytek8s.ToK8sPodSpec, DecorateEnvVars, GetPodTolerations (k8s_resource_adds.go) with
//     the K8s plugin config set below;
//   - flyteplugins pluginmachinery/encoding FixedLengthUniqueIDForParts (the object name).
//
// Reproduced from flytepropeller v1.13.0 source, because the code is unexported:
//   - the node labels node-id, task-name, interruptible
//     (pkg/controller/nodes/node_exec_context.go newNodeExecContext);
//   - the execution ID flyteadmin sets on the FlyteWorkflow
//     (flyteadmin pkg/workflowengine/impl/prepare_execution.go PrepareFlyteWorkflow);
//   - the task execution metadata and ID (pkg/controller/nodes/task/taskexec_context.go);
//   - the object metadata the K8s plugin manager adds to what BuildResource returns
//     (pkg/controller/nodes/task/k8s/plugin_manager.go addObjectMetadata).
//
// Go map order is left to Go: the platform default env vars and the per-resource
// tolerations come out in whatever order the runtime picks, as in a real propeller.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flyteorg/flyte/flyteidl/gen/pb-go/flyteidl/core"
	"github.com/flyteorg/flyte/flyteidl/gen/pb-go/flyteidl/plugins"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/catalog"
	pluginsCore "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/core"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/encoding"
	k8sconfig "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/flytek8s/config"
	pluginio "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/io"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/k8s"
	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/utils"
	_ "github.com/flyteorg/flyte/flyteplugins/go/tasks/plugins/k8s/ray"
	"github.com/flyteorg/flyte/flytepropeller/pkg/apis/flyteworkflow/v1alpha1"
	"github.com/flyteorg/flyte/flytepropeller/pkg/compiler"
	k8stransform "github.com/flyteorg/flyte/flytepropeller/pkg/compiler/transformers/k8s"
	propellerutils "github.com/flyteorg/flyte/flytepropeller/pkg/utils"
	"github.com/flyteorg/flyte/flytestdlib/contextutils"
	"github.com/flyteorg/flyte/flytestdlib/storage"
)

const (
	project   = "flytesnacks"
	domain    = "development"
	namespace = "flytesnacks-development"
	nodeID    = "n0"
	wfName    = "workflows.ray_example.ray_workflow"
	taskName  = "workflows.ray_example.ray_task"
	console   = "https://flyte.example.com/console"
	// flytepropeller pkg/controller/nodes/task/taskexec_context.go
	idMaxLength = 50
	// flytepropeller pkg/controller/nodes/task/k8s/plugin_manager.go
	finalizer = "flyte/flytek8s"
)

// One Flyte v1 task execution attempt.
type scenario struct {
	Name        string `json:"name"`
	Execution   string `json:"execution"`
	Attempt     uint32 `json:"attempt"`
	Version     string `json:"taskVersion"`
	Image       string `json:"image"`
	Replicas    int32  `json:"replicas"`
	SecondGroup bool   `json:"secondWorkerGroup,omitempty"`
	Autoscaling bool   `json:"autoscaling,omitempty"`
	// RuntimeEnvYAML as flytekit writes it (yaml.dump), or the legacy base64 JSON field.
	RuntimeEnvYAML string `json:"runtimeEnvYAML,omitempty"`
	RuntimeEnvB64  string `json:"runtimeEnvBase64,omitempty"`
	// Build until the platform env or tolerations come out in another order than this
	// scenario's (Go map order), to record a real shuffled RayJob.
	ShuffledFrom string `json:"shuffledFrom,omitempty"`
}

const pipYAML = "pip:\n- numpy==2.1.0\nenv_vars:\n  FEATURE_FLAG: 'on'\n"

func legacyB64() string {
	// flytekit before runtime_env_yaml: base64(json.dumps(runtime_env)).
	return base64.StdEncoding.EncodeToString([]byte(`{"pip": ["numpy==2.1.0"], "env_vars": {"FEATURE_FLAG": "on", "RETRIES": "3"}, "config": {"setup_timeout_seconds": 600}}`))
}

func scenarios() []scenario {
	base := scenario{Execution: "f3c9a1b2e4d5f6a7b8c9", Version: "v1", Image: "ghcr.io/acme/ray-task:py3.11-abc123", Replicas: 2, RuntimeEnvYAML: pipYAML}
	with := func(name string, edit func(*scenario)) scenario {
		s := base
		s.Name = name
		edit(&s)
		return s
	}
	return []scenario{
		with("exec1-attempt0", func(*scenario) {}),
		with("exec1-attempt1", func(s *scenario) { s.Attempt = 1 }),
		with("exec2-attempt0", func(s *scenario) { s.Execution = "a7k2m9p4q1r8s3t6u5v0" }),
		with("exec3-shuffled", func(s *scenario) { s.Execution = "b1n8c5x2z7l4k9j6h3g0"; s.ShuffledFrom = "exec1-attempt0" }),
		with("new-task-version", func(s *scenario) { s.Execution = "c4d8e2f6g1h5i9j3k7l0"; s.Version = "v2" }),
		with("new-image", func(s *scenario) {
			s.Execution = "d5e9f3g7h2i6j1k4l8m0"
			s.Image = "ghcr.io/acme/ray-task:py3.11-def456"
		}),
		with("more-replicas", func(s *scenario) { s.Execution = "e6f1g4h8i3j7k2l5m9n0"; s.Replicas = 4 }),
		with("second-worker-group", func(s *scenario) { s.Execution = "f7g2h5i9j4k8l3m6n1o0"; s.SecondGroup = true }),
		with("autoscaling", func(s *scenario) { s.Execution = "g8h3i6j1k5l9m4n7o2p0"; s.Autoscaling = true }),
		with("runtime-env-empty", func(s *scenario) { s.Execution = "h9i4j7k2l6m1n5o8p3q0"; s.RuntimeEnvYAML = "" }),
		with("runtime-env-legacy-base64", func(s *scenario) {
			s.Execution = "i1j5k8l3m7n2o6p9q4r0"
			s.RuntimeEnvYAML = ""
			s.RuntimeEnvB64 = legacyB64()
		}),
		with("runtime-env-ambiguous-scalars", func(s *scenario) {
			s.Execution = "j2k6l9m4n8o3p7q1r5s0"
			// As PyYAML's yaml.dump writes {"env_vars": {...}, "pip": [...], "config": {...}}.
			s.RuntimeEnvYAML = "config:\n  eager_install: true\n  setup_timeout_seconds: 600\nenv_vars:\n  A: 'on'\n  B: 'yes'\n  C: n\n  D: 'off'\n  E: '~'\n  F: '1_000'\n  G: '0x1F'\n  H: '3'\npip:\n- numpy==2.1.0\n"
		}),
	}
}

// The platform's K8s plugin config: the three default env vars of Flyte's sandbox values
// (charts/flyte-core/values-sandbox.yaml), tolerations per resource and by default.
func platformConfig() *k8sconfig.K8sPluginConfig {
	return &k8sconfig.K8sPluginConfig{
		DefaultEnvVars: map[string]string{
			"FLYTE_AWS_ENDPOINT":          "http://minio.flyte.svc.cluster.local:9000",
			"FLYTE_AWS_ACCESS_KEY_ID":     "minio",
			"FLYTE_AWS_SECRET_ACCESS_KEY": "miniostorage",
		},
		ResourceTolerations: map[corev1.ResourceName][]corev1.Toleration{
			corev1.ResourceCPU:    {{Key: "pool", Operator: corev1.TolerationOpEqual, Value: "cpu", Effect: corev1.TaintEffectNoSchedule}},
			corev1.ResourceMemory: {{Key: "pool", Operator: corev1.TolerationOpEqual, Value: "highmem", Effect: corev1.TaintEffectNoSchedule}},
		},
		DefaultTolerations: []corev1.Toleration{{Key: "flyte", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		InjectFinalizer:    true,
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return v
}

func taskTemplate(s scenario) *core.TaskTemplate {
	workers := []*plugins.WorkerGroupSpec{{GroupName: "cpu", Replicas: s.Replicas, MinReplicas: s.Replicas, MaxReplicas: s.Replicas}}
	if s.SecondGroup {
		workers = append(workers, &plugins.WorkerGroupSpec{GroupName: "highmem", Replicas: 1, MinReplicas: 1, MaxReplicas: 1})
	}
	if s.Autoscaling {
		workers[0].MinReplicas = 1
		workers[0].MaxReplicas = 8
	}
	rayJob := &plugins.RayJob{
		RayCluster: &plugins.RayCluster{
			HeadGroupSpec:     &plugins.HeadGroupSpec{RayStartParams: map[string]string{"num-cpus": "0"}},
			WorkerGroupSpec:   workers,
			EnableAutoscaling: s.Autoscaling,
		},
		RuntimeEnv:     s.RuntimeEnvB64,
		RuntimeEnvYaml: s.RuntimeEnvYAML,
	}
	custom := must(utils.MarshalObjToStruct(rayJob))
	res := &core.Resources{
		Requests: []*core.Resources_ResourceEntry{{Name: core.Resources_CPU, Value: "1"}, {Name: core.Resources_MEMORY, Value: "2Gi"}},
		Limits:   []*core.Resources_ResourceEntry{{Name: core.Resources_CPU, Value: "1"}, {Name: core.Resources_MEMORY, Value: "2Gi"}},
	}
	return &core.TaskTemplate{
		Id:       &core.Identifier{ResourceType: core.ResourceType_TASK, Project: project, Domain: domain, Name: taskName, Version: s.Version},
		Type:     "ray",
		Metadata: &core.TaskMetadata{Runtime: &core.RuntimeMetadata{Type: core.RuntimeMetadata_FLYTE_SDK, Version: "1.13.0", Flavor: "python"}, Retries: &core.RetryStrategy{Retries: 2}},
		Interface: &core.TypedInterface{
			Inputs:  &core.VariableMap{Variables: map[string]*core.Variable{}},
			Outputs: &core.VariableMap{Variables: map[string]*core.Variable{}},
		},
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: s.Image,
			// flytekit's default task resolver arguments.
			Args: []string{"pyflyte-execute", "--inputs", "{{.input}}", "--output-prefix", "{{.outputPrefix}}",
				"--raw-output-data-prefix", "{{.rawOutputDataPrefix}}", "--checkpoint-path", "{{.checkpointOutputPrefix}}",
				"--prev-checkpoint", "{{.prevCheckpointPrefix}}", "--resolver", "flytekit.core.python_auto_container.default_task_resolver",
				"--", "task-module", "workflows.ray_example", "task-name", "ray_task"},
			Resources: res,
			Env:       []*core.KeyValuePair{{Key: "LOG_LEVEL", Value: "20"}},
		}},
		Custom: custom,
		// A task with a link type gets FLYTE_EXECUTION_URL (pod_helper.go hasExternalLinkType).
		Config: map[string]string{"link_type": "wandb-execution-id"},
	}
}

// FlyteWorkflow for one execution, from propeller's compiler and k8s transformer.
func flyteWorkflow(s scenario, tmpl *core.TaskTemplate) *v1alpha1.FlyteWorkflow {
	compiled := must(compiler.CompileTask(tmpl))
	wfID := &core.Identifier{ResourceType: core.ResourceType_WORKFLOW, Project: project, Domain: domain, Name: wfName, Version: s.Version}
	wf := &core.WorkflowTemplate{
		Id:        wfID,
		Interface: &core.TypedInterface{Inputs: &core.VariableMap{Variables: map[string]*core.Variable{}}, Outputs: &core.VariableMap{Variables: map[string]*core.Variable{}}},
		Nodes: []*core.Node{{
			Id:       nodeID,
			Metadata: &core.NodeMetadata{Name: "ray_task"},
			Target:   &core.Node_TaskNode{TaskNode: &core.TaskNode{Reference: &core.TaskNode_ReferenceId{ReferenceId: tmpl.Id}}},
		}},
	}
	closure := must(compiler.CompileWorkflow(wf, nil, []*core.CompiledTask{compiled}, nil))
	execID := &core.WorkflowExecutionIdentifier{Project: project, Domain: domain, Name: s.Execution}
	fw := must(k8stransform.BuildFlyteWorkflow(closure, &core.LiteralMap{}, execID, namespace))
	fw.UID = types.UID("00000000-0000-4000-8000-" + s.Execution[:12])
	// flyteadmin pkg/workflowengine/impl/prepare_execution.go PrepareFlyteWorkflow.
	fw.ExecutionID = v1alpha1.WorkflowExecutionIdentifier{WorkflowExecutionIdentifier: execID}
	// The console link flyteadmin configures (FlyteWorkflow.ConsoleURL).
	fw.ConsoleURL = console
	return fw
}

type taskReader struct{ t *core.TaskTemplate }

func (r taskReader) Read(context.Context) (*core.TaskTemplate, error) { return r.t, nil }
func (r taskReader) Path(context.Context) (storage.DataReference, error) {
	return "s3://flyte/metadata/task.pb", nil
}

type paths struct{ inputs, outputs, raw, checkpoint, prevCheckpoint storage.DataReference }

func (p paths) GetInputPrefixPath() storage.DataReference { return p.inputs }
func (p paths) GetInputPath() storage.DataReference       { return p.inputs + "/inputs.pb" }
func (p paths) Get(context.Context) (*core.LiteralMap, error) {
	return &core.LiteralMap{}, nil
}
func (p paths) GetRawOutputPrefix() storage.DataReference           { return p.raw }
func (p paths) GetPreviousCheckpointsPrefix() storage.DataReference { return p.prevCheckpoint }
func (p paths) GetCheckpointPrefix() storage.DataReference          { return p.checkpoint }
func (p paths) GetOutputPrefixPath() storage.DataReference          { return p.outputs }
func (p paths) GetOutputPath() storage.DataReference                { return p.outputs + "/outputs.pb" }
func (p paths) GetDeckPath() storage.DataReference                  { return p.outputs + "/deck.html" }
func (p paths) GetErrorPath() storage.DataReference                 { return p.outputs + "/error.pb" }
func (p paths) Put(context.Context, pluginio.OutputReader) error    { return nil }

// taskExecutionID mirrors flytepropeller taskexec_context.go taskExecutionID.
type taskExecutionID struct {
	execName     string
	id           *core.TaskExecutionIdentifier
	uniqueNodeID string
}

func (t taskExecutionID) GetID() core.TaskExecutionIdentifier { return *t.id }
func (t taskExecutionID) GetUniqueNodeID() string             { return t.uniqueNodeID }
func (t taskExecutionID) GetGeneratedName() string            { return t.execName }
func (t taskExecutionID) GetGeneratedNameWith(_, maxLength int) (string, error) {
	return encoding.FixedLengthUniqueID(t.execName, maxLength)
}

// taskMetadata mirrors flytepropeller's nodeExecMetadata + taskExecutionMetadata.
type taskMetadata struct {
	fw     *v1alpha1.FlyteWorkflow
	id     taskExecutionID
	labels map[string]string
}

func (m taskMetadata) GetOwnerID() types.NamespacedName {
	return types.NamespacedName{Name: m.fw.Name, Namespace: m.fw.Namespace}
}
func (m taskMetadata) GetTaskExecutionID() pluginsCore.TaskExecutionID { return m.id }
func (m taskMetadata) GetNamespace() string                            { return m.fw.Namespace }
func (m taskMetadata) GetOwnerReference() metav1.OwnerReference        { return m.fw.GetOwnerReference() }

// taskexec_context.go: the overrides are the node (nCtx.Node()), as the compiler built it.
func (m taskMetadata) GetOverrides() pluginsCore.TaskOverrides  { return m.fw.Nodes[nodeID] }
func (m taskMetadata) GetLabels() map[string]string             { return m.labels }
func (m taskMetadata) GetMaxAttempts() uint32                   { return 3 }
func (m taskMetadata) GetAnnotations() map[string]string        { return m.fw.GetAnnotations() }
func (m taskMetadata) GetK8sServiceAccount() string             { return m.fw.ServiceAccountName }
func (m taskMetadata) GetSecurityContext() core.SecurityContext { return m.fw.SecurityContext }
func (m taskMetadata) IsInterruptible() bool                    { return false }
func (m taskMetadata) GetPlatformResources() *corev1.ResourceRequirements {
	return &corev1.ResourceRequirements{}
}
func (m taskMetadata) GetInterruptibleFailureThreshold() int32 { return 0 }
func (m taskMetadata) GetEnvironmentVariables() map[string]string {
	return m.fw.ExecutionConfig.EnvironmentVariables
}
func (m taskMetadata) GetConsoleURL() string { return m.fw.GetConsoleURL() }

type taskContext struct {
	reader taskReader
	meta   taskMetadata
	io     paths
}

func (c taskContext) ResourceManager() pluginsCore.ResourceManager             { return nil }
func (c taskContext) SecretManager() pluginsCore.SecretManager                 { return nil }
func (c taskContext) TaskRefreshIndicator() pluginsCore.SignalAsync            { return nil }
func (c taskContext) DataStore() *storage.DataStore                            { return nil }
func (c taskContext) PluginStateReader() pluginsCore.PluginStateReader         { return nil }
func (c taskContext) TaskReader() pluginsCore.TaskReader                       { return c.reader }
func (c taskContext) InputReader() pluginio.InputReader                        { return c.io }
func (c taskContext) TaskExecutionMetadata() pluginsCore.TaskExecutionMetadata { return c.meta }
func (c taskContext) OutputWriter() pluginio.OutputWriter                      { return c.io }
func (c taskContext) PluginStateWriter() pluginsCore.PluginStateWriter         { return nil }
func (c taskContext) Catalog() catalog.AsyncClient                             { return nil }
func (c taskContext) EventsRecorder() pluginsCore.EventsRecorder               { return nil }

func rayPlugin() k8s.Plugin {
	for _, entry := range pluginmachinery.PluginRegistry().GetK8sPlugins() {
		if entry.ID == "ray" {
			return entry.Plugin
		}
	}
	panic("ray plugin not registered")
}

func build(s scenario) *rayv1.RayJob {
	tmpl := taskTemplate(s)
	fw := flyteWorkflow(s, tmpl)

	// node_exec_context.go newNodeExecContext: the workflow's labels plus the node's.
	labels := map[string]string{}
	for k, v := range fw.GetLabels() {
		labels[k] = v
	}
	labels["node-id"] = propellerutils.SanitizeLabelValue(nodeID)
	labels["task-name"] = propellerutils.SanitizeLabelValue(tmpl.Id.Name)
	labels["interruptible"] = strconv.FormatBool(false)

	// taskexec_context.go newTaskExecutionContext / ComputeRawOutputPrefix.
	attempt := strconv.Itoa(int(s.Attempt))
	uniqueID := must(encoding.FixedLengthUniqueIDForParts(idMaxLength, []string{fw.Name, nodeID, attempt}))
	id := taskExecutionID{
		execName:     uniqueID,
		uniqueNodeID: nodeID,
		id: &core.TaskExecutionIdentifier{
			TaskId:          tmpl.Id,
			NodeExecutionId: &core.NodeExecutionIdentifier{NodeId: nodeID, ExecutionId: fw.ExecutionID.WorkflowExecutionIdentifier},
			RetryAttempt:    s.Attempt,
		},
	}
	meta := fmt.Sprintf("s3://flyte/metadata/propeller/%s-%s-%s/%s/data", project, domain, s.Execution, nodeID)
	tctx := taskContext{
		reader: taskReader{tmpl},
		meta:   taskMetadata{fw: fw, id: id, labels: labels},
		io: paths{
			inputs:         storage.DataReference(meta),
			outputs:        storage.DataReference(meta + "/" + attempt),
			raw:            storage.DataReference("s3://flyte/data/x8/" + uniqueID),
			checkpoint:     storage.DataReference("s3://flyte/data/x8/" + uniqueID + "/_flytecheckpoints"),
			prevCheckpoint: "",
		},
	}
	// flytepropeller pkg/controller/handler.go puts the workflow ID on the context.
	ctx := contextutils.WithWorkflowID(context.Background(), fw.GetID())
	obj := must(rayPlugin().BuildResource(ctx, tctx))

	// plugin_manager.go addObjectMetadata.
	cfg := k8sconfig.GetK8sPluginConfig()
	addObjectMetadata(tctx.meta, obj, cfg)
	job := obj.(*rayv1.RayJob)
	return job
}

func addObjectMetadata(m taskMetadata, o client.Object, cfg *k8sconfig.K8sPluginConfig) {
	o.SetNamespace(m.GetNamespace())
	o.SetAnnotations(utils.UnionMaps(cfg.DefaultAnnotations, o.GetAnnotations(), utils.CopyMap(m.GetAnnotations())))
	o.SetLabels(utils.UnionMaps(cfg.DefaultLabels, o.GetLabels(), utils.CopyMap(m.GetLabels())))
	o.SetName(m.GetTaskExecutionID().GetGeneratedName())
	o.SetOwnerReferences([]metav1.OwnerReference{m.GetOwnerReference()})
	if cfg.InjectFinalizer {
		o.SetFinalizers(append(o.GetFinalizers(), finalizer))
	}
}

// What Go map order changes: the env and tolerations of every pod template.
func orderKey(job *rayv1.RayJob) string {
	spec := job.Spec.RayClusterSpec
	key := fmt.Sprint(spec.HeadGroupSpec.Template.Spec.Containers[0].Env, spec.HeadGroupSpec.Template.Spec.Tolerations)
	for _, g := range spec.WorkerGroupSpecs {
		key += fmt.Sprint(g.Template.Spec.Containers[0].Env, g.Template.Spec.Tolerations)
	}
	return key
}

type fixture struct {
	GeneratedBy string        `json:"generatedBy"`
	Flyte       []string      `json:"flyte"`
	Scenario    scenario      `json:"scenario"`
	RayJob      *rayv1.RayJob `json:"rayJob"`
}

func main() {
	out := flag.String("out", "../fixtures/flyte/v1", "directory for the fixtures")
	flag.Parse()
	if err := k8sconfig.SetK8sPluginConfig(platformConfig()); err != nil {
		panic(err)
	}
	must(0, os.MkdirAll(*out, 0o755))
	built := map[string]*rayv1.RayJob{}
	for _, s := range scenarios() {
		job := build(s)
		if s.ShuffledFrom != "" {
			// Rebuild until Go's map order differs from the other scenario's.
			for i := 0; orderKey(job) == orderKey(built[s.ShuffledFrom]); i++ {
				if i > 1000 {
					panic("map order never changed")
				}
				job = build(s)
			}
		}
		built[s.Name] = job
		f := fixture{
			GeneratedBy: "tests/flyte-corpus (bash tests/flyte-corpus/generate.sh)",
			Flyte: []string{
				"flyteplugins v1.13.0: go/tasks/plugins/k8s/ray/ray.go BuildResource, go/tasks/pluginmachinery/flytek8s/k8s_resource_adds.go",
				"flytepropeller v1.13.0: pkg/compiler, pkg/compiler/transformers/k8s/workflow.go BuildFlyteWorkflow",
				"reproduced from flytepropeller v1.13.0: pkg/controller/nodes/node_exec_context.go (node labels), pkg/controller/nodes/task/taskexec_context.go (metadata), pkg/controller/nodes/task/k8s/plugin_manager.go (addObjectMetadata)",
			},
			Scenario: s,
			RayJob:   job,
		}
		text := must(json.MarshalIndent(f, "", "  "))
		path := filepath.Join(*out, s.Name+".json")
		must(0, os.WriteFile(path, append(text, '\n'), 0o644))
		fmt.Println("wrote", path)
	}
}
