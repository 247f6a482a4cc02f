package testserver

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ZooKeeperInstall is the command that provides the ZooKeeper server.
const ZooKeeperInstall = "apt-get install zookeeper"

// ErrZooKeeperMissing is returned by [StartZooKeeper] when Java or the
// ZooKeeper jars are not installed.
var ErrZooKeeperMissing = errors.New("ZooKeeper (java and /usr/share/java/zookeeper.jar) is not installed")

// ZKTickTime is the tickTime of test ZooKeeper servers: sessions may be as
// short as 2 ticks (400 ms) and as long as 60 s.
const ZKTickTime = 200 * time.Millisecond

// zkJars are the jars a standalone ZooKeeper 3.8 server needs, from the
// Debian packages zookeeper and its dependencies. slf4j-nop keeps it quiet.
var zkJars = []string{
	"zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-nop.jar",
	"commons-io.jar", "metrics-core.jar", "snappy-java.jar",
	"netty-handler.jar", "netty-transport.jar", "netty-common.jar", "netty-buffer.jar",
	"netty-resolver.jar", "netty-codec.jar", "netty-transport-native-epoll.jar",
	"netty-transport-native-unix-common.jar",
}

// ZKServer is a standalone ZooKeeper server run as a child process (the
// Debian package's jars on a JVM) with a generated zoo.cfg, its data in a
// directory of its own and its client port on a free loopback port.
type ZKServer struct {
	// Addr is the client address, "127.0.0.1:PORT"; it stays the same
	// across Restart.
	Addr string

	dir      string
	java, cp string
	logPath  string
	life     lifecycle
}

// ZooKeeper starts a ZooKeeper server for t in t.TempDir(), stopped by
// t.Cleanup. Without Java or the ZooKeeper jars it calls [Missing]. Startup
// takes a JVM's few seconds: share one server per package where possible
// (see [StartZooKeeper]).
func ZooKeeper(t testing.TB) *ZKServer {
	t.Helper()
	s, err := StartZooKeeper(t.TempDir())
	return started(t, s, err, ErrZooKeeperMissing, "ZooKeeper", ZooKeeperInstall)
}

// StartZooKeeper starts a ZooKeeper server with its data under dir and
// waits until it serves clients. The caller stops it with Stop. It returns
// an error matching [ErrZooKeeperMissing] when ZooKeeper is not installed.
// Its clients may open any number of connections.
func StartZooKeeper(dir string) (*ZKServer, error) { return StartZooKeeperMaxConns(dir, 0) }

// StartZooKeeperMaxConns is [StartZooKeeper] with the server's limit of
// connections per client address (maxClientCnxns) at maxConns: 60 is
// ZooKeeper's default, 0 no limit.
func StartZooKeeperMaxConns(dir string, maxConns int) (*ZKServer, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("%w: no java in PATH", ErrZooKeeperMissing)
	}
	var cp []string
	for _, jar := range zkJars {
		p := filepath.Join("/usr/share/java", jar)
		if _, err := os.Stat(p); err == nil {
			cp = append(cp, p)
		}
	}
	if len(cp) == 0 || !strings.HasSuffix(cp[0], "/zookeeper.jar") {
		return nil, fmt.Errorf("%w: no /usr/share/java/zookeeper.jar", ErrZooKeeperMissing)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &ZKServer{
		Addr: fmt.Sprintf("127.0.0.1:%d", port),
		dir:  dir, java: java, cp: strings.Join(cp, ":"),
		logPath: filepath.Join(dir, "zookeeper.log"),
	}
	cfg := fmt.Sprintf(`tickTime=%d
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
minSessionTimeout=%d
maxSessionTimeout=60000
maxClientCnxns=%d
forceSync=no
admin.enableServer=false
4lw.commands.whitelist=srvr,stat,mntr
`, ZKTickTime.Milliseconds(), filepath.Join(dir, "data"), port, 2*ZKTickTime.Milliseconds(), maxConns)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts the server if it is stopped and waits until it serves
// clients (up to 60 s).
func (s *ZKServer) Start() error { return s.life.start(s.launch) }

// launch runs the server once and waits until it is ready.
func (s *ZKServer) launch() (*process, error) {
	cmd := exec.Command(s.java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", s.cp, "org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(s.dir, "zoo.cfg"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	output := func() string { log, _ := os.ReadFile(s.logPath); return zkTail(log, 2000) }
	return launchLogged("ZooKeeper", cmd, s.logPath, 60*time.Second, s.serving, output)
}

// serving reports whether the server serves clients: the "srvr"
// four-letter word reports its mode only once it does ("ruok" answers
// earlier, while sessions are still refused).
func (s *ZKServer) serving() bool {
	c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	b, _ := io.ReadAll(c)
	return strings.Contains(string(b), "Mode: ")
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s) and waits for
// it to exit. It is safe to call when stopped. Sessions survive a stop and
// start on the same data, as in a real restart, until they time out.
func (s *ZKServer) Stop() error {
	s.life.stop(syscall.SIGTERM, 10*time.Second)
	return nil
}

// Restart stops the server and starts it again on the same data directory
// and port.
func (s *ZKServer) Restart() error {
	return s.life.restart(syscall.SIGTERM, 10*time.Second, s.launch)
}

func zkTail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
