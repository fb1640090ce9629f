package modeldeployment

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// RoutingDefaults are the manager's traffic settings (its flags).
type RoutingDefaults struct {
	// Gateway is the Gateway API Gateway an HTTPRoute attaches to when the
	// ModelDeployment names none (--default-gateway).
	Gateway *mlv1.GatewayReference
	// IstioMesh says every namespace's clients are in Istio's mesh
	// (--istio-mesh), not only the namespaces labeled for injection.
	IstioMesh bool
}

// Istio's namespace labels that put a namespace's pods into the mesh with
// sidecars (istio-injection=enabled, or istio.io/rev naming a revision).
const (
	istioInjectionLabel = "istio-injection"
	istioRevisionLabel  = "istio.io/rev"
)

// NamespaceLabels are the namespace labels router auto reads; the manager's
// namespace cache keeps them (and drops every other label).
var NamespaceLabels = []string{istioInjectionLabel, istioRevisionLabel}

// routePlan is how one ModelDeployment's traffic is routed in this pass.
type routePlan struct {
	// router is the router in use (auto resolved).
	router mlv1.TrafficRouter
	// gateway is the gateway the HTTPRoute attaches to or the Istio gateway
	// the VirtualService binds; nil for none.
	gateway *mlv1.GatewayReference
	// write: the router's objects are applied (its API is served).
	write bool
	// splits: the router can split traffic by weight; reason and message
	// explain it in the TrafficRouted condition.
	splits          bool
	reason, message string
}

// gatewayName is ns/name of a gateway, in the ModelDeployment's namespace
// when it names none.
func gatewayName(gw *mlv1.GatewayReference, namespace string) string {
	if gw.Namespace != "" {
		namespace = gw.Namespace
	}
	return namespace + "/" + gw.Name
}

// meshState describes whether a namespace's clients are in Istio's mesh.
type meshState struct {
	in  bool
	why string
}

// choosePlan picks the router for traffic.router and says whether it can
// split traffic. Auto chooses by what is configured, never by an installed
// API alone: a gateway named in the spec (Gateway API when served, else an
// Istio gateway); else the manager's default Gateway (Gateway API); else
// Istio when the namespace is in its mesh; else replica counts behind the
// stable Service. A router named explicitly is used as named, and the plan
// says when it cannot split.
func choosePlan(md *mlv1.ModelDeployment, served Routers, mesh meshState, defaults RoutingDefaults) routePlan {
	spec := md.Spec.Traffic
	ns := md.Namespace
	gateway := spec.Gateway
	if gateway == nil && defaults.Gateway != nil {
		gateway = defaults.Gateway
	}
	gatewayAPI := func() routePlan {
		switch {
		case !served.GatewayAPI:
			return routePlan{router: mlv1.RouterGatewayAPI, reason: mlv1.ReasonRouterNotInstalled,
				message: "traffic.router gatewayapi: this cluster does not serve the Gateway API's HTTPRoute, so no route is written and the stable Service spreads requests over every version's pods"}
		case gateway == nil:
			return routePlan{router: mlv1.RouterGatewayAPI, write: true, reason: mlv1.ReasonNoGateway,
				message: "the HTTPRoute has no parentRefs, so no Gateway routes it: name spec.traffic.gateway, or start the manager with --default-gateway"}
		}
		return routePlan{router: mlv1.RouterGatewayAPI, gateway: gateway, write: true, splits: true, reason: mlv1.ReasonWeightedRoutes,
			message: fmt.Sprintf("the HTTPRoute attached to Gateway %s splits traffic by weight", gatewayName(gateway, ns))}
	}
	istio := func() routePlan {
		switch {
		case !served.Istio:
			return routePlan{router: mlv1.RouterIstio, reason: mlv1.ReasonRouterNotInstalled,
				message: "traffic.router istio: this cluster does not serve Istio's VirtualService and DestinationRule, so none is written and the stable Service spreads requests over every version's pods"}
		case spec.Gateway != nil:
			return routePlan{router: mlv1.RouterIstio, gateway: spec.Gateway, write: true, splits: true, reason: mlv1.ReasonWeightedRoutes,
				message: fmt.Sprintf("the VirtualService bound to gateway %s and to the mesh splits traffic by weight", gatewayName(spec.Gateway, ns))}
		case mesh.in:
			return routePlan{router: mlv1.RouterIstio, write: true, splits: true, reason: mlv1.ReasonWeightedRoutes,
				message: fmt.Sprintf("the VirtualService splits traffic by weight for clients in Istio's mesh (%s)", mesh.why)}
		}
		return routePlan{router: mlv1.RouterIstio, write: true, reason: mlv1.ReasonOutsideMesh,
			message: fmt.Sprintf("the VirtualService only routes requests from clients in Istio's mesh, and namespace %s is not in it (neither %s=enabled nor %s) and spec.traffic.gateway names no Istio gateway; label the namespace, name a gateway, or start the manager with --istio-mesh",
				ns, istioInjectionLabel, istioRevisionLabel)}
	}
	replicas := func(why string) routePlan {
		return routePlan{router: mlv1.RouterService, splits: true, reason: mlv1.ReasonReplicaCounts,
			message: "weights are approximated by replica counts behind the stable Service" + why}
	}

	switch spec.Router {
	case mlv1.RouterGatewayAPI:
		return gatewayAPI()
	case mlv1.RouterIstio:
		return istio()
	case mlv1.RouterService:
		return replicas("")
	}
	switch {
	case spec.Gateway != nil && served.GatewayAPI:
		return gatewayAPI()
	case spec.Gateway != nil && served.Istio:
		return istio()
	case spec.Gateway != nil:
		return replicas(fmt.Sprintf(" (router auto: spec.traffic.gateway names %s, but this cluster serves neither the Gateway API nor Istio)", gatewayName(spec.Gateway, ns)))
	case defaults.Gateway != nil && served.GatewayAPI:
		return gatewayAPI()
	case mesh.in && served.Istio:
		return istio()
	}
	return replicas(fmt.Sprintf(" (router auto: no gateway is named in spec.traffic.gateway or by --default-gateway, and namespace %s is not in Istio's mesh)", ns))
}

// meshOf reads whether namespace ns is in Istio's mesh: every namespace with
// --istio-mesh, else one labeled for sidecar injection. The namespace's
// metadata comes from the manager's cache (namespaces.Watch).
func (r *Reconciler) meshOf(ctx context.Context, ns string) (meshState, error) {
	if r.Routing.IstioMesh {
		return meshState{in: true, why: "--istio-mesh"}, nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.Client.Get(ctx, client.ObjectKey{Name: ns}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return meshState{}, nil
		}
		return meshState{}, fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	l := obj.GetLabels()
	switch {
	case l[istioInjectionLabel] == "enabled":
		return meshState{in: true, why: fmt.Sprintf("namespace %s is labeled %s=enabled", ns, istioInjectionLabel)}, nil
	case l[istioRevisionLabel] != "" && l[istioInjectionLabel] != "disabled":
		return meshState{in: true, why: fmt.Sprintf("namespace %s is labeled %s=%s", ns, istioRevisionLabel, l[istioRevisionLabel])}, nil
	}
	return meshState{}, nil
}

// planRoute resolves md's router for this pass.
func (r *Reconciler) planRoute(ctx context.Context, md *mlv1.ModelDeployment) (routePlan, error) {
	served := Routers{IstioVersion: defaultIstioVersion}
	if r.Routers != nil {
		served = r.Routers.Routers()
	}
	var mesh meshState
	if served.Istio {
		var err error
		if mesh, err = r.meshOf(ctx, md.Namespace); err != nil {
			return routePlan{}, err
		}
	}
	return choosePlan(md, served, mesh, r.Routing), nil
}

// trafficRoutedCondition says whether the router in use splits traffic by
// weight, and if not, why and what to do.
func trafficRoutedCondition(p routePlan, generation int64) metav1.Condition {
	return condition(mlv1.ModelDeploymentTrafficRouted, p.splits, p.reason, p.message, generation)
}
