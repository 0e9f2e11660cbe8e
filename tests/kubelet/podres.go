// The kubelet's PodResources API v1 (proto/podresources.proto) in
// kdp-test-kubelet: List, Get and GetAllocatableResources from the
// emulator's real state, served on <kubelet-root>/pod-resources/kubelet.sock
// (-kubelet-root ROOT, or -pod-resources for ROOT = DIR/..). The devices are
// the ones each registered plugin streams; the allocations are the ones the
// "allocate" command made with pod=NS/NAME (see main.go), and the claims
// "dra-prepare" prepared with pod=NS/NAME container=C (their devices as the
// driver answered, in DynamicResources), until "release-pod NS/NAME".
//
//	-podres-get on|off|absent  on: Get answers (kubelet >= 1.34, or the gate
//	                           on); off: the kubelet's gate-off error (code
//	                           Unknown, "PodResources API Get method
//	                           disabled"); absent: a kubelet before 1.27
//	                           (Unimplemented)
//	-podres-delay D            every answer waits D first (a stalled kubelet)
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "kdptest/kubeletpb"
	prpb "kdptest/podrespb"
)

var (
	fKubeletRoot  string
	fPodResources bool
	fPodresGet    string
	fPodresDelay  time.Duration
)

// allocation: the devices of one resource given to one container, or (claim
// set) the devices of one DRA claim the container references.
type allocation struct {
	ns, pod, container, resource string
	ids                          []string
	claim                        *prpb.DynamicResource
}

type podres struct {
	prpb.UnimplementedPodResourcesListerServer
	k      *kubelet
	socket string
	srv    *grpc.Server
	mu     sync.Mutex
	allocs []allocation // in the order they were made
}

func podresSocket(root string) string { return filepath.Join(root, "pod-resources", "kubelet.sock") }

func startPodres(k *kubelet, root string) (*podres, error) {
	s := &podres{k: k, socket: podresSocket(root)}
	if err := os.MkdirAll(filepath.Dir(s.socket), 0o750); err != nil {
		return nil, err
	}
	if err := os.Remove(s.socket); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	lis, err := net.Listen("unix", s.socket)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %v", s.socket, err)
	}
	s.srv = grpc.NewServer()
	if fPodresGet == "absent" {
		prpb.RegisterPodResourcesListerServer(s.srv, &noGet{s: s})
	} else {
		prpb.RegisterPodResourcesListerServer(s.srv, s)
	}
	go func() {
		if err := s.srv.Serve(lis); err != nil {
			logf("pod-resources serve: %v", err)
		}
	}()
	return s, nil
}

func (s *podres) stop() {
	s.srv.Stop()
	os.Remove(s.socket)
}

// add records the allocations of one Allocate made for a pod.
func (s *podres) add(ns, pod string, containers []string, resource string, groups [][]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, ids := range groups {
		s.allocs = append(s.allocs, allocation{ns: ns, pod: pod, container: containers[i],
			resource: resource, ids: append([]string(nil), ids...)})
	}
}

// addClaim records a prepared DRA claim as referenced by these containers
// of a pod (the kubelet's DynamicResources, 1.34+).
func (s *podres) addClaim(ns, pod string, containers []string, dr *prpb.DynamicResource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range containers {
		s.allocs = append(s.allocs, allocation{ns: ns, pod: pod, container: c, claim: dr})
	}
}

// release forgets a pod's allocations; returns how many there were.
func (s *podres) release(ns, pod string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.allocs[:0]
	n := 0
	for _, a := range s.allocs {
		if a.ns == ns && a.pod == pod {
			n++
			continue
		}
		kept = append(kept, a)
	}
	s.allocs = kept
	return n
}

// numaOf: the NUMA nodes of these devices of resource, as the plugin
// streamed them (sorted, unique); nil if none.
func (s *podres) numaOf(resource string, ids []string) *prpb.TopologyInfo {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	seen := map[int64]bool{}
	s.k.mu.Lock()
	if rs := s.k.res[resource]; rs != nil {
		for _, d := range rs.devices {
			if want[d.ID] {
				for _, n := range d.GetTopology().GetNodes() {
					seen[n.GetID()] = true
				}
			}
		}
	}
	s.k.mu.Unlock()
	if len(seen) == 0 {
		return nil
	}
	nodes := []int64{}
	for n := range seen {
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
	t := &prpb.TopologyInfo{}
	for _, n := range nodes {
		t.Nodes = append(t.Nodes, &prpb.NUMANode{ID: n})
	}
	return t
}

// pods builds the PodResources of every pod (or of one: ns/pod != ""), in
// the order of their first allocation.
func (s *podres) pods(ns, pod string) []*prpb.PodResources {
	s.mu.Lock()
	allocs := append([]allocation(nil), s.allocs...)
	s.mu.Unlock()
	var out []*prpb.PodResources
	byPod := map[string]*prpb.PodResources{}
	byCtr := map[string]*prpb.ContainerResources{}
	for _, a := range allocs {
		if pod != "" && (a.ns != ns || a.pod != pod) {
			continue
		}
		pk := a.ns + "/" + a.pod
		pr := byPod[pk]
		if pr == nil {
			pr = &prpb.PodResources{Name: a.pod, Namespace: a.ns}
			byPod[pk] = pr
			out = append(out, pr)
		}
		ck := pk + "/" + a.container
		cr := byCtr[ck]
		if cr == nil {
			cr = &prpb.ContainerResources{Name: a.container}
			byCtr[ck] = cr
			pr.Containers = append(pr.Containers, cr)
		}
		if a.claim != nil {
			cr.DynamicResources = append(cr.DynamicResources, a.claim)
			continue
		}
		cr.Devices = append(cr.Devices, &prpb.ContainerDevices{ResourceName: a.resource,
			DeviceIds: a.ids, Topology: s.numaOf(a.resource, a.ids)})
	}
	return out
}

// wait: -podres-delay, cut short by the caller's deadline or cancel.
func wait(ctx context.Context, method string) error {
	emit("podres_call", M{"method": method})
	if fPodresDelay <= 0 {
		return nil
	}
	select {
	case <-time.After(fPodresDelay):
		return nil
	case <-ctx.Done():
		emit("podres_abandoned", M{"method": method, "error": ctx.Err().Error()})
		return status.FromContextError(ctx.Err()).Err()
	}
}

func (s *podres) List(ctx context.Context, r *prpb.ListPodResourcesRequest) (*prpb.ListPodResourcesResponse, error) {
	if err := wait(ctx, "List"); err != nil {
		return nil, err
	}
	return &prpb.ListPodResourcesResponse{PodResources: s.pods("", "")}, nil
}

func (s *podres) Get(ctx context.Context, r *prpb.GetPodResourcesRequest) (*prpb.GetPodResourcesResponse, error) {
	if err := wait(ctx, "Get"); err != nil {
		return nil, err
	}
	if fPodresGet == "off" {
		// The kubelet's words with its KubeletPodResourcesGet gate off.
		return nil, fmt.Errorf("PodResources API Get method disabled")
	}
	p := s.pods(r.PodNamespace, r.PodName)
	if len(p) == 0 {
		// A pod without devices is still a pod for the kubelet; the
		// emulator knows only pods that hold some.
		return nil, fmt.Errorf("pod %s in namespace %s not found", r.PodName, r.PodNamespace)
	}
	return &prpb.GetPodResourcesResponse{PodResources: p[0]}, nil
}

// GetAllocatableResources: every device of every registered resource (by
// name, then ID), one ContainerDevices each with its NUMA nodes, unhealthy
// ones included like the kubelet (kubernetes/kubernetes #104122).
func (s *podres) GetAllocatableResources(ctx context.Context, r *prpb.AllocatableResourcesRequest) (*prpb.AllocatableResourcesResponse, error) {
	if err := wait(ctx, "GetAllocatableResources"); err != nil {
		return nil, err
	}
	out := &prpb.AllocatableResourcesResponse{}
	s.k.mu.Lock()
	names := make([]string, 0, len(s.k.res))
	for n := range s.k.res {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		devs := append([]*pb.Device(nil), s.k.res[n].devices...)
		sort.Slice(devs, func(i, j int) bool { return devs[i].ID < devs[j].ID })
		for _, d := range devs {
			cd := &prpb.ContainerDevices{ResourceName: n, DeviceIds: []string{d.ID}}
			if nodes := d.GetTopology().GetNodes(); len(nodes) > 0 {
				cd.Topology = &prpb.TopologyInfo{}
				for _, x := range nodes {
					cd.Topology.Nodes = append(cd.Topology.Nodes, &prpb.NUMANode{ID: x.GetID()})
				}
			}
			out.Devices = append(out.Devices, cd)
		}
	}
	s.k.mu.Unlock()
	return out, nil
}

// noGet serves List and GetAllocatableResources only (a kubelet before
// 1.27: Get is Unimplemented, grpc-go's own answer).
type noGet struct {
	prpb.UnimplementedPodResourcesListerServer
	s *podres
}

func (n *noGet) List(ctx context.Context, r *prpb.ListPodResourcesRequest) (*prpb.ListPodResourcesResponse, error) {
	return n.s.List(ctx, r)
}

func (n *noGet) GetAllocatableResources(ctx context.Context, r *prpb.AllocatableResourcesRequest) (*prpb.AllocatableResourcesResponse, error) {
	return n.s.GetAllocatableResources(ctx, r)
}

func (n *noGet) Get(ctx context.Context, r *prpb.GetPodResourcesRequest) (*prpb.GetPodResourcesResponse, error) {
	return nil, status.Errorf(codes.Unimplemented, "unknown method Get for service v1.PodResourcesLister")
}

// parsePodArgs takes the pod=NS/NAME and container=C1,C2 words of an
// allocate command; the other words are returned as they are.
func parsePodArgs(args []string) (rest []string, ns, pod string, ctrs []string, err error) {
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "pod="):
			v := strings.TrimPrefix(a, "pod=")
			i := strings.Index(v, "/")
			if i <= 0 || i == len(v)-1 {
				return nil, "", "", nil, fmt.Errorf("pod=%q: want pod=NAMESPACE/NAME", v)
			}
			ns, pod = v[:i], v[i+1:]
		case strings.HasPrefix(a, "container="):
			ctrs = splitIDs(strings.TrimPrefix(a, "container="))
		default:
			rest = append(rest, a)
		}
	}
	return rest, ns, pod, ctrs, nil
}
