package modeldeployment

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/podsecurity"
)

// Names and paths shared by every model server.
const (
	// ContainerName is the model server container.
	ContainerName = "model-server"
	// ConfigMountPath is where spec.config is mounted.
	ConfigMountPath = "/etc/model-config"
	// ModelCacheMountPath is where the model cache PVC is mounted.
	ModelCacheMountPath = "/mnt/models"
	// AnnotationConfigHash on the pod template rolls the servers when spec.config changes.
	AnnotationConfigHash = "ml.example.com/config-hash"

	configVolume = "model-config"
	cacheVolume  = "model-cache"
	portName     = "http"
)

// commonLabels are carried by every child of md.
func commonLabels(md *mlv1.ModelDeployment) map[string]string {
	return map[string]string{
		mlv1.LabelModelDeployment: md.Name,
		mlv1.LabelManagedBy:       mlv1.ManagedByValue,
	}
}

// versionLabels are carried by every per-version child and its pods.
func versionLabels(md *mlv1.ModelDeployment, version string) map[string]string {
	l := commonLabels(md)
	l[mlv1.LabelModelVersion] = version
	return l
}

// ownerRef makes md the controller of a child, so the garbage collector
// deletes the child with it.
func ownerRef(md *mlv1.ModelDeployment) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(mlv1.GroupVersion.String()).
		WithKind("ModelDeployment").
		WithName(md.Name).
		WithUID(md.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// configHash identifies spec.config, so a change rolls the servers.
func configHash(md *mlv1.ModelDeployment) string {
	keys := make([]string, 0, len(md.Spec.Config))
	for k := range md.Spec.Config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := fnv.New64a()
	for _, k := range keys {
		fmt.Fprintf(h, "%s\x00%s\x00", k, md.Spec.Config[k])
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// desiredConfigMap holds spec.config, mounted into every server.
func desiredConfigMap(md *mlv1.ModelDeployment) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(mlv1.ModelDeploymentConfigMapName(md.Name), md.Namespace).
		WithLabels(commonLabels(md)).
		WithOwnerReferences(ownerRef(md)).
		WithData(md.Spec.Config)
}

// desiredModelCacheClaim is a version's model cache PVC. A retained PVC
// (storage.retainOnDelete, the default) has no owner reference, so it
// outlives its version and the ModelDeployment. Access modes and the storage
// class are immutable: an existing claim keeps its own.
func desiredModelCacheClaim(md *mlv1.ModelDeployment, version string, existing *corev1.PersistentVolumeClaim) *corev1ac.PersistentVolumeClaimApplyConfiguration {
	size := resource.MustParse(mlv1.DefaultModelCacheSize)
	if md.Spec.Storage.Size != nil {
		size = *md.Spec.Storage.Size
	}
	spec := corev1ac.PersistentVolumeClaimSpec().
		WithResources(corev1ac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceStorage: size}))
	switch {
	case existing != nil:
		spec.WithAccessModes(existing.Spec.AccessModes...)
		if existing.Spec.StorageClassName != nil {
			spec.WithStorageClassName(*existing.Spec.StorageClassName)
		}
	default:
		// Every replica of the version mounts the cache; more than one replica
		// may land on different nodes.
		mode := corev1.ReadWriteOnce
		if md.Spec.EffectiveMaxReplicas() > 1 {
			mode = corev1.ReadWriteMany
		}
		spec.WithAccessModes(mode)
		if md.Spec.Storage.StorageClassName != nil {
			spec.WithStorageClassName(*md.Spec.Storage.StorageClassName)
		}
	}
	pvc := corev1ac.PersistentVolumeClaim(mlv1.ModelCacheClaimName(md.Name, version), md.Namespace).
		WithLabels(versionLabels(md, version)).
		WithSpec(spec)
	if !md.Spec.RetainStorage() {
		pvc.WithOwnerReferences(ownerRef(md))
	}
	return pvc
}

// probe builds an HTTP GET probe on the health endpoint.
func probe(md *mlv1.ModelDeployment, periodSeconds, failureThreshold int32) *corev1ac.ProbeApplyConfiguration {
	return corev1ac.Probe().
		WithHTTPGet(corev1ac.HTTPGetAction().WithPath(md.Spec.EffectiveHealthEndpoint()).WithPort(intstr.FromInt32(md.Spec.EffectiveHealthPort()))).
		WithPeriodSeconds(periodSeconds).
		WithTimeoutSeconds(md.Spec.EffectiveHealthTimeoutSeconds()).
		WithFailureThreshold(failureThreshold)
}

// podSecurityContext is spec.podSecurityContext, or the admin's defaults
// (internal/podsecurity, the same as the workers'): Pod Security
// "restricted" and OpenShift's restricted-v2, with no fixed user or group
// unless the admin set them. The image must then run as a numeric non-root
// USER; see docs/modeldeployment.md.
func podSecurityContext(md *mlv1.ModelDeployment, pod podsecurity.Defaults) (*corev1ac.PodSecurityContextApplyConfiguration, error) {
	sc := md.Spec.PodSecurityContext
	if sc == nil {
		sc = pod.PodSecurityContext()
	}
	ac := &corev1ac.PodSecurityContextApplyConfiguration{}
	if err := convertJSON(sc, ac); err != nil {
		return nil, fmt.Errorf("spec.podSecurityContext: %w", err)
	}
	return ac, nil
}

// restrictedContainerSecurityContext is the container-level default of a
// model server (and of any container the operator adds to its pod): no
// privilege escalation, no Linux capabilities, non-root, RuntimeDefault
// seccomp.
func restrictedContainerSecurityContext() *corev1ac.SecurityContextApplyConfiguration {
	ac := &corev1ac.SecurityContextApplyConfiguration{}
	_ = convertJSON(podsecurity.ContainerSecurityContext(), ac)
	return ac
}

// containerSecurityContext is spec.securityContext, or the restricted default.
func containerSecurityContext(md *mlv1.ModelDeployment) (*corev1ac.SecurityContextApplyConfiguration, error) {
	if md.Spec.SecurityContext == nil {
		return restrictedContainerSecurityContext(), nil
	}
	ac := &corev1ac.SecurityContextApplyConfiguration{}
	if err := convertJSON(md.Spec.SecurityContext, ac); err != nil {
		return nil, fmt.Errorf("spec.securityContext: %w", err)
	}
	return ac, nil
}

// DesiredDeployment is the Deployment the operator applies for version v of
// md, as a typed object (for checks outside this package, such as the Pod
// Security tests in test/integration/security). replicas is as for the apply.
func DesiredDeployment(md *mlv1.ModelDeployment, v mlv1.ModelVersion, replicas *int32, pod podsecurity.Defaults, initImage string) (*appsv1.Deployment, error) {
	ac, err := desiredDeployment(md, v, replicas, pod, initImage)
	if err != nil {
		return nil, err
	}
	d := &appsv1.Deployment{}
	if err := convertJSON(ac, d); err != nil {
		return nil, fmt.Errorf("building the Deployment of version %s: %w", v.Name, err)
	}
	return d, nil
}

// desiredDeployment is a version's model server Deployment. replicas is nil
// whenever an HPA owns the version's scale: the field is then left out of the
// apply, so the HPA's value stands and the two never fight. pod are the
// admin's security defaults; initImage is the storage initializer's image
// (the manager's --storage-initializer-image).
func desiredDeployment(md *mlv1.ModelDeployment, v mlv1.ModelVersion, replicas *int32, pod podsecurity.Defaults, initImage string) (*appsv1ac.DeploymentApplyConfiguration, error) {
	labels := versionLabels(md, v.Name)
	interval := md.Spec.EffectiveIntervalSeconds()
	threshold := md.Spec.EffectiveFailureThreshold()
	deadline := md.Spec.EffectiveProgressDeadlineSeconds()
	port := md.Spec.EffectivePort()
	// The model comes from modelPath through the model volume. A stored
	// modelPath admission refuses today (gs://, hf:// from before the
	// storage initializer) keeps the old contract: MODEL_PATH is the URI
	// and the server loads it itself.
	var src *mlv1.ModelSource
	localPath := v.ModelPath
	if s, err := mlv1.ParseModelPath(v.ModelPath); err == nil {
		src, localPath = &s, s.LocalPath()
	}

	container := corev1ac.Container().
		WithName(ContainerName).
		WithImage(md.Spec.VersionImage(v)).
		WithPorts(corev1ac.ContainerPort().WithName(portName).WithContainerPort(port).WithProtocol(corev1.ProtocolTCP)).
		WithEnv(
			corev1ac.EnvVar().WithName("MODEL_NAME").WithValue(md.Spec.ModelName),
			corev1ac.EnvVar().WithName(mlv1.EnvModelPath).WithValue(localPath),
			corev1ac.EnvVar().WithName(mlv1.EnvModelURI).WithValue(v.ModelPath),
			corev1ac.EnvVar().WithName("MODEL_VERSION").WithValue(v.Name),
			corev1ac.EnvVar().WithName("FRAMEWORK").WithValue(string(md.Spec.Framework)),
		).
		WithVolumeMounts(corev1ac.VolumeMount().WithName(configVolume).WithMountPath(ConfigMountPath).WithReadOnly(true)).
		WithReadinessProbe(probe(md, interval, threshold)).
		WithLivenessProbe(probe(md, interval, threshold)).
		// The startup probe gives the model the whole progress deadline to
		// load before liveness starts counting.
		WithStartupProbe(probe(md, interval, max(1, (deadline+interval-1)/interval)))
	containerSC, err := containerSecurityContext(md)
	if err != nil {
		return nil, err
	}
	container.WithSecurityContext(containerSC)
	podSC, err := podSecurityContext(md, pod)
	if err != nil {
		return nil, err
	}
	var resources *corev1ac.ResourceRequirementsApplyConfiguration
	if res := md.Spec.Resources; len(res.Requests) > 0 || len(res.Limits) > 0 || len(res.Claims) > 0 {
		resources = &corev1ac.ResourceRequirementsApplyConfiguration{}
		if err := convertJSON(res, resources); err != nil {
			return nil, fmt.Errorf("spec.resources: %w", err)
		}
		container.WithResources(resources)
	}

	podSpec := corev1ac.PodSpec().
		WithSecurityContext(podSC).
		WithVolumes(corev1ac.Volume().WithName(configVolume).
			WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(mlv1.ModelDeploymentConfigMapName(md.Name))))
	if _, _, home, ok := pod.HomeVolume(); ok {
		// A writable HOME whatever UID runs (OpenShift assigns one that
		// has no home directory in the image).
		container.WithEnv(corev1ac.EnvVar().WithName(home.Name).WithValue(home.Value)).
			WithVolumeMounts(corev1ac.VolumeMount().WithName(podsecurity.HomeVolumeName).WithMountPath(pod.Home))
		podSpec.WithVolumes(corev1ac.Volume().WithName(podsecurity.HomeVolumeName).WithEmptyDir(corev1ac.EmptyDirVolumeSource()))
	}
	if md.Spec.Storage != nil {
		container.WithEnv(corev1ac.EnvVar().WithName("MODEL_CACHE_DIR").WithValue(ModelCacheMountPath)).
			WithVolumeMounts(corev1ac.VolumeMount().WithName(cacheVolume).WithMountPath(ModelCacheMountPath))
		podSpec.WithVolumes(corev1ac.Volume().WithName(cacheVolume).
			WithPersistentVolumeClaim(corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(mlv1.ModelCacheClaimName(md.Name, v.Name))))
	}
	if src != nil {
		if err := addModelVolume(md, v, *src, initImage, resources, container, podSpec); err != nil {
			return nil, err
		}
	}
	podSpec.WithContainers(container)

	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{
			mlv1.LabelModelDeployment: md.Name,
			mlv1.LabelModelVersion:    v.Name,
		})).
		WithProgressDeadlineSeconds(deadline).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(labels).
			WithAnnotations(map[string]string{AnnotationConfigHash: configHash(md)}).
			WithSpec(podSpec))
	if replicas != nil {
		spec.WithReplicas(*replicas)
	}
	return appsv1ac.Deployment(mlv1.VersionResourceName(md.Name, v.Name), md.Namespace).
		WithLabels(labels).
		WithOwnerReferences(ownerRef(md)).
		WithSpec(spec), nil
}

// addModelVolume puts version v's model at mlv1.ModelMountPath in the
// server container, read-only: a pvc:// claim is mounted there; an
// http(s):// or s3:// model is fetched into an emptyDir by the storage
// initializer init container, which runs with the server's security
// context and resources (an init container adds nothing to the pod's
// requests beyond them) and the version's Secret as its environment.
func addModelVolume(md *mlv1.ModelDeployment, v mlv1.ModelVersion, src mlv1.ModelSource, initImage string,
	resources *corev1ac.ResourceRequirementsApplyConfiguration, server *corev1ac.ContainerApplyConfiguration, podSpec *corev1ac.PodSpecApplyConfiguration) error {
	server.WithVolumeMounts(corev1ac.VolumeMount().WithName(mlv1.ModelVolumeName).WithMountPath(mlv1.ModelMountPath).WithReadOnly(true))
	if !src.Fetched() {
		podSpec.WithVolumes(corev1ac.Volume().WithName(mlv1.ModelVolumeName).
			WithPersistentVolumeClaim(corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(src.Host).WithReadOnly(true)))
		return nil
	}
	podSpec.WithVolumes(corev1ac.Volume().WithName(mlv1.ModelVolumeName).WithEmptyDir(corev1ac.EmptyDirVolumeSource()))
	sc, err := containerSecurityContext(md)
	if err != nil {
		return err
	}
	init := corev1ac.Container().
		WithName(mlv1.StorageInitializerContainerName).
		WithImage(initImage).
		WithArgs(v.ModelPath, src.LocalPath()).
		WithVolumeMounts(corev1ac.VolumeMount().WithName(mlv1.ModelVolumeName).WithMountPath(mlv1.ModelMountPath)).
		WithSecurityContext(sc).
		// The initializer writes its one-line error to the termination
		// message; a crash that writes none leaves its log's tail.
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError)
	if v.ModelSecretName != "" {
		init.WithEnvFrom(corev1ac.EnvFromSource().WithSecretRef(corev1ac.SecretEnvSource().WithName(v.ModelSecretName)))
	}
	if resources != nil {
		init.WithResources(resources)
	}
	podSpec.WithInitContainers(init)
	return nil
}

// templateHash identifies a version's pod template: when it changes, the
// version starts a new rollout (and a new progress deadline).
func templateHash(d *appsv1ac.DeploymentApplyConfiguration) string {
	data, _ := json.Marshal(d.Spec.Template)
	h := fnv.New64a()
	_, _ = h.Write(data)
	return fmt.Sprintf("%016x", h.Sum64())
}

// desiredHPA is a version's autoscaling/v2 HPA: CPU utilization plus any
// spec.scaling.metrics, passed through as they are.
func desiredHPA(md *mlv1.ModelDeployment, version string, minReplicas, maxReplicas int32) (*autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration, error) {
	target := md.Spec.EffectiveTargetCPUUtilization()
	metrics := []*autoscalingv2ac.MetricSpecApplyConfiguration{
		autoscalingv2ac.MetricSpec().
			WithType("Resource").
			WithResource(autoscalingv2ac.ResourceMetricSource().
				WithName(corev1.ResourceCPU).
				WithTarget(autoscalingv2ac.MetricTarget().WithType("Utilization").WithAverageUtilization(target))),
	}
	for i, m := range md.Spec.Scaling.Metrics {
		mac := &autoscalingv2ac.MetricSpecApplyConfiguration{}
		if err := convertJSON(m, mac); err != nil {
			return nil, fmt.Errorf("spec.scaling.metrics[%d]: %w", i, err)
		}
		metrics = append(metrics, mac)
	}
	name := mlv1.VersionResourceName(md.Name, version)
	return autoscalingv2ac.HorizontalPodAutoscaler(name, md.Namespace).
		WithLabels(versionLabels(md, version)).
		WithOwnerReferences(ownerRef(md)).
		WithSpec(autoscalingv2ac.HorizontalPodAutoscalerSpec().
			WithScaleTargetRef(autoscalingv2ac.CrossVersionObjectReference().
				WithAPIVersion("apps/v1").WithKind("Deployment").WithName(name)).
			WithMinReplicas(minReplicas).
			WithMaxReplicas(maxReplicas).
			WithMetrics(metrics...)), nil
}

// service builds a ClusterIP Service on the model port.
func service(md *mlv1.ModelDeployment, name string, labels, selector map[string]string) *corev1ac.ServiceApplyConfiguration {
	port := md.Spec.EffectivePort()
	return corev1ac.Service(name, md.Namespace).
		WithLabels(labels).
		WithOwnerReferences(ownerRef(md)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(selector).
			WithPorts(corev1ac.ServicePort().WithName(portName).WithProtocol(corev1.ProtocolTCP).
				WithPort(port).WithTargetPort(intstr.FromString(portName))))
}

// desiredStableService is the Service <name> over every version's pods.
func desiredStableService(md *mlv1.ModelDeployment) *corev1ac.ServiceApplyConfiguration {
	return service(md, md.Name, commonLabels(md), map[string]string{mlv1.LabelModelDeployment: md.Name})
}

// desiredVersionService is the Service <name>-<version> over one version's pods.
func desiredVersionService(md *mlv1.ModelDeployment, version string) *corev1ac.ServiceApplyConfiguration {
	return service(md, mlv1.VersionResourceName(md.Name, version), versionLabels(md, version),
		map[string]string{mlv1.LabelModelDeployment: md.Name, mlv1.LabelModelVersion: version})
}

// desiredHTTPRoute is the Gateway API route <name> with one weighted
// backendRef per version Service, attached to gateway (none when nil).
func desiredHTTPRoute(md *mlv1.ModelDeployment, gateway *mlv1.GatewayReference, ws []versionWeight) *gwv1ac.HTTPRouteApplyConfiguration {
	spec := gwv1ac.HTTPRouteSpec()
	if gw := gateway; gw != nil {
		parent := gwv1ac.ParentReference().WithName(gwv1.ObjectName(gw.Name))
		if gw.Namespace != "" {
			parent.WithNamespace(gwv1.Namespace(gw.Namespace))
		}
		if gw.SectionName != "" {
			parent.WithSectionName(gwv1.SectionName(gw.SectionName))
		}
		spec.WithParentRefs(parent)
	}
	for _, h := range md.Spec.Traffic.Hostnames {
		spec.WithHostnames(gwv1.Hostname(h))
	}
	rule := gwv1ac.HTTPRouteRule()
	for _, w := range ws {
		rule.WithBackendRefs(gwv1ac.HTTPBackendRef().
			WithName(gwv1.ObjectName(mlv1.VersionResourceName(md.Name, w.name))).
			WithPort(md.Spec.EffectivePort()).
			WithWeight(w.weight))
	}
	spec.WithRules(rule)
	return gwv1ac.HTTPRoute(md.Name, md.Namespace).
		WithLabels(commonLabels(md)).
		WithOwnerReferences(ownerRef(md)).
		WithSpec(spec)
}

// Istio kinds, written as unstructured objects so Istio's module is not needed.
const (
	IstioGroup               = "networking.istio.io"
	KindVirtualService       = "VirtualService"
	KindDestinationRule      = "DestinationRule"
	defaultIstioVersion      = "v1"
	istioGatewayMeshInternal = "mesh"
)

// unstructuredChild starts an unstructured child with md's labels and owner.
func unstructuredChild(md *mlv1.ModelDeployment, apiVersion, kind string, spec map[string]any) *unstructured.Unstructured {
	labels := map[string]any{}
	for k, v := range commonLabels(md) {
		labels[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata": map[string]any{
			"name":      md.Name,
			"namespace": md.Namespace,
			"labels":    labels,
			"ownerReferences": []any{map[string]any{
				"apiVersion":         mlv1.GroupVersion.String(),
				"kind":               "ModelDeployment",
				"name":               md.Name,
				"uid":                string(md.UID),
				"controller":         true,
				"blockOwnerDeletion": true,
			}},
		},
		"spec": spec,
	}}
}

// desiredVirtualService routes the stable host (and spec hostnames) to the
// version subsets with the given weights, bound to gateway and the mesh
// (the mesh only when gateway is nil).
func desiredVirtualService(md *mlv1.ModelDeployment, istioVersion string, gateway *mlv1.GatewayReference, ws []versionWeight) *unstructured.Unstructured {
	hosts := []any{md.Name}
	for _, h := range md.Spec.Traffic.Hostnames {
		hosts = append(hosts, h)
	}
	route := make([]any, 0, len(ws))
	for _, w := range ws {
		route = append(route, map[string]any{
			"destination": map[string]any{
				"host":   md.Name,
				"subset": w.name,
				"port":   map[string]any{"number": int64(md.Spec.EffectivePort())},
			},
			"weight": int64(w.weight),
		})
	}
	spec := map[string]any{
		"hosts": hosts,
		"http":  []any{map[string]any{"route": route}},
	}
	if gw := gateway; gw != nil {
		ref := gw.Name
		if gw.Namespace != "" {
			ref = gw.Namespace + "/" + gw.Name
		}
		spec["gateways"] = []any{ref, istioGatewayMeshInternal}
	}
	return unstructuredChild(md, IstioGroup+"/"+istioVersion, KindVirtualService, spec)
}

// desiredDestinationRule declares one subset per version, selected by the
// version label.
func desiredDestinationRule(md *mlv1.ModelDeployment, istioVersion string, ws []versionWeight) *unstructured.Unstructured {
	subsets := make([]any, 0, len(ws))
	for _, w := range ws {
		subsets = append(subsets, map[string]any{
			"name":   w.name,
			"labels": map[string]any{mlv1.LabelModelVersion: w.name},
		})
	}
	return unstructuredChild(md, IstioGroup+"/"+istioVersion, KindDestinationRule, map[string]any{
		"host":    md.Name,
		"subsets": subsets,
	})
}

// stableURL is where clients reach the model: the first hostname when the
// router has one, else the stable Service's cluster DNS name.
func stableURL(md *mlv1.ModelDeployment, router mlv1.TrafficRouter) string {
	if router != mlv1.RouterService && len(md.Spec.Traffic.Hostnames) > 0 {
		return "http://" + md.Spec.Traffic.Hostnames[0]
	}
	return fmt.Sprintf("http://%s.%s.svc.cluster.local:%d", md.Name, md.Namespace, md.Spec.EffectivePort())
}

// convertJSON copies a typed API value into its apply configuration; their
// JSON forms are the same.
func convertJSON(from, to any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, to)
}
