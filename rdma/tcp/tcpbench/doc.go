// Package tcpbench holds the tcp provider's benchmarks beside NATS core,
// over loopback and over a veth link into a network namespace. They live
// apart from package tcp so that its test binary does not link nats-server,
// which keeps fuzzing the frame decoders fast.
//
//	go test -run XXX -bench . -benchtime 3000x ./rdma/tcp/tcpbench
//
// The tcp ends poll through the product's default idle strategy
// (adaptive); TICKBUS_BENCH_IDLE=spin|yield|backoff picks another.
package tcpbench
