package modeldeployment

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/podsecurity"
)

// testMD is a two-version ModelDeployment as the API server would default it.
func testMD() *mlv1.ModelDeployment {
	q := resource.MustParse("5Gi")
	return &mlv1.ModelDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "fraud", Namespace: "ml", UID: "uid-1", Generation: 3},
		Spec: mlv1.ModelDeploymentSpec{
			ModelName: "fraud-detector",
			Framework: mlv1.ModelFrameworkSKLearn,
			Image:     "example.com/server:1",
			Port:      9000,
			Versions: []mlv1.ModelVersion{
				{Name: "v1", Weight: ptr.To[int32](90), ModelPath: "s3://m/v1"},
				{Name: "v2", Weight: ptr.To[int32](10), ModelPath: "s3://models/fraud/v2", ModelSecretName: "s3-creds", Image: "example.com/server:2"},
			},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
			Scaling: mlv1.ScalingSpec{MinReplicas: 2, MaxReplicas: ptr.To[int32](6), TargetCPUUtilization: 70,
				Metrics: []autoscalingv2.MetricSpec{{
					Type: autoscalingv2.PodsMetricSourceType,
					Pods: &autoscalingv2.PodsMetricSource{
						Metric: autoscalingv2.MetricIdentifier{Name: "queue_depth"},
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))},
					},
				}}},
			HealthCheck: mlv1.HealthCheckSpec{Endpoint: "/ready", Port: ptr.To[int32](9001), IntervalSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 4},
			Storage:     &mlv1.ModelStorageSpec{Size: &q, RetainOnDelete: ptr.To(true)},
			Config:      map[string]string{"threads": "4"},
			Traffic: mlv1.TrafficSpec{Router: mlv1.RouterAuto, Hostnames: []string{"fraud.example.com"},
				Gateway: &mlv1.GatewayReference{Name: "public", Namespace: "infra", SectionName: "https"}},
			Rollout: mlv1.RolloutSpec{ProgressDeadlineSeconds: 300},
		},
	}
}

func wantOwner() *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().WithAPIVersion("ml.example.com/v1").WithKind("ModelDeployment").
		WithName("fraud").WithUID("uid-1").WithController(true).WithBlockOwnerDeletion(true)
}

var wantV2Labels = map[string]string{
	"ml.example.com/modeldeployment": "fraud", "ml.example.com/model-version": "v2", "app.kubernetes.io/managed-by": "ml-operator",
}

func wantProbe(failureThreshold int32) *corev1ac.ProbeApplyConfiguration {
	return corev1ac.Probe().
		WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/ready").WithPort(intstr.FromInt32(9001))).
		WithPeriodSeconds(10).WithTimeoutSeconds(2).WithFailureThreshold(failureThreshold)
}

func TestDesiredDeployment(t *testing.T) {
	md := testMD()
	wantContainer := corev1ac.Container().
		WithName("model-server").
		WithImage("example.com/server:2").
		WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(9000).WithProtocol(corev1.ProtocolTCP)).
		WithEnv(
			corev1ac.EnvVar().WithName("MODEL_NAME").WithValue("fraud-detector"),
			// The local copy the storage initializer fetched.
			corev1ac.EnvVar().WithName("MODEL_PATH").WithValue("/mnt/model/v2"),
			corev1ac.EnvVar().WithName("MODEL_URI").WithValue("s3://models/fraud/v2"),
			corev1ac.EnvVar().WithName("MODEL_VERSION").WithValue("v2"),
			corev1ac.EnvVar().WithName("FRAMEWORK").WithValue("sklearn"),
		).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("model-config").WithMountPath("/etc/model-config").WithReadOnly(true)).
		WithReadinessProbe(wantProbe(4)).
		WithLivenessProbe(wantProbe(4)).
		WithStartupProbe(wantProbe(30)). // 300s deadline / 10s interval
		WithSecurityContext(corev1ac.SecurityContext().
			WithRunAsNonRoot(true).
			WithAllowPrivilegeEscalation(false).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithResources(corev1ac.ResourceRequirements().WithLimits(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")})).
		// A writable HOME (the admin's --pod-home) whatever UID runs.
		WithEnv(corev1ac.EnvVar().WithName("HOME").WithValue("/home/ml-operator")).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("home").WithMountPath("/home/ml-operator")).
		WithEnv(corev1ac.EnvVar().WithName("MODEL_CACHE_DIR").WithValue("/mnt/models")).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("model-cache").WithMountPath("/mnt/models")).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("model").WithMountPath("/mnt/model").WithReadOnly(true))
	// The storage initializer: the server's restricted security context and
	// resources, the version's Secret as its environment, the emptyDir
	// writable.
	wantInit := corev1ac.Container().
		WithName("storage-initializer").
		WithImage("example.com/storage-initializer:1").
		WithArgs("s3://models/fraud/v2", "/mnt/model/v2").
		WithVolumeMounts(corev1ac.VolumeMount().WithName("model").WithMountPath("/mnt/model")).
		WithSecurityContext(corev1ac.SecurityContext().
			WithRunAsNonRoot(true).
			WithAllowPrivilegeEscalation(false).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError).
		WithEnvFrom(corev1ac.EnvFromSource().WithSecretRef(corev1ac.SecretEnvSource().WithName("s3-creds"))).
		WithResources(corev1ac.ResourceRequirements().WithLimits(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}))
	wantSpec := func() *appsv1ac.DeploymentSpecApplyConfiguration {
		return appsv1ac.DeploymentSpec().
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{
				"ml.example.com/modeldeployment": "fraud", "ml.example.com/model-version": "v2"})).
			WithProgressDeadlineSeconds(300).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(wantV2Labels).
				WithAnnotations(map[string]string{AnnotationConfigHash: configHash(md)}).
				WithSpec(corev1ac.PodSpec().
					// No fixed user or group: OpenShift's restricted-v2
					// assigns them from the namespace's range.
					WithSecurityContext(corev1ac.PodSecurityContext().
						WithRunAsNonRoot(true).
						WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
					WithVolumes(
						corev1ac.Volume().WithName("model-config").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName("fraud-model-config")),
						corev1ac.Volume().WithName("home").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
						corev1ac.Volume().WithName("model-cache").WithPersistentVolumeClaim(corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName("fraud-v2-model")),
						corev1ac.Volume().WithName("model").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
					).
					WithInitContainers(wantInit).
					WithContainers(wantContainer)))
	}
	cases := []struct {
		name     string
		replicas *int32
		want     *appsv1ac.DeploymentApplyConfiguration
	}{
		{"HPA owns replicas: the field is left out", nil,
			appsv1ac.Deployment("fraud-v2", "ml").WithLabels(wantV2Labels).WithOwnerReferences(wantOwner()).WithSpec(wantSpec())},
		{"router service sized to zero", ptr.To[int32](0),
			appsv1ac.Deployment("fraud-v2", "ml").WithLabels(wantV2Labels).WithOwnerReferences(wantOwner()).WithSpec(wantSpec().WithReplicas(0))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := desiredDeployment(md, md.Spec.Versions[1], tc.replicas, podsecurity.NewDefaults(), "example.com/storage-initializer:1")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("desiredDeployment (-want +got):\n%s", diff)
			}
		})
	}
}

// Each modelPath scheme puts the model at /mnt/model in the server: a
// pvc:// claim is mounted read-only (no init container); an http(s):// URL
// is fetched into an emptyDir by the storage initializer, as the last
// segment of its path; no modelPath adds nothing.
func TestModelVolumePerScheme(t *testing.T) {
	restricted := corev1ac.SecurityContext().
		WithRunAsNonRoot(true).
		WithAllowPrivilegeEscalation(false).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
	serverMount := corev1ac.VolumeMount().WithName("model").WithMountPath("/mnt/model").WithReadOnly(true)
	type want struct {
		env     []string // MODEL_PATH, MODEL_URI
		volume  *corev1ac.VolumeApplyConfiguration
		mount   *corev1ac.VolumeMountApplyConfiguration
		initCtr []corev1ac.ContainerApplyConfiguration
	}
	cases := []struct {
		modelPath string
		want      want
	}{
		{"pvc://models-claim/fraud/v1.json", want{
			env: []string{"/mnt/model/fraud/v1.json", "pvc://models-claim/fraud/v1.json"},
			volume: corev1ac.Volume().WithName("model").WithPersistentVolumeClaim(
				corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName("models-claim").WithReadOnly(true)),
			mount: serverMount,
		}},
		{"http://store.ns.svc/models/fraud-v1.json?rev=2", want{
			env:    []string{"/mnt/model/fraud-v1.json", "http://store.ns.svc/models/fraud-v1.json?rev=2"},
			volume: corev1ac.Volume().WithName("model").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
			mount:  serverMount,
			initCtr: []corev1ac.ContainerApplyConfiguration{*corev1ac.Container().
				WithName("storage-initializer").
				WithImage("example.com/storage-initializer:1").
				WithArgs("http://store.ns.svc/models/fraud-v1.json?rev=2", "/mnt/model/fraud-v1.json").
				WithVolumeMounts(corev1ac.VolumeMount().WithName("model").WithMountPath("/mnt/model")).
				WithSecurityContext(restricted).
				WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError)},
		}},
		{"", want{env: []string{"", ""}}},
		// Stored before gs:// was refused: passed on as it was.
		{"gs://models/m", want{env: []string{"gs://models/m", "gs://models/m"}}},
	}
	for _, tc := range cases {
		t.Run(tc.modelPath, func(t *testing.T) {
			md := testMD()
			md.Spec.Storage = nil
			md.Spec.Resources = corev1.ResourceRequirements{}
			v := mlv1.ModelVersion{Name: "v1", ModelPath: tc.modelPath}
			d, err := desiredDeployment(md, v, nil, podsecurity.Defaults{}, "example.com/storage-initializer:1")
			if err != nil {
				t.Fatal(err)
			}
			ps := d.Spec.Template.Spec
			c := ps.Containers[0]
			env := map[string]string{}
			for _, e := range c.Env {
				env[*e.Name] = *e.Value
			}
			got := want{env: []string{env["MODEL_PATH"], env["MODEL_URI"]}, initCtr: ps.InitContainers}
			for i := range ps.Volumes {
				if *ps.Volumes[i].Name == "model" {
					got.volume = &ps.Volumes[i]
				}
			}
			for i := range c.VolumeMounts {
				if *c.VolumeMounts[i].Name == "model" {
					got.mount = &c.VolumeMounts[i]
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// The template hash changes with what restarts the pods, not with weights.
func TestTemplateHash(t *testing.T) {
	hash := func(md *mlv1.ModelDeployment) string {
		d, err := desiredDeployment(md, md.Spec.Versions[0], nil, podsecurity.NewDefaults(), "example.com/storage-initializer:1")
		if err != nil {
			t.Fatal(err)
		}
		return templateHash(d)
	}
	base := testMD()
	weights := testMD()
	weights.Spec.Versions[0].Weight = ptr.To[int32](50)
	image := testMD()
	image.Spec.Image = "example.com/server:9"
	config := testMD()
	config.Spec.Config["threads"] = "8"
	if hash(base) != hash(weights) {
		t.Error("a weight change must not start a new rollout")
	}
	if hash(base) == hash(image) {
		t.Error("an image change must start a new rollout")
	}
	if hash(base) == hash(config) {
		t.Error("a config change must start a new rollout")
	}
}

func TestDesiredHPA(t *testing.T) {
	got, err := desiredHPA(testMD(), "v2", 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := autoscalingv2ac.HorizontalPodAutoscaler("fraud-v2", "ml").
		WithLabels(wantV2Labels).
		WithOwnerReferences(wantOwner()).
		WithSpec(autoscalingv2ac.HorizontalPodAutoscalerSpec().
			WithScaleTargetRef(autoscalingv2ac.CrossVersionObjectReference().WithAPIVersion("apps/v1").WithKind("Deployment").WithName("fraud-v2")).
			WithMinReplicas(1).
			WithMaxReplicas(3).
			WithMetrics(
				autoscalingv2ac.MetricSpec().WithType("Resource").WithResource(autoscalingv2ac.ResourceMetricSource().
					WithName(corev1.ResourceCPU).
					WithTarget(autoscalingv2ac.MetricTarget().WithType("Utilization").WithAverageUtilization(70))),
				autoscalingv2ac.MetricSpec().WithType("Pods").WithPods(autoscalingv2ac.PodsMetricSource().
					WithMetric(autoscalingv2ac.MetricIdentifier().WithName("queue_depth")).
					WithTarget(autoscalingv2ac.MetricTarget().WithType("AverageValue").WithAverageValue(resource.MustParse("10")))),
			))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("desiredHPA (-want +got):\n%s", diff)
	}
}

func TestDesiredServices(t *testing.T) {
	md := testMD()
	port := corev1ac.ServicePort().WithName("http").WithProtocol(corev1.ProtocolTCP).WithPort(9000).WithTargetPort(intstr.FromString("http"))
	wantStable := corev1ac.Service("fraud", "ml").
		WithLabels(map[string]string{"ml.example.com/modeldeployment": "fraud", "app.kubernetes.io/managed-by": "ml-operator"}).
		WithOwnerReferences(wantOwner()).
		WithSpec(corev1ac.ServiceSpec().WithType(corev1.ServiceTypeClusterIP).
			WithSelector(map[string]string{"ml.example.com/modeldeployment": "fraud"}).WithPorts(port))
	if diff := cmp.Diff(wantStable, desiredStableService(md)); diff != "" {
		t.Errorf("desiredStableService (-want +got):\n%s", diff)
	}
	wantVersion := corev1ac.Service("fraud-v2", "ml").
		WithLabels(wantV2Labels).
		WithOwnerReferences(wantOwner()).
		WithSpec(corev1ac.ServiceSpec().WithType(corev1.ServiceTypeClusterIP).
			WithSelector(map[string]string{"ml.example.com/modeldeployment": "fraud", "ml.example.com/model-version": "v2"}).WithPorts(port))
	if diff := cmp.Diff(wantVersion, desiredVersionService(md, "v2")); diff != "" {
		t.Errorf("desiredVersionService (-want +got):\n%s", diff)
	}
}

func TestDesiredHTTPRoute(t *testing.T) {
	md := testMD()
	got := desiredHTTPRoute(md, md.Spec.Traffic.Gateway, []versionWeight{{"v1", 100}, {"v2", 0}})
	want := gwv1ac.HTTPRoute("fraud", "ml").
		WithLabels(map[string]string{"ml.example.com/modeldeployment": "fraud", "app.kubernetes.io/managed-by": "ml-operator"}).
		WithOwnerReferences(wantOwner()).
		WithSpec(gwv1ac.HTTPRouteSpec().
			WithParentRefs(gwv1ac.ParentReference().WithName("public").WithNamespace("infra").WithSectionName("https")).
			WithHostnames("fraud.example.com").
			WithRules(gwv1ac.HTTPRouteRule().WithBackendRefs(
				gwv1ac.HTTPBackendRef().WithName("fraud-v1").WithPort(9000).WithWeight(100),
				gwv1ac.HTTPBackendRef().WithName("fraud-v2").WithPort(9000).WithWeight(0),
			)))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("desiredHTTPRoute (-want +got):\n%s", diff)
	}
	// The gateway comes from the route plan (the spec's, or the manager's
	// default), not from the spec: with none there are no parentRefs.
	bare := desiredHTTPRoute(md, nil, []versionWeight{{"v1", 100}})
	if diff := cmp.Diff([]gwv1ac.ParentReferenceApplyConfiguration(nil), bare.Spec.ParentRefs); diff != "" {
		t.Errorf("desiredHTTPRoute without a gateway: parentRefs (-want +got):\n%s", diff)
	}
	other := desiredHTTPRoute(md, &mlv1.GatewayReference{Name: "models"}, []versionWeight{{"v1", 100}})
	if diff := cmp.Diff([]gwv1ac.ParentReferenceApplyConfiguration{*gwv1ac.ParentReference().WithName("models")}, other.Spec.ParentRefs); diff != "" {
		t.Errorf("desiredHTTPRoute with the default gateway: parentRefs (-want +got):\n%s", diff)
	}
}

func TestDesiredIstio(t *testing.T) {
	md := testMD()
	ws := []versionWeight{{"v1", 90}, {"v2", 10}}
	vs := desiredVirtualService(md, "v1", md.Spec.Traffic.Gateway, ws)
	wantSpec := map[string]any{
		"hosts":    []any{"fraud", "fraud.example.com"},
		"gateways": []any{"infra/public", "mesh"},
		"http": []any{map[string]any{"route": []any{
			map[string]any{"destination": map[string]any{"host": "fraud", "subset": "v1", "port": map[string]any{"number": int64(9000)}}, "weight": int64(90)},
			map[string]any{"destination": map[string]any{"host": "fraud", "subset": "v2", "port": map[string]any{"number": int64(9000)}}, "weight": int64(10)},
		}}},
	}
	if diff := cmp.Diff(wantSpec, vs.Object["spec"]); diff != "" {
		t.Errorf("VirtualService spec (-want +got):\n%s", diff)
	}
	if vs.GetAPIVersion() != "networking.istio.io/v1" || vs.GetKind() != "VirtualService" || vs.GetOwnerReferences()[0].UID != "uid-1" {
		t.Errorf("VirtualService identity: %s %s %v", vs.GetAPIVersion(), vs.GetKind(), vs.GetOwnerReferences())
	}
	mesh := desiredVirtualService(md, "v1", nil, ws)
	if _, bound := mesh.Object["spec"].(map[string]any)["gateways"]; bound {
		t.Errorf("a mesh-only VirtualService lists gateways: %v", mesh.Object["spec"])
	}
	dr := desiredDestinationRule(md, "v1beta1", ws)
	wantDR := map[string]any{
		"host": "fraud",
		"subsets": []any{
			map[string]any{"name": "v1", "labels": map[string]any{"ml.example.com/model-version": "v1"}},
			map[string]any{"name": "v2", "labels": map[string]any{"ml.example.com/model-version": "v2"}},
		},
	}
	if diff := cmp.Diff(wantDR, dr.Object["spec"]); diff != "" {
		t.Errorf("DestinationRule spec (-want +got):\n%s", diff)
	}
	if dr.GetAPIVersion() != "networking.istio.io/v1beta1" {
		t.Errorf("DestinationRule apiVersion %s", dr.GetAPIVersion())
	}
}

func TestDesiredModelCacheClaim(t *testing.T) {
	md := testMD()
	labels := map[string]string{
		"ml.example.com/modeldeployment": "fraud", "ml.example.com/model-version": "v1", "app.kubernetes.io/managed-by": "ml-operator",
	}
	requests := corev1ac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")})
	// Retained (the default): no owner reference, so the claim outlives the ModelDeployment.
	want := corev1ac.PersistentVolumeClaim("fraud-v1-model", "ml").WithLabels(labels).
		WithSpec(corev1ac.PersistentVolumeClaimSpec().WithResources(requests).WithAccessModes(corev1.ReadWriteMany))
	if diff := cmp.Diff(want, desiredModelCacheClaim(md, "v1", nil)); diff != "" {
		t.Errorf("retained claim (-want +got):\n%s", diff)
	}
	// Not retained, and already created RWO with a class: immutable fields kept.
	md.Spec.Storage.RetainOnDelete = ptr.To(false)
	existing := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To("fast")}}
	want = corev1ac.PersistentVolumeClaim("fraud-v1-model", "ml").WithLabels(labels).
		WithSpec(corev1ac.PersistentVolumeClaimSpec().WithResources(requests).WithAccessModes(corev1.ReadWriteOnce).WithStorageClassName("fast")).
		WithOwnerReferences(wantOwner())
	if diff := cmp.Diff(want, desiredModelCacheClaim(md, "v1", existing)); diff != "" {
		t.Errorf("owned claim (-want +got):\n%s", diff)
	}
}

func TestStableURL(t *testing.T) {
	md := testMD()
	if got := stableURL(md, mlv1.RouterGatewayAPI); got != "http://fraud.example.com" {
		t.Errorf("gatewayapi with hostnames: %s", got)
	}
	if got := stableURL(md, mlv1.RouterService); got != "http://fraud.ml.svc.cluster.local:9000" {
		t.Errorf("service: %s", got)
	}
}
