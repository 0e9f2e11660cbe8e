// kdp-go-client: grpc-go test client for the kdptest.Echo service
// (tests/interop/echo.proto), used to prove kdp's gRPC server against a real
// grpc-go peer (the kubelet's stack).
//
//	kdp-go-client -socket PATH -scenario NAME [-dial unix|legacy] [-n N]
//	              [-timeout D] [-max-send BYTES] [-max-recv BYTES]
//	              [-expect-authority STR] [-min-cancelled K]
//
// Results are printed as one JSON object per line on stdout. Exit status: 0
// when the scenario's checks pass, 1 (with a one-line reason on stderr) when
// they fail, 2 on usage errors.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "kdptest/echopb"
)

// protoCodec replaces grpc-go's built-in "proto" codec. grpc-go 1.33's codec
// marshals through github.com/golang/protobuf/proto, and in GOPATH mode on
// Debian 12 that is golang/protobuf 1.3.5 (golang-github-golang-protobuf-1-3-dev),
// which predates the APIv2 messages protoc-gen-go 1.28 generates: it panics
// ("protobuf tag not enough fields in EchoRequest.state"). Newer grpc-go does
// exactly this: marshal with google.golang.org/protobuf/proto.
type protoCodec struct{}

func (protoCodec) Marshal(v interface{}) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("proto codec: cannot marshal %T", v)
	}
	return proto.Marshal(m)
}

func (protoCodec) Unmarshal(data []byte, v interface{}) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("proto codec: cannot unmarshal into %T", v)
	}
	return proto.Unmarshal(data, m)
}

func (protoCodec) Name() string { return "proto" }

func init() { encoding.RegisterCodec(protoCodec{}) }

var scenarios = []string{
	"unary", "status", "deadline", "unknown", "oversize", "big", "stream",
	"cancel", "mixed", "hold", "stats", "wait-idle", "bench",
}

// Flags.
var (
	fSocket          string
	fScenario        string
	fDial            string
	fN               int
	fTimeout         time.Duration
	fMaxSend         int
	fMaxRecv         int
	fExpectAuthority string
	fMinCancelled    int64
	authoritySet     bool
	minCancelledSet  bool
)

var stdoutMu sync.Mutex

// emit prints one JSON object per line; keys are kept in the given order.
func emit(kv ...interface{}) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(fmt.Sprint(kv[i]))
		b.Write(k)
		b.WriteByte(':')
		var v bytes.Buffer
		enc := json.NewEncoder(&v)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(kv[i+1]); err != nil {
			v.Reset()
			enc.Encode(fmt.Sprint(kv[i+1]))
		}
		b.Write(bytes.TrimRight(v.Bytes(), "\n"))
	}
	b.WriteString("}\n")
	stdoutMu.Lock()
	os.Stdout.Write(b.Bytes()) // unbuffered: one write per line
	stdoutMu.Unlock()
}

var exitOnce sync.Once

// fail prints the reason (one line) and exits 1.
func fail(format string, a ...interface{}) {
	msg := strings.ReplaceAll(fmt.Sprintf(format, a...), "\n", `\n`)
	exitOnce.Do(func() {
		emit("scenario", fScenario, "ok", false, "error", msg)
		fmt.Fprintf(os.Stderr, "kdp-go-client %s: FAIL: %s\n", fScenario, msg)
		os.Exit(1)
	})
	select {} // another goroutine is exiting
}

func usage(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "kdp-go-client: "+format+"\n", a...)
	fmt.Fprintf(os.Stderr, "usage: kdp-go-client -socket PATH -scenario {%s} [flags]\n", strings.Join(scenarios, "|"))
	os.Exit(2)
}

func pass(kv ...interface{}) {
	emit(append([]interface{}{"scenario", fScenario, "ok", true}, kv...)...)
}

// describe renders an RPC error as "Code: message".
func describe(err error) string {
	if err == nil {
		return "OK"
	}
	if s, ok := status.FromError(err); ok {
		return fmt.Sprintf("%s: %q", s.Code(), s.Message())
	}
	return err.Error()
}

func codeOf(err error) codes.Code { return status.Code(err) }

func dial(ctx context.Context) *grpc.ClientConn {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	opts := []grpc.DialOption{
		grpc.WithInsecure(),
		grpc.WithBlock(),
		grpc.WithReturnConnectionError(),
		// Retry quickly while the server is still coming up.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallSendMsgSize(fMaxSend),
			grpc.MaxCallRecvMsgSize(fMaxRecv),
		),
	}
	var target string
	switch fDial {
	case "unix":
		// What current kubelets do; grpc-go sends ":authority: localhost".
		p, err := filepath.Abs(fSocket)
		if err != nil {
			fail("socket path: %v", err)
		}
		target = "unix://" + p
	case "legacy":
		// What older kubelets do: the target is the bare path and a custom
		// dialer; grpc-go then sends the path itself as ":authority".
		target = fSocket
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", addr)
		}))
	}
	conn, err := grpc.DialContext(dctx, target, opts...)
	if err != nil {
		fail("dial %s (%s): %v", fSocket, fDial, err)
	}
	return conn
}

// callCtx bounds one RPC by d and by the scenario's overall context.
func callCtx(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

func mustUnary(ctx context.Context, c pb.EchoClient, what string, payload []byte) *pb.EchoReply {
	r, err := c.Unary(ctx, &pb.EchoRequest{Payload: payload})
	if err != nil {
		fail("%s: Unary: %s", what, describe(err))
	}
	if !bytes.Equal(r.Payload, payload) {
		fail("%s: reply payload mismatch (%d bytes, want %d)", what, len(r.Payload), len(payload))
	}
	if r.RequestBytes != int64(len(payload)) {
		fail("%s: request_bytes %d, want %d", what, r.RequestBytes, len(payload))
	}
	return r
}

func getStats(ctx context.Context, c pb.EchoClient) *pb.EchoStats {
	cctx, cancel := callCtx(ctx, 2*time.Second)
	defer cancel()
	s, err := c.Stats(cctx, &pb.EchoRequest{})
	if err != nil {
		fail("Stats: %s", describe(err))
	}
	return s
}

func statsKV(s *pb.EchoStats) []interface{} {
	return []interface{}{
		"active_streams", s.ActiveStreams, "connections", s.Connections,
		"streams_cancelled", s.StreamsCancelled, "streams_total", s.StreamsTotal,
	}
}

// waitStats polls Stats every 20 ms until ok(stats) or limit/ctx runs out.
func waitStats(ctx context.Context, c pb.EchoClient, limit time.Duration, ok func(*pb.EchoStats) bool) (*pb.EchoStats, bool, time.Duration) {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var last *pb.EchoStats
	for {
		cctx, ccancel := context.WithTimeout(wctx, 2*time.Second)
		s, err := c.Stats(cctx, &pb.EchoRequest{})
		ccancel()
		if err != nil {
			if wctx.Err() != nil && last != nil {
				return last, false, time.Since(start)
			}
			fail("Stats: %s", describe(err))
		}
		last = s
		if ok(s) {
			return s, true, time.Since(start)
		}
		select {
		case <-wctx.Done():
			return last, false, time.Since(start)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// percentile (nearest rank) of sorted values.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

func nOr(def int) int {
	if fN >= 0 {
		return fN
	}
	return def
}

// ---------------------------------------------------------------- scenarios

func scUnary(ctx context.Context, c pb.EchoClient) {
	r := mustUnary(ctx, c, "unary", []byte("hello"))
	if authoritySet && r.Authority != fExpectAuthority {
		fail("authority %q, want %q", r.Authority, fExpectAuthority)
	}
	pass("payload", string(r.Payload), "request_bytes", r.RequestBytes, "authority", r.Authority, "dial", fDial)
}

func scStatus(ctx context.Context, c pb.EchoClient) {
	const msg = "bad thing: ü 100% \"quoted\"\nline2"
	_, err := c.Unary(ctx, &pb.EchoRequest{StatusCode: int32(codes.FailedPrecondition), StatusMessage: msg})
	s, _ := status.FromError(err)
	if err == nil || s.Code() != codes.FailedPrecondition {
		fail("got %s, want FailedPrecondition", describe(err))
	}
	if s.Message() != msg {
		fail("message %q, want %q", s.Message(), msg)
	}
	pass("code", s.Code().String(), "message", s.Message())
}

func scDeadline(ctx context.Context, c pb.EchoClient) {
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	start := time.Now()
	_, err := c.Unary(dctx, &pb.EchoRequest{Payload: []byte("slow"), DelayMs: 3000})
	elapsed := time.Since(start)
	cancel()
	if codeOf(err) != codes.DeadlineExceeded {
		fail("delayed Unary: got %s, want DeadlineExceeded", describe(err))
	}
	mustUnary(ctx, c, "Unary after deadline", []byte("after-deadline"))
	pass("code", codes.DeadlineExceeded.String(), "elapsed_ms", elapsed.Milliseconds(), "followup", "OK")
}

func scUnknown(ctx context.Context, conn *grpc.ClientConn) {
	var got []interface{}
	for _, m := range []string{"/kdptest.Echo/Nope", "/other.Service/Unary"} {
		err := conn.Invoke(ctx, m, &pb.EchoRequest{Payload: []byte("x")}, new(pb.EchoReply))
		if codeOf(err) != codes.Unimplemented {
			fail("%s: got %s, want Unimplemented", m, describe(err))
		}
		got = append(got, m, status.Convert(err).Message())
	}
	pass("code", codes.Unimplemented.String(), "messages", got)
}

func scOversize(ctx context.Context, c pb.EchoClient) {
	n := nOr(2 << 20)
	_, err := c.Unary(ctx, &pb.EchoRequest{Payload: bytes.Repeat([]byte{'o'}, n)})
	if codeOf(err) != codes.ResourceExhausted {
		fail("%d-byte Unary: got %s, want ResourceExhausted", n, describe(err))
	}
	msg := status.Convert(err).Message()
	mustUnary(ctx, c, "Unary after oversize", []byte("after-oversize"))
	pass("bytes", n, "code", codes.ResourceExhausted.String(), "message", msg, "followup", "OK")
}

func scBig(ctx context.Context, c pb.EchoClient) {
	const n = 4000000
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	start := time.Now()
	r, err := c.Unary(ctx, &pb.EchoRequest{Payload: payload, ReplySize: n})
	elapsed := time.Since(start)
	if err != nil {
		fail("4 MB Unary: %s", describe(err))
	}
	if len(r.Payload) != n {
		fail("reply %d bytes, want %d", len(r.Payload), n)
	}
	if i := bytes.IndexFunc(r.Payload, func(c rune) bool { return c != 'x' }); i >= 0 {
		fail("reply byte %d is %q, want 'x'", i, r.Payload[i])
	}
	if r.RequestBytes != n {
		fail("request_bytes %d, want %d", r.RequestBytes, n)
	}
	pass("request_bytes", r.RequestBytes, "reply_bytes", len(r.Payload), "elapsed_ms", round1(float64(elapsed.Microseconds())/1000))
}

func scStream(ctx context.Context, c pb.EchoClient) {
	n := nOr(20)
	if n < 1 {
		usage("stream needs -n >= 1")
	}
	st, err := c.Stream(ctx, &pb.EchoRequest{Count: int32(n), IntervalMs: 50})
	if err != nil {
		fail("Stream: %s", describe(err))
	}
	recv := make([]int64, 0, n)
	sent := make([]int64, 0, n)
	for {
		m, err := st.Recv()
		now := time.Now().UnixNano()
		if err == io.EOF {
			break
		}
		if err != nil {
			fail("Stream Recv after %d messages: %s", len(recv), describe(err))
		}
		if m.Seq != int64(len(recv)) {
			fail("message %d has seq %d", len(recv), m.Seq)
		}
		if len(recv) >= n {
			fail("more than %d messages", n)
		}
		recv = append(recv, now)
		sent = append(sent, m.SentUnixNanos)
	}
	if len(recv) != n {
		fail("got %d messages, want %d", len(recv), n)
	}
	// Causal "delivered promptly": message i arrived before i+1 was queued.
	for i := 0; i+1 < n; i++ {
		if recv[i] >= sent[i+1] {
			fail("message %d received at %d, not before message %d was sent at %d (batched)", i, recv[i], i+1, sent[i+1])
		}
	}
	lat := make([]float64, n)
	for i := range lat {
		lat[i] = float64(recv[i]-sent[i]) / 1000
	}
	sort.Float64s(lat)
	pass("messages", n, "end", "OK",
		"latency_us_p50", round1(percentile(lat, 0.50)),
		"latency_us_p99", round1(percentile(lat, 0.99)),
		"latency_us_max", round1(lat[n-1]))
}

func scCancel(ctx context.Context, c pb.EchoClient) {
	before := getStats(ctx, c)
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	st, err := c.Stream(sctx, &pb.EchoRequest{Count: 0, IntervalMs: 10})
	if err != nil {
		fail("Stream: %s", describe(err))
	}
	for i := 0; i < 3; i++ {
		m, err := st.Recv()
		if err != nil {
			fail("Stream Recv %d: %s", i, describe(err))
		}
		if m.Seq != int64(i) {
			fail("message %d has seq %d", i, m.Seq)
		}
	}
	scancel()
	// Drain whatever was buffered; the stream must end with Canceled.
	var endErr error
	for {
		if _, endErr = st.Recv(); endErr != nil {
			break
		}
	}
	if codeOf(endErr) != codes.Canceled {
		fail("after cancel, Recv ended with %s, want Canceled", describe(endErr))
	}
	s, ok, took := waitStats(ctx, c, 5*time.Second, func(s *pb.EchoStats) bool {
		return s.ActiveStreams == 0 && s.StreamsCancelled >= before.StreamsCancelled+1
	})
	if !ok {
		fail("server did not see the cancel within %v: active_streams %d, streams_cancelled %d (before %d)",
			took.Round(time.Millisecond), s.ActiveStreams, s.StreamsCancelled, before.StreamsCancelled)
	}
	pass(append([]interface{}{"cancelled_before", before.StreamsCancelled, "settle_ms", took.Milliseconds()}, statsKV(s)...)...)
}

func scMixed(ctx context.Context, c pb.EchoClient) {
	n := nOr(1000)
	const workers = 8
	before := getStats(ctx, c)
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	// A 2 ms interval keeps the stream pushing all through the unary burst
	// (which lasts tens of milliseconds), so the two really interleave.
	st, err := c.Stream(sctx, &pb.EchoRequest{Count: 0, IntervalMs: 2})
	if err != nil {
		fail("Stream: %s", describe(err))
	}

	var (
		mu       sync.Mutex
		recvTime []time.Time
		arrived  = make(chan struct{}, 1024)
		streamEr = make(chan error, 1)
	)
	go func() {
		for i := int64(0); ; i++ {
			m, err := st.Recv()
			if err != nil {
				streamEr <- err
				return
			}
			if m.Seq != i {
				streamEr <- fmt.Errorf("stream message %d has seq %d", i, m.Seq)
				return
			}
			mu.Lock()
			recvTime = append(recvTime, time.Now())
			mu.Unlock()
			select {
			case arrived <- struct{}{}:
			default:
			}
		}
	}()
	// The stream is live once its first message is in.
	select {
	case <-arrived:
	case err := <-streamEr:
		fail("stream: %s", describe(err))
	case <-ctx.Done():
		fail("no stream message before the timeout")
	}

	var next int64 = -1
	var failed atomic.Value
	var wg sync.WaitGroup
	burstStart := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := atomic.AddInt64(&next, 1)
				if i >= int64(n) || failed.Load() != nil {
					return
				}
				p := []byte(fmt.Sprintf("mixed-w%d-c%06d-%x", w, i, i*2654435761))
				r, err := c.Unary(ctx, &pb.EchoRequest{Payload: p})
				switch {
				case err != nil:
					failed.Store(fmt.Sprintf("Unary %d: %s", i, describe(err)))
				case !bytes.Equal(r.Payload, p):
					failed.Store(fmt.Sprintf("Unary %d: payload %q, want %q", i, r.Payload, p))
				case r.RequestBytes != int64(len(p)):
					failed.Store(fmt.Sprintf("Unary %d: request_bytes %d, want %d", i, r.RequestBytes, len(p)))
				}
			}
		}(w)
	}
	wg.Wait()
	burstEnd := time.Now()
	if f := failed.Load(); f != nil {
		fail("%s", f)
	}
	select {
	case err := <-streamEr:
		fail("stream broke during the unary burst: %s", describe(err))
	default:
	}
	count := func(from, to time.Time) (during, total int) {
		mu.Lock()
		defer mu.Unlock()
		for _, t := range recvTime {
			if !t.Before(from) && (to.IsZero() || !t.After(to)) {
				during++
			}
		}
		return during, len(recvTime)
	}
	during, _ := count(burstStart, burstEnd)
	if during == 0 {
		fail("no stream message arrived during the %v unary burst: the stream and the calls did not interleave",
			burstEnd.Sub(burstStart).Round(time.Millisecond))
	}
	// The stream must still deliver: at least one message since the burst
	// began and two overall (wait up to 2 s for the next one if the burst was
	// shorter than the stream's interval).
	deadline := time.After(2 * time.Second)
	for {
		since, total := count(burstStart, time.Time{})
		if since >= 1 && total >= 2 {
			break
		}
		select {
		case <-arrived:
		case err := <-streamEr:
			fail("stream broke after the unary burst: %s", describe(err))
		case <-deadline:
			fail("stream delivered nothing within 2 s after the unary burst began (%d messages overall)", total)
		case <-ctx.Done():
			fail("timeout waiting for stream messages")
		}
	}
	_, total := count(burstStart, burstEnd)
	scancel()
	s, ok, took := waitStats(ctx, c, 5*time.Second, func(s *pb.EchoStats) bool {
		return s.ActiveStreams == 0 && s.StreamsCancelled >= before.StreamsCancelled+1
	})
	if !ok {
		fail("server did not see the stream cancel within %v: active_streams %d, streams_cancelled %d (before %d)",
			took.Round(time.Millisecond), s.ActiveStreams, s.StreamsCancelled, before.StreamsCancelled)
	}
	elapsed := burstEnd.Sub(burstStart)
	pass(append([]interface{}{
		"unary_calls", n, "workers", workers, "burst_ms", elapsed.Milliseconds(),
		"calls_per_s", math.Round(float64(n) / elapsed.Seconds()),
		"stream_msgs_during_burst", during, "stream_msgs_total", total,
		"settle_ms", took.Milliseconds()}, statsKV(s)...)...)
}

func scHold(ctx context.Context, c pb.EchoClient) {
	st, err := c.Stream(ctx, &pb.EchoRequest{Count: 0, IntervalMs: 50})
	if err != nil {
		fail("Stream: %s", describe(err))
	}
	for i := int64(0); ; i++ {
		m, err := st.Recv()
		if err != nil {
			if ctx.Err() != nil {
				emit("scenario", fScenario, "ok", true, "event", "timeout", "received", i)
				return
			}
			fail("Stream Recv after %d messages: %s", i, describe(err))
		}
		if m.Seq != i {
			fail("message %d has seq %d", i, m.Seq)
		}
		emit("seq", m.Seq, "sent_unix_nanos", m.SentUnixNanos, "recv_unix_nanos", time.Now().UnixNano())
	}
}

func scStats(ctx context.Context, c pb.EchoClient) {
	emit(statsKV(getStats(ctx, c))...)
}

func scWaitIdle(ctx context.Context, c pb.EchoClient) {
	s, ok, took := waitStats(ctx, c, fTimeout, func(s *pb.EchoStats) bool {
		return s.ActiveStreams == 0 && (!minCancelledSet || s.StreamsCancelled >= fMinCancelled)
	})
	emit(append(statsKV(s), "ok", ok, "waited_ms", took.Milliseconds())...)
	if !ok {
		if minCancelledSet {
			fail("not idle: active_streams %d, streams_cancelled %d (want 0 and >= %d)", s.ActiveStreams, s.StreamsCancelled, fMinCancelled)
		}
		fail("not idle: active_streams %d", s.ActiveStreams)
	}
}

func scBench(ctx context.Context, c pb.EchoClient) {
	n := nOr(10000)
	if n < 1 {
		usage("bench needs -n >= 1")
	}
	payload := []byte("0123456789abcdef")
	for i := 0; i < 100; i++ {
		mustUnary(ctx, c, "warm-up", payload)
	}
	d := make([]float64, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		t := time.Now()
		r, err := c.Unary(ctx, &pb.EchoRequest{Payload: payload})
		d[i] = float64(time.Since(t).Nanoseconds()) / 1000
		if err != nil {
			fail("Unary %d: %s", i, describe(err))
		}
		if !bytes.Equal(r.Payload, payload) {
			fail("Unary %d: payload mismatch", i)
		}
	}
	total := time.Since(start)
	sort.Float64s(d)
	pass("calls", n, "payload_bytes", len(payload),
		"p50_us", round1(percentile(d, 0.50)), "p90_us", round1(percentile(d, 0.90)),
		"p99_us", round1(percentile(d, 0.99)), "max_us", round1(d[n-1]),
		"calls_per_s", math.Round(float64(n)/total.Seconds()))
}

func main() {
	fs := flag.NewFlagSet("kdp-go-client", flag.ContinueOnError)
	fs.StringVar(&fSocket, "socket", "", "unix socket path of the server (required)")
	fs.StringVar(&fScenario, "scenario", "", "scenario: "+strings.Join(scenarios, ", ")+" (required)")
	fs.StringVar(&fDial, "dial", "unix", `"unix": target unix://PATH (:authority localhost); "legacy": target PATH + custom dialer (:authority PATH)`)
	fs.IntVar(&fN, "n", -1, "count/size for the scenario (stream: messages, default 20; oversize: bytes, default 2 MiB; mixed: unary calls, default 1000; bench: calls, default 10000)")
	fs.DurationVar(&fTimeout, "timeout", 20*time.Second, "overall bound for the scenario")
	fs.IntVar(&fMaxSend, "max-send", 16<<20, "max send message size (bytes)")
	fs.IntVar(&fMaxRecv, "max-recv", 16<<20, "max receive message size (bytes)")
	fs.StringVar(&fExpectAuthority, "expect-authority", "", "unary: require the server to have seen this :authority")
	fs.Int64Var(&fMinCancelled, "min-cancelled", 0, "wait-idle: also wait until streams_cancelled >= K")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "expect-authority":
			authoritySet = true
		case "min-cancelled":
			minCancelledSet = true
		}
	})
	if fs.NArg() != 0 {
		usage("unexpected arguments: %v", fs.Args())
	}
	if fSocket == "" {
		usage("-socket is required")
	}
	if fScenario == "" {
		usage("-scenario is required")
	}
	known := false
	for _, s := range scenarios {
		known = known || s == fScenario
	}
	if !known {
		usage("unknown scenario %q", fScenario)
	}
	if fDial != "unix" && fDial != "legacy" {
		usage("-dial must be unix or legacy, not %q", fDial)
	}
	if fTimeout <= 0 || fMaxSend <= 0 || fMaxRecv <= 0 {
		usage("-timeout, -max-send and -max-recv must be positive")
	}

	ctx, cancel := context.WithTimeout(context.Background(), fTimeout)
	defer cancel()
	// Never hang: whatever blocks, the process ends shortly after -timeout.
	time.AfterFunc(fTimeout+2*time.Second, func() {
		if fScenario == "hold" {
			os.Exit(0)
		}
		fail("watchdog: scenario still running %v after -timeout %v", 2*time.Second, fTimeout)
	})

	conn := dial(ctx)
	defer conn.Close()
	c := pb.NewEchoClient(conn)

	switch fScenario {
	case "unary":
		scUnary(ctx, c)
	case "status":
		scStatus(ctx, c)
	case "deadline":
		scDeadline(ctx, c)
	case "unknown":
		scUnknown(ctx, conn)
	case "oversize":
		scOversize(ctx, c)
	case "big":
		scBig(ctx, c)
	case "stream":
		scStream(ctx, c)
	case "cancel":
		scCancel(ctx, c)
	case "mixed":
		scMixed(ctx, c)
	case "hold":
		scHold(ctx, c)
	case "stats":
		scStats(ctx, c)
	case "wait-idle":
		scWaitIdle(ctx, c)
	case "bench":
		scBench(ctx, c)
	}
}
