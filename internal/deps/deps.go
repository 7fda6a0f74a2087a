// Package deps pins the project's chosen dependencies while the packages that
// use them are being written in parallel. It is removed once each is imported
// by real code.
package deps

import (
	_ "github.com/HdrHistogram/hdrhistogram-go"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go"
	_ "github.com/nats-io/nats.go/micro"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/common/expfmt"
	_ "github.com/rs/zerolog"
	_ "github.com/stretchr/testify/require"
	_ "golang.org/x/sys/unix"
	_ "gopkg.in/yaml.v3"
)
