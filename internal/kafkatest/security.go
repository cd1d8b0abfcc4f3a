package kafkatest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Mechanisms are the SASL mechanisms the SASL listeners accept, as Kafka
// names them (sasl.enabled.mechanisms).
var Mechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// TLS is the server side of the broker's TLS listeners.
type TLS struct {
	// CertPEM is the server certificate chain in PEM, leaf first. Clients
	// connect to 127.0.0.1, so the leaf must name that IP to be verified.
	CertPEM []byte
	// KeyPEM is the leaf's unencrypted private key in PEM: PKCS#8 ("PRIVATE
	// KEY"), SEC 1 ("EC PRIVATE KEY") or PKCS#1 ("RSA PRIVATE KEY"); it is
	// rewritten as PKCS#8, the only form Kafka's PEM key store reads.
	KeyPEM []byte
	// CAPEM is the PEM bundle client certificates must chain to (the
	// broker's ssl.truststore). Required with ClientAuth; "" leaves the
	// trust store unset.
	CAPEM []byte
	// ClientAuth sets ssl.client.auth=required on the SSL listener, so that
	// only clients with a certificate signed by CAPEM get in (mutual TLS).
	// false (the default) asks for no client certificate. The SASL_SSL
	// listener never asks for one.
	ClientAuth bool
}

// listenerPorts are the ports of one broker's listeners; 0 means the
// listener is not configured.
type listenerPorts struct {
	plain, controller int
	sasl, saslSSL     int // SASL_PLAINTEXT and SASL_SSL
	ssl               int // SSL
}

// Files the security listeners read, inside the broker's directory.
const (
	keystoreFile   = "keystore.pem"   // PKCS#8 key followed by the certificate chain
	truststoreFile = "truststore.pem" // CAPEM
)

// checkSecurity validates the security options before anything is started.
func checkSecurity(opts Options) error {
	for name, password := range opts.SASLUsers {
		if name == "" || password == "" {
			return fmt.Errorf("kafkatest: SASLUsers: user %q has an empty name or password", name)
		}
		for _, s := range []string{name, password} {
			if i := strings.IndexFunc(s, unsafeRune); i >= 0 {
				// These would need quoting in the JAAS config and in the
				// storage tool's --add-scram argument.
				return fmt.Errorf("kafkatest: SASLUsers: user %q: %q is not allowed in names and passwords", name, s[i])
			}
		}
	}
	if opts.TLS == nil {
		return nil
	}
	if _, err := tls.X509KeyPair(opts.TLS.CertPEM, opts.TLS.KeyPEM); err != nil {
		return fmt.Errorf("kafkatest: TLS.CertPEM and TLS.KeyPEM: %w", err)
	}
	if opts.TLS.ClientAuth && !x509.NewCertPool().AppendCertsFromPEM(opts.TLS.CAPEM) {
		return errors.New("kafkatest: TLS.ClientAuth needs TLS.CAPEM with at least one PEM certificate")
	}
	return nil
}

// unsafeRune reports runes that checkSecurity refuses in SASL user names and
// passwords.
func unsafeRune(r rune) bool {
	return r <= ' ' || r == 0x7f || strings.ContainsRune(`"\,=[]'`, r)
}

// securityProperties returns the server.properties entries for the SASL and
// TLS listeners, merged into the base config by properties.
func securityProperties(opts Options, dir string, ports listenerPorts) map[string]string {
	p := map[string]string{}
	if ports.sasl == 0 && ports.saslSSL == 0 && ports.ssl == 0 {
		return p
	}
	saslListeners := []string{}
	if ports.sasl != 0 {
		saslListeners = append(saslListeners, "sasl_plaintext")
	}
	if ports.saslSSL != 0 {
		saslListeners = append(saslListeners, "sasl_ssl")
	}
	if len(saslListeners) > 0 {
		p["sasl.enabled.mechanisms"] = strings.Join(Mechanisms, ",")
		names := make([]string, 0, len(opts.SASLUsers))
		for name := range opts.SASLUsers {
			names = append(names, name)
		}
		sort.Strings(names)
		var plain strings.Builder
		plain.WriteString("org.apache.kafka.common.security.plain.PlainLoginModule required")
		for _, name := range names {
			fmt.Fprintf(&plain, " user_%s=\"%s\"", name, opts.SASLUsers[name])
		}
		plain.WriteString(";")
		const scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
		for _, l := range saslListeners {
			p["listener.name."+l+".plain.sasl.jaas.config"] = plain.String()
			p["listener.name."+l+".scram-sha-256.sasl.jaas.config"] = scram
			p["listener.name."+l+".scram-sha-512.sasl.jaas.config"] = scram
		}
	}
	if opts.TLS != nil {
		p["ssl.keystore.type"] = "PEM"
		p["ssl.keystore.location"] = filepath.Join(dir, keystoreFile)
		if len(opts.TLS.CAPEM) > 0 {
			p["ssl.truststore.type"] = "PEM"
			p["ssl.truststore.location"] = filepath.Join(dir, truststoreFile)
		}
		if opts.TLS.ClientAuth {
			p["listener.name.ssl.ssl.client.auth"] = "required"
		}
	}
	return p
}

// securityListeners returns the extra listener entries ("NAME://host:port")
// and protocol map entries ("NAME:PROTOCOL") for the configured ports.
func securityListeners(ports listenerPorts) (listeners, protocols []string) {
	for _, l := range []struct {
		name string
		port int
	}{{"SASL_PLAINTEXT", ports.sasl}, {"SASL_SSL", ports.saslSSL}, {"SSL", ports.ssl}} {
		if l.port != 0 {
			listeners = append(listeners, l.name+"://127.0.0.1:"+strconv.Itoa(l.port))
			protocols = append(protocols, l.name+":"+l.name)
		}
	}
	return listeners, protocols
}

// scramArgs returns the storage tool arguments that create every SASL user
// for both SCRAM mechanisms in the new cluster's metadata.
func scramArgs(users map[string]string) []string {
	names := make([]string, 0, len(users))
	for name := range users {
		names = append(names, name)
	}
	sort.Strings(names)
	var args []string
	for _, name := range names {
		for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
			args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", mech, name, users[name]))
		}
	}
	return args
}

// writeTLSFiles writes the key store (PKCS#8 key, then the chain) and the
// trust store into dir.
func writeTLSFiles(dir string, t *TLS) error {
	key, err := pkcs8PEM(t.KeyPEM)
	if err != nil {
		return fmt.Errorf("kafkatest: TLS.KeyPEM: %w", err)
	}
	keystore := append(key, t.CertPEM...)
	err = os.WriteFile(filepath.Join(dir, keystoreFile), keystore, 0o600)
	if err == nil && len(t.CAPEM) > 0 {
		err = os.WriteFile(filepath.Join(dir, truststoreFile), t.CAPEM, 0o644)
	}
	if err != nil {
		return fmt.Errorf("kafkatest: write TLS files: %w", err)
	}
	return nil
}

// pkcs8PEM converts the first private key in keyPEM to a PKCS#8 PEM block.
func pkcs8PEM(keyPEM []byte) ([]byte, error) {
	for rest := keyPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM private key")
		}
		var key any
		var err error
		switch block.Type {
		case "PRIVATE KEY":
			return pem.EncodeToMemory(block), nil
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
	}
}
