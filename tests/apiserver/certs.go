package main

// The credentials of one emulator run: a CA (ECDSA P-256), the server's
// certificate (127.0.0.1, ::1, localhost and the in-cluster service names),
// a client certificate (CN = the user name, O = system:authenticated) signed
// by the CA, the bearer tokens, and the files a client reads: kubeconfigs
// for a developer and the service-account directory a pod sees.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
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
	"strings"
	"time"
)

type credentials struct {
	caCert     *x509.Certificate
	caPEM      []byte
	caKey      *ecdsa.PrivateKey
	serverTLS  tls.Certificate
	clientPEM  []byte
	clientKey  []byte
	clientUser string
	pool       *x509.CertPool
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err)
	}
	return n
}

func pemOf(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

// newCredentials makes the CA and the two leaf certificates.
func newCredentials(clientUser string) (*credentials, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "kdp-test-apiserver-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	c := &credentials{caCert: caCert, caPEM: pemOf("CERTIFICATE", caDER), caKey: caKey, clientUser: clientUser}
	c.pool = x509.NewCertPool()
	c.pool.AddCert(caCert)

	leaf := func(tmpl *x509.Certificate) ([]byte, []byte, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pemOf("CERTIFICATE", der), pemOf("EC PRIVATE KEY", kder), nil
	}
	srvPEM, srvKey, err := leaf(&x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default",
			"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	})
	if err != nil {
		return nil, err
	}
	if c.serverTLS, err = tls.X509KeyPair(srvPEM, srvKey); err != nil {
		return nil, err
	}
	c.clientPEM, c.clientKey, err = leaf(&x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: clientUser, Organization: []string{"system:authenticated"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// newToken returns a fresh random bearer token (JWT-like in shape: three
// base64url parts, so that a client that peeks at it sees what it expects).
func newToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none","kid":"kdp-test"}`)) + "." +
		enc.EncodeToString([]byte(`{"sub":"`+tokenUser+`"}`)) + "." + hex.EncodeToString(b)
}

// writeFileAtomic writes through a temporary file and a rename, so that a
// reader never sees half a token.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp.%d", path, os.Getpid())
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// kubeconfig renders a kubeconfig (YAML) for server with the given user
// lines (already indented by 4 spaces).
func kubeconfig(server, clusterLine, userName string, userLines []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Config\nclusters:\n- name: kdp-test\n  cluster:\n    server: %s\n    %s\n", server, clusterLine)
	fmt.Fprintf(&b, "users:\n- name: %s\n  user:\n", userName)
	for _, l := range userLines {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	fmt.Fprintf(&b, "contexts:\n- name: kdp-test\n  context:\n    cluster: kdp-test\n    user: %s\n    namespace: %s\ncurrent-context: kdp-test\n", userName, fNamespace)
	return []byte(b.String())
}

// writeFiles writes every file a client reads (called at start and
// whenever the token changes).
func (s *server) writeFiles(token string) error {
	d := s.dir
	c := s.creds
	files := map[string][]byte{
		"ca.crt":     c.caPEM,
		"client.crt": c.clientPEM,
		"token":      []byte(token),
		"kubeconfig-token": kubeconfig(s.url, "certificate-authority: "+filepath.Join(d, "ca.crt"), "kdp-token",
			[]string{"token: " + token}),
		"kubeconfig-cert": kubeconfig(s.url, "certificate-authority: "+filepath.Join(d, "ca.crt"), "kdp-cert",
			[]string{"client-certificate: " + filepath.Join(d, "client.crt"), "client-key: " + filepath.Join(d, "client.key")}),
		"kubeconfig-data": kubeconfig(s.url, "certificate-authority-data: "+base64.StdEncoding.EncodeToString(c.caPEM), "kdp-cert",
			[]string{"client-certificate-data: " + base64.StdEncoding.EncodeToString(c.clientPEM),
				"client-key-data: " + base64.StdEncoding.EncodeToString(c.clientKey)}),
		"serviceaccount/token":     []byte(token),
		"serviceaccount/ca.crt":    c.caPEM,
		"serviceaccount/namespace": []byte(fNamespace),
	}
	if err := writeFileAtomic(filepath.Join(d, "client.key"), c.clientKey, 0o600); err != nil {
		return err
	}
	for name, data := range files {
		if err := writeFileAtomic(filepath.Join(d, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
