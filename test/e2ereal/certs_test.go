//go:build e2e_real

package e2ereal

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiutil "github.com/cert-manager/cert-manager/pkg/api/util"
	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/localcluster"
	"github.com/ml-operator/ml-operator/internal/realnode"
)

// webhookSecret is the Secret cert-manager writes the serving certificate
// into (config/certmanager) and the manager mounts.
const webhookSecret = "webhook-server-cert"

func leafSerial(pemData []byte) (string, error) {
	block, _ := pem.Decode(pemData)
	if block == nil {
		return "", fmt.Errorf("no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", err
	}
	return cert.SerialNumber.Text(16), nil
}

// servedSerial is the serial of the certificate the webhook server at
// addr presents. The test process reaches the pod on the bridge.
func servedSerial(addr string) (string, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only the serial is read
	if err != nil {
		return "", err
	}
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return "", fmt.Errorf("%s presented no certificate", addr)
	}
	return certs[0].SerialNumber.Text(16), nil
}

func managerPods(t *testing.T) []string {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, node.Client.List(context.Background(), pods, client.InNamespace(realnode.OperatorNamespace),
		client.MatchingLabels{"control-plane": "controller-manager"}))
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	return names
}

func managerWebhookAddrs(t *testing.T) []string {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, node.Client.List(context.Background(), pods, client.InNamespace(realnode.OperatorNamespace),
		client.MatchingLabels{"control-plane": "controller-manager"}))
	var addrs []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			addrs = append(addrs, net.JoinHostPort(p.Status.PodIP, "9443"))
		}
	}
	require.NotEmpty(t, addrs, "no running manager pod")
	return addrs
}

func caBundles(t *testing.T) [][]byte {
	t.Helper()
	var out [][]byte
	mw := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	require.NoError(t, opClient.List(context.Background(), mw))
	for _, c := range mw.Items {
		for _, w := range c.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
	}
	vw := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	require.NoError(t, opClient.List(context.Background(), vw))
	for _, c := range vw.Items {
		for _, w := range c.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
	}
	return out
}

// admissionLoad sends dry-run creates of a valid TrainingJob (each one
// calls the mutating and the validating webhook through the API server)
// until stop closes or max requests were sent, and counts the failures.
type admissionLoad struct {
	sent, failed atomic.Int64
	mu           sync.Mutex
	errs         []string
}

func (l *admissionLoad) run(ns string, stop <-chan struct{}, max int64) {
	job := &mlv1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: "load", Namespace: ns},
		Spec:       mlv1.TrainingJobSpec{Framework: "pytorch", Image: TrainerImage, NumWorkers: 2, GPUsPerWorker: ptr.To[int32](0)},
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for l.sent.Load() < max {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		l.sent.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := opClient.Create(ctx, job.DeepCopy(), client.DryRunAll)
		cancel()
		if err != nil {
			l.failed.Add(1)
			l.mu.Lock()
			if len(l.errs) < 10 {
				l.errs = append(l.errs, err.Error())
			}
			l.mu.Unlock()
		}
	}
}

// testCertificateRenewalUnderLoad: the webhook's serving certificate is
// renewed the way `cmctl renew` does it (the Certificate's Issuing
// condition set to True) while admission requests keep coming; cert-manager
// issues a new certificate from the same CA, the kubelet updates the
// mounted Secret, the manager reloads it, and not one admission call fails.
func testCertificateRenewalUnderLoad(t *testing.T) {
	ctx := context.Background()
	scheme := localcluster.Scheme()
	require.NoError(t, cmapi.AddToScheme(scheme))
	cm, err := client.New(node.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)

	certs := &cmapi.CertificateList{}
	require.NoError(t, cm.List(ctx, certs, client.InNamespace(realnode.OperatorNamespace)))
	var crt *cmapi.Certificate
	for i := range certs.Items {
		if certs.Items[i].Spec.SecretName == webhookSecret {
			crt = &certs.Items[i]
		}
	}
	require.NotNil(t, crt, "no Certificate writes %s", webhookSecret)
	secret := &corev1.Secret{}
	require.NoError(t, node.Client.Get(ctx, client.ObjectKey{Namespace: realnode.OperatorNamespace, Name: webhookSecret}, secret))
	before, err := leafSerial(secret.Data["tls.crt"])
	require.NoError(t, err)
	caBefore := secret.Data["ca.crt"]
	bundlesBefore := caBundles(t)
	addrs := managerWebhookAddrs(t)
	for _, a := range addrs {
		served, err := servedSerial(a)
		require.NoError(t, err)
		require.Equal(t, before, served, "%s serves another certificate than the Secret holds", a)
	}
	t.Logf("Certificate %s revision %d, serial %s, served by %v", crt.Name, ptr.Deref(crt.Status.Revision, 0), before, addrs)

	ns := namespace(t)
	load := &admissionLoad{}
	stop := make(chan struct{})
	loadDone := make(chan struct{})
	began := time.Now()
	go func() { defer close(loadDone); load.run(ns, stop, 20000) }()
	stopLoad := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-loadDone
	}
	defer stopLoad()
	// Some load before the renewal.
	require.NoError(t, poll(time.Minute, func() bool { return load.sent.Load() >= 50 }))

	// `cmctl renew`: the Issuing condition, through the status subresource.
	require.NoError(t, cm.Get(ctx, client.ObjectKeyFromObject(crt), crt))
	apiutil.SetCertificateCondition(crt, crt.Generation, cmapi.CertificateConditionIssuing, cmmeta.ConditionTrue,
		"ManuallyTriggered", "Certificate re-issuance manually triggered")
	require.NoError(t, cm.Status().Update(ctx, crt))
	renewed := time.Now()

	var after string
	require.NoError(t, poll(2*time.Minute, func() bool {
		if node.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret) != nil {
			return false
		}
		after, _ = leafSerial(secret.Data["tls.crt"])
		return after != "" && after != before
	}), "cert-manager issued no new certificate")
	t.Logf("new certificate in the Secret %s after the renewal: serial %s", time.Since(renewed).Round(100*time.Millisecond), after)
	require.True(t, bytes.Equal(caBefore, secret.Data["ca.crt"]), "the CA changed with the renewal")

	// The kubelet updates the mounted Secret (its sync period is a minute)
	// and the manager's certificate watcher reloads it.
	served := map[string]string{}
	err = poll(4*time.Minute, func() bool {
		for _, a := range addrs {
			served[a], _ = servedSerial(a)
			if served[a] != after {
				return false
			}
		}
		return true
	})
	require.NoError(t, err, "the webhook servers still serve %v, want %s", served, after)
	t.Logf("every manager pod serves the new certificate %s after the renewal", time.Since(renewed).Round(100*time.Millisecond))
	// A little more load on the new certificate, then stop.
	sentAtReload := load.sent.Load()
	require.NoError(t, poll(time.Minute, func() bool { return load.sent.Load() >= sentAtReload+50 }))
	stopLoad()

	t.Logf("admission load: %d dry-run creates in %s, %d failed %v",
		load.sent.Load(), time.Since(began).Round(100*time.Millisecond), load.failed.Load(), load.errs)
	require.Zero(t, load.failed.Load(), "admission calls failed during the renewal: %v", load.errs)
	require.Equal(t, bundlesBefore, caBundles(t), "the injected CA bundles changed")
	require.NoError(t, cm.Get(ctx, client.ObjectKeyFromObject(crt), crt))
	t.Logf("Certificate %s revision %d", crt.Name, ptr.Deref(crt.Status.Revision, 0))
}
