// Command kstatus computes the kstatus result (sigs.k8s.io/cli-utils/pkg/kstatus/status, the library behind
// `kubectl wait`-style tools such as kpt, Flux and cli-utils' own applier) for Kubernetes objects.
//
// Usage: kstatus < objects.jsonl
// One JSON object per input line; one JSON answer per output line: {"status":"Current","message":"..."} or
// {"error":"..."} when kstatus cannot compute a status.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type answer struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

func main() {
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 0, 1<<20), 16<<20)
	out := json.NewEncoder(os.Stdout)
	for scanner.Scan() {
		object := &unstructured.Unstructured{}
		if err := object.UnmarshalJSON(scanner.Bytes()); err != nil {
			fmt.Fprintln(os.Stderr, "bad input line:", err)
			os.Exit(2)
		}
		result, err := status.Compute(object)
		reply := answer{}
		if err != nil {
			reply.Error = err.Error()
		} else {
			reply.Status = result.Status.String()
			reply.Message = result.Message
		}
		if err := out.Encode(reply); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
