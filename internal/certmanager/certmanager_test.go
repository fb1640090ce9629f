package certmanager

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/stretchr/testify/require"
)

func TestCRDFilesComeFromThePinnedModule(t *testing.T) {
	files, err := CRDFiles("../..")
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		require.Contains(t, f, "cert-manager@v1.21.2", "the version go.mod pins")
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.Contains(t, string(b), "kind: CustomResourceDefinition")
		names = append(names, filepath.Base(f))
	}
	for _, want := range []string{"cert-manager.io_certificates.yaml", "cert-manager.io_issuers.yaml", "cert-manager.io_certificaterequests.yaml"} {
		require.Contains(t, names, want)
	}
}

func TestOnlyTheControllersConfigDefaultNeedsAreRegistered(t *testing.T) {
	var got []string
	for name := range controller.Known() {
		got = append(got, name)
	}
	sort.Strings(got)
	for _, name := range got {
		// No ACME (it would reach out to an ACME server), Vault, Venafi or
		// ingress/gateway shims.
		for _, banned := range []string{"acme", "vault", "venafi", "ingress", "gateway"} {
			require.NotContains(t, strings.ToLower(name), banned, "registered controllers: %v", got)
		}
	}
	for _, want := range []string{"issuers", "clusterissuers", "certificaterequests-approver",
		"certificaterequests-issuer-selfsigned", "certificaterequests-issuer-ca", "certificates-issuing"} {
		require.Contains(t, got, want)
	}
}
