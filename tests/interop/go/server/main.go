// kdp-go-server: a grpc-go implementation of the kdptest.Echo service
// (tests/interop/echo.proto), used as the reference peer for kdp's gRPC client
// and to check that kdp-go-client's scenarios behave as expected against grpc-go.
//
//	kdp-go-server -socket PATH [-max-recv BYTES] [-max-send BYTES]
//
// Removes a stale socket file at start, prints "ready" once listening, and on
// SIGTERM/SIGINT stops, removes the socket and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
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

const statsMethod = "/kdptest.Echo/Stats"

// counters shared by the service, the interceptors and the stats handler.
type counters struct {
	active      int64 // RPCs in flight (Stats calls excluded)
	connections int64
	cancelled   int64 // RPCs whose context was cancelled (client cancel or connection loss)
	total       int64 // RPCs ever begun
}

var cnt counters

func track(method string, ctx context.Context, run func() error) error {
	atomic.AddInt64(&cnt.total, 1)
	if method == statsMethod {
		return run()
	}
	atomic.AddInt64(&cnt.active, 1)
	err := run()
	if errors.Is(ctx.Err(), context.Canceled) {
		atomic.AddInt64(&cnt.cancelled, 1)
	}
	atomic.AddInt64(&cnt.active, -1)
	return err
}

func unaryInterceptor(ctx context.Context, req interface{}, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp interface{}, err error) {
	err = track(info.FullMethod, ctx, func() error {
		var e error
		resp, e = h(ctx, req)
		return e
	})
	return resp, err
}

func streamInterceptor(srv interface{}, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return track(info.FullMethod, ss.Context(), func() error { return h(srv, ss) })
}

// connStats counts open connections.
type connStats struct{}

func (connStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (connStats) HandleRPC(context.Context, stats.RPCStats)                         {}
func (connStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (connStats) HandleConn(_ context.Context, s stats.ConnStats) {
	switch s.(type) {
	case *stats.ConnBegin:
		atomic.AddInt64(&cnt.connections, 1)
	case *stats.ConnEnd:
		atomic.AddInt64(&cnt.connections, -1)
	}
}

type echoServer struct {
	pb.UnimplementedEchoServer
}

func ctxErr(ctx context.Context) error {
	return status.FromContextError(ctx.Err()).Err()
}

// sleep waits d, or returns the context's error if it ends first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctxErr(ctx)
	}
}

func replyPayload(req *pb.EchoRequest) []byte {
	if req.ReplySize > 0 {
		return []byte(strings.Repeat("x", int(req.ReplySize)))
	}
	return req.Payload
}

func authority(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(":authority"); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

func (echoServer) Unary(ctx context.Context, req *pb.EchoRequest) (*pb.EchoReply, error) {
	if req.DelayMs > 0 {
		if err := sleep(ctx, time.Duration(req.DelayMs)*time.Millisecond); err != nil {
			return nil, err
		}
	}
	if req.StatusCode != 0 {
		return nil, status.Error(codes.Code(req.StatusCode), req.StatusMessage)
	}
	return &pb.EchoReply{
		Payload:      replyPayload(req),
		RequestBytes: int64(len(req.Payload)),
		Authority:    authority(ctx),
	}, nil
}

func (echoServer) Stream(req *pb.EchoRequest, ss pb.Echo_StreamServer) error {
	ctx := ss.Context()
	if req.StatusCode != 0 {
		return status.Error(codes.Code(req.StatusCode), req.StatusMessage)
	}
	payload := replyPayload(req)
	auth := authority(ctx)
	interval := time.Duration(req.IntervalMs) * time.Millisecond
	for i := int64(0); req.Count == 0 || i < int64(req.Count); i++ {
		if i > 0 {
			if err := sleep(ctx, interval); err != nil {
				return err
			}
		} else if ctx.Err() != nil {
			return ctxErr(ctx)
		}
		err := ss.Send(&pb.EchoReply{
			Payload:       payload,
			Seq:           i,
			SentUnixNanos: time.Now().UnixNano(),
			RequestBytes:  int64(len(req.Payload)),
			Authority:     auth,
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (echoServer) Stats(context.Context, *pb.EchoRequest) (*pb.EchoStats, error) {
	return &pb.EchoStats{
		ActiveStreams:    atomic.LoadInt64(&cnt.active),
		Connections:      atomic.LoadInt64(&cnt.connections),
		StreamsCancelled: atomic.LoadInt64(&cnt.cancelled),
		StreamsTotal:     atomic.LoadInt64(&cnt.total),
	}, nil
}

func main() {
	fs := flag.NewFlagSet("kdp-go-server", flag.ContinueOnError)
	socket := fs.String("socket", "", "unix socket path to listen on (required)")
	maxRecv := fs.Int("max-recv", 4<<20, "max receive message size in bytes (grpc-go default 4 MiB)")
	maxSend := fs.Int("max-send", 1<<31-1, "max send message size in bytes")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *socket == "" || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: kdp-go-server -socket PATH [-max-recv BYTES] [-max-send BYTES]")
		os.Exit(2)
	}
	if err := os.Remove(*socket); err != nil && !os.IsNotExist(err) {
		fmt.Fprintf(os.Stderr, "kdp-go-server: remove stale %s: %v\n", *socket, err)
		os.Exit(1)
	}
	lis, err := net.Listen("unix", *socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kdp-go-server: listen %s: %v\n", *socket, err)
		os.Exit(1)
	}
	// We remove the socket ourselves on exit.
	if ul, ok := lis.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(false)
	}
	s := grpc.NewServer(
		grpc.MaxRecvMsgSize(*maxRecv),
		grpc.MaxSendMsgSize(*maxSend),
		grpc.UnaryInterceptor(unaryInterceptor),
		grpc.StreamInterceptor(streamInterceptor),
		grpc.StatsHandler(connStats{}),
	)
	pb.RegisterEchoServer(s, echoServer{})

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		s.Stop()
		os.Remove(*socket)
		os.Exit(0)
	}()

	os.Stdout.WriteString("ready\n") // os.Stdout is unbuffered
	if err := s.Serve(lis); err != nil {
		fmt.Fprintf(os.Stderr, "kdp-go-server: serve: %v\n", err)
		os.Remove(*socket)
		os.Exit(1)
	}
	select {} // Stop was called by the signal handler, which exits.
}
