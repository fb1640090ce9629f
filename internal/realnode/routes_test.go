package realnode

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// natRules is iptables-save -t nat as kube-proxy v1.36 leaves it for two
// Services of one namespace (one with a named port and session affinity
// on another) and one of another namespace with the same name.
const natRules = `*nat
:KUBE-SVC-AAAA - [0:0]
:KUBE-SVC-BBBB - [0:0]
-A KUBE-SERVICES -d 10.96.159.227/32 -p tcp -m comment --comment "shop/fraud:http cluster IP" -m tcp --dport 8080 -j KUBE-SVC-AAAA
-A KUBE-SVC-AAAA ! -s 10.100.0.0/16 -d 10.96.159.227/32 -p tcp -m comment --comment "shop/fraud:http cluster IP" -m tcp --dport 8080 -j KUBE-MARK-MASQ
-A KUBE-SVC-AAAA -m comment --comment "shop/fraud:http -> 10.100.0.7:8080" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-X1
-A KUBE-SVC-AAAA -m comment --comment "shop/fraud:http -> 10.100.0.5:8080" -j KUBE-SEP-X2
-A KUBE-SVC-BBBB -m comment --comment "shop/fraud-v1 -> 10.100.0.5:8080" -m recent --name KUBE-SEP-X2 --rcheck --seconds 10800 --reap -j KUBE-SEP-X2
-A KUBE-SVC-BBBB -m comment --comment "shop/fraud-v1 -> 10.100.0.5:8080" -j KUBE-SEP-X2
-A KUBE-SVC-CCCC -m comment --comment "other/fraud:http -> 10.100.0.9:8080" -j KUBE-SEP-X3
-A KUBE-SEP-X1 -p tcp -m comment --comment "shop/fraud:http" -m tcp -j DNAT --to-destination 10.100.0.7:8080
COMMIT
`

func TestProgrammedEndpoints(t *testing.T) {
	for _, tc := range []struct {
		ns, name string
		want     map[string][]string
	}{
		{"shop", "fraud", map[string][]string{"http": {"10.100.0.5:8080", "10.100.0.7:8080"}}},
		{"shop", "fraud-v1", map[string][]string{"": {"10.100.0.5:8080"}}},
		{"other", "fraud", map[string][]string{"http": {"10.100.0.9:8080"}}},
		{"shop", "missing", map[string][]string{}},
	} {
		got := programmedEndpoints(natRules, tc.ns, tc.name)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s/%s (-want +got):\n%s", tc.ns, tc.name, diff)
		}
	}
}

func TestReadyAddresses(t *testing.T) {
	ep := func(ip string, ready *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	items := []discoveryv1.EndpointSlice{
		{
			Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
			Endpoints: []discoveryv1.Endpoint{ep("10.100.0.7", ptr.To(true)), ep("10.100.0.8", ptr.To(false)), ep("10.100.0.9", nil)},
		},
		{
			Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}, {Name: ptr.To("metrics"), Port: ptr.To[int32](9090)}},
			Endpoints: []discoveryv1.Endpoint{ep("10.100.0.5", ptr.To(true))},
		},
		{Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http")}}, Endpoints: []discoveryv1.Endpoint{ep("10.100.0.6", ptr.To(true))}},
	}
	want := map[string][]string{
		"http":    {"10.100.0.5:8080", "10.100.0.7:8080"},
		"metrics": {"10.100.0.5:9090"},
	}
	if diff := cmp.Diff(want, readyAddresses(items)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
