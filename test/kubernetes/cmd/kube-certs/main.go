// Command kube-certs writes the keys and certificates a loopback control plane needs, into one folder:
//
//	ca.crt, ca.key                     the cluster CA (signs everything below, trusted by every client)
//	apiserver.crt, apiserver.key       kube-apiserver's serving certificate (127.0.0.1, ::1, localhost, kubernetes.default…)
//	admin.crt, admin.key               the test admin: CN=gpuvm-test-admin, O=system:masters
//	controller-manager.crt/.key        CN=system:kube-controller-manager (its default RBAC role)
//	service-account.key, .pub          the ServiceAccount token signer (TokenRequest)
//
// Files that exist are kept (a playground restarted on the same folder keeps its identity), so it is safe to
// run again. Usage: kube-certs DIR
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

const validity = 10 * 365 * 24 * time.Hour

type identity struct {
	file         string
	commonName   string
	organization []string
	usage        x509.ExtKeyUsage
	dnsNames     []string
	ips          []net.IP
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kube-certs DIR")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "kube-certs:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := loadOrCreateKey(filepath.Join(dir, "ca.key"))
	if err != nil {
		return err
	}
	ca, err := loadOrCreateCA(filepath.Join(dir, "ca.crt"), caKey)
	if err != nil {
		return err
	}
	for _, id := range []identity{
		{
			file: "apiserver", commonName: "kube-apiserver", usage: x509.ExtKeyUsageServerAuth,
			dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			ips:      []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.0.0.1")},
		},
		{file: "admin", commonName: "gpuvm-test-admin", organization: []string{"system:masters"}, usage: x509.ExtKeyUsageClientAuth},
		{file: "controller-manager", commonName: "system:kube-controller-manager", usage: x509.ExtKeyUsageClientAuth},
	} {
		if err := loadOrCreateLeaf(dir, id, ca, caKey); err != nil {
			return err
		}
	}
	saKey, err := loadOrCreateKey(filepath.Join(dir, "service-account.key"))
	if err != nil {
		return err
	}
	publicDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "service-account.pub"), "PUBLIC KEY", publicDER)
}

func loadOrCreateKey(path string) (*ecdsa.PrivateKey, error) {
	if data, err := os.ReadFile(path); err == nil {
		block, _ := pem.Decode(data)
		if block == nil {
			return nil, fmt.Errorf("%s: not PEM", path)
		}
		return x509.ParseECPrivateKey(block.Bytes)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return key, writePEM(path, "EC PRIVATE KEY", der)
}

func loadOrCreateCA(path string, key *ecdsa.PrivateKey) (*x509.Certificate, error) {
	if data, err := os.ReadFile(path); err == nil {
		block, _ := pem.Decode(data)
		if block == nil {
			return nil, fmt.Errorf("%s: not PEM", path)
		}
		return x509.ParseCertificate(block.Bytes)
	}
	template := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "gpuvm-test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, err
	}
	if err := writePEM(path, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func loadOrCreateLeaf(dir string, id identity, ca *x509.Certificate, caKey crypto.Signer) error {
	certPath := filepath.Join(dir, id.file+".crt")
	if _, err := os.Stat(certPath); err == nil {
		return nil
	}
	key, err := loadOrCreateKey(filepath.Join(dir, id.file+".key"))
	if err != nil {
		return err
	}
	template := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: id.commonName, Organization: id.organization},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{id.usage},
		DNSNames:     id.dnsNames,
		IPAddresses:  id.ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, key.Public(), caKey)
	if err != nil {
		return err
	}
	return writePEM(certPath, "CERTIFICATE", der)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err)
	}
	return n
}

func writePEM(path, blockType string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600)
}
