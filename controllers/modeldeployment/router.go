package modeldeployment

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// RouterDetector resolves traffic.router auto: Gateway API when its HTTPRoute
// CRD is served, else Istio when VirtualService and DestinationRule are,
// else service. It asks discovery at start and then on a timer, so
// installing a mesh later is noticed without a restart.
type RouterDetector struct {
	Discovery discovery.DiscoveryInterface
	// Interval between discovery checks.
	Interval time.Duration

	mu           sync.RWMutex
	router       mlv1.TrafficRouter
	istioVersion string
	changes      chan ctrlevent.GenericEvent
}

// NewRouterDetector returns a detector that checks discovery every interval.
func NewRouterDetector(d discovery.DiscoveryInterface, interval time.Duration) *RouterDetector {
	return &RouterDetector{Discovery: d, Interval: interval, router: mlv1.RouterService, istioVersion: defaultIstioVersion,
		changes: make(chan ctrlevent.GenericEvent, 1)}
}

// Changes receives an event each time the timer finds that auto resolves
// to another router (or another Istio version), so the controller can
// reconcile the ModelDeployments that use auto at once, not at their next
// health interval. The event's object is a placeholder.
func (d *RouterDetector) Changes() <-chan ctrlevent.GenericEvent { return d.changes }

// notify signals a change without blocking: one pending signal stands for
// any number of changes.
func (d *RouterDetector) notify() {
	select {
	case d.changes <- ctrlevent.GenericEvent{Object: &mlv1.ModelDeployment{}}:
	default:
	}
}

// Router is the router auto resolves to, as of the last check.
func (d *RouterDetector) Router() mlv1.TrafficRouter {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.router
}

// IstioVersion is the networking.istio.io version served (v1, or v1beta1 on
// older meshes); v1 when Istio is absent.
func (d *RouterDetector) IstioVersion() string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.istioVersion
}

// served reports whether groupVersion serves every named resource.
func (d *RouterDetector) served(groupVersion string, resources ...string) (bool, error) {
	list, err := d.Discovery.ServerResourcesForGroupVersion(groupVersion)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	have := map[string]bool{}
	for _, r := range list.APIResources {
		have[r.Name] = true
	}
	for _, r := range resources {
		if !have[r] {
			return false, nil
		}
	}
	return true, nil
}

// Detect asks discovery now and stores the result. On a discovery error the
// previous result stands.
func (d *RouterDetector) Detect() (mlv1.TrafficRouter, error) {
	router, istioVersion := mlv1.RouterService, defaultIstioVersion
	gw, err := d.served("gateway.networking.k8s.io/v1", "httproutes")
	if err != nil {
		return d.Router(), err
	}
	if gw {
		router = mlv1.RouterGatewayAPI
	}
	for _, v := range []string{"v1", "v1beta1"} {
		ok, err := d.served(IstioGroup+"/"+v, "virtualservices", "destinationrules")
		if err != nil {
			return d.Router(), err
		}
		if ok {
			istioVersion = v
			if router == mlv1.RouterService {
				router = mlv1.RouterIstio
			}
			break
		}
	}
	d.mu.Lock()
	d.router, d.istioVersion = router, istioVersion
	d.mu.Unlock()
	return router, nil
}

// Start runs discovery on the timer until ctx ends (a manager Runnable).
func (d *RouterDetector) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("router-detector")
	t := time.NewTicker(d.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			before, beforeIstio := d.Router(), d.IstioVersion()
			after, err := d.Detect()
			if err != nil {
				log.Error(err, "discovering traffic routers")
			} else if after != before || d.IstioVersion() != beforeIstio {
				log.Info("traffic router for router=auto changed", "from", before, "to", after, "istioVersion", d.IstioVersion())
				d.notify()
			}
		}
	}
}

// NeedLeaderElection: every replica keeps its detector current.
func (d *RouterDetector) NeedLeaderElection() bool { return false }
