package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// fileConfig is the YAML file's schema. Every field is a fileValue so that
// a value is parsed by the same code, with the same errors, as the
// environment variable; TestFileKeysMatchVariables keeps it in step with vars.
type fileConfig struct {
	Listen                fileValue `yaml:"listen"`
	AdminListen           fileValue `yaml:"admin_listen"`
	PublicURL             fileValue `yaml:"public_url"`
	AdminToken            fileValue `yaml:"admin_token"`
	Secret                fileValue `yaml:"secret"`
	SecretPrevious        fileValue `yaml:"secret_previous"`
	DataDir               fileValue `yaml:"data_dir"`
	DBDriver              fileValue `yaml:"db_driver"`
	DBDSN                 fileValue `yaml:"db_dsn"`
	Store                 fileValue `yaml:"store"`
	FSRoot                fileValue `yaml:"fs_root"`
	S3Bucket              fileValue `yaml:"s3_bucket"`
	S3Endpoint            fileValue `yaml:"s3_endpoint"`
	S3Region              fileValue `yaml:"s3_region"`
	S3PathStyle           fileValue `yaml:"s3_path_style"`
	S3CA                  fileValue `yaml:"s3_ca"`
	TLSCert               fileValue `yaml:"tls_cert"`
	TLSKey                fileValue `yaml:"tls_key"`
	AdminTLSCert          fileValue `yaml:"admin_tls_cert"`
	AdminTLSKey           fileValue `yaml:"admin_tls_key"`
	RedirectListen        fileValue `yaml:"redirect_listen"`
	ACMEDomains           fileValue `yaml:"acme_domains"`
	ACMEEmail             fileValue `yaml:"acme_email"`
	ACMEDirectory         fileValue `yaml:"acme_directory"`
	StoreOpenTimeout      fileValue `yaml:"store_open_timeout"`
	StoreIdleTimeout      fileValue `yaml:"store_idle_timeout"`
	ShutdownGrace         fileValue `yaml:"shutdown_grace"`
	DBTimeout             fileValue `yaml:"db_timeout"`
	ClaimBatch            fileValue `yaml:"claim_batch"`
	RefusalCache          fileValue `yaml:"refusal_cache"`
	MaxConnections        fileValue `yaml:"max_connections"`
	BodyTimeout           fileValue `yaml:"body_timeout"`
	LogLevel              fileValue `yaml:"log_level"`
	LogFormat             fileValue `yaml:"log_format"`
	SessionTTL            fileValue `yaml:"session_ttl"`
	SessionByteBudget     fileValue `yaml:"session_byte_budget"`
	SessionMaxConcurrency fileValue `yaml:"session_max_concurrency"`
	SessionAffinity       fileValue `yaml:"session_affinity"`
	SlotLease             fileValue `yaml:"slot_lease"`
	SweepInterval         fileValue `yaml:"sweep_interval"`
	ObjectRetention       fileValue `yaml:"object_retention"`
	AuditRetention        fileValue `yaml:"audit_retention"`
	WebhookURL            fileValue `yaml:"webhook_url"`
	WebhookSecret         fileValue `yaml:"webhook_secret"`
	WebhookMaxAge         fileValue `yaml:"webhook_max_age"`
	UploadExpiry          fileValue `yaml:"upload_expiry"`
	Console               fileValue `yaml:"console"`
	PreviewAgents         fileValue `yaml:"preview_agents"`
	PreviewDetails        fileValue `yaml:"preview_details"`
	Auth                  fileValue `yaml:"auth"`
	AuthCookie            fileValue `yaml:"auth_cookie"`
	AuthHeader            fileValue `yaml:"auth_header"`
	TrustedProxies        fileValue `yaml:"trusted_proxies"`
	JWTKey                fileValue `yaml:"jwt_key"`
	JWTJWKSURL            fileValue `yaml:"jwt_jwks_url"`
	JWTIssuer             fileValue `yaml:"jwt_issuer"`
	JWTAudience           fileValue `yaml:"jwt_audience"`
	JWTAccountClaim       fileValue `yaml:"jwt_account_claim"`
	JWTLeeway             fileValue `yaml:"jwt_leeway"`
}

// fileValue is one scalar from the file, kept as text with its line for
// error messages. A null value (`listen:` or `listen: ~`) counts as unset.
type fileValue struct {
	value string
	line  int
	set   bool
}

func (v *fileValue) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: value must be a single scalar", n.Line)
	}
	if n.Tag == "!!null" {
		return nil
	}
	*v = fileValue{value: n.Value, line: n.Line, set: true}
	return nil
}

// readFile decodes the YAML file at path and returns its set values by key.
// Unknown keys are an error: a misspelt key silently ignored would leave a
// default in force that the operator believes is overridden.
func readFile(path string) (map[string]fileValue, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %v", err)
	}
	var fc fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config: %s: %s", path, yamlError(err))
	}
	v := reflect.ValueOf(fc)
	t := v.Type()
	values := make(map[string]fileValue, t.NumField())
	for i := range t.NumField() {
		if fv := v.Field(i).Interface().(fileValue); fv.set {
			values[t.Field(i).Tag.Get("yaml")] = fv
		}
	}
	return values, nil
}

// yamlError makes yaml.v3's errors one line, and its unknown-field message
// speak of keys rather than of this package's Go types.
func yamlError(err error) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return strings.Join(strings.Fields(strings.TrimPrefix(err.Error(), "yaml: ")), " ")
	}
	suffix := " not found in type " + reflect.TypeFor[fileConfig]().String()
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		if before, ok := strings.CutSuffix(m, suffix); ok {
			if line, key, ok := strings.Cut(before, ": field "); ok {
				m = fmt.Sprintf("%s: unknown key %q", line, key)
			}
		}
		msgs[i] = m
	}
	return strings.Join(msgs, "; ")
}
