// Package config loads a service's configuration from the environment, the
// only source of configuration (docs/operations.md "Configuration"). Each
// service declares
// one Config struct with `env` and `envDefault` tags; Load fills and
// validates it, and Masked renders it for the start-up log without secrets.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"time"
	_ "time/tzdata" // DAILY_RESET_TZ must load on hosts without a zoneinfo database

	"github.com/caarlos0/env/v11"
)

// Connections are the settings every service shares.
type Connections struct {
	DatabaseURL string `env:"DATABASE_URL" envDefault:"postgres://postgres@127.0.0.1:5432/parley?sslmode=disable" secret:"url"`
	RedisURL    string `env:"REDIS_URL" envDefault:"redis://127.0.0.1:6379/0" secret:"url"`
	NATSURL     string `env:"NATS_URL" envDefault:"nats://127.0.0.1:4222" secret:"url"`
	// NATSSecurity authenticates to NATS and secures the connection: NATS
	// is a trust boundary, since whoever reaches it can call every
	// service's rpc and admin endpoints.
	NATSSecurity
	// Listening bounds every HTTP listener of the service.
	Listening

	// RedisPrefix starts every Redis key, so that test runs and checkouts
	// sharing one Redis never collide.
	RedisPrefix string `env:"REDIS_PREFIX" envDefault:"parley:"`
	// EventsStream and EventsSubjectPrefix name the JetStream stream of
	// customer events and its subjects (<prefix>.<workspace_id>.<event>).
	EventsStream        string `env:"EVENTS_STREAM" envDefault:"EVENTS"`
	EventsSubjectPrefix string `env:"EVENTS_SUBJECT_PREFIX" envDefault:"events"`
	// EventsReplicas is how many servers of a NATS cluster hold every
	// stream Parley creates (EVENTS and the streams named after it) and
	// their durable consumers: 1 on a single server, 3 on a cluster so a
	// server's loss loses nothing and stops nothing. Applied at every
	// start, so changing it moves existing streams.
	EventsReplicas int `env:"EVENTS_REPLICAS" envDefault:"1"`
	// RPCSubjectPrefix starts the subjects of the gateway-to-service calls.
	RPCSubjectPrefix string `env:"RPC_SUBJECT_PREFIX" envDefault:"parley.rpc"`

	// DailyResetTZ is where "midnight" is for daily caps.
	DailyResetTZ string `env:"DAILY_RESET_TZ" envDefault:"Asia/Ulaanbaatar"`
}

// NATSSecurity is how a process proves itself to NATS: a credentials file
// (NATS_CREDS), or a user and password, or a token; and TLS with a CA and,
// for mutual TLS, a client certificate and key. All empty is an
// unauthenticated plain connection, fine on a developer's machine only.
type NATSSecurity struct {
	NATSCreds    string `env:"NATS_CREDS"`
	NATSUser     string `env:"NATS_USER"`
	NATSPassword string `env:"NATS_PASSWORD" secret:"true"`
	NATSToken    string `env:"NATS_TOKEN" secret:"true"`
	NATSTLSCA    string `env:"NATS_TLS_CA"`
	NATSTLSCert  string `env:"NATS_TLS_CERT"`
	NATSTLSKey   string `env:"NATS_TLS_KEY"`
}

// Validate refuses ambiguous or half-given credentials, which would
// otherwise fail later as an opaque authorization error.
func (s NATSSecurity) Validate() error {
	given := 0
	for _, set := range []bool{s.NATSCreds != "", s.NATSUser != "" || s.NATSPassword != "", s.NATSToken != ""} {
		if set {
			given++
		}
	}
	switch {
	case given > 1:
		return errors.New("NATS_CREDS, NATS_USER/NATS_PASSWORD and NATS_TOKEN: set at most one way to authenticate")
	case (s.NATSUser == "") != (s.NATSPassword == ""):
		return errors.New("NATS_USER and NATS_PASSWORD: set both or neither")
	case (s.NATSTLSCert == "") != (s.NATSTLSKey == ""):
		return errors.New("NATS_TLS_CERT and NATS_TLS_KEY: set both or neither")
	}
	return nil
}

// Listening are the bounds every HTTP listener keeps: the services' own
// (pkg/service serves them with pkg/httpx) and the sandboxes beside them.
type Listening struct {
	// HTTPReadTimeout bounds reading one whole request, headers and body,
	// from its first byte: a client that sends slowly, or stops, is
	// answered 408 or cut there rather than holding its connection and
	// a goroutine for as long as it likes. A response may take longer
	// (a streamed run, the widget's events): only reading is bounded.
	HTTPReadTimeout time.Duration `env:"HTTP_READ_TIMEOUT" envDefault:"30s"`
}

// Validate refuses a bound that would bound nothing.
func (l Listening) Validate() error {
	if l.HTTPReadTimeout <= 0 {
		return fmt.Errorf("HTTP_READ_TIMEOUT: %s must be more than 0", l.HTTPReadTimeout)
	}
	return nil
}

// CheckListenAddr refuses a service's listen address (GATEWAY_ADDR, …)
// that is no host:port, ":8080" or "127.0.0.1:8080": at start, naming the
// variable, rather than once the service has migrated and connected and
// its listener fails on it.
func CheckListenAddr(name, addr string) error {
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return fmt.Errorf("%s: %q is not a listen address host:port, such as :8080 or 127.0.0.1:8080", name, addr)
	}
	return nil
}

// Location returns the time zone for daily resets.
func (c Connections) Location() (*time.Location, error) {
	return time.LoadLocation(c.DailyResetTZ)
}

// MaxStreamReplicas is the most replicas JetStream keeps of a stream.
const MaxStreamReplicas = 5

// Validate checks the shared settings. A service Config that embeds
// Connections and adds its own Validate must call this one too.
func (c Connections) Validate() error {
	if _, err := c.Location(); err != nil {
		return fmt.Errorf("DAILY_RESET_TZ: %w", err)
	}
	if err := c.NATSSecurity.Validate(); err != nil {
		return err
	}
	if err := c.Listening.Validate(); err != nil {
		return err
	}
	if err := checkURLs("REDIS_URL", c.RedisURL); err != nil {
		return err
	}
	if err := checkURLs("NATS_URL", c.NATSURL); err != nil {
		return err
	}
	if c.EventsReplicas < 1 || c.EventsReplicas > MaxStreamReplicas {
		return fmt.Errorf("EVENTS_REPLICAS: %d is not between 1 and %d", c.EventsReplicas, MaxStreamReplicas)
	}
	for name, v := range map[string]string{"EVENTS_STREAM": c.EventsStream, "EVENTS_SUBJECT_PREFIX": c.EventsSubjectPrefix, "RPC_SUBJECT_PREFIX": c.RPCSubjectPrefix} {
		if v == "" || strings.ContainsAny(v, " *>") {
			return fmt.Errorf("%s: %q is not a valid NATS name", name, v)
		}
	}
	return nil
}

// Validator is implemented by configs that check themselves after loading.
type Validator interface {
	Validate() error
}

// Load reads T from the environment and validates it.
func Load[T any]() (T, error) {
	return LoadFrom[T](nil)
}

// LoadFrom is Load reading the variables from environ instead of the
// process's environment (nil: the process's), so that tests of a service's
// settings run in parallel without touching it. Unset and empty variables
// take their defaults.
func LoadFrom[T any](environ map[string]string) (T, error) {
	var cfg T
	opts := env.Options{}
	if environ != nil {
		opts.Environment = environ
	}
	if err := env.ParseWithOptions(&cfg, opts); err != nil {
		return cfg, fmt.Errorf("read config: %w", nameVariables(err, reflect.TypeOf(cfg)))
	}
	if v, ok := any(&cfg).(Validator); ok {
		if err := v.Validate(); err != nil {
			return cfg, fmt.Errorf("invalid config: %w", err)
		}
	}
	return cfg, nil
}

// nameVariables rewrites the library's parse errors, which name Go fields
// ("RetryDelays"), to name the environment variable an operator sets.
func nameVariables(err error, t reflect.Type) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err
	}
	names := map[string]string{}
	envNames(t, names)
	out := make([]error, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) && names[pe.Name] != "" {
			e = fmt.Errorf("%s: %w", names[pe.Name], pe.Err)
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// envNames maps each field name of t (embedded structs flattened) to its
// env tag.
func envNames(t reflect.Type, out map[string]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if name := f.Tag.Get("env"); name != "" {
			out[f.Name] = name
		} else if f.Type.Kind() == reflect.Struct {
			envNames(f.Type, out)
		}
	}
}

// Masked returns the settings as env name → value for logging. Fields tagged
// secret:"true" are replaced by "***"; secret:"url" keeps the URLs but hides
// their secrets (RedactURL).
func Masked(cfg any) map[string]string {
	out := map[string]string{}
	mask(reflect.ValueOf(cfg), out)
	return out
}

func mask(v reflect.Value, out map[string]string) {
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Tag.Get("env")
		if name == "" {
			mask(v.Field(i), out)
			continue
		}
		val := fmt.Sprint(v.Field(i).Interface())
		switch f.Tag.Get("secret") {
		case "true":
			if val != "" {
				val = "***"
			}
		case "url":
			val = RedactURL(val)
		}
		out[name] = val
	}
}

// RedactURL hides the secrets of raw, one URL or several comma-separated
// (NATS_URL lists a cluster's servers): the password of each, and the
// user of a NATS URL without one, which is a token (nats://TOKEN@host).
// PostgreSQL also takes a password as a parameter, in a URL's query
// (?password=) or in a keyword DSN (host=db password=…), both of which
// DATABASE_URL accepts: those are hidden too. What does not parse is
// hidden whole.
func RedactURL(raw string) string {
	urls := strings.Split(raw, ",")
	for i, one := range urls {
		urls[i] = redactOne(strings.TrimSpace(one))
	}
	return strings.Join(urls, ",")
}

// checkURLs refuses a setting holding a URL (or a comma-separated list, as
// NATS_URL) that does not parse, without repeating it: the clients'
// parse error quotes the whole URL, so a password with an unescaped "%"
// would otherwise reach the log when the service fails at start. A NATS
// server given without a scheme is nats://, as the NATS client reads it.
func checkURLs(name, raw string) error {
	for _, one := range strings.Split(raw, ",") {
		one = strings.TrimSpace(one)
		if name == "NATS_URL" && !strings.Contains(one, "://") {
			one = "nats://" + one
		}
		if _, err := url.Parse(one); err != nil {
			return fmt.Errorf("%s: not a valid URL (escape the characters of a user or password, e.g. %%25 for %%, %%40 for @, %%2F for /)", name)
		}
	}
	return nil
}

// passwordParams are the parameters of a PostgreSQL connection string that
// hold a secret (pgconn's password and sslpassword).
var passwordParams = map[string]bool{"password": true, "sslpassword": true}

// dsnPassword is a password parameter of a keyword DSN, its value bare or
// single-quoted as libpq writes it.
var dsnPassword = regexp.MustCompile(`(?i)\b((?:ssl)?password)\s*=\s*(?:'(?:[^'\\]|\\.)*'|\S*)`)

func redactOne(raw string) string {
	if !strings.Contains(raw, "://") && strings.Contains(raw, "=") {
		return dsnPassword.ReplaceAllString(raw, "${1}=***")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "***"
	}
	if u.RawQuery != "" {
		params := strings.Split(u.RawQuery, "&")
		for i, p := range params {
			if key, _, _ := strings.Cut(p, "="); passwordParams[strings.ToLower(key)] {
				params[i] = key + "=***"
			}
		}
		u.RawQuery = strings.Join(params, "&")
		raw = u.String()
	}
	if u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "***")
	} else if natsSchemes[u.Scheme] {
		u.User = url.User("***")
	}
	return strings.Replace(u.String(), "%2A%2A%2A", "***", 1)
}

// natsSchemes are the schemes of NATS URLs, whose lone user is a token.
var natsSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}
