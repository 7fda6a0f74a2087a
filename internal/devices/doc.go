// Package devices opens, per process, the rdma devices (providers) a
// publisher or subscriber reaches its peers through: shm for peers on this
// host, tcp for the others. Devices are opened on first use and closed
// together.
package devices
