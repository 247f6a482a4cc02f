//go:build race

package zk_test

// raceEnabled: TestSessionGoneWhileDisconnected skips under the race
// detector, which reports a data race inside github.com/go-zookeeper/zk
// v1.0.4 itself (Conn.recvLoop against Conn.sendSetWatches when a
// connection with many watches comes back). .ci/run runs the test without
// -race.
const raceEnabled = true
