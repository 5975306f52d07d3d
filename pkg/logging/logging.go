// Package logging builds the zap logger every Parley process uses: JSON by
// default, human-readable with LOG_FORMAT=console, level from LOG_LEVEL,
// repeated lines sampled (docs/operations.md "Logs").
package logging

import (
	"fmt"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New returns a logger whose entries carry the service name.
func New(service string) (*zap.Logger, error) {
	level := zapcore.InfoLevel
	if s := os.Getenv("LOG_LEVEL"); s != "" {
		if err := level.Set(s); err != nil {
			return nil, fmt.Errorf("LOG_LEVEL: %w", err)
		}
	}
	cfg := zap.NewProductionConfig()
	switch format := os.Getenv("LOG_FORMAT"); format {
	case "", "json":
	case "console":
		cfg = zap.NewDevelopmentConfig()
		cfg.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
		cfg.DisableStacktrace = true
	default:
		// A mistyped format would otherwise log JSON without a word, as a
		// bad value of any other setting stops the service at start.
		return nil, fmt.Errorf("LOG_FORMAT: %q is neither json nor console", format)
	}
	cfg.Level = zap.NewAtomicLevelAt(level)
	// A line a delivery or a request would cost a busy service a write
	// each: of the lines with the same message and level, the first 100
	// of each second are written, then every 100th, in either format.
	cfg.Sampling = &zap.SamplingConfig{Initial: 100, Thereafter: 100}
	cfg.EncoderConfig.TimeKey = "ts"
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	log, err := cfg.Build()
	if err != nil {
		return nil, fmt.Errorf("build logger: %w", err)
	}
	return log.With(zap.String("service", service)), nil
}
