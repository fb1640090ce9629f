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

// Routers are the traffic routers the cluster serves the API of: the Gateway
// API's HTTPRoute, Istio's VirtualService and DestinationRule (and which
// networking.istio.io version). A served API is not a working router: what
// auto picks also depends on what is configured (choosePlan).
type Routers struct {
	GatewayAPI   bool
	Istio        bool
	IstioVersion string
}

// RouterDetector asks discovery which router APIs are served, at start and
// then on a timer, so installing a mesh or the Gateway API later is noticed
// without a restart.
type RouterDetector struct {
	Discovery discovery.DiscoveryInterface
	// Interval between discovery checks.
	Interval time.Duration

	mu      sync.RWMutex
	routers Routers
	changes chan ctrlevent.GenericEvent
}

// NewRouterDetector returns a detector that checks discovery every interval.
func NewRouterDetector(d discovery.DiscoveryInterface, interval time.Duration) *RouterDetector {
	return &RouterDetector{Discovery: d, Interval: interval, routers: Routers{IstioVersion: defaultIstioVersion},
		changes: make(chan ctrlevent.GenericEvent, 1)}
}

// Changes receives an event each time the timer finds that the served
// router APIs changed, so the controller can reconcile the ModelDeployments
// that use auto at once, not at their next health interval. The event's
// object is a placeholder.
func (d *RouterDetector) Changes() <-chan ctrlevent.GenericEvent { return d.changes }

// notify signals a change without blocking: one pending signal stands for
// any number of changes.
func (d *RouterDetector) notify() {
	select {
	case d.changes <- ctrlevent.GenericEvent{Object: &mlv1.ModelDeployment{}}:
	default:
	}
}

// Routers are the router APIs served, as of the last check.
func (d *RouterDetector) Routers() Routers {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.routers
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
func (d *RouterDetector) Detect() (Routers, error) {
	rs := Routers{IstioVersion: defaultIstioVersion}
	gw, err := d.served("gateway.networking.k8s.io/v1", "httproutes")
	if err != nil {
		return d.Routers(), err
	}
	rs.GatewayAPI = gw
	for _, v := range []string{"v1", "v1beta1"} {
		ok, err := d.served(IstioGroup+"/"+v, "virtualservices", "destinationrules")
		if err != nil {
			return d.Routers(), err
		}
		if ok {
			rs.Istio, rs.IstioVersion = true, v
			break
		}
	}
	d.mu.Lock()
	d.routers = rs
	d.mu.Unlock()
	return rs, nil
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
			before := d.Routers()
			after, err := d.Detect()
			if err != nil {
				log.Error(err, "discovering traffic routers")
			} else if after != before {
				log.Info("served traffic router APIs changed", "gatewayAPI", after.GatewayAPI, "istio", after.Istio, "istioVersion", after.IstioVersion)
				d.notify()
			}
		}
	}
}

// NeedLeaderElection: every replica keeps its detector current.
func (d *RouterDetector) NeedLeaderElection() bool { return false }
