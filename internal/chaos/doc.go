// Package chaos proves tickbus's promise under the faults of a trading
// floor: one order for every subscriber and no loss without a word, while
// the topic's home is killed, stopped and partitioned, publishers restart
// and a NATS server of the cluster restarts.
//
// Roles (publishers and subscribers) run as real processes (internal/child)
// in network-namespace hosts (internal/netns). Each writes what it did into
// a record file (Recorder): a publisher every tick it published, a
// subscriber every tick it delivered and every event it got. The file is a
// shared mapping, so a SIGKILLed role's record survives it (all but the
// store it was making). Check reads the records and proves, per
// subscriber, that every sequence from its first to its last delivered
// tick was delivered exactly once or named by exactly one event; that all
// subscribers delivered the same ticks at the same sequences (so in the
// same order); and that no sequence carries two different ticks, measured
// against what the publishers recorded. It also rejects gap and overrun
// events that name more sequences than were ever claimed: an ended epoch's
// unused reservation must be named by one epoch event.
//
// When the chaos test fails it keeps the records and every role's whole
// log in the directory it names ("records kept in …"): each role's record
// file (ReadFile) and <role>.log (zerolog JSON). NETNS_NATS_LOG=1 shows the
// nats-servers' logs too; CHAOS_KEEP=1 keeps records and logs of a run
// that passed. BenchmarkFailover crashes the home (SIGKILL, SIGSTOP) with
// the same roles, in three hosts where the machine allows, else on one
// (no root needed): go test -run XXX -bench Failover -benchtime=10x.
package chaos
