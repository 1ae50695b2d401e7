// Command pause is the node's Pod sandbox ("infra") container: it holds the Pod's namespaces and does nothing else.
// The kubelet needs a sandbox image and no registry is reachable here, so hack/node/setup.sh builds this program
// (statically, CGO_ENABLED=0) and packs it as the local image registry.k8s.io/pause (hack/node/oci-image.sh), the
// same contract as upstream's build/pause/linux/pause.c:
//   - it sleeps until SIGINT or SIGTERM and then exits 0 (the runtime stops the sandbox with SIGTERM/SIGKILL);
//   - as PID 1 of a Pod with a shared PID namespace it reaps orphaned children (SIGCHLD), so none stay zombies.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (ts-controller-manager, Go)")
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", s)
		os.Exit(0)
	}
}
