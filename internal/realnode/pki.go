package realnode

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/ml-operator/ml-operator/internal/selfca"
)

// pki is the cluster's certificate authority and the files it issued, all
// in one directory of the workdir. Every identity is a client certificate
// signed by the one CA: the admin (system:masters), the kubelet
// (system:node:<name>), kube-proxy, and kube-apiserver's client for the
// kubelet API.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  crypto.Signer
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// CA is the CA certificate file.
func (p *pki) CA() string { return p.path("ca.crt") }

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := selfca.New("ml-operator-realnode-ca", time.Now())
	if err != nil {
		return nil, err
	}
	der, cert, key := ca.DER, ca.Cert, ca.Key
	p := &pki{dir: dir, caCert: cert, caKey: key}
	if err := writePEM(p.CA(), "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if err := writeKey(p.path("ca.key"), key); err != nil {
		return nil, err
	}
	// The service-account token signing key pair.
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := writeKey(p.path("sa.key"), sa); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(sa.Public())
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.path("sa.pub"), "PUBLIC KEY", pub); err != nil {
		return nil, err
	}
	return p, nil
}

var serial int64 = 1

// issue writes <name>.crt and <name>.key: a certificate for cn in orgs,
// for serving (with the given names and addresses) and client use.
func (p *pki) issue(name, cn string, orgs []string, dnsNames []string, ips []net.IP) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return fmt.Errorf("issuing %s: %w", name, err)
	}
	if err := writePEM(p.path(name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writeKey(p.path(name+".key"), key)
}

// kubeconfig writes <name>.kubeconfig for the identity issued as name.
func (p *pki) kubeconfig(name, server string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["realnode"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: p.CA()}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificate: p.path(name + ".crt"),
		ClientKey:         p.path(name + ".key"),
	}
	cfg.Contexts["realnode"] = &clientcmdapi.Context{Cluster: "realnode", AuthInfo: name}
	cfg.CurrentContext = "realnode"
	path := p.path(name + ".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	return path, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}
