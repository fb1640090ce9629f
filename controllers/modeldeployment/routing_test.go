package modeldeployment

import (
	"testing"

	"github.com/stretchr/testify/assert"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// choosePlan: auto never picks a router that routes nothing, and a router
// named explicitly says when it cannot split.
func TestChoosePlan(t *testing.T) {
	specGW := &mlv1.GatewayReference{Name: "public", Namespace: "infra"}
	defaultGW := &mlv1.GatewayReference{Name: "models", Namespace: "gateways"}
	both := Routers{GatewayAPI: true, Istio: true, IstioVersion: "v1"}
	onlyIstio := Routers{Istio: true, IstioVersion: "v1"}
	none := Routers{IstioVersion: "v1"}
	inMesh := meshState{in: true, why: "namespace ml is labeled istio-injection=enabled"}
	cases := []struct {
		name     string
		router   mlv1.TrafficRouter
		gateway  *mlv1.GatewayReference
		served   Routers
		mesh     meshState
		defaults RoutingDefaults
		want     routePlan
		// message holds a part of the condition message.
		message string
	}{
		{name: "auto, both APIs served, nothing configured: replica counts", router: mlv1.RouterAuto, served: both,
			want: routePlan{router: mlv1.RouterService, splits: true, reason: mlv1.ReasonReplicaCounts}, message: "namespace ml is not in Istio's mesh"},
		{name: "unset router is auto", served: both,
			want: routePlan{router: mlv1.RouterService, splits: true, reason: mlv1.ReasonReplicaCounts}},
		{name: "auto, gateway in spec, Gateway API served", router: mlv1.RouterAuto, gateway: specGW, served: both,
			want: routePlan{router: mlv1.RouterGatewayAPI, gateway: specGW, write: true, splits: true, reason: mlv1.ReasonWeightedRoutes}, message: "Gateway infra/public"},
		{name: "auto, gateway in spec, only Istio served: Istio bound to it", router: mlv1.RouterAuto, gateway: specGW, served: onlyIstio,
			want: routePlan{router: mlv1.RouterIstio, gateway: specGW, write: true, splits: true, reason: mlv1.ReasonWeightedRoutes}, message: "gateway infra/public"},
		{name: "auto, gateway in spec, nothing served", router: mlv1.RouterAuto, gateway: specGW, served: none,
			want: routePlan{router: mlv1.RouterService, splits: true, reason: mlv1.ReasonReplicaCounts}, message: "serves neither"},
		{name: "auto, manager default gateway", router: mlv1.RouterAuto, served: both, defaults: RoutingDefaults{Gateway: defaultGW},
			want: routePlan{router: mlv1.RouterGatewayAPI, gateway: defaultGW, write: true, splits: true, reason: mlv1.ReasonWeightedRoutes}, message: "Gateway gateways/models"},
		{name: "auto, the spec's gateway wins over the default", router: mlv1.RouterAuto, gateway: specGW, served: both, defaults: RoutingDefaults{Gateway: defaultGW},
			want: routePlan{router: mlv1.RouterGatewayAPI, gateway: specGW, write: true, splits: true, reason: mlv1.ReasonWeightedRoutes}},
		{name: "auto, default gateway without the Gateway API is not an Istio gateway", router: mlv1.RouterAuto, served: onlyIstio, defaults: RoutingDefaults{Gateway: defaultGW},
			want: routePlan{router: mlv1.RouterService, splits: true, reason: mlv1.ReasonReplicaCounts}},
		{name: "auto, namespace in the mesh, both served: seed 004's VirtualService", router: mlv1.RouterAuto, served: both, mesh: inMesh,
			want: routePlan{router: mlv1.RouterIstio, write: true, splits: true, reason: mlv1.ReasonWeightedRoutes}, message: "istio-injection=enabled"},
		{name: "auto, the default gateway wins over the mesh", router: mlv1.RouterAuto, served: both, mesh: inMesh, defaults: RoutingDefaults{Gateway: defaultGW},
			want: routePlan{router: mlv1.RouterGatewayAPI, gateway: defaultGW, write: true, splits: true, reason: mlv1.ReasonWeightedRoutes}},
		{name: "auto, in the mesh but Istio not served", router: mlv1.RouterAuto, served: Routers{GatewayAPI: true, IstioVersion: "v1"}, mesh: inMesh,
			want: routePlan{router: mlv1.RouterService, splits: true, reason: mlv1.ReasonReplicaCounts}},
		{name: "gatewayapi without a gateway routes nothing", router: mlv1.RouterGatewayAPI, served: both,
			want: routePlan{router: mlv1.RouterGatewayAPI, write: true, reason: mlv1.ReasonNoGateway}, message: "no parentRefs"},
		{name: "gatewayapi takes the default gateway", router: mlv1.RouterGatewayAPI, served: both, defaults: RoutingDefaults{Gateway: defaultGW},
			want: routePlan{router: mlv1.RouterGatewayAPI, gateway: defaultGW, write: true, splits: true, reason: mlv1.ReasonWeightedRoutes}},
		{name: "gatewayapi not served", router: mlv1.RouterGatewayAPI, gateway: specGW, served: onlyIstio,
			want: routePlan{router: mlv1.RouterGatewayAPI, reason: mlv1.ReasonRouterNotInstalled}, message: "does not serve the Gateway API"},
		{name: "istio outside the mesh without a gateway", router: mlv1.RouterIstio, served: both,
			want: routePlan{router: mlv1.RouterIstio, write: true, reason: mlv1.ReasonOutsideMesh}, message: "--istio-mesh"},
		{name: "istio does not bind the manager's default (Gateway API) gateway", router: mlv1.RouterIstio, served: both, defaults: RoutingDefaults{Gateway: defaultGW},
			want: routePlan{router: mlv1.RouterIstio, write: true, reason: mlv1.ReasonOutsideMesh}},
		{name: "istio in the mesh", router: mlv1.RouterIstio, served: both, mesh: inMesh,
			want: routePlan{router: mlv1.RouterIstio, write: true, splits: true, reason: mlv1.ReasonWeightedRoutes}},
		{name: "istio with a gateway", router: mlv1.RouterIstio, gateway: specGW, served: both,
			want: routePlan{router: mlv1.RouterIstio, gateway: specGW, write: true, splits: true, reason: mlv1.ReasonWeightedRoutes}},
		{name: "istio not served", router: mlv1.RouterIstio, served: Routers{GatewayAPI: true, IstioVersion: "v1"}, mesh: inMesh,
			want: routePlan{router: mlv1.RouterIstio, reason: mlv1.ReasonRouterNotInstalled}, message: "does not serve Istio"},
		{name: "service", router: mlv1.RouterService, gateway: specGW, served: both, mesh: inMesh,
			want: routePlan{router: mlv1.RouterService, splits: true, reason: mlv1.ReasonReplicaCounts}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			md := &mlv1.ModelDeployment{}
			md.Namespace = "ml"
			md.Spec.Traffic = mlv1.TrafficSpec{Router: tc.router, Gateway: tc.gateway}
			got := choosePlan(md, tc.served, tc.mesh, tc.defaults)
			assert.Contains(t, got.message, tc.message)
			assert.NotEmpty(t, got.message)
			got.message = ""
			assert.Equal(t, tc.want, got)
		})
	}
}
