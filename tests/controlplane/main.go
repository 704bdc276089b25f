// Command rayshare-controlplane runs a real kube-apiserver (from k8s.io/kubernetes)
// with an embedded etcd in a single process, for integration tests of the
// rayshare admission webhook.
//
// Usage:
//
//	rayshare-controlplane --data-dir DIR [--parent-pid N] [-- EXTRA-KUBE-APISERVER-FLAGS...]
//	rayshare-controlplane kube-scheduler|kube-controller-manager [FLAGS...]   (components.go)
//
// When the apiserver is ready it writes DIR/admin.kubeconfig,
// DIR/rayshare.kubeconfig, DIR/ready (containing the port) and prints
// "READY https://127.0.0.1:PORT" on stdout. SIGTERM/SIGINT (or the death of
// --parent-pid) shuts everything down and exits 0.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "time/tzdata" // for timeZone support in CronJob, as in cmd/kube-apiserver

	"go.etcd.io/etcd/server/v3/embed"
	genericapiserver "k8s.io/apiserver/pkg/server"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // as in cmd/kube-apiserver
	_ "k8s.io/component-base/metrics/prometheus/version"  // as in cmd/kube-apiserver
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

const (
	serviceAccountIssuer = "https://kubernetes.default.svc"
	serviceClusterIPs    = "10.0.0.0/24"

	etcdReadyTimeout      = 60 * time.Second
	apiserverReadyTimeout = 180 * time.Second
	apiserverStopTimeout  = 20 * time.Second
	etcdStopTimeout       = 10 * time.Second
)

// stderr is the process's original standard error. os.Stderr is redirected to
// DIR/apiserver.log so that the apiserver's (klog) output lands there.
var stderr io.Writer = os.Stderr

func logf(format string, args ...any) {
	fmt.Fprintf(stderr, "rayshare-controlplane: "+format+"\n", args...)
}

func main() {
	if code, ok := runComponent(); ok {
		os.Exit(code)
	}
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("rayshare-controlplane", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	dataDir := fs.String("data-dir", "", "directory for PKI, tokens, kubeconfigs, etcd data and logs (created if needed; required)")
	parentPID := fs.Int("parent-pid", 0, "if > 0, shut down and exit when this process is gone (polled every second)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: rayshare-controlplane --data-dir DIR [--parent-pid N] [-- EXTRA-KUBE-APISERVER-FLAGS...]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dataDir == "" {
		fs.Usage()
		logf("--data-dir is required")
		return 2
	}
	extraArgs := fs.Args()

	dir, err := filepath.Abs(*dataDir)
	if err != nil {
		logf("%v", err)
		return 1
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		logf("creating data dir: %v", err)
		return 1
	}
	readyFile := filepath.Join(dir, "ready")
	_ = os.Remove(readyFile) // stale marker from a previous run
	_ = os.Remove(filepath.Join(dir, "etcd.log"))

	// Redirect os.Stderr (not fd 2) to the apiserver log: klog and the
	// apiserver's text logger write to os.Stderr. Go runtime crashes still go
	// to the real stderr.
	apiLogPath := filepath.Join(dir, "apiserver.log")
	apiLog, err := os.OpenFile(apiLogPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		logf("opening apiserver log: %v", err)
		return 1
	}
	defer apiLog.Close()
	origStderr := os.Stderr
	stderr = origStderr
	os.Stderr = apiLog

	// Shutdown requests: our own signal channel (the apiserver installs its
	// own SIGTERM/SIGINT handler in NewAPIServerCommand, which cancels its
	// context; a second signal makes it os.Exit(1)), or the parent's death.
	stop := make(chan struct{})
	var stopOnce sync.Once
	requestStop := func(reason string) {
		stopOnce.Do(func() {
			logf("shutting down (%s)", reason)
			close(stop)
		})
	}
	sigCh := make(chan os.Signal, 2)
	signal.Notify(sigCh, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sigCh
		requestStop("signal " + s.String())
	}()
	if *parentPID > 0 {
		go watchParent(*parentPID, func() {
			requestStop(fmt.Sprintf("parent process %d is gone", *parentPID))
			// Emulate SIGTERM for the apiserver's own signal handler.
			genericapiserver.RequestShutdown()
		})
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}

	// failure: print the error and the tail of the apiserver log, exit 1 —
	// unless a shutdown was requested, which makes any error irrelevant.
	fail := func(format string, args ...any) int {
		if stopped() {
			return 0
		}
		logf(format, args...)
		printLogTail(apiLogPath, 40)
		return 1
	}

	// klog.Fatal (e.g. a post-start hook failing because a shutdown was
	// requested while the apiserver was still starting) ends the process via
	// klog.OsExit: a requested shutdown still exits 0; otherwise report the
	// fatal line, which went to the apiserver log.
	klog.OsExit = func(code int) {
		if stopped() {
			os.Exit(0)
		}
		logf("apiserver exited fatally (code %d)", code)
		printFatal(apiLogPath)
		os.Exit(code)
	}

	// Build the apiserver command now: this installs the apiserver's signal
	// handler early, so a signal at any point reaches it.
	cmd := app.NewAPIServerCommand()

	ports, err := freePorts(3)
	if err != nil {
		return fail("picking free ports: %v", err)
	}
	etcdClientPort, etcdPeerPort, apiPort := ports[0], ports[1], ports[2]

	pkiDir := filepath.Join(dir, "pki")
	pki, err := generatePKI(pkiDir)
	if err != nil {
		return fail("generating PKI: %v", err)
	}
	tokens, err := writeTokens(filepath.Join(dir, "tokens.csv"))
	if err != nil {
		return fail("writing tokens: %v", err)
	}

	// --- etcd ---
	etcd, err := startEtcd(dir, etcdClientPort, etcdPeerPort)
	if err != nil {
		return fail("starting etcd: %v", err)
	}
	etcdClosed := false
	closeEtcd := func() {
		if etcdClosed {
			return
		}
		etcdClosed = true
		done := make(chan struct{})
		go func() { etcd.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(etcdStopTimeout):
			logf("etcd did not stop within %v", etcdStopTimeout)
		}
	}
	defer closeEtcd()
	select {
	case <-etcd.Server.ReadyNotify():
	case err := <-etcd.Err():
		return fail("etcd failed: %v", err)
	case <-time.After(etcdReadyTimeout):
		return fail("etcd not ready after %v", etcdReadyTimeout)
	case <-stop:
		return 0
	}

	// --- kube-apiserver ---
	args := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdClientPort),
		"--tls-cert-file=" + filepath.Join(pkiDir, "apiserver.crt"),
		"--tls-private-key-file=" + filepath.Join(pkiDir, "apiserver.key"),
		"--client-ca-file=" + filepath.Join(pkiDir, "ca.crt"),
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + filepath.Join(pkiDir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(pkiDir, "sa.key"),
		"--service-cluster-ip-range=" + serviceClusterIPs,
		// No controller-manager creates default service accounts, so the
		// ServiceAccount admission plugin would reject every pod.
		"--disable-admission-plugins=ServiceAccount",
		"--enable-admission-plugins=MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
		"--cert-dir=" + pkiDir,
		"--allow-privileged=true",
		"--profiling=false",
		"--v=0",
	}
	args = append(args, extraArgs...)
	cmd.SetArgs(args)
	cmd.SilenceErrors = true
	cmd.SetOut(apiLog)
	cmd.SetErr(apiLog)

	apiErr := make(chan error, 1)
	go func() { apiErr <- cmd.ExecuteContext(context.Background()) }()

	apiDone := false
	waitAPIServer := func() {
		if apiDone {
			return
		}
		select {
		case err := <-apiErr:
			apiDone = true
			if err != nil {
				logf("apiserver stopped with: %v", err)
			}
		case <-time.After(apiserverStopTimeout):
			logf("apiserver did not stop within %v", apiserverStopTimeout)
		}
	}

	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	readyErr := make(chan error, 1)
	go func() { readyErr <- waitReady(server, pki.caPEM, tokens.admin, stop) }()
	select {
	case err := <-readyErr:
		if err != nil {
			if stopped() {
				waitAPIServer()
				return 0
			}
			return fail("apiserver not ready: %v", err)
		}
	case err := <-apiErr:
		apiDone = true
		if err == nil {
			err = errors.New("exited without error")
		}
		return fail("apiserver failed: %v", err)
	case <-stop:
		waitAPIServer()
		return 0
	}

	// --- kubeconfigs, ready marker ---
	if err := writeKubeconfig(filepath.Join(dir, "admin.kubeconfig"), server, pki.caPEM, "admin", tokens.admin); err != nil {
		return fail("writing admin kubeconfig: %v", err)
	}
	if err := writeKubeconfig(filepath.Join(dir, "rayshare.kubeconfig"), server, pki.caPEM, "rayshare", tokens.rayshare); err != nil {
		return fail("writing rayshare kubeconfig: %v", err)
	}
	if err := writeFileAtomic(readyFile, []byte(strconv.Itoa(apiPort)+"\n"), 0o644); err != nil {
		return fail("writing ready file: %v", err)
	}
	fmt.Fprintf(os.Stdout, "READY %s\n", server)
	_ = os.Stdout.Sync()

	select {
	case <-stop:
		_ = os.Remove(readyFile)
		waitAPIServer()
		closeEtcd()
		return 0
	case err := <-apiErr:
		apiDone = true
		_ = os.Remove(readyFile)
		if err == nil {
			err = errors.New("exited without error")
		}
		return fail("apiserver stopped unexpectedly: %v", err)
	case err := <-etcd.Err():
		_ = os.Remove(readyFile)
		return fail("etcd failed: %v", err)
	}
}

// watchParent calls gone once process pid no longer exists (or is a zombie).
func watchParent(pid int, gone func()) {
	for {
		if os.Getppid() != pid && !processAlive(pid) {
			gone()
			return
		}
		time.Sleep(time.Second)
	}
}

func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	// A dead process not yet reaped by its parent still answers kill(0).
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
			if state := stat[i+2]; state == 'Z' || state == 'X' {
				return false
			}
		}
	}
	return true
}

// freePorts returns n distinct free TCP ports on 127.0.0.1 (all listeners are
// held open until every port has been picked, then closed).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func startEtcd(dir string, clientPort, peerPort int) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "rayshare"
	cfg.Dir = filepath.Join(dir, "etcd")
	clientURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", clientPort)}
	peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", peerPort)}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.Logger = "zap"
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}
	// Zero would log every request as "expensive"; use etcd's defaults.
	cfg.WarningApplyDuration = embed.DefaultWarningApplyDuration
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	// Throw-away test data: durability is not worth the fsync latency.
	cfg.UnsafeNoFsync = true
	return embed.StartEtcd(cfg)
}

// waitReady polls SERVER/readyz with the admin token until it returns 200.
func waitReady(server string, caPEM []byte, token string, stop <-chan struct{}) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("bad CA PEM")
	}
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	deadline := time.Now().Add(apiserverReadyTimeout)
	var last string
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		select {
		case <-stop:
			return errors.New("shutdown requested")
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("timed out after %v (last: %s)", apiserverReadyTimeout, last)
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func printLogTail(path string, n int) {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	logf("last %d lines of %s:", len(lines), path)
	for _, l := range lines {
		fmt.Fprintln(stderr, "  "+l)
	}
}

// printFatal prints the last klog fatal line ("F...") of the log at path (a
// fatal log is followed by goroutine dumps, so a plain tail is useless).
func printFatal(path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(string(data), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if len(l) > 5 && l[0] == 'F' && l[1] >= '0' && l[1] <= '9' {
			logf("%s", l)
			break
		}
	}
	logf("full log: %s", path)
}
