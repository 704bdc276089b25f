package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

type pkiFiles struct {
	caPEM []byte
}

// generatePKI writes, under dir:
//
//	ca.crt, ca.key                  self-signed CA (ECDSA P-256)
//	apiserver.crt, apiserver.key    serving cert signed by the CA; SANs 127.0.0.1, ::1, localhost, kubernetes.default.svc...
//	sa.key, sa.pub                  RSA 2048 service-account token signing key pair
func generatePKI(dir string) (*pkiFiles, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	now := time.Now()

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "rayshare-controlplane-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), caPEM, 0o644); err != nil {
		return nil, err
	}
	if err := writeKey(filepath.Join(dir, "ca.key"), caKey); err != nil {
		return nil, err
	}

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{
			"localhost", "kubernetes", "kubernetes.default",
			"kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
		},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.0.0.1")},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, srvKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	srvPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER})
	if err := os.WriteFile(filepath.Join(dir, "apiserver.crt"), srvPEM, 0o644); err != nil {
		return nil, err
	}
	if err := writeKey(filepath.Join(dir, "apiserver.key"), srvKey); err != nil {
		return nil, err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	if err := writeKey(filepath.Join(dir, "sa.key"), saKey); err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return nil, err
	}
	return &pkiFiles{caPEM: caPEM}, nil
}

// writeKey writes a private key as PKCS#8 PEM ("PRIVATE KEY"), mode 0600.
func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err)
	}
	return n.Add(n, big.NewInt(1))
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

type tokenSet struct {
	admin, rayshare string
}

// writeTokens writes a --token-auth-file (token,user,uid,"group1,group2").
func writeTokens(path string) (*tokenSet, error) {
	t := &tokenSet{admin: randomToken(), rayshare: randomToken()}
	csv := fmt.Sprintf("%s,admin,admin,\"system:masters\"\n", t.admin) +
		fmt.Sprintf("%s,system:serviceaccount:rayshare-system:rayshare,rayshare-sa-uid,"+
			"\"system:serviceaccounts,system:serviceaccounts:rayshare-system,system:authenticated\"\n", t.rayshare)
	if err := writeFileAtomic(path, []byte(csv), 0o600); err != nil {
		return nil, err
	}
	return t, nil
}

// writeKubeconfig writes a kubeconfig using token auth against server.
func writeKubeconfig(path, server string, caPEM []byte, user, token string) error {
	ca := base64.StdEncoding.EncodeToString(caPEM)
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: rayshare
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: %s
  context:
    cluster: rayshare
    user: %s
    namespace: default
current-context: %s
preferences: {}
`, server, ca, user, token, user, user, user)
	return writeFileAtomic(path, []byte(cfg), 0o600)
}
