// Slice publishing for kdp-go-testdra, the usual Go way with net/http and
// encoding/json (no client-go offline): with -publish-api URL it POSTs the
// pool's ResourceSlices (the -devices, 128 a slice, one pool named -pool,
// nodeName -node; each device with the gopher example's attributes "model"
// and "index" and capacity "memory") to the API server once it serves, bearer token and CA from
// files, and says "published" {slices, devices} once every slice is created.
// For bench/dra.py: start to slices published, side by side with kdp.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

var (
	fPublishAPI   string
	fPublishCA    string
	fPublishToken string
	fNode         string
)

const maxSliceDevices = 128

func publishSlices(devices []string) error {
	ca, err := os.ReadFile(fPublishCA)
	if err != nil {
		return err
	}
	tok, err := os.ReadFile(fPublishToken)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("%s: no certificate", fPublishCA)
	}
	c := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	n := (len(devices) + maxSliceDevices - 1) / maxSliceDevices
	prefix := strings.ReplaceAll(fNode+"-"+fDriver, ".", "-") + "-"
	for i := 0; i < n; i++ {
		end := (i + 1) * maxSliceDevices
		if end > len(devices) {
			end = len(devices)
		}
		devs := []map[string]any{}
		for k, d := range devices[i*maxSliceDevices : end] {
			// what kdp-example-gopher-dra describes, for a like-for-like publish
			devs = append(devs, map[string]any{"name": d,
				"attributes": map[string]any{"model": map[string]any{"string": "gopher"},
					"index": map[string]any{"int": i*maxSliceDevices + k}},
				"capacity": map[string]any{"memory": map[string]any{"value": "1Gi"}}})
		}
		slice := map[string]any{
			"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
			"metadata": map[string]any{"generateName": prefix},
			"spec": map[string]any{"driver": fDriver, "nodeName": fNode,
				"pool":    map[string]any{"name": fPool, "generation": 1, "resourceSliceCount": n},
				"devices": devs},
		}
		body, _ := json.Marshal(slice)
		req, err := http.NewRequest("POST", fPublishAPI+"/apis/resource.k8s.io/v1/resourceslices",
			bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("create slice: HTTP %d: %s", resp.StatusCode, msg)
		}
	}
	emit("published", M{"slices": n, "devices": len(devices)})
	return nil
}
