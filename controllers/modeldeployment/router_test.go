package modeldeployment

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubetesting "k8s.io/client-go/testing"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

func resources(gv string, names ...string) *metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: gv}
	for _, n := range names {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: n})
	}
	return l
}

func TestRouterDetector(t *testing.T) {
	gateway := resources("gateway.networking.k8s.io/v1", "gateways", "httproutes")
	istioV1 := resources("networking.istio.io/v1", "virtualservices", "destinationrules", "gateways")
	istioBeta := resources("networking.istio.io/v1beta1", "virtualservices", "destinationrules")
	cases := []struct {
		name   string
		served []*metav1.APIResourceList
		want   Routers
	}{
		{"nothing installed", nil, Routers{IstioVersion: "v1"}},
		{"both", []*metav1.APIResourceList{istioV1, gateway}, Routers{GatewayAPI: true, Istio: true, IstioVersion: "v1"}},
		{"istio v1", []*metav1.APIResourceList{istioV1}, Routers{Istio: true, IstioVersion: "v1"}},
		{"older istio serves v1beta1 only", []*metav1.APIResourceList{istioBeta}, Routers{Istio: true, IstioVersion: "v1beta1"}},
		{"gateway group without HTTPRoute", []*metav1.APIResourceList{resources("gateway.networking.k8s.io/v1", "gateways")}, Routers{IstioVersion: "v1"}},
		{"istio without DestinationRule", []*metav1.APIResourceList{resources("networking.istio.io/v1", "virtualservices")}, Routers{IstioVersion: "v1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := NewRouterDetector(&fakediscovery.FakeDiscovery{Fake: &kubetesting.Fake{Resources: tc.served}}, time.Minute)
			got, err := d.Detect()
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || d.Routers() != tc.want {
				t.Errorf("Detect = %+v (stored %+v), want %+v", got, d.Routers(), tc.want)
			}
		})
	}
}

// A discovery error keeps the last good answer.
func TestRouterDetectorKeepsLastResultOnError(t *testing.T) {
	fake := &kubetesting.Fake{Resources: []*metav1.APIResourceList{resources("gateway.networking.k8s.io/v1", "httproutes")}}
	d := NewRouterDetector(&fakediscovery.FakeDiscovery{Fake: fake}, time.Minute)
	if _, err := d.Detect(); err != nil {
		t.Fatal(err)
	}
	fake.PrependReactor("get", "resource", func(kubetesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("apiserver unavailable")
	})
	if _, err := d.Detect(); err == nil {
		t.Fatal("want the discovery error")
	}
	if !d.Routers().GatewayAPI {
		t.Errorf("Routers = %+v after an error, want the last result (Gateway API served)", d.Routers())
	}
}

// The timer notices a router installed after start, stores it and signals
// the change once; a tick that finds nothing new signals nothing.
func TestRouterDetectorTimerSignalsChanges(t *testing.T) {
	fake := &lockedDiscovery{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &kubetesting.Fake{}}}
	d := NewRouterDetector(fake, 5*time.Millisecond)
	if _, err := d.Detect(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}()

	select {
	case <-d.Changes():
		t.Fatal("a change signalled while nothing changed")
	case <-time.After(50 * time.Millisecond):
	}
	fake.setResources(resources("gateway.networking.k8s.io/v1", "httproutes"))
	select {
	case ev := <-d.Changes():
		if _, ok := ev.Object.(*mlv1.ModelDeployment); !ok {
			t.Errorf("event object %T", ev.Object)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the HTTPRoute CRD served after start was not noticed")
	}
	if !d.Routers().GatewayAPI {
		t.Errorf("Routers = %+v, want the Gateway API served", d.Routers())
	}
	select {
	case <-d.Changes():
		t.Error("one change signalled twice")
	case <-time.After(50 * time.Millisecond):
	}
}

// lockedDiscovery lets a test change the served resources while the
// detector's timer reads them: client-go's FakeDiscovery reads Resources
// without its lock.
type lockedDiscovery struct {
	*fakediscovery.FakeDiscovery
	mu sync.Mutex
}

func (l *lockedDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.FakeDiscovery.ServerResourcesForGroupVersion(gv)
}

func (l *lockedDiscovery) setResources(r ...*metav1.APIResourceList) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.Resources = r
}
